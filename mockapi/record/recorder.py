"""The recorder as an ASGI app: each request forwarded to the upstream as it came, the
answer relayed as it arrives, both journaled, and each Messages API exchange kept as a rule
of the scenario it rewrites (``mockapi.record.proxy`` says what is written and serves it).

A target that could leave the upstream's base path is refused 400 before anything is
forwarded (``mockapi.check.targets``). The relay streams the upstream's body through and keeps
at most ``max_recorded_bytes`` of it for the recording (the scenario's ``description``
says what a rule left out); the rule is made and the scenario written off the event loop.
When the client leaves, the upstream's response is closed at once: what arrived until
then is the rule, cut off.

What came back of one exchange, what of it the recording keeps and the rule it becomes are
``mockapi.record.exchange``'s; here is the flow, from the target's check through the relay
to the rule kept.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import anyio.to_thread
import httpx
from starlette.requests import ClientDisconnect, Request
from starlette.types import Receive, Scope, Send

from mockapi.check.requests import MAX_BODY_BYTES, BadRequest, is_json, parse_body, read_body
from mockapi.check.targets import (
    UnsafeTarget,
    check_upstream,
    control_character,
    forwarded_url,
)
from mockapi.journal.records import (
    END_CLIENT_DISCONNECTED,
    END_COMPLETE,
    END_DISCONNECTED_BY_SCRIPT,
    OUTCOME_CLIENT_DISCONNECTED,
    OUTCOME_HELLO,
    OUTCOME_INVALID_REQUEST,
    OUTCOME_MOCK_ERROR,
    OUTCOME_MODELS,
    OUTCOME_NOT_FOUND,
    OUTCOME_REFUSED,
    OUTCOME_REPLIED,
    EndReason,
    Outcome,
    Routing,
    request_record,
    response_end_record,
    transport_outcome,
)
from mockapi.journal.redact import redact_headers, redact_query
from mockapi.journal.write import Journal
from mockapi.record.exchange import Exchange, rule_id
from mockapi.record.recorded import RecordedScenario
from mockapi.script.decide import Script
from mockapi.script.events import error_body
from mockapi.script.matching import facts_from_body
from mockapi.script.scenario import Scenario

__all__ = ["MAX_RECORDED_BYTES", "RECORDED_PATH", "Recorder"]

RECORDED_PATH = "/v1/messages"  # the route whose exchanges become rules
# of each upstream body, what the recording keeps (the client gets all of it)
MAX_RECORDED_BYTES = 4 * 1024 * 1024
# not forwarded: they describe this hop, not the request (httpx sets its own)
_HOP_REQUEST = frozenset({"host", "content-length", "connection", "keep-alive", "te",
                          "trailer", "transfer-encoding", "upgrade", "proxy-authorization",
                          "proxy-connection", "accept-encoding"})
# not relayed: the body is relayed decoded and re-framed
_HOP_RESPONSE = frozenset({"content-length", "content-encoding", "transfer-encoding",
                           "connection", "keep-alive"})
_TIMEOUT = httpx.Timeout(connect=30.0, read=600.0, write=60.0, pool=30.0)


class _BrokenOff(Exception):
    """Raised inside a relayed body to drop the client's connection, as the upstream's was."""


class _QuietBreaks(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, _BrokenOff)


logging.getLogger("uvicorn.error").addFilter(_QuietBreaks())


def _outcome(path: str, status: int) -> Outcome:
    if path.startswith("/v1/models"):
        return OUTCOME_MODELS if status < 400 else OUTCOME_NOT_FOUND
    if path == "/api/hello":
        return OUTCOME_HELLO
    if path in ("/v1/messages", "/v1/messages/count_tokens") or status != 404:
        return OUTCOME_REPLIED
    return OUTCOME_NOT_FOUND


async def _until_disconnect(receive: Receive, scope: anyio.CancelScope,
                            exchange: Exchange) -> None:
    """Cancel ``scope`` when the client leaves (its body was read: nothing else comes)."""
    while (await receive())["type"] != "http.disconnect":
        pass
    if not exchange.complete:
        scope.cancel()


class Recorder:
    """The proxy as an ASGI app (``__call__``), its journal and the scenario it writes.

    ``classifier``: how request kinds are told apart (the scenario's, ``claude-code`` or
    ``plain``); ``allowed_hosts``: the ``Host`` values served (None: any); a request from
    a web page (``Origin``) is always refused. ``max_recorded_bytes``: how much of each
    upstream body a rule keeps (the client gets all of it).
    """

    def __init__(self, upstream: str, scenario_path: str | Path, journal_path: str | Path, *,
                 classifier: str = "claude-code", name: str = "recorded",
                 fsync: bool = False, allowed_hosts: set[str] | None = None,
                 transport: httpx.AsyncBaseTransport | None = None,
                 max_recorded_bytes: int = MAX_RECORDED_BYTES):
        self.upstream = check_upstream(upstream)
        self.scenario_path = Path(scenario_path)
        self.journal = Journal(journal_path, fsync=fsync)
        self.name = name
        self.classifier = classifier
        self.script = Script(Scenario.model_validate({"classifier": classifier}))
        self.allowed_hosts = None if allowed_hosts is None else {h.lower() for h in allowed_hosts}
        self.transport = transport
        self.max_recorded_bytes = max_recorded_bytes
        self.run = self.journal.last_run + 1
        self.started = time.monotonic()
        self.recorded = RecordedScenario(self.scenario_path, name=name, upstream=self.upstream,
                                         classifier=classifier)
        self.open: dict[int, Exchange] = {}
        self.write_scenario()

    # ---- the scenario ------------------------------------------------------------------

    @property
    def rules(self) -> dict[int, str]:
        """The rules kept so far, by seq (each as YAML)."""
        return self.recorded.rules

    def scenario(self) -> Scenario:
        """What was recorded so far, as the mock loads it."""
        return self.recorded.scenario()

    def write_scenario(self, *, with_open: bool = False) -> Path:
        """Write the scenario file whole (a temporary file renamed into place); with
        ``with_open``, exchanges still open too, as what arrived of them, cut off."""
        extra = {}
        if with_open:
            for seq, exchange in list(self.open.items()):
                if exchange.routing is not None and exchange.status:
                    extra[seq] = self.recorded.rule_text(seq, exchange.rule(complete=False))
        return self.recorded.write(extra)

    def _keep(self, exchange: Exchange, complete: bool) -> None:
        """Add the exchange's rule (a Messages API exchange has one) and rewrite the file;
        run off the event loop."""
        if exchange.routing is not None:
            self.recorded.keep(exchange.seq, exchange.rule(complete=complete),
                               exchange.cut(rule_id(exchange.routing)))

    def close(self) -> None:
        """Write the scenario a last time (open exchanges as cut off) and close the journal."""
        try:
            self.write_scenario(with_open=True)
        finally:
            self.journal.close()

    # ---- one request -------------------------------------------------------------------

    def _routing(self, path: str, method: str, raw: bytes, headers: Any,
                 seq: int) -> Routing | None:
        """What the mock makes of this request (kind, turn, attempt), as the mock would
        compute it; None for a request the mock answers before its script sees it."""
        if method != "POST" or path not in ("/v1/messages", "/v1/messages/count_tokens"):
            return None
        try:
            body = parse_body(raw, headers, path)
        except BadRequest:
            return None
        if "thread" in body:
            return None
        facts = facts_from_body(path, body, headers)
        decision = self.script.decide(facts, body, raw, seq)
        routing: Routing = {
            "kind": decision.kind, "turn": decision.turn, "attempt": decision.attempt,
            "stream": facts.stream, "model": facts.model, "rule": None, "reply_index": None,
            "replay_of": None}
        if path == RECORDED_PATH:
            routing["rule"], routing["reply_index"] = rule_id(routing), 0
        return routing

    def _journal_request(self, scope: Scope, seq: int, arrival: float, raw: bytes | None,
                         outcome: Outcome, status: int | None, *, error: str | None = None,
                         routing: Routing | None = None) -> None:
        query = redact_query(scope.get("query_string", b"").decode("latin-1"))
        record = request_record(
            seq=seq, run=self.run, time=arrival,
            elapsed=round(time.monotonic() - self.started, 6), method=scope["method"],
            path=scope["path"], query=query, headers=redact_headers(scope["headers"]),
            body_size=len(raw) if raw is not None else None, outcome=outcome, status=status,
            error=error, routing=routing)
        self.journal.append_request(record, reply=None, body=raw, body_is_json=is_json(raw))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        refusal = self._refusal(scope)
        arrival = time.time()
        seq = self.journal.next_seq()
        if refusal:
            self._journal_request(scope, seq, arrival, None, OUTCOME_REFUSED, 403, error=refusal)
            await _answer(send, 403, "permission_error", f"loopprobe record: {refusal}", seq)
            return
        try:
            url = self._target(scope)
        except UnsafeTarget as unsafe:
            why = (f"the request target is refused: {unsafe}; the recorder forwards a path "
                   f"under {self.upstream} as it came, or nothing")
            self._journal_request(scope, seq, arrival, None, OUTCOME_INVALID_REQUEST, 400,
                                  error=why)
            await _answer(send, 400, "invalid_request_error", f"loopprobe record: {why}", seq)
            return
        request = Request(scope, receive)
        try:
            raw = await read_body(request, MAX_BODY_BYTES)
        except BadRequest as bad:
            self._journal_request(scope, seq, arrival, None, bad.outcome, bad.status,
                                  error=bad.message)
            await _answer(send, bad.status, bad.error_type, bad.message, seq)
            return
        except ClientDisconnect:
            return
        routing = self._routing(scope["path"], scope["method"], raw, request.headers, seq)
        exchange = Exchange(seq, routing if scope["path"] == RECORDED_PATH else None,
                             self.max_recorded_bytes)
        forwarded = [(k, v) for k, v in scope["headers"]
                     if k.decode("latin-1").lower() not in _HOP_REQUEST]
        async with httpx.AsyncClient(timeout=_TIMEOUT, transport=self.transport,
                                     follow_redirects=False) as client:
            upstream_request = client.build_request(scope["method"], url, headers=forwarded,
                                                    content=raw)
            try:
                async with anyio.create_task_group() as group:
                    group.start_soon(_until_disconnect, receive, group.cancel_scope, exchange)
                    await self._relay(client, upstream_request, scope, send, exchange, arrival,
                                      raw, routing)
                    group.cancel_scope.cancel()
            finally:
                if exchange.response is not None:
                    await exchange.response.aclose()  # at once when the client left
            await self._end(scope, send, exchange, arrival, raw, routing)

    async def _relay(self, client: httpx.AsyncClient, upstream_request: httpx.Request,
                     scope: Scope, send: Send, exchange: Exchange, arrival: float, raw: bytes,
                     routing: Routing | None) -> None:
        """Ask the upstream and relay its body as it comes; cancelled when the client leaves
        (``_end`` then says what happened)."""
        try:
            response = await client.send(upstream_request, stream=True)
        except httpx.HTTPError as error:
            exchange.unreachable = type(error).__name__
            return
        exchange.response = response
        exchange.status, exchange.headers = response.status_code, response.headers
        self._journal_request(scope, exchange.seq, arrival, raw,
                              _outcome(scope["path"], response.status_code),
                              response.status_code, routing=routing)
        self.open[exchange.seq] = exchange
        await send({"type": "http.response.start", "status": response.status_code,
                    "headers": [(k, v) for k, v in response.headers.raw
                                if k.decode("latin-1").lower() not in _HOP_RESPONSE]})
        began = time.monotonic()
        try:
            async for chunk in response.aiter_bytes():
                exchange.take(chunk, time.monotonic() - began)
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        except httpx.HTTPError as error:
            exchange.broken = repr(error)
            return
        exchange.complete = True

    async def _end(self, scope: Scope, send: Send, exchange: Exchange, arrival: float,
                   raw: bytes, routing: Routing | None) -> None:
        """Journal how the exchange ended, keep its rule (off the event loop) and end the
        client's response as the upstream's ended."""
        seq = exchange.seq
        if exchange.unreachable is not None:
            why = f"the upstream {self.upstream} cannot be reached: {exchange.unreachable}"
            self._journal_request(scope, seq, arrival, raw, OUTCOME_MOCK_ERROR, 502,
                                  error=why, routing=routing)
            await _answer(send, 502, "api_error", f"loopprobe record: {why}", seq)
            return
        if exchange.response is None:  # the client left before the upstream answered
            self._journal_request(scope, seq, arrival, raw, OUTCOME_CLIENT_DISCONNECTED, None,
                                  error="the client left before the upstream answered; the "
                                        "upstream's request was cancelled", routing=routing)
            return
        reason: EndReason = END_COMPLETE if exchange.complete else \
            END_DISCONNECTED_BY_SCRIPT if exchange.broken else END_CLIENT_DISCONNECTED
        try:
            if exchange.complete:
                # on disk before the client sees the body end: a kill after it loses nothing
                await anyio.to_thread.run_sync(self._keep, exchange, True)
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            if exchange.headers.get("content-type", "").startswith("text/event-stream"):
                self.journal.append_or_keep(response_end_record(
                    seq=seq, run=self.run, time=time.time(),
                    elapsed=round(time.monotonic() - self.started, 6), reason=reason,
                    events_sent=exchange.writes, bytes_sent=exchange.size,
                    write_offsets=exchange.offsets))
            if not exchange.complete:
                await anyio.to_thread.run_sync(self._keep, exchange, False)
            self.open.pop(seq, None)  # once kept: close() writes what is still open
        if exchange.broken is not None:
            raise _BrokenOff(f"the upstream broke the body off: {exchange.broken}")

    def refused_by_transport(self, method: str, path: str, status: int, why: str) -> None:
        """Journal a request that the transport refused before the recorder saw it."""
        self.journal.append_or_keep(request_record(
            seq=self.journal.next_seq(), run=self.run, time=time.time(),
            elapsed=round(time.monotonic() - self.started, 6), method=method, path=path,
            query="", headers={}, body_size=None, outcome=transport_outcome(status),
            status=status, error=why))

    def _target(self, scope: Scope) -> str:
        """Where the request goes: its target as it came, under the upstream's base."""
        control = control_character(scope["path"])
        if control:
            raise UnsafeTarget(f"a control character in the path ({control})")
        raw_path = scope.get("raw_path") or quote(scope["path"]).encode("ascii")
        raw_path, _, query = raw_path.partition(b"?")  # an in-process scope may hold both
        return forwarded_url(self.upstream, raw_path, scope.get("query_string") or query)

    def _refusal(self, scope: Scope) -> str:
        host = ""
        for name, value in scope["headers"]:
            if name == b"origin":
                return ("requests from web pages are refused: found Origin: "
                        f"{value.decode('latin-1')[:100]}")
            if name == b"host":
                host = value.decode("latin-1").lower()
        if self.allowed_hosts is not None and host not in self.allowed_hosts:
            return (f"expected Host to be the recorder's own address "
                    f"({', '.join(sorted(self.allowed_hosts))}), found {host[:100] or 'none'}")
        return ""


async def _answer(send: Send, status: int, error_type: str, message: str, seq: int) -> None:
    request_id = f"req_loopprobe_record_{seq:06d}"
    body = error_body(error_type, message, request_id)
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"request-id", request_id.encode())]})
    await send({"type": "http.response.body", "body": body, "more_body": False})
