"""The recorder under attack (issue 27): each test reproduces what broke the landed code, on
an in-process fake upstream (an ``httpx.MockTransport`` that notes every URL it is asked
for), in-process where the wire does not matter and on a real uvicorn where it does.

Broken before: ``/../../admin``, ``%2e%2e`` and ``..%2F`` reached other paths of the
upstream's host with the client's key; ``?api_key=`` was journaled verbatim; ``%0d%0a`` in a
path was a 500 with a traceback, unjournaled; a 16 MB reply peaked at 375 MB while the
scenario was rewritten on the event loop (another client waited 14.5 s); the upstream was
read to its end after the client had left.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import tracemalloc
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import httpx
import orjson
import pytest

from mockapi import load_scenario, read_journal
from mockapi.record import RecordingProxy
from mockapi.record.recorder import Recorder

API_KEY = "sk-ant-record-hardening-0001"
HEADERS = [(b"x-api-key", API_KEY.encode()), (b"anthropic-version", b"2023-06-01"),
           (b"content-type", b"application/json")]
BODY = orjson.dumps({"model": "m", "max_tokens": 5, "stream": True,
                     "messages": [{"role": "user", "content": "hi"}]})
UPSTREAM = "http://upstream.test/base"
TIMEOUT = 20.0


class FakeUpstream:
    """An upstream in this process: answers every request with ``reply`` (a factory of
    ``httpx.Response``) and notes each URL it was asked for."""

    def __init__(self, reply: Any = None):
        self.urls: list[str] = []
        self.reply = reply or (lambda: httpx.Response(200, json={"ok": True}))
        self.transport = httpx.MockTransport(self._handle)

    async def _handle(self, request: httpx.Request) -> httpx.Response:
        self.urls.append(str(request.url))
        response: httpx.Response = self.reply()
        return response


async def call(app: Any, method: str, target: bytes, body: bytes = b"", *,
               disconnect: asyncio.Event | None = None,
               on_body: Any = None) -> tuple[int, bytes]:
    """One request to an ASGI app, its target as it would come on the wire (uvicorn's scope:
    ``path`` percent-decoded, ``raw_path`` as sent); the status and the body."""
    raw_path, _, query = target.partition(b"?")
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": method, "scheme": "http", "root_path": "",
             "path": unquote(raw_path.decode("ascii")), "raw_path": raw_path,
             "query_string": query, "headers": [(b"host", b"recorder.test"), *HEADERS],
             "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80)}
    sent = False
    status, chunks = 0, []
    left = disconnect or asyncio.Event()

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await left.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif on_body is not None:
            on_body(message.get("body", b""))
        else:
            chunks.append(message.get("body", b""))
        if message["type"] == "http.response.body" and not message.get("more_body"):
            left.set()

    await app(scope, receive, send)
    return status, b"".join(chunks)


def recorder(tmp_path: Path, upstream: FakeUpstream, **options: Any) -> Recorder:
    return Recorder(UPSTREAM, tmp_path / "s.yaml", tmp_path / "j.jsonl",
                    transport=upstream.transport, **options)


def journaled(tmp_path: Path) -> list[dict[str, Any]]:
    return [dict(r) for r in read_journal(tmp_path / "j.jsonl").requests()]


# ---- the forwarded path stays under the upstream's base ------------------------------------

ESCAPES = [
    (b"/../../admin", "a '.' or '..' segment"),
    (b"/v1/../../admin", "a '.' or '..' segment"),
    (b"/v1/./messages", "a '.' or '..' segment"),
    (b"/%2e%2e/%2e%2e/admin", "an encoded '.' (%2E)"),
    (b"/v1/.%2E/admin", "an encoded '.' (%2E)"),
    (b"/v1/..%2F..%2Fadmin", "an encoded '/' (%2F)"),
    (b"/v1/%2fadmin", "an encoded '/' (%2F)"),
    (b"/v1/..%5C..%5Cadmin", "an encoded '\\' (%5C)"),
    (b"/v1/a\\..\\..\\admin", "'\\\\' at 5 of the path"),
    (b"/v1/%0d%0aHost:%20evil", "a control character in the path (U+000D at 4)"),
    (b"/v1/%00", "a control character in the path (U+0000 at 4)"),
    (b"/v1/%zz", "a malformed percent escape in the path"),
    (b"*", "the path does not start with '/'"),
    (b"/v1/models?a=#b", "'#' at 2 of the query"),
]


def _get(tmp_path: Path, target: bytes) -> tuple[int, bytes, FakeUpstream]:
    """GET ``target`` through a recorder in front of a fake upstream."""
    upstream = FakeUpstream()
    app = recorder(tmp_path, upstream)
    status, body = asyncio.run(call(app, "GET", target))
    app.close()
    return status, body, upstream


@pytest.mark.parametrize(("target", "why"), ESCAPES, ids=[t.decode() for t, _ in ESCAPES])
def test_a_target_that_could_leave_the_base_is_refused_400_and_journaled(
        tmp_path: Path, target: bytes, why: str) -> None:
    status, body, upstream = _get(tmp_path, target)
    error = orjson.loads(body)["error"]
    assert (status, error["type"]) == (400, "invalid_request_error")
    assert why in error["message"] and UPSTREAM in error["message"]
    assert upstream.urls == []  # nothing was forwarded
    (record,) = journaled(tmp_path)
    assert (record["outcome"], record["status"], record["path"]) == (
        "invalid_request", 400, unquote(target.partition(b"?")[0].decode()))
    assert why in record["error"]


@pytest.mark.parametrize(("target", "forwarded"), [
    (b"/v1/messages?beta=true", "/base/v1/messages?beta=true"),
    (b"/v1/models/claude-sonnet-4-5", "/base/v1/models/claude-sonnet-4-5"),
    (b"/v1/messages%3Fa=1", "/base/v1/messages%3Fa=1"),  # not a query: as it came
    (b"/v1//x", "/base/v1//x"),
    (b"/v1/%C3%A9t%C3%A9", "/base/v1/%C3%A9t%C3%A9"),
    (b"/v1/..a/b..", "/base/v1/..a/b.."),  # dots inside a segment are not dot segments
    # a query cannot leave the path: as it came
    (b"/v1/models?ids[]=a&q=%2e%2e%2F", "/base/v1/models?ids[]=a&q=%2e%2e%2F"),
])
def test_a_plain_target_is_forwarded_under_the_base_as_it_came(
        tmp_path: Path, target: bytes, forwarded: str) -> None:
    status, _, upstream = _get(tmp_path, target)
    assert status == 200
    assert upstream.urls == ["http://upstream.test" + forwarded]


def test_refusals_on_the_wire_are_in_the_apis_shape_and_journaled(tmp_path: Path) -> None:
    """A raw CR or a byte outside ASCII in the target never reaches the app: the transport
    answered it in plain text, unjournaled; a %0d%0a reached httpx and was a 500."""
    upstream = FakeUpstream()
    with RecordingProxy(UPSTREAM, tmp_path / "s.yaml", tmp_path / "j.jsonl") as proxy:
        proxy.recorder.transport = upstream.transport
        host = proxy.url.split("//")[1]
        answers = [_raw_request(host, target) for target in (
            b"/v1/%0d%0aX-Injected:%201", b"/v1/a\rb", b"/v1/\xff", b"/../../admin")]
    for answer in answers:
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 400 "), answer[:200]
        assert orjson.loads(_unchunked(head, body))["error"]["type"] == "invalid_request_error"
    records = journaled(tmp_path)
    assert [(r["outcome"], r["status"]) for r in records] == [("invalid_request", 400)] * 4
    assert records[0]["path"] == "/v1/\r\nX-Injected: 1"
    assert upstream.urls == []


def _raw_request(host: str, target: bytes) -> bytes:
    address, port = host.rsplit(":", 1)
    with socket.create_connection((address, int(port)), timeout=TIMEOUT) as sock:
        sock.sendall(b"GET " + target + b" HTTP/1.1\r\nHost: " + host.encode() +
                     b"\r\nx-api-key: k\r\nConnection: close\r\n\r\n")
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    return received


def _unchunked(head: bytes, body: bytes) -> bytes:
    if b"transfer-encoding: chunked" not in head.lower():
        return body
    out = b""
    while body:
        size_line, _, body = body.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            break
        out, body = out + body[:size], body[size + 2:]
    return out


# ---- secrets in the query string -----------------------------------------------------------


def test_a_key_in_the_query_string_is_forwarded_but_never_journaled(tmp_path: Path) -> None:
    upstream = FakeUpstream()
    app = recorder(tmp_path, upstream)
    target = f"/v1/models?api_key={API_KEY}-q&beta=true".encode()
    assert asyncio.run(call(app, "GET", target))[0] == 200
    app.close()
    # the upstream gets it as the client sent it, as it gets the x-api-key header
    assert upstream.urls == [f"http://upstream.test/base/v1/models?api_key={API_KEY}-q&beta=true"]
    assert [r["query"] for r in journaled(tmp_path)] == ["api_key=[redacted]&beta=true"]
    assert API_KEY.encode() not in (tmp_path / "j.jsonl").read_bytes()


# ---- a large reply: streamed through, a bounded copy kept, the scenario off the loop -------

MB = 1024 * 1024


def _sse(event: dict[str, Any]) -> bytes:
    return b"event: " + event["type"].encode() + b"\ndata: " + orjson.dumps(event) + b"\n\n"


def _big_stream(total: int) -> AsyncIterator[bytes]:
    """A well-formed message stream of about ``total`` bytes of text deltas."""
    async def stream() -> AsyncIterator[bytes]:
        yield _sse({"type": "message_start", "message": {
            "id": "msg_up", "type": "message", "role": "assistant", "model": "m", "content": [],
            "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1}}})
        yield _sse({"type": "content_block_start", "index": 0,
                    "content_block": {"type": "text", "text": ""}})
        piece = "x" * (64 * 1024)
        for _ in range(total // len(piece)):
            yield _sse({"type": "content_block_delta", "index": 0,
                        "delta": {"type": "text_delta", "text": piece}})
        yield _sse({"type": "content_block_stop", "index": 0})
        yield _sse({"type": "message_delta", "delta": {"stop_reason": "end_turn",
                                                        "stop_sequence": None},
                    "usage": {"output_tokens": 5}})
        yield _sse({"type": "message_stop"})
    return stream()


def _streamed(total: int) -> Any:
    return lambda: httpx.Response(200, headers={"content-type": "text/event-stream"},
                                  content=_big_stream(total))


def test_a_16_mb_reply_is_streamed_through_and_a_bounded_copy_recorded(tmp_path: Path) -> None:
    upstream = FakeUpstream(_streamed(16 * MB))
    app = recorder(tmp_path, upstream, max_recorded_bytes=1 * MB)
    relayed = [0]

    def count(chunk: bytes) -> None:
        relayed[0] += len(chunk)

    tracemalloc.start()
    try:
        status, _ = asyncio.run(call(app, "POST", b"/v1/messages", BODY, on_body=count))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    app.close()
    assert status == 200 and relayed[0] > 16 * MB  # the client got every byte
    # before: 375 MB for 16 MB (every chunk kept, joined, parsed, base64ed, dumped twice)
    assert peak < 12 * MB, f"peak {peak / MB:.1f} MB"
    scenario = load_scenario(tmp_path / "s.yaml")
    (rule,) = scenario.rules
    kept = rule.reply_list()[0].raw
    assert kept.disconnect is True  # what is kept replays cut off, and says so
    assert sum(len(c.to_bytes()) for c in kept.chunks) == 1 * MB
    assert f"{rule.id} keeps the first {MB} of the {relayed[0]} bytes" in \
        scenario.description
    ends = [r for r in read_journal(tmp_path / "j.jsonl").records
            if r.get("type") == "response_end"]
    assert [(e["reason"], e["bytes_sent"]) for e in ends] == [("complete", relayed[0])]


def test_the_scenario_is_written_off_the_event_loop(tmp_path: Path) -> None:
    """While one exchange's rule is being written, another client is answered."""
    upstream = FakeUpstream(_streamed(64 * 1024))
    app = recorder(tmp_path, upstream)
    writing, release = threading.Event(), threading.Event()
    keep = app.recorded.keep

    def slow_keep(*args: Any) -> None:
        writing.set()
        assert release.wait(TIMEOUT)
        keep(*args)

    app.recorded.keep = slow_keep  # type: ignore[method-assign]

    async def both() -> tuple[int, int]:
        first = asyncio.create_task(call(app, "POST", b"/v1/messages", BODY))
        assert await asyncio.to_thread(writing.wait, TIMEOUT)
        # the loop is free while the first exchange's rule is written
        other = await asyncio.wait_for(call(app, "GET", b"/v1/models"), TIMEOUT)
        release.set()
        return (await first)[0], other[0]

    try:
        assert asyncio.run(both()) == (200, 200)
    finally:
        release.set()
        app.close()
    assert len(load_scenario(tmp_path / "s.yaml").rules) == 1


