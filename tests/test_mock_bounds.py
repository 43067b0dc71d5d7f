"""The mock's remaining bounds: connections within the process's descriptor limit, a pipelined
request's head, a clean exit on SIGTERM and SIGINT.

Each case runs ``python -m mockapi`` (the descriptor limit and the signals belong to a process)
or a real server on 127.0.0.1, and fails on the mock as it was before the fix.
"""

from __future__ import annotations

import os
import resource
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import orjson
import pytest

from tests.test_mock_hardening import HEADERS, TIMEOUT, body, lines_of, request_head

Start = Callable[..., tuple[subprocess.Popen[bytes], str]]


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def test_stalled_uploads_beyond_the_descriptor_limit_leave_a_request_answered(
        serve_process: Start, tmp_path: Path) -> None:
    """Before: with a soft RLIMIT_NOFILE of 256 the cap stayed at 1000; 300 uploads stalled
    half-way took every descriptor, accept() failed and a valid request waited unanswered."""
    journal = tmp_path / "j.jsonl"
    process, url = serve_process({"classifier": "plain", "rules": [
        {"repeat": "always", "reply": {"text": "ok"}}]}, journal, nofile=256)
    port = _port(url)
    stalled: list[socket.socket] = []
    try:
        for _ in range(300):
            sock = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
            stalled.append(sock)
            sock.sendall(request_head(port, length=100) + b'{"model":')
        time.sleep(0.5)  # the mock takes what its limit lets it
        answer = httpx.post(f"{url}/v1/messages", headers=HEADERS, json=body(),
                            timeout=httpx.Timeout(TIMEOUT))
        assert answer.status_code in (200, 503), answer.text
        if answer.status_code == 503:
            assert answer.json()["error"]["type"] == "overloaded_error"
        assert process.poll() is None  # the mock stays up
    finally:
        for sock in stalled:
            sock.close()
    state = httpx.get(f"{url}/_mock/state", timeout=TIMEOUT).json()
    connections = state["connections"]
    assert connections["configured"] == 1000
    assert 100 < connections["max"] < 256, connections
    assert "RLIMIT_NOFILE 256" in connections["why"]
    records = [r for r in lines_of(journal) if r["type"] == "request"]
    outcomes = {(r["outcome"], r["status"]) for r in records}
    # the uploads served were cut by the test closing them
    assert outcomes <= {("over_limit", 503), ("replied", 200), ("client_disconnected", None)}
    assert ("over_limit", 503) in outcomes  # the uploads over the cap were refused, journaled


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_the_mock_cleanly_with_exit_0(
        serve_process: Start, tmp_path: Path, signum: signal.Signals) -> None:
    """Before: uvicorn raised the signal again after its clean shutdown, so SIGTERM ended the
    process with -15 and SIGINT with a KeyboardInterrupt traceback."""
    journal = tmp_path / "j.jsonl"
    process, url = serve_process({"classifier": "plain", "rules": [
        {"repeat": "always", "reply": {"text": "ok"}}]}, journal)
    served = httpx.post(f"{url}/v1/messages", headers=HEADERS, json=body(), timeout=TIMEOUT)
    assert served.status_code == 200
    os.kill(process.pid, signum)
    assert process.wait(TIMEOUT) == 0
    assert process.stderr is not None
    assert b"Traceback" not in process.stderr.read()
    records = lines_of(journal)  # whole lines only
    assert [(r["outcome"], r["status"]) for r in records if r["type"] == "request"] == [
        ("replied", 200)]


SLOW_STREAM = {"classifier": "plain", "rules": [{"repeat": "always", "reply": {
    "text": "slow", "stall": {"after_events": 1, "seconds": 1.5}}}]}


def _pipelined(port: int, first: bytes, then: Iterator[bytes]) -> tuple[bytes, int]:
    """Send ``first`` and at once the chunks of ``then`` (until one would wait); return what
    the mock answers before it closes, and how many bytes of ``then`` it took."""
    sent = 0
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as sock:
        sock.sendall(first)
        sock.settimeout(0.5)
        try:
            for chunk in then:
                sock.sendall(chunk)
                sent += len(chunk)
        except (TimeoutError, BrokenPipeError, ConnectionResetError):
            pass  # the mock stopped reading, or closed
        sock.settimeout(TIMEOUT)
        answer = b""
        try:
            while chunk := sock.recv(65536):
                answer += chunk
        except ConnectionResetError:
            pass
    return answer, sent


def _streamed_request(port: int) -> bytes:
    payload = orjson.dumps(body(stream=True))
    return request_head(port, length=len(payload)) + payload


