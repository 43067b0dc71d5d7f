"""Record, then replay: a proxy in front of any Messages API endpoint that writes what passed.

Every request is forwarded to the upstream as it came (its ``x-api-key`` or
``authorization`` too: they go to the upstream and nowhere else), and the upstream's
answer is relayed as it arrives: a stream event by event, a JSON body, an error with its
status. What passed is written twice:

- the **journal**, in the mock's own format and by its own writer (``Journal``: secret
  headers redacted, one line per request as soon as the upstream's status is known, a
  ``response_end`` line when a stream is over);
- a **scenario** the mock loads: one rule per ``POST /v1/messages`` exchange, matched on
  what the mock itself computes for the request (``kind``, ``turn``, ``attempt``, by the
  same ``Script`` and classifier), never on the request's text (dates, paths, session ids
  change run to run). The rule's reply is the upstream's: its text, tool_use, thinking
  and redacted_thinking blocks, ``stop_reason``, ``usage``, ``model`` and ``id``; an error
  status with its type and message; or, for anything a message reply cannot say (a stream
  that broke off or carried an error event, a block type the mock does not know), the
  upstream's bytes as a ``raw`` reply. Strings are escaped so that the scenario's
  ``{placeholders}`` leave them as they were. The scenario is ``validation: lenient``:
  the upstream already judged each request. How an answer becomes a reply is
  ``mockapi.upstream_reply``'s (``reply_from_exchange``, re-exported here).

The scenario file is rewritten (atomically) after every exchange and once more when the
proxy stops, when exchanges still open are written as what arrived of them, cut off.
Message threads (``thread`` in the body) are relayed and journaled but get no rule.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

import httpx
import uvicorn
import yaml
from starlette.requests import ClientDisconnect, Request
from starlette.types import Receive, Scope, Send

from mockapi.events import error_body
from mockapi.journal import Journal, redact_headers
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
from mockapi.server import (
    NonLoopbackRefused,
    ServerThread,
    bind_socket,
    bind_unix_socket,
    own_hosts,
)
from mockapi.server import uvicorn_config as _uvicorn_config
from mockapi.upstream_reply import reply_from_exchange

__all__ = ["RECORDED_PATH", "Recorder", "RecordingProxy", "UpstreamError", "check_upstream",
           "record", "reply_from_exchange"]

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
        query = scope.get("query_string", b"").decode("latin-1")
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


# ---- on a socket ------------------------------------------------------------------------


class _StopQuietly(uvicorn.Server):
    """Stops on SIGINT/SIGTERM without re-raising the signal afterwards (uvicorn's default):
    stopping is how a recording ends, and the scenario is written after it."""

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        self._captured_signals.clear()


class RecordingProxy:
    """The recorder on a loopback port (or a Unix socket, as ``MockServer``) in a thread;
    a context manager. ``.url``, ``.journal`` (the mock's journal writer), ``.recorder``.
    """

    def __init__(self, upstream: str, scenario_path: str | Path, journal_path: str | Path, *,
                 host: str = "127.0.0.1", port: int = 0, uds: Path | None = None,
                 public_url: str | None = None, classifier: str = "claude-code",
                 fsync: bool = False):
        self.uds = uds
        self._socket = bind_unix_socket(uds) if uds is not None else bind_socket(host, port)
        if uds is not None:
            if public_url is None:
                raise ValueError("a recorder on a Unix socket needs the public_url clients use")
            self.url = public_url.rstrip("/")
        else:
            address = self._socket.getsockname()
            shown = f"[{address[0]}]" if ":" in address[0] else address[0]
            self.url = public_url or f"http://{shown}:{address[1]}"
        self.recorder = Recorder(upstream, scenario_path, journal_path, classifier=classifier,
                                 fsync=fsync, allowed_hosts=own_hosts(self.url))
        self.journal = self.recorder.journal
        self._server = _StopQuietly(_uvicorn_config(self.recorder))
        self._runner = ServerThread(self._server, self._socket, f"record:{self.url}",
                                    "the recorder")
        self._closed = False

    def serve_forever(self) -> None:
        """Serve in this thread until SIGINT or SIGTERM; then write the scenario."""
        try:
            self._server.run(sockets=[self._socket])
        finally:
            self._close()

    def start(self) -> RecordingProxy:
        self._runner.start()
        return self

    def stop(self) -> None:
        self._runner.stop()
        self._close()

    def _close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._socket.close()
        if self.uds is not None:
            self.uds.unlink(missing_ok=True)
        self.recorder.close()

    def __enter__(self) -> RecordingProxy:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()



def record(upstream: str, out: Path, *, host: str = "127.0.0.1", port: int = 0,
           classifier: str = "claude-code") -> int:
    """``loopprobe record``: serve until SIGINT/SIGTERM, then write the scenario; 2 when it
    cannot start (one line on stderr saying why)."""
    scenario_path, journal_path = out / "scenario.yaml", out / "journal.jsonl"
    if scenario_path.exists() or journal_path.exists():
        print(f"loopprobe record: {out} already holds a recording (scenario.yaml, "
              "journal.jsonl): choose another --out", file=sys.stderr)
        return 2
    try:
        proxy = RecordingProxy(upstream, scenario_path, journal_path, host=host, port=port,
                               classifier=classifier, fsync=True)
    except UpstreamError as error:
        print(f"loopprobe record: {error}", file=sys.stderr)
        return 2
    except NonLoopbackRefused:
        print(f"loopprobe record: refusing to bind {host!r}: the recorder listens on loopback "
              "only (127.0.0.1, ::1)", file=sys.stderr)
        return 2
    except (OSError, ValueError) as error:
        print(f"loopprobe record: cannot listen on {host}:{port}: {error}", file=sys.stderr)
        return 2
    print(f"loopprobe record: listening on {proxy.url}, forwarding to {proxy.recorder.upstream}"
          f"; writing {scenario_path} and {journal_path} (Ctrl-C to stop)", flush=True)
    proxy.serve_forever()
    rules = len(proxy.recorder.rules)
    print(f"loopprobe record: wrote {scenario_path} ({rules} rule(s)) and {journal_path}",
          flush=True)
    return 0
