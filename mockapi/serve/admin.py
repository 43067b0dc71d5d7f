"""The mock's own admin surface under ``/_mock/``: the journal, the play state, scenarios, reset.

Admin requests are not recorded. With an admin token, each needs it in the
``x-loopprobe-admin-token`` header.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import anyio.to_thread
import orjson
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from mockapi.check.requests import BadRequest, read_body
from mockapi.journal.write import Journal
from mockapi.script.decide import Script
from mockapi.script.events import error_body
from mockapi.script.scenario import Scenario, ScenarioError, decode_scenario_text, parse_scenario
from mockapi.serve.threads import Threads
from mockapi.serve.transport import ConnectionCap

__all__ = ["ADMIN_PREFIX", "ADMIN_TOKEN_HEADER", "MAX_ADMIN_BODY_BYTES", "SCENARIO_BODY",
           "AdministeredMock", "admin_routes"]

ADMIN_PREFIX = "/_mock"
SCENARIO_BODY = ('expected a JSON object {"scenario": {<scenario>}, "context": {<name>: '
                 '<string>}} ("context" optional; Content-Type: application/json) or a '
                 'scenario in YAML (Content-Type: application/yaml)')
ADMIN_TOKEN_HEADER = "x-loopprobe-admin-token"
MAX_ADMIN_BODY_BYTES = 8 * 1024 * 1024  # a scenario, with room to spare


class AdministeredMock(Protocol):
    """What the admin surface reads and changes of a mock (``MockApp``)."""

    admin_token: str | None
    journal: Journal
    run: int
    script: Script
    scenario: Scenario
    context: dict[str, str]
    open_streams: int
    threads: Threads
    connection_cap: ConnectionCap | None

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
        after_text = request.query_params.get("after", "0") or "0"
        # str.isdigit() also takes "²" and other digits int() refuses
        if not (after_text.isascii() and after_text.isdigit()):
            return _json(orjson.dumps({"error": f"after: expected a journal seq (an integer "
                                                f"≥ 0), found {after_text!r}"}), 400)
        after = int(after_text)
        run = request.query_params.get("run", "current")
        # only the lines after ``after`` are read, off the event loop
        contents = await anyio.to_thread.run_sync(self.mock.journal.read_after, after)
        every: Sequence[Mapping[str, Any]] = contents.records
        records = [r for r in every if r.get("seq", 0) > after
                   and (run == "all" or r.get("run") == self.mock.run)]
        return _json(orjson.dumps({"records": records, "torn_tail": contents.torn_tail}))

    async def state(self, request: Request) -> Response:
        if denied := self._denied(request):
            return denied
        mock = self.mock
        journal = mock.journal
        return _json(orjson.dumps({
            "scenario": mock.script.scenario.name, "run": mock.run,
            "rules": mock.script.state(), "open_streams": mock.open_streams,
            "journal": str(journal.path), "context": mock.context,
            "journal_problem": journal.problem(), "journal_failed_writes": journal.failed_writes,
            "journal_last_failure": journal.last_failure, "threads": mock.threads.state(),
            "thread_store": mock.threads.store_state(),
            "builtin_replies": mock.script.builtin_state(),
            "connections": None if (cap := mock.connection_cap) is None else {
                "max": cap.max, "configured": cap.configured, "why": cap.why},
        }))

    async def scenario(self, request: Request) -> Response:
        if denied := self._denied(request):
            return denied
        try:
            raw = await read_body(request, MAX_ADMIN_BODY_BYTES)
        except BadRequest as bad:
            return _json(error_body(bad.error_type, bad.message, "req_loopprobe_admin"),
                         bad.status)
        except ClientDisconnect:
            return Response(status_code=499)
        content_type = request.headers.get("content-type", "")
        try:
            if "yaml" in content_type:
                data, context = _decoded(raw, "request.yaml"), None
                if not isinstance(data, dict):
                    raise _unexpected(f"found {_a(data)}")
            else:
                envelope = _decoded(raw, "request.json")
                if not isinstance(envelope, dict):
                    raise _unexpected(f"found {_a(envelope)}")
                if "scenario" not in envelope:
                    keys = ", ".join(map(str, envelope)) or "none"
                    raise _unexpected(
                        f"found a bare scenario (keys: {keys}): wrap it as {{\"scenario\": "
                        "...}, or send it as YAML" if "rules" in envelope else
                        f"found an object without \"scenario\" (keys: {keys})")
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


def _unexpected(found: str) -> ScenarioError:
    return ScenarioError("request body", [f"(top level): {SCENARIO_BODY}; {found}"])


def _decoded(raw: bytes, source: str) -> Any:
    """The body as JSON or YAML; a body that is neither says what was expected."""
    try:
        return decode_scenario_text(raw, source)
    except ScenarioError as error:
        raise _unexpected(f"found a body that is {error.problems[0]}") from None


def _a(value: Any) -> str:
    names = {list: "a list", str: "a string", int: "a number", float: "a number",
             bool: "a boolean", type(None): "nothing (an empty body or null)"}
    return names.get(type(value), type(value).__name__)
