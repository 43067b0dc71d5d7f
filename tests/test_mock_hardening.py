"""The mock under abuse (issue 11): whatever a client, a full disk or a signal does, the journal
stays whole and says what happened, every resource is bounded, and what the real API refuses is
refused.

Each test reproduces one failure an attack run found, on a real server on 127.0.0.1 (or a
``python -m mockapi`` process where a signal or a file size limit is part of the case); each
fails on the mock as it was before the fix.
"""

from __future__ import annotations

import asyncio
import os
import resource
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from mockapi import Match, Rule, Scenario, read_journal, text
from mockapi.journal.records import RequestRecord, ResponseEndRecord
from mockapi.journal.write import Journal, JournalInUse
from mockapi.script.scenario import MAX_SCENARIO_BYTES, ScenarioError, decode_scenario_text, load_scenario
from mockapi.serve.server import MockServer
from mockapi.serve.transport import Limits
from tests.test_records import _misfits as misfits

HEADERS = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
TIMEOUT = 20.0


def body(content: str = "x", *, stream: bool = False) -> dict[str, Any]:
    return {"model": "m", "max_tokens": 5, "stream": stream,
            "messages": [{"role": "user", "content": content}]}


def lines_of(path: Path) -> list[dict[str, Any]]:
    """Every line of a journal, each required to be a whole JSON record."""
    data = path.read_bytes()
    assert data.endswith(b"\n"), f"the journal ends in a partial line: {data[-200:]!r}"
    return [orjson.loads(line) for line in data.split(b"\n")[:-1]]


def fits(record: dict[str, Any], kind: Any) -> None:
    """The record is what its TypedDict describes (keys, types, order)."""
    assert misfits(record, kind) == [], record


ONE_THEN_TWO = Scenario(classifier="plain", rules=[
    Rule(id="first", reply=text("first")), Rule(id="second", reply=text("second"))])

BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
    f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
    f"*{chr(97 + i)}]\n" for i in range(9))


def test_yaml_aliases_are_refused_before_they_expand() -> None:
    # refused at the first alias, while composing: nothing is expanded (9**10 items)
    with pytest.raises(ScenarioError, match=r"alias \*a: aliases are refused"):
        decode_scenario_text(BOMB, "bomb.yaml")
    # anchors without aliases, and ordinary data, still load
    assert decode_scenario_text("rules: &r []\n", "ok.yaml") == {"rules": []}


