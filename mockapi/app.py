"""The Starlette application: Messages API routes, the admin prefix, and recording.

Every request is recorded before its reply starts. Deliberate divergences from
the real API:

- ``x-api-key``/``authorization`` must be present but any value is accepted.
- ids are deterministic (``msg_loopprobe_<seq>``, ``req_loopprobe_<seq>``) and
  token counts come from the script, not from a tokenizer.
- ``GET /v1/models/{id}`` knows the scenario's ``models`` list only.
- Anything under ``/_mock/`` is the mock's own admin surface and is not recorded.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import orjson
from sse_starlette import EventSourceResponse
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from mockapi.events import PreparedError, PreparedMessage, PreparedRaw, error_body
from mockapi.journal import Journal, encode_body_field, read_journal, redact_headers
from mockapi.matching import facts_from_body
from mockapi.scenario import Scenario, ScenarioError, decode_scenario_text, parse_scenario
from mockapi.script import Script
from mockapi.sse import encode_event

__all__ = ["ADMIN_PREFIX", "DeliberateDisconnect", "MockApp"]

ADMIN_PREFIX = "/_mock"
ADMIN_TOKEN_HEADER = "x-loopprobe-admin-token"
MAX_BODY_BYTES = 32 * 1024 * 1024  # the real API's request size limit
REQUIRED_FIELDS = {
    "/v1/messages": (("model", str), ("max_tokens", int), ("messages", list)),
    "/v1/messages/count_tokens": (("model", str), ("messages", list)),
}


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

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = await self.endpoint(Request(scope, receive))
        await response(scope, receive, send)


SSE_HEADERS = {"content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache",
               "connection": "keep-alive", "x-accel-buffering": "no"}


class _WholeStream(Response):
    """A stream with no scripted fault: every event in one chunked body write.

    Same bytes and headers as the sse-starlette path used for faulty streams, without
    its per-response task group, which costs more than everything else of a request.
    """

    def __init__(self, body: bytes, headers: Mapping[str, str],
                 done: Callable[[str], None]):
        super().__init__(status_code=200)
        self.body = body
        # no content-length: the body goes out chunked, as a stream does
        self.raw_headers = [(k.lower().encode("latin-1"), v.encode("latin-1"))
                            for k, v in headers.items()]
        self.done = done

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        reason = "client_disconnected"
        try:
            await send({"type": "http.response.start", "status": 200,
                        "headers": self.raw_headers})
            await send({"type": "http.response.body", "body": self.body, "more_body": False})
            reason = "complete"
        except OSError:
            pass
        finally:
            self.done(reason)


class _BadRequest(Exception):
    def __init__(self, status: int, error_type: str, message: str, outcome: str):
        super().__init__(message)
        self.status, self.error_type, self.message, self.outcome = (
            status, error_type, message, outcome)


def _json(body: bytes, status: int = 200, headers: Mapping[str, str] | None = None) -> Response:
    return Response(body, status_code=status, headers=dict(headers or {}),
                    media_type="application/json")


class MockApp:
    """One mock: a scenario, its play state, a journal. ``app`` is the ASGI callable."""

    def __init__(self, scenario: Scenario, journal: Journal, *,
                 context: Mapping[str, str] | None = None,
                 admin_token: str | None = None, max_body_bytes: int = MAX_BODY_BYTES,
                 max_streams: int = 1024):
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
        self.app = Starlette(routes=[
            Route("/v1/messages", self.messages, methods=["POST"]),
            Route("/v1/messages/count_tokens", self.messages, methods=["POST"]),
            Route("/v1/models", self.models, methods=["GET"]),
            Route("/v1/models/{model_id:path}", self.model, methods=["GET"]),
            Route("/api/hello", self.hello, methods=["GET", "HEAD"]),
            Route(f"{ADMIN_PREFIX}/requests", self.admin_requests, methods=["GET"]),
            Route(f"{ADMIN_PREFIX}/state", self.admin_state, methods=["GET"]),
            Route(f"{ADMIN_PREFIX}/scenario", self.admin_scenario, methods=["PUT", "POST"]),
            Route(f"{ADMIN_PREFIX}/reset", self.admin_reset, methods=["POST"]),
            # an ASGI endpoint matches every method (a function endpoint defaults to GET)
            Route("/{path:path}", _AnyMethod(self.not_found)),
        ])

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
                parsed_ok: bool, *, reply_json: bytes | None = None, **fields: Any) -> None:
        record: dict[str, Any] = {
            "type": "request", "seq": seq, "run": self.run, "time": arrival,
            "elapsed": round(time.monotonic() - self.started, 6),
            "method": request.method, "path": request.url.path,
            "query": request.url.query,
            "headers": redact_headers(request.scope["headers"]),
            "body_size": len(raw) if raw is not None else None,
        }
        record.update(fields)
        extra = [b'"reply":' + reply_json] if reply_json is not None else []
        if raw:
            extra.append(encode_body_field(raw, parsed_ok))
        self.journal.append(record, *extra)

    def _record_end(self, seq: int, reason: str, events: int, size: int) -> None:
        self.journal.append({
            "type": "response_end", "seq": seq, "run": self.run, "time": time.time(),
            "elapsed": round(time.monotonic() - self.started, 6),
            "reason": reason, "events_sent": events, "bytes_sent": size,
        })

    # ---- Messages API -----------------------------------------------------

    async def messages(self, request: Request) -> Response:
        arrival = time.time()
        seq = self.journal.next_seq()
        request_id = f"req_loopprobe_{seq:06d}"
        raw: bytes | None = None
        parsed_ok = False
        try:
            raw = await self._read_body(request)
            body = _parse_body(raw, request)
            parsed_ok = True
            facts = facts_from_body(request.url.path, body, request.headers)
            decision = self.script.decide(facts, body, raw, seq)
        except _BadRequest as bad:
            self._record(request, seq, arrival, raw, parsed_ok or _is_json(raw),
                         outcome=bad.outcome,
                         status=bad.status, error=bad.message)
            return _json(error_body(bad.error_type, bad.message, request_id), bad.status,
                         {"request-id": request_id})
        except ClientDisconnect:
            self._record(request, seq, arrival, raw, False, outcome="client_disconnected",
                         status=None, error="the client left before sending its whole body")
            return Response(status_code=499)
        except Exception as error:  # recorded, then answered in the API's envelope
            message = f"loopprobe mock failed on this request: {type(error).__name__}: {error}"
            self._record(request, seq, arrival, raw, parsed_ok, outcome="mock_error",
                         status=500, error=message)
            return _json(error_body("api_error", message, request_id), 500,
                         {"request-id": request_id, "x-should-retry": "false"})

        common: dict[str, Any] = {"kind": decision.kind, "turn": decision.turn, "attempt": decision.attempt,
                  "stream": facts.stream, "model": facts.model, "rule": decision.rule,
                  "reply_index": decision.reply_index, "replay_of": decision.replay_of}
        prepared = decision.prepared
        if prepared is None:
            if request.url.path.endswith("/count_tokens"):
                return self._count_tokens(request, seq, arrival, raw, common, request_id)
            message = decision.no_rule_message(seq)
            self._record(request, seq, arrival, raw, True, outcome="no_rule", status=400,
                         error=message, nearest=decision.nearest, **common)
            return _json(error_body("invalid_request_error", message, request_id), 400,
                         {"request-id": request_id, "x-should-retry": "false"})

        if isinstance(prepared, PreparedError):
            spec = prepared.reply.error
            self._record(request, seq, arrival, raw, True, outcome="replied",
                         status=spec.status, **common, reply_json=prepared.description)
            await self._stall(request, prepared.reply.stall_before)
            return _json(error_body(spec.resolved_type(), spec.message, request_id),
                         spec.status, {"request-id": request_id, **spec.headers})

        if isinstance(prepared, PreparedRaw):
            self._record(request, seq, arrival, raw, True, outcome="replied",
                         status=prepared.reply.raw.status, **common,
                         reply_json=prepared.description)
            if await self._stall(request, prepared.reply.stall_before):
                self._record_end(seq, "client_disconnected", 0, 0)
                return Response(status_code=499)
            return self._raw_response(prepared, seq, request_id)

        self._record(request, seq, arrival, raw, True, outcome="replied", status=200, **common,
                     reply_json=prepared.description)
        if await self._stall(request, prepared.reply.stall_before):
            self._record_end(seq, "client_disconnected", 0, 0)
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
        reply = prepared.reply
        if not (reply.stall or reply.stream_error or reply.disconnect or reply.truncate):
            whole = start + prepared.joined_tail
            return _WholeStream(whole, headers, lambda reason: self._record_end(
                seq, reason, len(prepared.tail) + 1 if reason == "complete" else 0,
                len(whole) if reason == "complete" else 0))
        events = self._stream(prepared, start, seq)
        return EventSourceResponse(events, headers=headers, ping=0, sep="\n")

    def _count_tokens(self, request: Request, seq: int, arrival: float, raw: bytes | None,
                      common: dict[str, Any], request_id: str) -> Response:
        body = orjson.dumps({"input_tokens": max(1, len(raw or b"") // 4)})
        self._record(request, seq, arrival, raw, True, outcome="replied", status=200,
                     **{**common, "rule": "builtin:count_tokens"})
        return _json(body, 200, {"request-id": request_id})

    async def _read_body(self, request: Request) -> bytes:
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            raise _BadRequest(413, "request_too_large",
                              f"Request exceeds the maximum allowed number of bytes "
                              f"({self.max_body_bytes}); content-length was {declared}",
                              "too_large")
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > self.max_body_bytes:
                raise _BadRequest(413, "request_too_large",
                                  f"Request exceeds the maximum allowed number of bytes "
                                  f"({self.max_body_bytes})", "too_large")
            chunks.append(chunk)
        return b"".join(chunks)

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

    async def _stream(self, prepared: PreparedMessage, start: bytes,
                      seq: int) -> AsyncIterator[bytes]:
        reply = prepared.reply
        events = (start, *prepared.tail)
        stall_at = None
        if reply.stall is not None:
            stall_at = reply.stall.after_events
            if reply.stall.before_event is not None:
                name = b"event: " + reply.stall.before_event.encode() + b"\n"
                stall_at = next((i for i, e in enumerate(events) if e.startswith(name)), None)
        sent = size = 0
        reason = "client_disconnected"
        self.open_streams += 1
        try:
            for position in range(len(events) + 1):
                if reply.stall and stall_at == position:
                    await asyncio.sleep(reply.stall.seconds)
                if reply.disconnect and reply.disconnect.after_events == position:
                    reason = "disconnected_by_script"
                    raise DeliberateDisconnect(f"scripted disconnect after {position} events")
                if reply.truncate and reply.truncate.after_events == position:
                    reason = "truncated_by_script"
                    return
                if reply.stream_error and reply.stream_error.after_events == position:
                    error = encode_event({"type": "error", "error": {
                        "type": reply.stream_error.type, "message": reply.stream_error.message}})
                    yield error
                    sent, size, reason = sent + 1, size + len(error), "stream_error_by_script"
                    return
                if position == len(events):
                    break
                yield events[position]
                sent, size = sent + 1, size + len(events[position])
            reason = "complete"
        finally:
            self.open_streams -= 1
            self._record_end(seq, reason, sent, size)

    def _raw_response(self, prepared: PreparedRaw, seq: int, request_id: str) -> Response:
        spec = prepared.reply.raw

        async def chunks() -> AsyncIterator[bytes]:
            sent = size = 0
            reason = "client_disconnected"
            try:
                for delay, data in prepared.chunks:
                    if delay:
                        await asyncio.sleep(delay)
                    yield data
                    sent, size = sent + 1, size + len(data)
                if spec.disconnect:
                    reason = "disconnected_by_script"
                    raise DeliberateDisconnect("scripted disconnect after raw chunks")
                reason = "complete"
            finally:
                self._record_end(seq, reason, sent, size)

        return StreamingResponse(chunks(), status_code=spec.status, media_type=spec.content_type,
                                 headers={"request-id": request_id, **spec.headers})

    # ---- other API routes ---------------------------------------------------

    def _model_entry(self, model_id: str) -> dict[str, Any]:
        return {"type": "model", "id": model_id, "display_name": model_id,
                "created_at": "2025-01-01T00:00:00Z"}

    async def models(self, request: Request) -> Response:
        seq = await self._record_simple(request, "models", 200)
        ids = self.script.scenario.models
        return _json(orjson.dumps({
            "data": [self._model_entry(m) for m in ids], "has_more": False,
            "first_id": ids[0] if ids else None, "last_id": ids[-1] if ids else None,
        }), headers={"request-id": f"req_loopprobe_{seq:06d}"})

    async def model(self, request: Request) -> Response:
        model_id = request.path_params["model_id"]
        if model_id in self.script.scenario.models:
            seq = await self._record_simple(request, "models", 200)
            return _json(orjson.dumps(self._model_entry(model_id)),
                         headers={"request-id": f"req_loopprobe_{seq:06d}"})
        return await self.not_found(request)

    async def hello(self, request: Request) -> Response:
        await self._record_simple(request, "hello", 200)
        return _json(b'{"message":"hello"}')

    async def not_found(self, request: Request) -> Response:
        seq = await self._record_simple(request, "not_found", 404)
        message = f"Not found: {request.method} {request.url.path}"
        request_id = f"req_loopprobe_{seq:06d}"
        return _json(error_body("not_found_error", message, request_id), 404,
                     {"request-id": request_id})

    async def _record_simple(self, request: Request, outcome: str, status: int) -> int:
        arrival = time.time()
        seq = self.journal.next_seq()
        try:
            raw = await self._read_body(request)
        except (_BadRequest, ClientDisconnect):
            raw = None
        self._record(request, seq, arrival, raw, _is_json(raw), outcome=outcome, status=status)
        return seq

    # ---- admin ------------------------------------------------------------

    def _admin_denied(self, request: Request) -> Response | None:
        if self.admin_token and request.headers.get(ADMIN_TOKEN_HEADER) != self.admin_token:
            return _json(error_body("permission_error",
                                    f"the admin prefix needs the {ADMIN_TOKEN_HEADER} header",
                                    "req_loopprobe_admin"), 403)
        return None

    async def admin_requests(self, request: Request) -> Response:
        if denied := self._admin_denied(request):
            return denied
        contents = read_journal(self.journal.path)
        after_text = request.query_params.get("after", "0") or "0"
        if not after_text.isdigit():
            return _json(orjson.dumps({"error": f"after: expected a journal seq (an integer "
                                                f"≥ 0), found {after_text!r}"}), 400)
        after = int(after_text)
        run = request.query_params.get("run", "current")
        records = [r for r in contents.records if r.get("seq", 0) > after
                   and (run == "all" or r.get("run") == self.run)]
        return _json(orjson.dumps({"records": records, "torn_tail": contents.torn_tail}))

    async def admin_state(self, request: Request) -> Response:
        if denied := self._admin_denied(request):
            return denied
        return _json(orjson.dumps({
            "scenario": self.script.scenario.name, "run": self.run,
            "rules": self.script.state(), "open_streams": self.open_streams,
            "journal": str(self.journal.path), "context": self.context,
        }))

    async def admin_scenario(self, request: Request) -> Response:
        if denied := self._admin_denied(request):
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
            self.install(parse_scenario(data, "request body"), context)
        except ScenarioError as error:
            return _json(orjson.dumps({"installed": False, "problems": error.problems}), 400)
        return _json(orjson.dumps({"installed": True, "scenario": self.scenario.name}))

    async def admin_reset(self, request: Request) -> Response:
        if denied := self._admin_denied(request):
            return denied
        return _json(orjson.dumps({"run": self.reset()}))


def _is_json(raw: bytes | None) -> bool:
    if not raw:
        return False
    try:
        orjson.loads(raw)
    except orjson.JSONDecodeError:
        return False
    return True


_TYPE_NAMES = {str: "string", int: "integer", list: "list"}  # pydantic's wording, as the API


def _parse_body(raw: bytes, request: Request) -> dict[str, Any]:
    headers = request.headers
    if "x-api-key" not in headers and "authorization" not in headers:
        raise _BadRequest(401, "authentication_error", "x-api-key header is required",
                          "invalid_request")
    if "anthropic-version" not in headers:
        raise _BadRequest(400, "invalid_request_error", "anthropic-version: header is required",
                          "invalid_request")
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as error:
        raise _BadRequest(400, "invalid_request_error",
                          f"The request body is not valid JSON: {error}",
                          "invalid_request") from None
    if not isinstance(body, dict):
        raise _BadRequest(400, "invalid_request_error",
                          f"The request body must be a JSON object, got {type(body).__name__}",
                          "invalid_request")
    for name, expected in REQUIRED_FIELDS[request.url.path]:
        if name not in body:
            raise _BadRequest(400, "invalid_request_error", f"{name}: Field required",
                              "invalid_request")
        value = body[name]
        if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
            raise _BadRequest(400, "invalid_request_error",
                              f"{name}: Input should be a valid {_TYPE_NAMES[expected]}, "
                              f"got {type(value).__name__}", "invalid_request")
    return body
