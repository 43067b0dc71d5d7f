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
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from tests.mock_process import read_line
from tests.test_mock_hardening import HEADERS, TIMEOUT, body, lines_of, request_head

Start = Callable[..., tuple[subprocess.Popen[bytes], str]]


@pytest.fixture
def mock_process(tmp_path: Path) -> Iterator[Start]:
    """Start ``python -m mockapi`` (own session; killed by its process group at the end),
    optionally with a soft descriptor limit ``nofile``."""
    started: list[subprocess.Popen[bytes]] = []

    def start(scenario: dict[str, Any], journal: Path, *,
              nofile: int | None = None) -> tuple[subprocess.Popen[bytes], str]:
        file = tmp_path / f"scenario-{len(started)}.json"
        file.write_bytes(orjson.dumps(scenario))

        def limit_descriptors() -> None:
            if nofile is not None:
                hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, hard))

        process = subprocess.Popen(
            [sys.executable, "-m", "mockapi", "--scenario", str(file), "--journal", str(journal),
             "--admin-open"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            start_new_session=True, preexec_fn=limit_descriptors)
        started.append(process)
        line = read_line(process, 30)
        return process, line.split()[3]

    yield start
    for process in started:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def test_stalled_uploads_beyond_the_descriptor_limit_leave_a_request_answered(
        mock_process: Start, tmp_path: Path) -> None:
    """Before: with a soft RLIMIT_NOFILE of 256 the cap stayed at 1000; 300 uploads stalled
    half-way took every descriptor, accept() failed and a valid request waited unanswered."""
    journal = tmp_path / "j.jsonl"
    process, url = mock_process({"classifier": "plain", "rules": [
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
        mock_process: Start, tmp_path: Path, signum: signal.Signals) -> None:
    """Before: uvicorn raised the signal again after its clean shutdown, so SIGTERM ended the
    process with -15 and SIGINT with a KeyboardInterrupt traceback."""
    journal = tmp_path / "j.jsonl"
    process, url = mock_process({"classifier": "plain", "rules": [
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
