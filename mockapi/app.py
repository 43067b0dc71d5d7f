"""The Starlette application: the Messages API routes, each recorded before its reply starts.

Requests are checked by ``requests``, records built by ``records``; a streamed
body is played from its plan (``plan``) by one loop here. The admin prefix is
in ``admin``. Deliberate divergences from the real API:

- ``x-api-key``/``authorization`` must be present but any value is accepted.
- ids are deterministic (``msg_loopprobe_<seq>``, ``req_loopprobe_<seq>``) and
  token counts come from the script, not from a tokenizer.
- ``GET /v1/models/{id}`` knows the scenario's ``models`` list only.
- Anything under ``/_mock/`` is the mock's own admin surface and is not recorded.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping
from typing import Any

import orjson
from sse_starlette import EventSourceResponse
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope
from starlette.types import Send as ASGISend

from mockapi.admin import ADMIN_PREFIX, admin_routes
from mockapi.events import PreparedError, PreparedRaw, error_body
from mockapi.journal import Journal, redact_headers
from mockapi.matching import facts_from_body
from mockapi.plan import Abort, Plan, Send, Sleep
from mockapi.records import (
    END_CLIENT_DISCONNECTED,
    END_COMPLETE,
    OUTCOME_CLIENT_DISCONNECTED,
    OUTCOME_HELLO,
    OUTCOME_MOCK_ERROR,
    OUTCOME_MODELS,
    OUTCOME_NO_RULE,
    OUTCOME_NOT_FOUND,
    OUTCOME_REFUSED,
    OUTCOME_REPLIED,
    EndReason,
    NearestRule,
    Outcome,
    Routing,
    request_record,
    response_end_record,
    spliced_fields,
)
from mockapi.requests import MAX_BODY_BYTES, BadRequest, is_json, parse_body, read_body
from mockapi.scenario import Scenario
from mockapi.script import Script

__all__ = ["SSE_HEADERS", "DeliberateDisconnect", "MockApp"]


class DeliberateDisconnect(Exception):
    """Raised inside a response to drop the connection, as a scripted fault."""


class _QuietDeliberateDisconnects(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, BaseExceptionGroup):
            return not all(isinstance(e, DeliberateDisconnect) for e in exc.exceptions)
        if isinstance(exc, DeliberateDisconnect):
            return False
        # uvicorn's note for a deliberately unfinished response
        return "returned without completing response" not in record.getMessage()


logging.getLogger("uvicorn.error").addFilter(_QuietDeliberateDisconnects())


class _AnyMethod:
    """Serve ``endpoint`` for any HTTP method, so that every request is recorded."""

    def __init__(self, endpoint: Callable[[Request], Awaitable[Response]]):
        self.endpoint = endpoint

    async def __call__(self, scope: Scope, receive: Receive, send: ASGISend) -> None:
        response = await self.endpoint(Request(scope, receive))
        await response(scope, receive, send)


SSE_HEADERS = {"content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache",
               "connection": "keep-alive", "x-accel-buffering": "no"}


class _WholeStream(Response):
    """A stream whose plan is one write: every event in one chunked body write.

    Same bytes and headers as the sse-starlette path used for other plans, without
    its per-response task group, which costs more than everything else of a request.
    """

    def __init__(self, body: bytes, headers: Mapping[str, str],
                 done: Callable[[EndReason, list[float]], None]):
        super().__init__(status_code=200)
        self.body = body
        # no content-length: the body goes out chunked, as a stream does
        self.raw_headers = [(k.lower().encode("latin-1"), v.encode("latin-1"))
                            for k, v in headers.items()]
        self.done = done

    async def __call__(self, scope: Scope, receive: Receive, send: ASGISend) -> None:
        reason: EndReason = END_CLIENT_DISCONNECTED
        started = time.monotonic()
        offsets: list[float] = []
        try:
            await send({"type": "http.response.start", "status": 200,
                        "headers": self.raw_headers})
            offsets.append(time.monotonic() - started)
            await send({"type": "http.response.body", "body": self.body, "more_body": False})
            reason = END_COMPLETE
        except OSError:
            pass
        finally:
            self.done(reason, offsets)


def _json(body: bytes, status: int = 200, headers: Mapping[str, str] | None = None) -> Response:
    return Response(body, status_code=status, headers=dict(headers or {}),
                    media_type="application/json")


class _Guard:
    """Refuse, on every route, a request from a web page (it carries ``Origin``) or one whose
    ``Host`` is not the mock's own address (DNS rebinding); the mock's API refusals are
    journaled by ``refused`` (nothing is read of the body, no scripted reply is used)."""

    def __init__(self, app: Starlette, allowed_hosts: Collection[str] | None,
                 refused: Callable[[Request, str], Awaitable[Response]]):
        self.app = app
        self.allowed = None if allowed_hosts is None else frozenset(
            h.lower().encode("latin-1") for h in allowed_hosts)
        self.refused = refused

    async def __call__(self, scope: Scope, receive: Receive, send: ASGISend) -> None:
        if scope["type"] == "http":
            host = b""
            for name, value in scope["headers"]:
                if name == b"origin":
                    why = (f"requests from web pages are refused: expected no Origin header, "
                           f"found Origin: {value.decode('latin-1')[:100]}")
                    break
                if name == b"host":
                    host = value.lower()
            else:
                why = "" if self.allowed is None or host in self.allowed else (
                    f"expected Host to be the mock's own address "
                    f"({', '.join(sorted(h.decode() for h in self.allowed))}), found "
                    f"{host.decode('latin-1')[:100] or 'none'}")
            if why:
                response = await self.refused(Request(scope, receive), why)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


class MockApp:
    """One mock: a scenario, its play state, a journal. ``app`` is the ASGI callable.

    ``allowed_hosts``: the ``Host`` values accepted (``host:port``); ``None`` accepts any
    (an in-process app with no address of its own). A browser ``Origin`` is always refused.
    """

    def __init__(self, scenario: Scenario, journal: Journal, *,
                 context: Mapping[str, str] | None = None,
                 admin_token: str | None = None, max_body_bytes: int = MAX_BODY_BYTES,
                 max_streams: int = 1024, allowed_hosts: Collection[str] | None = None):
        self.context = dict(context or {})
        self.scenario = scenario
        self.script = Script(scenario.render(self.context))
        self.journal = journal
        self.admin_token = admin_token
        self.max_body_bytes = max_body_bytes
        self.max_streams = max_streams
        self.open_streams = 0
        self.run = journal.last_run + 1  # a restarted server starts a new run
        self.started = time.monotonic()
        self.app = _Guard(Starlette(routes=[
            Route("/v1/messages", self.messages, methods=["POST"]),
            Route("/v1/messages/count_tokens", self.messages, methods=["POST"]),
            Route("/v1/models", self.models, methods=["GET"]),
            Route("/v1/models/{model_id:path}", self.model, methods=["GET"]),
            Route("/api/hello", self.hello, methods=["GET", "HEAD"]),
            *admin_routes(self),
            # an ASGI endpoint matches every method (a function endpoint defaults to GET)
            Route("/{path:path}", _AnyMethod(self.not_found)),
        ]), allowed_hosts, self.refuse)

    # ---- play state -------------------------------------------------------

    def install(self, scenario: Scenario, context: Mapping[str, str] | None = None) -> None:
        """Swap the scenario (and its context); a bad one raises and the old one stays."""
        merged = {**self.context, **(context or {})}
        script = Script(scenario.render(merged))
        self.scenario, self.context, self.script = scenario, merged, script

    def reset(self) -> int:
        self.script = Script(self.script.scenario)
        self.run += 1
        return self.run

    # ---- recording --------------------------------------------------------

    def _record(self, request: Request, seq: int, arrival: float, raw: bytes | None,
                body_is_json: bool, outcome: Outcome, status: int | None, *,
                error: str | None = None, nearest: list[NearestRule] | None = None,
                routing: Routing | None = None, reply: bytes | None = None) -> None:
        record = request_record(
            seq=seq, run=self.run, time=arrival,
            elapsed=round(time.monotonic() - self.started, 6),
            method=request.method, path=request.url.path, query=request.url.query,
            headers=redact_headers(request.scope["headers"]),
            body_size=len(raw) if raw is not None else None,
            outcome=outcome, status=status, error=error, nearest=nearest, routing=routing)
        self.journal.append(record, *spliced_fields(reply, raw, body_is_json))

    def _record_end(self, seq: int, reason: EndReason, events: int, size: int,
                    offsets: list[float] | None = None) -> None:
        self.journal.append(response_end_record(
            seq=seq, run=self.run, time=time.time(),
            elapsed=round(time.monotonic() - self.started, 6),
            reason=reason, events_sent=events, bytes_sent=size, write_offsets=offsets))

    # ---- Messages API -----------------------------------------------------

    async def messages(self, request: Request) -> Response:
        arrival = time.time()
        seq = self.journal.next_seq()
        request_id = f"req_loopprobe_{seq:06d}"
        raw: bytes | None = None
        parsed_ok = False
        try:
            raw = await read_body(request, self.max_body_bytes)
            body = parse_body(raw, request.headers, request.url.path)
            parsed_ok = True
            facts = facts_from_body(request.url.path, body, request.headers)
            decision = self.script.decide(facts, body, raw, seq)
        except BadRequest as bad:
            self._record(request, seq, arrival, raw, parsed_ok or is_json(raw), bad.outcome,
                         bad.status, error=bad.message)
            return _json(error_body(bad.error_type, bad.message, request_id), bad.status,
                         {"request-id": request_id})
        except ClientDisconnect:
            self._record(request, seq, arrival, raw, False, OUTCOME_CLIENT_DISCONNECTED, None,
                         error="the client left before sending its whole body")
            return Response(status_code=499)
        except Exception as error:  # recorded, then answered in the API's envelope
            message = f"loopprobe mock failed on this request: {type(error).__name__}: {error}"
            self._record(request, seq, arrival, raw, parsed_ok, OUTCOME_MOCK_ERROR, 500,
                         error=message)
            return _json(error_body("api_error", message, request_id), 500,
                         {"request-id": request_id, "x-should-retry": "false"})

        routing: Routing = {
            "kind": decision.kind, "turn": decision.turn, "attempt": decision.attempt,
            "stream": facts.stream, "model": facts.model, "rule": decision.rule,
            "reply_index": decision.reply_index, "replay_of": decision.replay_of}
        prepared = decision.prepared
        if prepared is None:
            if request.url.path.endswith("/count_tokens"):
                return self._count_tokens(request, seq, arrival, raw, routing, request_id)
            message = decision.no_rule_message(seq)
            self._record(request, seq, arrival, raw, True, OUTCOME_NO_RULE, 400, error=message,
                         nearest=decision.nearest, routing=routing)
            return _json(error_body("invalid_request_error", message, request_id), 400,
                         {"request-id": request_id, "x-should-retry": "false"})

        if isinstance(prepared, PreparedError):
            spec = prepared.reply.error
            self._record(request, seq, arrival, raw, True, OUTCOME_REPLIED, spec.status,
                         routing=routing, reply=prepared.description)
            await self._stall(request, prepared.reply.stall_before)
            return _json(error_body(spec.resolved_type(), spec.message, request_id),
                         spec.status, {"request-id": request_id, **spec.headers})

        if isinstance(prepared, PreparedRaw):
            raw_spec = prepared.reply.raw
            self._record(request, seq, arrival, raw, True, OUTCOME_REPLIED, raw_spec.status,
                         routing=routing, reply=prepared.description)
            if await self._stall(request, prepared.reply.stall_before):
                self._record_end(seq, END_CLIENT_DISCONNECTED, 0, 0)
                return Response(status_code=499)
            return StreamingResponse(self._play(prepared.plan, seq), status_code=raw_spec.status,
                                     media_type=raw_spec.content_type,
                                     headers={"request-id": request_id, **raw_spec.headers})

        self._record(request, seq, arrival, raw, True, OUTCOME_REPLIED, 200, routing=routing,
                     reply=prepared.description)
        if await self._stall(request, prepared.reply.stall_before):
            self._record_end(seq, END_CLIENT_DISCONNECTED, 0, 0)
            return Response(status_code=499)
        model = prepared.reply.model or facts.model or "claude-sonnet-4-5"
        message_id = prepared.reply.id or f"msg_loopprobe_{seq:06d}"
        headers = {"request-id": request_id, **prepared.reply.headers}
        if not facts.stream:
            return _json(prepared.json_body(message_id, model), 200, headers)
        if self.open_streams >= self.max_streams:
            return _json(error_body("overloaded_error",
                                    f"loopprobe mock: more than {self.max_streams} open streams",
                                    request_id), 529, {"request-id": request_id})
        headers.update(SSE_HEADERS)
        start = prepared.message_start(message_id, model)
        plan = prepared.plan
        if plan.whole is not None:
            tail, sends = plan.whole
            whole = start + tail
            return _WholeStream(whole, headers, lambda reason, offsets: self._record_end(
                seq, reason, sends + 1 if reason == END_COMPLETE else 0,
                len(whole) if reason == END_COMPLETE else 0, offsets))
        return EventSourceResponse(self._play(plan.steps(start), seq, counted=True),
                                   headers=headers, ping=0, sep="\n")

    def _count_tokens(self, request: Request, seq: int, arrival: float, raw: bytes | None,
                      routing: Routing, request_id: str) -> Response:
        body = orjson.dumps({"input_tokens": max(1, len(raw or b"") // 4)})
        self._record(request, seq, arrival, raw, True, OUTCOME_REPLIED, 200,
                     routing={**routing, "rule": "builtin:count_tokens"})
        return _json(body, 200, {"request-id": request_id})

    async def _stall(self, request: Request, seconds: float) -> bool:
        """Wait ``seconds`` before answering; True if the client left meanwhile."""
        if seconds <= 0:
            return False
        try:
            async with asyncio.timeout(seconds):
                while True:
                    message = await request.receive()
                    if message["type"] == "http.disconnect":
                        return True
        except TimeoutError:
            return False

    async def _play(self, plan: Plan, seq: int, *, counted: bool = False) -> AsyncIterator[bytes]:
        """Execute ``plan`` as a response body and journal how it ended.

        ``counted``: an SSE stream, counted in ``open_streams`` while it plays.
        """
        sent = size = 0
        reason: EndReason = END_CLIENT_DISCONNECTED
        started = time.monotonic()
        offsets: list[float] = []
        if counted:
            self.open_streams += 1
        try:
            for step in plan:
                if isinstance(step, Send):
                    offsets.append(time.monotonic() - started)
                    yield step.data
                    sent, size = sent + 1, size + len(step.data)
                elif isinstance(step, Sleep):
                    await asyncio.sleep(step.seconds)
                else:
                    reason = step.reason
                    if isinstance(step, Abort):
                        raise DeliberateDisconnect(f"scripted disconnect after {sent} writes")
                    return
        finally:
            if counted:
                self.open_streams -= 1
            self._record_end(seq, reason, sent, size, offsets)

    # ---- other API routes ---------------------------------------------------

    def _model_entry(self, model_id: str) -> dict[str, Any]:
        return {"type": "model", "id": model_id, "display_name": model_id,
                "created_at": "2025-01-01T00:00:00Z"}

    async def models(self, request: Request) -> Response:
        seq = await self._record_simple(request, OUTCOME_MODELS, 200)
        ids = self.script.scenario.models
        return _json(orjson.dumps({
            "data": [self._model_entry(m) for m in ids], "has_more": False,
            "first_id": ids[0] if ids else None, "last_id": ids[-1] if ids else None,
        }), headers={"request-id": f"req_loopprobe_{seq:06d}"})

    async def model(self, request: Request) -> Response:
        model_id = request.path_params["model_id"]
        if model_id in self.script.scenario.models:
            seq = await self._record_simple(request, OUTCOME_MODELS, 200)
            return _json(orjson.dumps(self._model_entry(model_id)),
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

    async def refuse(self, request: Request, why: str) -> Response:
        """403 in the API's envelope; an API request is journaled (admin ones never are)."""
        request_id = "req_loopprobe_refused"
        if not request.url.path.startswith(ADMIN_PREFIX):
            seq = self.journal.next_seq()
            request_id = f"req_loopprobe_{seq:06d}"
            self._record(request, seq, time.time(), None, False, OUTCOME_REFUSED, 403,
                         error=why)
        return _json(error_body("permission_error", f"loopprobe mock: {why}", request_id),
                     403, {"request-id": request_id})

    async def _record_simple(self, request: Request, outcome: Outcome, status: int) -> int:
        arrival = time.time()
        seq = self.journal.next_seq()
        try:
            raw: bytes | None = await read_body(request, self.max_body_bytes)
        except (BadRequest, ClientDisconnect):
            raw = None
        self._record(request, seq, arrival, raw, is_json(raw), outcome, status)
        return seq