# ---- the client leaves ---------------------------------------------------------------------


class EndlessUpstream(FakeUpstream):
    """A stream that never ends by itself: notes how many chunks were read and whether the
    recorder closed it."""

    def __init__(self) -> None:
        super().__init__(self._response)
        self.pulled = 0
        self.closed = asyncio.Event()

    def _response(self) -> httpx.Response:
        async def endless() -> AsyncIterator[bytes]:
            try:
                yield _sse({"type": "message_start", "message": {"id": "m"}})
                while True:
                    self.pulled += 1
                    yield _sse({"type": "ping"})
                    await asyncio.sleep(0.001)
            finally:
                self.closed.set()
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                              content=endless())


def test_the_upstream_is_closed_when_the_client_leaves(tmp_path: Path) -> None:
    upstream = EndlessUpstream()
    app = recorder(tmp_path, upstream)

    async def leave_after_ten_chunks() -> int:
        left, seen = asyncio.Event(), [0]

        def count(chunk: bytes) -> None:
            seen[0] += 1
            if seen[0] == 10:
                left.set()

        await asyncio.wait_for(call(app, "POST", b"/v1/messages", BODY, disconnect=left,
                                    on_body=count), TIMEOUT)
        assert upstream.closed.is_set()  # closed before the call returned
        return upstream.pulled

    pulled = asyncio.run(leave_after_ten_chunks())
    app.close()
    assert pulled < 20  # before: read on forever, to the end of a reply nobody reads
    ends = [r for r in read_journal(tmp_path / "j.jsonl").records
            if r.get("type") == "response_end"]
    assert [e["reason"] for e in ends] == ["client_disconnected"]
    (rule,) = load_scenario(tmp_path / "s.yaml").rules
    assert rule.reply_list()[0].raw.disconnect is True


def test_a_client_leaving_before_the_upstream_answers_cancels_the_request(
        tmp_path: Path) -> None:
    asked = asyncio.Event()

    async def never(request: httpx.Request) -> httpx.Response:
        asked.set()
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")

    upstream = FakeUpstream()
    upstream.transport = httpx.MockTransport(never)
    app = recorder(tmp_path, upstream)

    async def leave() -> None:
        left = asyncio.Event()
        task = asyncio.create_task(call(app, "POST", b"/v1/messages", BODY, disconnect=left))
        await asyncio.wait_for(asked.wait(), TIMEOUT)
        left.set()
        await asyncio.wait_for(task, TIMEOUT)

    asyncio.run(leave())
    app.close()
    (record,) = journaled(tmp_path)
    assert (record["outcome"], record["status"]) == ("client_disconnected", None)
