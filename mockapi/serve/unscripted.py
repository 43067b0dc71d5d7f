"""The answers no rule scripts: the model list, one model, hello, the 404 of any other path
and the gate's refusals, each journaled as a Messages API request is (``MockApp._record``).

``GET /v1/models`` and ``GET /v1/models/{id}`` know the scenario's ``models`` list only; any
other path is 404 ``not_found_error``, whatever its method. A refusal of the gate (``Guard``:
a web page's ``Origin``, a foreign ``Host``, a path that is no path) is 403 or 400 in the
API's envelope, journaled unless it is of an admin path (admin requests never are).
"""

from __future__ import annotations

import time
from typing import Any, Protocol

import orjson
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from mockapi.check.requests import BadRequest, is_json, read_body
from mockapi.journal.records import (
    OUTCOME_HELLO,
    OUTCOME_INVALID_REQUEST,
    OUTCOME_MODELS,
    OUTCOME_NOT_FOUND,
    OUTCOME_REFUSED,
    Outcome,
)
from mockapi.journal.write import Journal
from mockapi.script.decide import Script
from mockapi.script.events import error_body
from mockapi.serve.admin import ADMIN_PREFIX
from mockapi.serve.gate import Unrecorded
from mockapi.serve.gate import json_response as _json

__all__ = ["Unscripted", "UnscriptedMock"]


class UnscriptedMock(Protocol):
    """What these routes read of their mock (``MockApp``), and how they journal a request."""

    journal: Journal
    script: Script
    max_body_bytes: int

    def _record(self, request: Request, seq: int, arrival: float, raw: bytes | None,
                body_is_json: bool, outcome: Outcome, status: int | None, *,
                error: str | None = None, path: str | None = None) -> None: ...


def _model_entry(model_id: str) -> dict[str, Any]:
    return {"type": "model", "id": model_id, "display_name": model_id,
            "created_at": "2025-01-01T00:00:00Z"}


class Unscripted:
    """The endpoints of one mock's unscripted answers."""

    def __init__(self, mock: UnscriptedMock):
        self.mock = mock

    def api_routes(self) -> list[Route]:
        """The API's routes besides the Messages ones (the 404 is the app's last route)."""
        return [Route("/v1/models", self.models, methods=["GET"]),
                Route("/v1/models/{model_id:path}", self.model, methods=["GET"]),
                Route("/api/hello", self.hello, methods=["GET", "HEAD"])]

    async def models(self, request: Request) -> Response:
        seq = await self._record_simple(request, OUTCOME_MODELS, 200)
        ids = self.mock.script.scenario.models
        return _json(orjson.dumps({
            "data": [_model_entry(m) for m in ids], "has_more": False,
            "first_id": ids[0] if ids else None, "last_id": ids[-1] if ids else None,
        }), headers={"request-id": f"req_loopprobe_{seq:06d}"})

    async def model(self, request: Request) -> Response:
        model_id = request.path_params["model_id"]
        if model_id in self.mock.script.scenario.models:
            seq = await self._record_simple(request, OUTCOME_MODELS, 200)
            return _json(orjson.dumps(_model_entry(model_id)),
                         headers={"request-id": f"req_loopprobe_{seq:06d}"})
        return await self.not_found(request)

    async def hello(self, request: Request) -> Response:
        await self._record_simple(request, OUTCOME_HELLO, 200)
        return _json(b'{"message":"hello"}')

    async def not_found(self, request: Request) -> Response:
        seq = await self._record_simple(request, OUTCOME_NOT_FOUND, 404)
        message = f"Not found: {request.method} {request.url.path}"
        request_id = f"req_loopprobe_{seq:06d}"
        return _json(error_body("not_found_error", message, request_id), 404,
                     {"request-id": request_id})

    async def refuse(self, request: Request, why: str, status: int = 403) -> Response:
        """403 (who may not be answered) or 400 (a path that is no path) in the API's
        envelope; an API request is journaled (admin ones never are)."""
        request_id = "req_loopprobe_refused"
        outcome: Outcome = OUTCOME_REFUSED if status == 403 else OUTCOME_INVALID_REQUEST
        error_type = "permission_error" if status == 403 else "invalid_request_error"
        path: str = request.scope["path"]
        if not path.startswith(ADMIN_PREFIX):
            seq = self.mock.journal.next_seq()
            request_id = f"req_loopprobe_{seq:06d}"
            try:
                self.mock._record(request, seq, time.time(), None, False, outcome, status,
                                  error=why, path=path)
            except Unrecorded:
                pass  # refused all the same; the journal notes its failure once it can
        return _json(error_body(error_type, f"loopprobe mock: {why}", request_id),
                     status, {"request-id": request_id})

    async def _record_simple(self, request: Request, outcome: Outcome, status: int) -> int:
        arrival = time.time()
        seq = self.mock.journal.next_seq()
        try:
            raw: bytes | None = await read_body(request, self.mock.max_body_bytes)
        except (BadRequest, ClientDisconnect):
            raw = None
        self.mock._record(request, seq, arrival, raw, is_json(raw), outcome, status)
        return seq
