"""The mock's own admin surface under ``/_mock/``: the journal, the play state, scenarios, reset.

Admin requests are not recorded. With an admin token, each needs it in the
``x-loopprobe-admin-token`` header.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from mockapi.events import error_body
from mockapi.journal import Journal, read_journal
from mockapi.scenario import Scenario, ScenarioError, decode_scenario_text, parse_scenario
from mockapi.script import Script

__all__ = ["ADMIN_PREFIX", "ADMIN_TOKEN_HEADER", "AdministeredMock", "admin_routes"]

ADMIN_PREFIX = "/_mock"
ADMIN_TOKEN_HEADER = "x-loopprobe-admin-token"


class AdministeredMock(Protocol):
    """What the admin surface reads and changes of a mock (``MockApp``)."""

    admin_token: str | None
    journal: Journal
    run: int
    script: Script
    scenario: Scenario
    context: dict[str, str]
    open_streams: int

    def install(self, scenario: Scenario, context: Mapping[str, str] | None = None) -> None: ...

    def reset(self) -> int: ...


def admin_routes(mock: AdministeredMock) -> list[Route]:
    admin = _Admin(mock)
    return [
        Route(f"{ADMIN_PREFIX}/requests", admin.requests, methods=["GET"]),
        Route(f"{ADMIN_PREFIX}/state", admin.state, methods=["GET"]),
        Route(f"{ADMIN_PREFIX}/scenario", admin.scenario, methods=["PUT", "POST"]),
        Route(f"{ADMIN_PREFIX}/reset", admin.reset, methods=["POST"]),
    ]


def _json(body: bytes, status: int = 200) -> Response:
    return Response(body, status_code=status, media_type="application/json")


class _Admin:
    def __init__(self, mock: AdministeredMock):
        self.mock = mock

    def _denied(self, request: Request) -> Response | None:
        token = self.mock.admin_token
        if token and request.headers.get(ADMIN_TOKEN_HEADER) != token:
            return _json(error_body("permission_error",
                                    f"the admin prefix needs the {ADMIN_TOKEN_HEADER} header",
                                    "req_loopprobe_admin"), 403)
        return None

    async def requests(self, request: Request) -> Response:
        if denied := self._denied(request):
            return denied
        contents = read_journal(self.mock.journal.path)
        after_text = request.query_params.get("after", "0") or "0"
        if not after_text.isdigit():
            return _json(orjson.dumps({"error": f"after: expected a journal seq (an integer "
                                                f"≥ 0), found {after_text!r}"}), 400)
        after = int(after_text)
        run = request.query_params.get("run", "current")
        every: Sequence[Mapping[str, Any]] = contents.records
        records = [r for r in every if r.get("seq", 0) > after
                   and (run == "all" or r.get("run") == self.mock.run)]
        return _json(orjson.dumps({"records": records, "torn_tail": contents.torn_tail}))

    async def state(self, request: Request) -> Response:
        if denied := self._denied(request):
            return denied
        mock = self.mock
        return _json(orjson.dumps({
            "scenario": mock.script.scenario.name, "run": mock.run,
            "rules": mock.script.state(), "open_streams": mock.open_streams,
            "journal": str(mock.journal.path), "context": mock.context,
        }))

    async def scenario(self, request: Request) -> Response:
        if denied := self._denied(request):
            return denied
        raw = await request.body()
        content_type = request.headers.get("content-type", "")
        try:
            if "yaml" in content_type:
                data, context = decode_scenario_text(raw, "request.yaml"), None
            else:
                envelope = decode_scenario_text(raw, "request.json")
                if not isinstance(envelope, dict) or "scenario" not in envelope:
                    raise ScenarioError("request body", [
                        "(top level): expected {\"scenario\": {...}, \"context\": {...}}"])
                data, context = envelope["scenario"], envelope.get("context")
                if context is not None and not (isinstance(context, dict) and all(
                        isinstance(v, str) for v in context.values())):
                    raise ScenarioError("request body", [
                        "context: expected a mapping of placeholder names to strings, found "
                        f"{json.dumps(context)[:80]}"])
            self.mock.install(parse_scenario(data, "request body"), context)
        except ScenarioError as error:
            return _json(orjson.dumps({"installed": False, "problems": error.problems}), 400)
        return _json(orjson.dumps({"installed": True, "scenario": self.mock.scenario.name}))

    async def reset(self, request: Request) -> Response:
        if denied := self._denied(request):
            return denied
        return _json(orjson.dumps({"run": self.mock.reset()}))