def _endless_head(port: int, total: int) -> Iterator[bytes]:
    yield f"POST /v1/messages HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\nx-big: ".encode()
    for _ in range(total // 65536):
        yield b"a" * 65536


@pytest.mark.parametrize(("then", "status", "why", "outcome"), [
    ("endless", b"431", b"exceed 8192 bytes", "too_large"),
    ("stalled", b"408", b"did not arrive within 0.5 s", "timeout"),
])
def test_a_pipelined_head_is_bounded_while_the_reply_before_it_is_sent(
        tmp_path: Path, then: str, status: bytes, why: bytes, outcome: str) -> None:
    """Before: the head of a request pipelined behind a streamed reply was neither counted nor
    timed; 64 MiB of it were read into memory, and a stalled one was dropped unanswered."""
    from mockapi.script.scenario import parse_scenario
    from mockapi.serve.server import MockServer
    from mockapi.serve.transport import Limits

    journal = tmp_path / "j.jsonl"
    with MockServer(parse_scenario(SLOW_STREAM), journal,
                    limits=Limits(max_header_bytes=8192, header_timeout=0.5)) as mock:
        after = (_endless_head(mock.port, 64 * 2**20) if then == "endless"
                 else iter([b"POST /v1/messages HTTP/1.1\r\nhost: x"]))
        answer, sent = _pipelined(mock.port, _streamed_request(mock.port), after)
        fine = httpx.post(f"{mock.url}/v1/messages", headers=HEADERS, json=body(),
                          timeout=TIMEOUT)
    assert fine.status_code == 200
    reply, _, refusal = answer.partition(b"event: message_stop")
    assert reply.startswith(b"HTTP/1.1 200"), answer[:300]  # the reply in flight went whole
    head, _, payload = refusal.partition(b"HTTP/1.1 ")[2].partition(b"\r\n\r\n")
    assert head.startswith(status), refusal[:300]
    assert why in payload
    if then == "endless":
        assert sent < 32 * 2**20  # the mock stopped reading the head
    records = [r for r in lines_of(journal) if r["type"] == "request"]
    assert [(r["outcome"], r["path"]) for r in records] == [
        ("replied", "/v1/messages"), (outcome, "/v1/messages"), ("replied", "/v1/messages")]


def test_silent_connections_past_the_room_over_the_cap_are_answered_at_once(
        tmp_path: Path) -> None:
    """Connections over the cap that send nothing would hold descriptors until their head
    timeout: past OVER_CAP_ROOM of them a connection is answered 503 as it is accepted."""
    from mockapi.script.scenario import Scenario
    from mockapi.serve.server import MockServer
    from mockapi.serve.transport import OVER_CAP_ROOM, Limits
    from tests.test_mock_hardening import connections_reach

    journal = tmp_path / "j.jsonl"
    with MockServer(Scenario(), journal, limits=Limits(max_connections=4)) as mock:
        held = []
        try:
            for _ in range(4 + OVER_CAP_ROOM):
                held.append(socket.create_connection(("127.0.0.1", mock.port), timeout=TIMEOUT))
            connections_reach(mock, 4 + OVER_CAP_ROOM)
            with socket.create_connection(("127.0.0.1", mock.port), timeout=TIMEOUT) as sock:
                answer = sock.recv(65536)  # answered before it sent anything
            over = httpx.post(f"{mock.url}/v1/messages", headers=HEADERS, json=body(),
                              timeout=TIMEOUT)
        finally:
            for sock in held:
                sock.close()
    head, _, payload = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 503"), answer[:200]
    assert orjson.loads(payload)["error"]["type"] == "overloaded_error"
    assert over.status_code == 503 and over.json()["error"]["type"] == "overloaded_error"
    records = [r for r in lines_of(journal) if r["type"] == "request"]
    # refused before their heads: neither method nor path known
    assert [(r["outcome"], r["method"], r["path"]) for r in records] == [
        ("over_limit", "", "")] * 2


@pytest.mark.parametrize(("soft", "expected", "why"), [
    (resource.RLIM_INFINITY, 1000, "the configured cap (no descriptor limit)"),
    (20000, 1000, "the configured cap (soft RLIMIT_NOFILE 20000 leaves room)"),
    (256, 256 - 10 - 64, "soft RLIMIT_NOFILE 256 less 10 descriptors open at start and 64 kept "
                         "for refusals and files"),
    (50, 1, "soft RLIMIT_NOFILE 50 less 10"),
])
def test_the_connection_cap_follows_the_soft_descriptor_limit(
        monkeypatch: pytest.MonkeyPatch, soft: int, expected: int, why: str) -> None:
    from mockapi.serve import transport

    monkeypatch.setattr(transport.resource, "getrlimit", lambda which: (soft, soft))
    monkeypatch.setattr(transport, "_open_descriptors", lambda: 10)
    cap = transport.connection_cap(1000)
    assert (cap.max, cap.configured) == (expected, 1000)
    assert cap.why.startswith(why)
