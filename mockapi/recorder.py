"""The recorder as an ASGI app: each request forwarded to the upstream as it came, the
answer relayed as it arrives, both journaled, and each Messages API exchange kept as a rule
of the scenario it rewrites (``mockapi.record`` says what is written and serves it).
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml
from starlette.requests import ClientDisconnect, Request
from starlette.types import Receive, Scope, Send

from mockapi.events import error_body
from mockapi.journal import Journal, redact_headers, redact_query
from mockapi.matching import facts_from_body
from mockapi.records import (
    END_CLIENT_DISCONNECTED,
    END_COMPLETE,
    END_DISCONNECTED_BY_SCRIPT,
    OUTCOME_HELLO,
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
    spliced_fields,
)
from mockapi.requests import MAX_BODY_BYTES, BadRequest, is_json, parse_body, read_body
from mockapi.scenario import Scenario, parse_scenario
from mockapi.script import Script
from mockapi.upstream_reply import reply_from_exchange

__all__ = ["RECORDED_PATH", "Recorder", "UpstreamError", "check_upstream"]

RECORDED_PATH = "/v1/messages"  # the route whose exchanges become rules
# not forwarded: they describe this hop, not the request (httpx sets its own)
_HOP_REQUEST = frozenset({"host", "content-length", "connection", "keep-alive", "te",
                          "trailer", "transfer-encoding", "upgrade", "proxy-authorization",
                          "proxy-connection", "accept-encoding"})
# not relayed: the body is relayed decoded and re-framed
_HOP_RESPONSE = frozenset({"content-length", "content-encoding", "transfer-encoding",
                           "connection", "keep-alive"})
_TIMEOUT = httpx.Timeout(connect=30.0, read=600.0, write=60.0, pool=30.0)


class UpstreamError(ValueError):
    """An --upstream that is not an http(s) URL."""


def check_upstream(url: str) -> str:
    """The upstream's base URL without a trailing slash; ``UpstreamError`` when it is not
    an http(s) URL with a host."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError) as error:
        raise UpstreamError(f"--upstream {url!r} is not a URL: {error}") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise UpstreamError(f"--upstream {url!r}: expected an http:// or https:// URL with a "
                            "host, e.g. https://api.anthropic.com")
    if parsed.query or parsed.fragment:
        raise UpstreamError(f"--upstream {url!r}: expected no query or fragment")
    if parsed.userinfo:  # the URL is written into the scenario: credentials go in headers
        raise UpstreamError("--upstream: expected no user or password in the URL (the "
                            "client's own x-api-key or authorization header is passed on)")
    return url.rstrip("/")



# ---- the recorder ------------------------------------------------------------------------


class _BrokenOff(Exception):
    """Raised inside a relayed body to drop the client's connection, as the upstream's was."""


class _QuietBreaks(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, _BrokenOff)


logging.getLogger("uvicorn.error").addFilter(_QuietBreaks())


@dataclass
class _Exchange:
    seq: int
    routing: Routing | None
    status: int = 0
    headers: httpx.Headers = field(default_factory=httpx.Headers)
    chunks: list[bytes] = field(default_factory=list)


def _rule_id(routing: Routing) -> str:
    return f"{routing['kind']}-turn{routing['turn']}-attempt{routing['attempt']}"