def test_a_second_server_on_one_journal_is_refused_naming_the_holder(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    with MockServer(Scenario(), path):
        with pytest.raises(JournalInUse, match=rf"pid {os.getpid()}"):
            Journal(path)
    Journal(path).close()  # released when the first server stopped


def test_the_journal_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j.jsonl")
    journal.close()
    assert stat.S_IMODE((tmp_path / "j.jsonl").stat().st_mode) == 0o600


def test_serve_names_a_journal_it_cannot_write_or_share(tmp_path: Path) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    done = subprocess.run([sys.executable, "-m", "mockapi", "--journal",
                           str(blocked / "j.jsonl")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "cannot write the journal" in done.stderr
    assert "listen" not in done.stderr
    held = Journal(tmp_path / "held.jsonl")
    try:
        done = subprocess.run([sys.executable, "-m", "mockapi", "--journal",
                               str(tmp_path / "held.jsonl")], capture_output=True, text=True,
                              timeout=60)
    finally:
        held.close()
    assert done.returncode == 2 and "being written by another mock" in done.stderr


# ---- journal integrity -----------------------------------------------------------------------


def test_a_full_disk_leaves_whole_lines_refuses_unscripted_and_is_noted_later(
        serve_process: Any, tmp_path: Path) -> None:
    """A file size limit cuts the journal write short, as a full disk does: the partial line is
    taken back, the request is answered 500 and uses nothing of the script; once writes work
    again the failure is noted and the script goes on where it was."""
    journal = tmp_path / "j.jsonl"
    process, url = serve_process({"classifier": "plain", "rules": [
        {"id": "first", "reply": {"text": "first"}},
        {"id": "second", "reply": {"text": "second"}}]}, journal)
    first = httpx.post(f"{url}/v1/messages", headers=HEADERS, json=body("a"), timeout=TIMEOUT)
    assert first.json()["content"][0]["text"] == "first"
    size = journal.stat().st_size
    # room for part of the next line only: the write is cut short
    resource.prlimit(process.pid, resource.RLIMIT_FSIZE, (size + 100, resource.RLIM_INFINITY))
    refused = httpx.post(f"{url}/v1/messages", headers=HEADERS, json=body("b"), timeout=TIMEOUT)
    assert refused.status_code == 500
    assert refused.headers["request-id"] == "req_loopprobe_000002"
    error = refused.json()["error"]
    assert error["type"] == "api_error"
    assert "could not be journaled" in error["message"] and "File too large" in error["message"]
    assert journal.stat().st_size == size  # nothing of the refused line is left
    state = httpx.get(f"{url}/_mock/state", timeout=TIMEOUT).json()
    assert state["journal_failed_writes"] == 1 and state["rules"][1]["served"] == 0

    resource.prlimit(process.pid, resource.RLIMIT_FSIZE,
                     (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    again = httpx.post(f"{url}/v1/messages", headers=HEADERS, json=body("b"), timeout=TIMEOUT)
    assert again.json()["content"][0]["text"] == "second"  # the refused one used nothing
    records = lines_of(journal)
    assert [(r["type"], r.get("seq")) for r in records] == [
        ("request", 1), ("journal_note", None), ("request", 3)]
    note = records[1]
    assert note["note"].startswith("the journal could not be written 1 time(s)")
    assert [f["unavailable"] for f in note["failures"]] == [False]
    assert (records[2]["turn"], records[2]["attempt"]) == (2, 1)  # the refused turn never was
    listed = httpx.get(f"{url}/_mock/requests", timeout=TIMEOUT).json()
    assert [r["seq"] for r in listed["records"]] == [1, 3] and listed["torn_tail"] is None


def test_a_deleted_or_replaced_journal_refuses_requests_until_it_is_back(tmp_path: Path) -> None:
    """Before: lines went on into the unlinked file, answered and lost. A stream's end, which
    happens after its reply was sent, is kept and written once the journal is back."""
    path, away = tmp_path / "j.jsonl", tmp_path / "moved.jsonl"
    scenario = Scenario(classifier="plain", rules=[
        Rule(id="slow", match=Match(last_user_text_contains="slow"),
             reply=text("slow", stall={"after_events": 1, "seconds": 1.0})),
        Rule(id="any", repeat="always", reply=text("ok"))])
    with MockServer(scenario, path) as mock, httpx.Client(timeout=TIMEOUT) as client:
        with client.stream("POST", f"{mock.url}/v1/messages", headers=HEADERS,
                           json=body("slow", stream=True)) as stream:
            chunks = stream.iter_bytes()
            next(chunks)  # recorded, streaming, stalled
            path.rename(away)
            gone = client.post(f"{mock.url}/v1/messages", headers=HEADERS, json=body())
            rest = b"".join(chunks)  # the stream ends while the journal is away
        assert b"message_stop" in rest
        assert gone.status_code == 500 and "was deleted" in gone.json()["error"]["message"]
        assert mock.admin("GET", "state").json()["journal_problem"].startswith(
            f"the journal {path} was deleted")

        path.write_bytes(b"")  # another file at its place
        replaced = client.post(f"{mock.url}/v1/messages", headers=HEADERS, json=body())
        assert replaced.status_code == 500
        assert "was replaced by another file" in replaced.json()["error"]["message"]
        assert path.read_bytes() == b""

        away.replace(path)
        back = client.post(f"{mock.url}/v1/messages", headers=HEADERS, json=body())
        assert back.status_code == 200
        assert mock.mock.script.state()[1]["served"] == 1
    records = lines_of(path)
    assert [(r["type"], r.get("seq")) for r in records] == [
        ("request", 1), ("journal_note", None), ("response_end", 1), ("request", 4)]
    assert [f["unavailable"] for f in records[1]["failures"]] == [True, True, True]
    assert records[2]["reason"] == "complete"


def test_unreadable_lines_anywhere_are_skipped_listed_and_a_server_restarts_on_them(
        tmp_path: Path) -> None:
    """Before: a torn line in the middle made /_mock/requests answer 500 and a restart exit 1."""
    path = tmp_path / "j.jsonl"
    with MockServer(ONE_THEN_TWO, path) as mock:
        httpx.post(f"{mock.url}/v1/messages", headers=HEADERS, json=body("a"), timeout=TIMEOUT)
    whole = path.read_bytes()
    cut = b'{"type":"request","seq":2,"run"'
    path.write_bytes(whole + cut + b"\n")  # a line cut mid-file
    with MockServer(ONE_THEN_TWO, path) as mock:
        answer = httpx.post(f"{mock.url}/v1/messages", headers=HEADERS, json=body("b"),
                            timeout=TIMEOUT)
        assert answer.status_code == 200
        listed = mock.admin("GET", "requests", params={"run": "all"}).json()
    assert [r["seq"] for r in listed["records"]] == [1, 2]
    assert listed["torn_tail"] == (
        f"{path}: 1 line(s) are not journal records (writes cut short) and were skipped: "
        f"line 2 ({len(cut)} bytes at offset {len(whole)})")
    contents = read_journal(path)
    (note,) = [r for r in contents.records if r["type"] == "journal_note"]
    assert note["note"] == "1 unreadable line(s) are kept in place and skipped by readers"
    assert (note["lines"], note["offsets"]) == ([2], [len(whole)])


def test_a_stream_ended_by_sigterm_says_so(serve_process: Any, tmp_path: Path) -> None:
    """Before: labelled client_disconnected, blaming the client for the server's stop."""
    journal = tmp_path / "j.jsonl"
    process, url = serve_process({"classifier": "plain", "rules": [{"reply": {
        "text": "long", "stall": {"after_events": 1, "seconds": 60}}}]}, journal)
    with httpx.Client(timeout=TIMEOUT) as client, client.stream(
            "POST", f"{url}/v1/messages", headers=HEADERS, json=body(stream=True)) as stream:
        chunks = stream.iter_bytes()
        next(chunks)
        os.killpg(process.pid, signal.SIGTERM)
        try:
            rest = b"".join(chunks)
        except httpx.HTTPError:
            rest = b""
    assert b"message_stop" not in rest
    assert process.wait(TIMEOUT) == 0  # a clean stop, though by a signal
    ends = [r for r in lines_of(journal) if r["type"] == "response_end"]
    assert [(e["seq"], e["reason"]) for e in ends] == [(1, "server_shutdown")]


# ---- honest records ----------------------------------------------------------------------------


def test_max_streams_holds_under_a_burst_and_refusals_use_nothing(tmp_path: Path) -> None:
    """Before: 20 of 20 accepted with a limit of 3 (only streams with a fault were counted),
    and a refused stream was journaled 200 and used its scripted reply."""
    scenario = Scenario(classifier="plain", rules=[Rule(id="s", repeat="always", reply=text(
        "held", stall={"after_events": 1, "seconds": 1.5}))])

    async def burst(url: str) -> list[int]:
        async with httpx.AsyncClient(timeout=TIMEOUT) as client:
            async def one(i: int) -> int:
                answer = await client.post(f"{url}/v1/messages", headers=HEADERS,
                                           json=body(f"burst {i}", stream=True))
                return answer.status_code
            return await asyncio.gather(*(one(i) for i in range(20)))

    with MockServer(scenario, tmp_path / "j.jsonl", max_streams=3) as mock:
        statuses = asyncio.run(burst(mock.url))
        served = mock.mock.script.state()[0]["served"]
        assert mock.mock.open_streams == 0
    assert sorted(statuses) == [200] * 3 + [529] * 17
    assert served == 3
    requests = [r for r in lines_of(tmp_path / "j.jsonl") if r["type"] == "request"]
    refused = [r for r in requests if r["outcome"] == "over_limit"]
    assert len(refused) == 17
    assert all(r["status"] == 529 and "rule" not in r and "reply" not in r for r in refused)
    for record in requests:
        fits(record, RequestRecord)


def test_a_response_end_after_a_reset_keeps_the_run_of_its_request(tmp_path: Path) -> None:
    scenario = Scenario(classifier="plain", rules=[Rule(reply=text(
        "slow", stall={"after_events": 1, "seconds": 0.5}))])
    with MockServer(scenario, tmp_path / "j.jsonl") as mock, \
            httpx.Client(timeout=TIMEOUT) as client:
        with client.stream("POST", f"{mock.url}/v1/messages", headers=HEADERS,
                           json=body(stream=True)) as stream:
            chunks = stream.iter_bytes()
            next(chunks)
            assert mock.reset() == 2
            b"".join(chunks)
    records = lines_of(tmp_path / "j.jsonl")
    assert [(r["type"], r["run"]) for r in records] == [("request", 1), ("response_end", 1)]


def test_a_stream_the_client_abandons_unread_is_not_complete(tmp_path: Path) -> None:
    """Before: journaled complete (the write returned; the bytes sat in a socket buffer)."""
    big = "y" * (8 * 1024 * 1024)  # more than the kernel buffers on both sides hold
    scenario = Scenario(classifier="plain", rules=[
        Rule(id="big", match=Match(last_user_text_contains="big"), reply=text(big)),
        Rule(id="small", reply=text("small"))])
    path = tmp_path / "j.jsonl"
    with MockServer(scenario, path) as mock:
        with socket.create_connection(("127.0.0.1", mock.port), timeout=TIMEOUT) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            payload = orjson.dumps(body("big", stream=True))
            sock.sendall(
                f"POST /v1/messages HTTP/1.1\r\nhost: 127.0.0.1:{mock.port}\r\n"
                f"x-api-key: k\r\nanthropic-version: 2023-06-01\r\n"
                f"content-type: application/json\r\ncontent-length: {len(payload)}\r\n\r\n"
                .encode() + payload)
            assert sock.recv(100).startswith(b"HTTP/1.1 200")
        # the client left without reading; a second stream is read whole
        answer = httpx.post(f"{mock.url}/v1/messages", headers=HEADERS,
                            json=body("small", stream=True), timeout=TIMEOUT)
        assert b"message_stop" in answer.content
        deadline = time.monotonic() + TIMEOUT
        while len(read_journal(path).ends()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    ends = read_journal(path).ends()
    assert ends[1]["reason"] == "client_disconnected"
    assert ends[1].get("delivery") == "unacknowledged"
    assert (ends[2]["reason"], ends[2].get("delivery")) == ("complete", "acknowledged")
    for end in ends.values():
        fits(dict(end), ResponseEndRecord)


def test_a_stream_read_whole_then_closed_is_complete(tmp_path: Path) -> None:
    """Before: journaled client_disconnected, 0 bytes sent, now and then (once in CI): the
    client read every byte and closed between two of the mock's delivery checks, and the
    check after the close found the socket gone and took it for a reset."""
    big = "w" * (4 * 1024 * 1024)
    scenario = Scenario(classifier="plain", rules=[Rule(repeat="always", reply=text(big))])
    path = tmp_path / "j.jsonl"
    with MockServer(scenario, path) as mock:
        for _ in range(3):
            with socket.create_connection(("127.0.0.1", mock.port), timeout=TIMEOUT) as sock:
                payload = orjson.dumps(body("big", stream=True))
                sock.sendall(
                    f"POST /v1/messages HTTP/1.1\r\nhost: 127.0.0.1:{mock.port}\r\n"
                    f"x-api-key: k\r\nanthropic-version: 2023-06-01\r\n"
                    f"content-type: application/json\r\ncontent-length: {len(payload)}\r\n"
                    f"\r\n".encode() + payload)
                got = b""
                # slowly enough that the mock's checks are far apart, then closed at once
                while not got.endswith(b"0\r\n\r\n"):
                    chunk = sock.recv(256 * 1024)
                    assert chunk, "the mock closed before the stream's end"
                    got += chunk
                    time.sleep(0.002)
        deadline = time.monotonic() + TIMEOUT
        while len(read_journal(path).ends()) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
    ends = read_journal(path).ends()
    assert [(e["reason"], e.get("delivery")) for e in ends.values()] == \
        [("complete", "acknowledged")] * 3


def test_a_large_reply_is_journaled_by_reference(tmp_path: Path) -> None:
    """Before: a 50 MB scripted reply was copied into every journal line that used it."""
    big = "z" * (1024 * 1024)
    scenario = Scenario(classifier="plain", rules=[Rule(repeat="always", reply=text(big))])
    with MockServer(scenario, tmp_path / "j.jsonl") as mock:
        for _ in range(3):
            answer = httpx.post(f"{mock.url}/v1/messages", headers=HEADERS, json=body(),
                                timeout=TIMEOUT)
            assert answer.json()["content"][0]["text"] == big
    data = (tmp_path / "j.jsonl").read_bytes()
    assert len(data) < 10_000
    reply = orjson.loads(data.split(b"\n")[0])["reply"]
    assert set(reply["by_reference"]) == {"bytes", "sha256"}
    assert reply["by_reference"]["bytes"] > len(big)


# ---- bounded resources -------------------------------------------------------------------------


def raw_exchange(port: int, head: bytes, *, then: bytes = b"", wait: float = TIMEOUT) -> bytes:
    """Send ``head`` (and ``then``), return whatever the server answers before closing."""
    with socket.create_connection(("127.0.0.1", port), timeout=wait) as sock:
        try:
            sock.sendall(head + then)
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused while sending: the answer is still readable
        answer = b""
        try:
            while chunk := sock.recv(65536):
                answer += chunk
        except ConnectionResetError:
            pass
        return answer


def request_head(port: int, *extra: str, length: int | None = None) -> bytes:
    lines = ["POST /v1/messages HTTP/1.1", f"host: 127.0.0.1:{port}", "x-api-key: k",
             "anthropic-version: 2023-06-01", "content-type: application/json", *extra]
    if length is not None:
        lines.append(f"content-length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def test_oversized_or_too_many_headers_are_refused_431_before_the_app(tmp_path: Path) -> None:
    """Before: a 64 MB header was parsed, journaled, and grew the process by 330 MB."""
    path = tmp_path / "j.jsonl"
    with MockServer(Scenario(classifier="claude-code"), path,
                    limits=Limits(max_header_bytes=8192, max_headers=20)) as mock:
        big = raw_exchange(mock.port, request_head(mock.port, "x-big: " + "a" * 4_000_000))
        many = raw_exchange(mock.port, request_head(
            mock.port, *(f"x-h{i}: v" for i in range(30)), length=2), then=b"{}")
        fine = httpx.post(f"{mock.url}/v1/messages", headers=HEADERS, json=body(),
                          timeout=TIMEOUT)
    for answer, why in ((big, "exceed 8192 bytes"), (many, "more than 20 request headers")):
        head, _, payload = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 431"), answer[:200]
        error = orjson.loads(payload)["error"]
        assert error["type"] == "request_too_large" and why in error["message"]
    assert fine.status_code == 200  # an ordinary request still reaches the app
    records = [r for r in lines_of(path) if r["type"] == "request"]
    assert [(r["outcome"], r["status"], r["method"], r["path"], r["headers"])
            for r in records[:2]] == [("too_large", 431, "POST", "/v1/messages", {})] * 2
    for record in records:
        fits(record, RequestRecord)


def test_a_stalled_head_or_body_gets_408_and_its_connection_back(tmp_path: Path) -> None:
    """Before: no read timeout; uploads stalled half-way held their connections forever."""
    path = tmp_path / "j.jsonl"
    with MockServer(Scenario(), path, limits=Limits(header_timeout=0.5, body_timeout=0.5)) as mock:
        head_stalled = raw_exchange(mock.port, b"POST /v1/messages HTTP/1.1\r\nhost: x")
        body_stalled = raw_exchange(mock.port, request_head(mock.port, length=100),
                                    then=b'{"model":')
        started = time.monotonic()
        with socket.create_connection(("127.0.0.1", mock.port), timeout=TIMEOUT) as idle:
            assert idle.recv(100) == b""  # a silent connection is closed, not answered
        assert time.monotonic() - started < TIMEOUT
    assert head_stalled.startswith(b"HTTP/1.1 408"), head_stalled[:200]
    assert b"did not arrive within 0.5 s" in head_stalled
    assert body_stalled.startswith(b"HTTP/1.1 408"), body_stalled[:200]
    assert b"paused for more than 0.5 s after 9 bytes" in body_stalled
    records = [r for r in lines_of(path) if r["type"] == "request"]
    assert [(r["outcome"], r["status"]) for r in records] == [("timeout", 408)] * 2
    for record in records:
        fits(record, RequestRecord)


def read_reply(sock: socket.socket) -> bytes:
    """One whole reply with a content-length, read from a connection kept open."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"closed before a reply's head: {data!r}"
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:"))
    while len(rest) < length:
        chunk = sock.recv(65536)
        assert chunk, f"closed in a reply's body: {head + rest!r}"
        rest += chunk
    return head


def test_an_idle_keep_alive_connection_is_kept_for_the_head_timeout(tmp_path: Path) -> None:
    """Before: uvicorn closed a connection idle for 5 s, just over the 4 s undici keeps one.
    A client held up for a moment sent its next request as the mock closed, and got a reset
    for a request never read (7 in a 200-client soak on CI). The idle close is the head
    timer's, as documented: 8 s here, so 6 s of idleness keeps the connection."""
    path = tmp_path / "j.jsonl"
    payload = orjson.dumps(body())
    with MockServer(ONE_THEN_TWO, path, limits=Limits(header_timeout=8.0)) as mock, \
            socket.create_connection(("127.0.0.1", mock.port), timeout=TIMEOUT) as sock:
        request = request_head(mock.port, length=len(payload)) + payload
        sock.sendall(request)
        assert read_reply(sock).startswith(b"HTTP/1.1 200")
        time.sleep(6.0)  # past uvicorn's own 5 s default, within the head timeout
        sock.sendall(request)
        assert read_reply(sock).startswith(b"HTTP/1.1 200")
        assert sock.recv(100) == b"", "an idle connection is closed once the head timeout passes"
    assert [r["rule"] for r in lines_of(path) if r["type"] == "request"] == ["first", "second"]


@pytest.mark.parametrize(("target", "path", "why"), [
    (b"/v1/%0d%0aX-Injected:%201", "/v1/\r\nX-Injected: 1", "control character (U+000D at 4)"),
    (b"/v1/messages%00", "/v1/messages\x00", "control character (U+0000 at 12)"),
    (b"*", "*", "expected a path starting with '/'"),
    (b"/v1/a\rb", None, "not valid HTTP/1.1"),
    (b"/v1/\xff", None, "not valid HTTP/1.1"),
    (b"/v1/a\tb", None, "not valid HTTP/1.1"),
])
def test_a_path_that_is_no_path_is_400_in_the_apis_shape_and_journaled(
        tmp_path: Path, target: bytes, path: str | None, why: str) -> None:
    """Issue 27. Before: Starlette's router answered %0d%0a 404 in plain text and uvicorn a
    raw CR 400 in plain text, neither journaled (the recorder turned %0d%0a into a 500)."""
    journal = tmp_path / "j.jsonl"
    with MockServer(Scenario(), journal) as mock:
        answer = raw_exchange(mock.port, b"GET " + target + b" HTTP/1.1\r\nhost: 127.0.0.1:"
                              + str(mock.port).encode() + b"\r\nconnection: close\r\n\r\n")
    head, _, payload = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400"), answer[:200]
    error = orjson.loads(payload)["error"]
    assert error["type"] == "invalid_request_error" and why in error["message"]
    (record,) = [r for r in lines_of(journal) if r["type"] == "request"]
    assert (record["outcome"], record["status"]) == ("invalid_request", 400)
    assert why in record["error"]
    if path is not None:
        assert record["path"] == path
    fits(record, RequestRecord)


def connections_reach(mock: MockServer, count: int) -> None:
    """Wait (bounded) until the server holds exactly ``count`` connections."""
    connections = mock._server.server_state.connections
    deadline = time.monotonic() + TIMEOUT
    while len(connections) != count and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(connections) == count, f"{len(connections)} connections, expected {count}"


def test_connections_beyond_the_limit_are_answered_503_and_journaled(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    with MockServer(Scenario(classifier="claude-code"), path, limits=Limits(max_connections=4)) as mock:
        held = [socket.create_connection(("127.0.0.1", mock.port), timeout=TIMEOUT)
                for _ in range(4)]
        try:
            connections_reach(mock, 4)  # accepted by the server
            over = httpx.post(f"{mock.url}/v1/messages", headers=HEADERS, json=body(),
                              timeout=TIMEOUT)
        finally:
            for sock in held:
                sock.close()
        connections_reach(mock, 0)
        after = httpx.post(f"{mock.url}/v1/messages", headers=HEADERS, json=body(),
                           timeout=TIMEOUT)
    assert over.status_code == 503
    assert over.json()["error"] == {
        "type": "overloaded_error",
        "message": "loopprobe mock: 4 connections are open, the most this mock serves at once"}
    assert after.status_code == 200  # served again
    records = [r for r in lines_of(path) if r["type"] == "request"]
    assert [(r["outcome"], r["status"]) for r in records] == [("over_limit", 503), ("replied", 200)]


def test_admin_bodies_and_scenario_files_are_bounded(tmp_path: Path) -> None:
    with MockServer(Scenario(), tmp_path / "j.jsonl") as mock:
        answer = mock.admin("POST", "scenario", content=b" " * (9 * 1024 * 1024),
                            headers={"content-type": "application/json"})
    assert answer.status_code == 413
    assert answer.json()["error"]["type"] == "request_too_large"
    huge = tmp_path / "huge.yaml"
    with huge.open("wb") as handle:
        handle.truncate(MAX_SCENARIO_BYTES + 1)
    with pytest.raises(ScenarioError, match=f"at most {MAX_SCENARIO_BYTES} bytes"):
        load_scenario(huge)


def test_requests_after_a_seq_read_only_the_lines_after_it(tmp_path: Path) -> None:
    """Before: every poll re-read the whole journal (2 s and +490 MB on 210 MB); ``after=²``
    answered 500."""
    scenario = Scenario(classifier="plain", rules=[Rule(repeat="always", reply=text("ok"))])
    path = tmp_path / "j.jsonl"
    with MockServer(scenario, path) as mock:
        for i in range(30):
            httpx.post(f"{mock.url}/v1/messages", headers=HEADERS, json=body(f"m{i}"),
                       timeout=TIMEOUT)
        later = mock.admin("GET", "requests", params={"after": "25"}).json()
        odd = mock.admin("GET", "requests", params={"after": "²"})
        offset = mock.journal.offset_after(25)
    assert [r["seq"] for r in later["records"]] == [26, 27, 28, 29, 30]
    assert odd.status_code == 400 and "expected a journal seq" in odd.json()["error"]
    data = path.read_bytes()
    assert offset == sum(len(line) + 1 for line in data.split(b"\n")[:25])
    assert orjson.loads(data[offset:].split(b"\n")[0])["seq"] == 26


# ---- the API's own refusals ----------------------------------------------------------------


REFUSED_BODIES = {
    "max_tokens below 0": {**body(), "max_tokens": -1},
    "no messages": {**body(), "messages": []},
    "an unknown role": {**body(), "messages": [{"role": "wizard", "content": "x"}]},
    "a tool_result without its tool_use": {**body(), "messages": [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "x"}]}]},
    "a tool_use without its tool_result": {**body(), "messages": [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "t",
                                           "input": {}}]},
        {"role": "user", "content": "y"}]},
    "an unknown block type": {**body(), "messages": [{"role": "user", "content": [
        {"type": "hologram"}]}]},
    "stream as a string": {**body(), "stream": "true"},
    "temperature out of range": {**body(), "temperature": 7},
    "empty content": {**body(), "messages": [{"role": "user", "content": ""}]},
}


def test_what_the_real_api_refuses_gets_its_400_and_lenient_answers_it(tmp_path: Path) -> None:
    strict = Scenario(classifier="plain", rules=[Rule(repeat="always", reply=text("ok"))])
    lenient = strict.model_copy(update={"validation": "lenient"})
    with MockServer(strict, tmp_path / "strict.jsonl") as mock, \
            MockServer(lenient, tmp_path / "lenient.jsonl") as loose, \
            MockServer(strict, tmp_path / "flag.jsonl", lenient=True) as flag:
        for name, refused in REFUSED_BODIES.items():
            answer = httpx.post(f"{mock.url}/v1/messages", headers=HEADERS, json=refused,
                                timeout=TIMEOUT)
            assert answer.status_code == 400, name
            assert answer.json()["error"]["type"] == "invalid_request_error", name
            for other in (loose, flag):
                answer = httpx.post(f"{other.url}/v1/messages", headers=HEADERS, json=refused,
                                    timeout=TIMEOUT)
                assert answer.status_code == 200, (name, answer.text)
        bad_version = httpx.post(f"{mock.url}/v1/messages", json=body(),
                                 headers={**HEADERS, "anthropic-version": "yesterday"},
                                 timeout=TIMEOUT)
        assert bad_version.status_code == 400
        assert mock.mock.script.state()[0]["served"] == 0  # refusals use nothing
    records = [r for r in lines_of(tmp_path / "strict.jsonl") if r["type"] == "request"]
    assert {r["outcome"] for r in records} == {"invalid_request"}
    assert all("body" in r for r in records)  # kept exactly, for the reader to see why
