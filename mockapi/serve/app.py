"""The Starlette application: the Messages API routes, each recorded before its reply starts.

``MockApp`` is one request's path from arrival to answer (read, check, admit, decide,
journal, reply), in one module so that a reader follows it without leaving it. Requests are
checked by ``mockapi.check``, records built by ``mockapi.journal.records``; a reply's body
is played from its plan by ``playing``; the gate in front of every route (``Origin``,
``Host``, an unjournaled request) is ``gate``; the routes no rule answers (models, hello,
404, the gate's refusals) are ``unscripted``'s, journaled by ``MockApp._record`` too; the
admin prefix is in ``admin``. Deliberate divergences from the real API:

- ``x-api-key``/``authorization`` must be present but any value is accepted.
- request ids are deterministic (``req_loopprobe_<seq>``); message ids are
  ``msg_loopprobe_<seq>_<24 random hex>`` (unguessable: a message thread is continued by
  its reply's id), or ``msg_loopprobe_<seq>`` with the scenario's ``message_ids:
  sequential`` (the harness's choice, for evidence that reproduces byte for byte); token
  counts come from the script, not from a tokenizer.
- ``GET /v1/models/{id}`` knows the scenario's ``models`` list only.
- Anything under ``/_mock/`` is the mock's own admin surface and is not recorded.
- A path holding a control character (``%0d%0a``) or not starting with ``/``, and a head
  that is not HTTP, are answered 400 ``invalid_request_error`` and journaled; a query's
  secret-bearing parameters (``api_key=``...) are journaled ``[redacted]``.

What the journal says is what happened: a request the journal cannot take (a full disk,
its file deleted) is answered 500 and consumes nothing of the script; a stream over
``max_streams`` is answered 529 before any rule sees it; a stream is ``complete`` only
once its bytes were acknowledged (on TCP, ``mockapi.serve.transport.delivery``); one cut by
the server stopping says so.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping
from typing import Any

import orjson
from sse_starlette import EventSourceResponse
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from mockapi.check.repeated_parts import RepeatedParts
from mockapi.check.requests import MAX_BODY_BYTES, BadRequest, is_json, parse_body, read_body
from mockapi.check.validation import check
from mockapi.journal.records import (
    END_CLIENT_DISCONNECTED,
    END_SERVER_SHUTDOWN,
    OUTCOME_CLIENT_DISCONNECTED,
    OUTCOME_MOCK_ERROR,
    OUTCOME_NO_RULE,
    OUTCOME_OVER_LIMIT,
    OUTCOME_REPLIED,
    OUTCOME_TIMEOUT,
    EndReason,
    NearestRule,
    Outcome,
    Routing,
    request_record,
    response_end_record,
    transport_outcome,
)
from mockapi.journal.redact import redact_headers, redact_query
from mockapi.journal.write import Journal, JournalError
from mockapi.script.decide import Decision, Script
from mockapi.script.events import PreparedError, PreparedRaw, error_body
from mockapi.script.matching import RequestFacts, facts_from_body
from mockapi.script.scenario import Scenario
from mockapi.serve.admin import ADMIN_PREFIX, admin_routes
from mockapi.serve.gate import AnyMethod, Guard, Unrecorded, unrecorded
from mockapi.serve.gate import json_response as _json
from mockapi.serve.playing import (
    SSE_HEADERS,
    Played,
    Playing,
    WholeStream,
    play,
    stall,
    transport_of,
)
from mockapi.serve.threads import PendingTurn, Threads, message_id
from mockapi.serve.transport import BODY_TIMED_OUT, ConnectionCap
from mockapi.serve.unscripted import Unscripted

__all__ = ["DELIVERY_TIMEOUT", "MockApp"]

DELIVERY_TIMEOUT = 2.0  # how long a finished stream waits to see its bytes acknowledged


class MockApp:
    """One mock: a scenario, its play state, a journal. ``app`` is the ASGI callable.

    ``allowed_hosts``: the ``Host`` values accepted (``host:port``); ``None`` accepts any
    (an in-process app with no address of its own). A browser ``Origin`` is always refused.
    """

    def __init__(self, scenario: Scenario, journal: Journal, *,
                 context: Mapping[str, str] | None = None,
                 admin_token: str | None = None, max_body_bytes: int = MAX_BODY_BYTES,
                 max_streams: int = 1024, allowed_hosts: Collection[str] | None = None,
                 lenient: bool = False, delivery_timeout: float = DELIVERY_TIMEOUT):
        """``lenient``: skip the checks of ``mockapi.check.validation`` for every scenario (a
        scenario can also ask for it); ``delivery_timeout``: how long a finished stream
        waits for its bytes to be acknowledged."""
        self.context = dict(context or {})
        self.scenario = scenario
        self.script = Script(scenario.render(self.context))
        self.journal = journal
        self.admin_token = admin_token
        self.max_body_bytes = max_body_bytes
        self.max_streams = max_streams
        self.open_streams = 0
        self.lenient = lenient
        self.delivery_timeout = delivery_timeout
        self.shutting_down = False  # set by the server when it stops
        self.connection_cap: ConnectionCap | None = None  # set by the server serving it
        self.run = journal.last_run + 1  # a restarted server starts a new run
        self.threads = Threads(scenario.thread_idle_seconds)
        self.parts = RepeatedParts()  # system prompts and tool lists, parsed once
        self.started = time.monotonic()
        unscripted = Unscripted(self)
        self.app = Guard(Starlette(routes=[
            Route("/v1/messages", self.messages, methods=["POST"]),
            Route("/v1/messages/count_tokens", self.messages, methods=["POST"]),
            *unscripted.api_routes(),
            *admin_routes(self),
            # an ASGI endpoint matches every method (a function endpoint defaults to GET)
            Route("/{path:path}", AnyMethod(unscripted.not_found)),
        ], exception_handlers={Unrecorded: unrecorded}), allowed_hosts, unscripted.refuse,
            self.messages)

    # ---- play state -------------------------------------------------------

    def install(self, scenario: Scenario, context: Mapping[str, str] | None = None) -> None:
        """Swap the scenario (and its context); a bad one raises and the old one stays."""
        merged = {**self.context, **(context or {})}
        script = Script(scenario.render(merged))
        self.scenario, self.context, self.script = scenario, merged, script
        self.threads = Threads(scenario.thread_idle_seconds)

    def reset(self) -> int:
        self.script = Script(self.script.scenario)
        self.threads = Threads(self.script.scenario.thread_idle_seconds)
        self.run += 1
        return self.run

    # ---- recording --------------------------------------------------------

    def _record(self, request: Request, seq: int, arrival: float, raw: bytes | None,
                body_is_json: bool, outcome: Outcome, status: int | None, *,
                error: str | None = None, nearest: list[NearestRule] | None = None,
                routing: Routing | None = None, reply: bytes | None = None,
                decision: Decision | None = None, thread: dict[str, Any] | None = None,
                path: str | None = None, sent: dict[str, Any] | None = None) -> None:
        """Journal a request before its reply starts; ``Unrecorded`` if the journal cannot
        take the line (``decision`` is then taken back: nothing of the script was used).
        ``path``: the path as decoded (default: as ``request.url`` shows it); ``sent``: the
        body as parsed from ``raw`` (the journal splits its large parts off; it parses
        ``raw`` again where it is not given)."""
        record = request_record(
            seq=seq, run=self.run, time=arrival,
            elapsed=round(time.monotonic() - self.started, 6),
            method=request.method, path=_url_path(request) if path is None else path,
            # (Starlette's URL, built only where there is a query: it costs on every request)
            query=redact_query(request.url.query) if request.scope.get("query_string") else "",
            headers=redact_headers(request.scope["headers"]),
            body_size=len(raw) if raw is not None else None,
            outcome=outcome, status=status, error=error, nearest=nearest, routing=routing,
            thread=thread)
        try:
            self.journal.append_request(record, reply=reply, body=raw,
                                        body_is_json=body_is_json, parsed=sent,
                                        known=self.parts.parts_of(sent) if sent else None)
        except JournalError as failure:
            if decision is not None:
                self.script.undo(decision)
            raise Unrecorded(seq, str(failure)) from None

    def _record_end(self, seq: int, run: int, reason: EndReason, events: int, size: int,
                    offsets: list[float] | None = None,
                    delivered: tuple[str, int] | None = None) -> None:
        """Journal how a reply ended; kept for later if the journal cannot take it now (the
        reply was sent: no error can take it back)."""
        self.journal.append_or_keep(response_end_record(
            seq=seq, run=run, time=time.time(),
            elapsed=round(time.monotonic() - self.started, 6),
            reason=reason, events_sent=events, bytes_sent=size, write_offsets=offsets,
            delivery=delivered[0] if delivered else None,
            unacknowledged=delivered[1] if delivered else 0))

    def cut_short(self, reason: EndReason) -> EndReason:
        """A reply that did not complete because the server is stopping says so."""
        if reason == END_CLIENT_DISCONNECTED and self.shutting_down:
            return END_SERVER_SHUTDOWN
        return reason

    def refused_by_transport(self, method: str, path: str, status: int, why: str) -> None:
        """Journal a request that the transport refused before any route saw it."""
        if path.startswith(ADMIN_PREFIX):
            return
        outcome = transport_outcome(status)
        record = request_record(
            seq=self.journal.next_seq(), run=self.run, time=time.time(),
            elapsed=round(time.monotonic() - self.started, 6), method=method, path=path,
            query="", headers={}, body_size=None, outcome=outcome, status=status, error=why)
        try:
            self.journal.append(record)
        except JournalError:
            pass  # the journal counts the failure and notes it once it can

    # ---- Messages API -----------------------------------------------------

    async def messages(self, request: Request) -> Response:
        arrival = time.time()
        run = self.run
        seq = self.journal.next_seq()
        request_id = f"req_loopprobe_{seq:06d}"
        raw: bytes | None = None
        parsed_ok = False
        turn: PendingTurn | None = None
        # routed by its exact path (no character of it escaped): the path as decoded
        path: str = request.scope["path"]
        self.threads.sweep()  # expired threads go on every request, not when looked up
        try:
            raw = await read_body(request, self.max_body_bytes)
            body = parse_body(raw, request.headers, path, self.parts)
            parsed_ok = True
            if "thread" in body and path == "/v1/messages":
                # from here on the whole conversation: the journal keeps ``raw`` as sent
                body, turn = self.threads.open(body, request.headers, seq, len(raw))
            check(body, request.headers, path,
                  lenient=self.lenient or self.script.scenario.validation == "lenient")
            facts = facts_from_body(path, body, request.headers)
        except BadRequest as bad:
            if turn is not None:
                turn.drop()
            self._record(request, seq, arrival, raw, parsed_ok or is_json(raw), bad.outcome,
                         bad.status, error=bad.message, thread=getattr(bad, "view", None))
            return _json(error_body(bad.error_type, bad.message, request_id,
                                    getattr(bad, "details", None)),
                         bad.status, {"request-id": request_id})
        except ClientDisconnect:
            timed_out = request.scope.get("extensions", {}).get(BODY_TIMED_OUT)
            if timed_out:  # the transport answered 408 and closed the connection
                self._record(request, seq, arrival, raw, False, OUTCOME_TIMEOUT, 408,
                             error=timed_out)
            else:
                self._record(request, seq, arrival, raw, False, OUTCOME_CLIENT_DISCONNECTED,
                             None, error="the client left before sending its whole body")
            return Response(status_code=499)
        except Exception as error:  # recorded, then answered in the API's envelope
            if turn is not None:
                turn.drop()
            return self._mock_error(request, seq, arrival, raw, parsed_ok, error)
        try:
            return await self._admit(request, seq, run, arrival, raw, body, facts, request_id,
                                     turn)
        finally:
            if turn is not None:
                turn.drop()  # nothing when its reply was kept

    async def _admit(self, request: Request, seq: int, run: int, arrival: float, raw: bytes,
                     body: dict[str, Any], facts: RequestFacts, request_id: str,
                     turn: PendingTurn | None) -> Response:
        stream_slot = facts.stream and request.scope["path"] == "/v1/messages"
        if stream_slot:
            if self.open_streams >= self.max_streams:
                message = (f"loopprobe mock: {self.max_streams} streams are open, the most "
                           "this mock serves at once (max_streams); no scripted reply was used")
                self._record(request, seq, arrival, raw, True, OUTCOME_OVER_LIMIT, 529,
                             error=message)
                return _json(error_body("overloaded_error", message, request_id), 529,
                             {"request-id": request_id})
        # taken now, before any await: a burst cannot pass the limit
        playing = Playing(self, seq, run, slot=stream_slot)
        try:
            response = await self._answer(request, seq, arrival, raw, body, facts, request_id,
                                          playing, turn)
        except BaseException:
            playing.release()
            raise
        if isinstance(response, Played | WholeStream):
            return response
        playing.release()  # answered without a body to play
        return response

    def _mock_error(self, request: Request, seq: int, arrival: float, raw: bytes | None,
                    parsed_ok: bool, error: Exception) -> Response:
        message = f"loopprobe mock failed on this request: {type(error).__name__}: {error}"
        request_id = f"req_loopprobe_{seq:06d}"
        self._record(request, seq, arrival, raw, parsed_ok, OUTCOME_MOCK_ERROR, 500,
                     error=message)
        return _json(error_body("api_error", message, request_id), 500,
                     {"request-id": request_id, "x-should-retry": "false"})

    async def _answer(self, request: Request, seq: int, arrival: float,
                      raw: bytes, body: dict[str, Any], facts: RequestFacts, request_id: str,
                      playing: Playing, turn: PendingTurn | None) -> Response:
        sent = body if turn is None else None  # a thread's body is the whole conversation
        try:
            decision = self.script.decide(facts, body, raw, seq)
        except Exception as error:
            return self._mock_error(request, seq, arrival, raw, True, error)
        routing: Routing = {
            "kind": decision.kind, "turn": decision.turn, "attempt": decision.attempt,
            "stream": facts.stream, "model": facts.model, "rule": decision.rule,
            "reply_index": decision.reply_index, "replay_of": decision.replay_of}
        if turn is not None:
            routing["thread"] = turn.view
        if decision.builtin is not None:
            routing["builtin_reply"] = decision.builtin
        prepared = decision.prepared
        if prepared is None:
            if request.scope["path"].endswith("/count_tokens"):
                return self._count_tokens(request, seq, arrival, raw, routing, request_id,
                                          decision)
            message = decision.no_rule_message(seq)
            self._record(request, seq, arrival, raw, True, OUTCOME_NO_RULE, 400, error=message,
                         nearest=decision.nearest, routing=routing, decision=decision,
                         sent=sent)
            return _json(error_body("invalid_request_error", message, request_id), 400,
                         {"request-id": request_id, "x-should-retry": "false"})

        if isinstance(prepared, PreparedError):
            spec = prepared.reply.error
            self._record(request, seq, arrival, raw, True, OUTCOME_REPLIED, spec.status,
                         routing=routing, reply=prepared.description, decision=decision,
                         sent=sent)
            await stall(request, prepared.reply.stall_before)
            return _json(error_body(spec.resolved_type(), spec.message, request_id),
                         spec.status, {"request-id": request_id, **spec.headers})

        if isinstance(prepared, PreparedRaw):
            raw_spec = prepared.reply.raw
            self._record(request, seq, arrival, raw, True, OUTCOME_REPLIED, raw_spec.status,
                         routing=routing, reply=prepared.description, decision=decision,
                         sent=sent)
            if await stall(request, prepared.reply.stall_before):
                playing.end(END_CLIENT_DISCONNECTED)
                return Response(status_code=499)
            return Played(StreamingResponse(
                play(prepared.plan, playing, transport_of(request.scope), self.delivery_timeout),
                status_code=raw_spec.status, media_type=raw_spec.content_type,
                headers={"request-id": request_id, **raw_spec.headers}), playing)

        self._record(request, seq, arrival, raw, True, OUTCOME_REPLIED, 200, routing=routing,
                     reply=prepared.description, decision=decision, sent=sent)
        if decision.builtin is not None:
            self.script.builtin_used(seq, decision.builtin)
        if await stall(request, prepared.reply.stall_before):
            playing.end(END_CLIENT_DISCONNECTED)
            return Response(status_code=499)
        model = prepared.reply.model or facts.model or "claude-sonnet-4-5"
        reply_id = prepared.reply.id or message_id(seq, self.script.scenario.message_ids)
        if turn is not None:
            reply = prepared.reply
            if reply.expire_thread:
                turn.expire()
            elif not (facts.stream and (reply.disconnect or reply.truncate or reply.stream_error)):
                turn.keep(reply_id, list(prepared.content))
        headers = {"request-id": request_id, **prepared.reply.headers}
        if not facts.stream:
            return _json(prepared.json_body(reply_id, model), 200, headers)
        headers.update(SSE_HEADERS)
        start = prepared.message_start(reply_id, model)
        plan = prepared.plan
        if plan.whole:
            return WholeStream(start, plan.tail, headers, playing)
        return Played(EventSourceResponse(
            play(plan.steps(start), playing, transport_of(request.scope),
                 self.delivery_timeout),
            headers=headers, ping=0, sep="\n"), playing)

    def _count_tokens(self, request: Request, seq: int, arrival: float, raw: bytes | None,
                      routing: Routing, request_id: str, decision: Decision) -> Response:
        body = orjson.dumps({"input_tokens": max(1, len(raw or b"") // 4)})
        self._record(request, seq, arrival, raw, True, OUTCOME_REPLIED, 200,
                     routing={**routing, "rule": "builtin:count_tokens",
                              "builtin_reply": "count-tokens"}, decision=decision)
        self.script.builtin_used(seq, "count-tokens")
        return _json(body, 200, {"request-id": request_id})


_EXACT_ROUTES = frozenset(("/v1/messages", "/v1/messages/count_tokens"))


def _url_path(request: Request) -> str:
    """The path as ``request.url`` shows it; for the Messages routes (matched exactly, nothing
    in them escaped) the scope's, without building the URL (it costs on every request)."""
    path: str = request.scope["path"]
    return path if path in _EXACT_ROUTES else request.url.path