class _NoAliases(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        return True


def _outcome(path: str, status: int) -> Outcome:
    if path.startswith("/v1/models"):
        return OUTCOME_MODELS if status < 400 else OUTCOME_NOT_FOUND
    if path == "/api/hello":
        return OUTCOME_HELLO
    if path in ("/v1/messages", "/v1/messages/count_tokens") or status != 404:
        return OUTCOME_REPLIED
    return OUTCOME_NOT_FOUND


class Recorder:
    """The proxy as an ASGI app (``__call__``), its journal and the scenario it writes.

    ``classifier``: how request kinds are told apart (the scenario's, ``claude-code`` or
    ``plain``); ``allowed_hosts``: the ``Host`` values served (None: any); a request from
    a web page (``Origin``) is always refused.
    """

    def __init__(self, upstream: str, scenario_path: str | Path, journal_path: str | Path, *,
                 classifier: str = "claude-code", name: str = "recorded",
                 fsync: bool = False, allowed_hosts: set[str] | None = None,
                 transport: httpx.AsyncBaseTransport | None = None):
        self.upstream = check_upstream(upstream)
        self.scenario_path = Path(scenario_path)
        self.journal = Journal(journal_path, fsync=fsync)
        self.name = name
        self.classifier = classifier
        self.script = Script(Scenario.model_validate({"classifier": classifier}))
        self.allowed_hosts = None if allowed_hosts is None else {h.lower() for h in allowed_hosts}
        self.transport = transport
        self.run = self.journal.last_run + 1
        self.started = time.monotonic()
        self.rules: dict[int, dict[str, Any]] = {}  # by seq: a rule as data
        self.open: dict[int, _Exchange] = {}
        self._lock = threading.Lock()
        self.write_scenario()

    # ---- the scenario ------------------------------------------------------------------

    def scenario(self, *, with_open: bool = False) -> Scenario:
        """What was recorded so far, as a validated scenario (``with_open``: exchanges
        still open too, as what arrived of them, cut off)."""
        rules = dict(self.rules)
        if with_open:
            for seq, exchange in list(self.open.items()):
                if exchange.routing is not None and exchange.status:
                    rules[seq] = self._rule(exchange, complete=False)
        data = {"name": self.name,
                "description": f"recorded from {self.upstream} by loopprobe record",
                "classifier": self.classifier, "validation": "lenient",
                "rules": [rules[seq] for seq in sorted(rules)]}
        return parse_scenario(data, str(self.scenario_path))

    def write_scenario(self, *, with_open: bool = False) -> Path:
        """Write the scenario file whole (a temporary file renamed into place)."""
        data = self.scenario(with_open=with_open).model_dump(mode="json", exclude_unset=True)
        text = yaml.dump(data, Dumper=_NoAliases, sort_keys=False, allow_unicode=True,
                         width=100)
        with self._lock:
            self.scenario_path.parent.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(prefix=f".{self.scenario_path.name}.",
                                                 dir=self.scenario_path.parent)
            try:
                with os.fdopen(handle, "w") as out:
                    out.write(text)
                os.replace(temporary, self.scenario_path)
            except BaseException:
                Path(temporary).unlink(missing_ok=True)
                raise
        return self.scenario_path

    def _rule(self, exchange: _Exchange, *, complete: bool) -> dict[str, Any]:
        routing = exchange.routing
        assert routing is not None
        return {"id": _rule_id(routing),
                "match": {"kind": routing["kind"], "turn": routing["turn"],
                          "attempt": routing["attempt"]},
                "reply": reply_from_exchange(exchange.status, exchange.headers,
                                             exchange.chunks, complete)}

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
            routing["rule"], routing["reply_index"] = _rule_id(routing), 0
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
        self.journal.append(record, *spliced_fields(None, raw, is_json(raw)))

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
        exchange = _Exchange(seq, routing if scope["path"] == RECORDED_PATH else None)
        query = scope.get("query_string", b"")
        url = self.upstream + scope["path"] + ("?" + query.decode("latin-1") if query else "")
        forwarded = [(k, v) for k, v in scope["headers"]
                     if k.decode("latin-1").lower() not in _HOP_REQUEST]
        async with httpx.AsyncClient(timeout=_TIMEOUT, transport=self.transport,
                                     follow_redirects=False) as client:
            try:
                response = await client.send(
                    client.build_request(scope["method"], url, headers=forwarded, content=raw),
                    stream=True)
            except httpx.HTTPError as error:
                why = f"the upstream {self.upstream} cannot be reached: {type(error).__name__}"
                self._journal_request(scope, seq, arrival, raw, OUTCOME_MOCK_ERROR, 502,
                                      error=why, routing=routing)
                await _answer(send, 502, "api_error", f"loopprobe record: {why}", seq)
                return
            try:
                await self._relay(scope, send, response, exchange, arrival, raw, routing)
            finally:
                await response.aclose()

    async def _relay(self, scope: Scope, send: Send, response: httpx.Response,
                     exchange: _Exchange, arrival: float, raw: bytes,
                     routing: Routing | None) -> None:
        seq = exchange.seq
        exchange.status, exchange.headers = response.status_code, response.headers
        self._journal_request(scope, seq, arrival, raw,
                              _outcome(scope["path"], response.status_code),
                              response.status_code, routing=routing)
        streamed = response.headers.get("content-type", "").startswith("text/event-stream")
        self.open[seq] = exchange
        reason: EndReason = END_CLIENT_DISCONNECTED
        size = 0
        offsets: list[float] = []
        began = time.monotonic()
        complete = False
        try:
            await send({"type": "http.response.start", "status": response.status_code,
                        "headers": [(k, v) for k, v in response.headers.raw
                                    if k.decode("latin-1").lower() not in _HOP_RESPONSE]})
            try:
                async for chunk in response.aiter_bytes():
                    exchange.chunks.append(chunk)
                    offsets.append(time.monotonic() - began)
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                    size += len(chunk)
            except httpx.HTTPError as error:
                reason = END_DISCONNECTED_BY_SCRIPT  # the upstream broke the body off
                raise _BrokenOff(f"the upstream broke the body off: {error!r}") from None
            complete = True
            # on disk before the client sees the body end: a kill after it loses nothing
            self._keep(exchange, complete=True)
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            reason = END_COMPLETE
        finally:
            self.open.pop(seq, None)
            if streamed:
                self.journal.append_or_keep(response_end_record(
                    seq=seq, run=self.run, time=time.time(),
                    elapsed=round(time.monotonic() - self.started, 6), reason=reason,
                    events_sent=len(exchange.chunks), bytes_sent=size, write_offsets=offsets))
            if not complete:
                self._keep(exchange, complete=False)

    def _keep(self, exchange: _Exchange, *, complete: bool) -> None:
        """Add the exchange's rule (a Messages API exchange has one) and rewrite the file."""
        if exchange.routing is not None:
            self.rules[exchange.seq] = self._rule(exchange, complete=complete)
            self.write_scenario()

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
