"""The mock as a server: loopback by default, clear refusals, limits, start and stop."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from mockapi import Match, MockServer, Rule, Scenario, text
from mockapi.serve.server import NonLoopbackRefused

HEADERS = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
BODY = {"model": "m", "max_tokens": 5, "stream": True,
        "messages": [{"role": "user", "content": "x"}]}


def _serve(*args: str, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "mockapi", *args], cwd=cwd, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)


def _stop(process: subprocess.Popen[str]) -> tuple[str, str]:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
    try:
        return process.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        return process.communicate(timeout=15)


def test_a_non_loopback_address_is_refused_without_the_flag(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "mockapi", "--host", "0.0.0.0"],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 2
    assert "refusing to bind '0.0.0.0'" in done.stderr
    assert "--allow-remote" in done.stderr
    with pytest.raises(NonLoopbackRefused):
        MockServer(Scenario(), tmp_path / "j.jsonl", host="0.0.0.0")


def test_allow_remote_binds_and_warns(tmp_path: Path) -> None:
    process = _serve("--host", "0.0.0.0", "--allow-remote", cwd=tmp_path)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("mockapi listening on http://0.0.0.0:")
    finally:
        _, stderr = _stop(process)
    assert "WARNING: listening on 0.0.0.0, reachable from other machines" in stderr


def test_port_zero_prints_the_url_and_serves(tmp_path: Path) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text("classifier: plain\nrules:\n  - {reply: {text: hi}, repeat: always}\n")
    process = _serve("--scenario", str(scenario), "--journal", str(tmp_path / "j.jsonl"),
                     cwd=tmp_path)
    try:
        assert process.stdout is not None
        url = process.stdout.readline().split()[3]
        answer = httpx.post(f"{url}/v1/messages", headers=HEADERS,
                            json={**BODY, "stream": False}, timeout=10)
        assert answer.json()["content"] == [{"type": "text", "text": "hi"}]
    finally:
        _stop(process)
    assert '"path":"/v1/messages"' in (tmp_path / "j.jsonl").read_text()


def test_a_bad_scenario_file_stops_the_server_with_every_problem(tmp_path: Path) -> None:
    scenario = tmp_path / "bad.yaml"
    scenario.write_text("rules:\n  - match: {turn: one}\n    reply: {text: x}\n  - {}\n")
    done = subprocess.run([sys.executable, "-m", "mockapi", "--scenario", str(scenario)],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 2
    assert f"invalid scenario {scenario}: 2 problem(s)" in done.stderr
    assert "rules[0].match.turn" in done.stderr and "rules[1]" in done.stderr
    assert "Traceback" not in done.stderr


def test_open_streams_are_limited_with_a_clear_error(tmp_path: Path) -> None:
    scenario = Scenario(classifier="plain", rules=[
        Rule(match=Match(), repeat="always",
             reply=text("slow", stall={"after_events": 1, "seconds": 5}))])
    with MockServer(scenario, tmp_path / "j.jsonl", max_streams=1) as mock, \
            httpx.Client(timeout=10) as client:
        with client.stream("POST", f"{mock.url}/v1/messages", headers=HEADERS,
                           json=BODY) as first:
            chunks = first.iter_bytes()  # held: a dropped iterator closes the stream
            next(chunks)  # the first stream is open, stalled
            second = client.post(f"{mock.url}/v1/messages", headers=HEADERS, json=BODY)
            del chunks
        assert second.status_code == 529
        assert second.json()["error"] == {
            "type": "overloaded_error",
            "message": "loopprobe mock: 1 streams are open, the most this mock serves at once "
                       "(max_streams); no scripted reply was used"}
    records = [r for r in mock.read().requests()]
    assert [(r["outcome"], r["status"], r.get("rule")) for r in records] == [
        ("replied", 200, "rule-1"), ("over_limit", 529, None)]


def test_stop_returns_even_with_a_stalled_stream(tmp_path: Path) -> None:
    scenario = Scenario(classifier="plain", rules=[
        Rule(match=Match(), reply=text("never", stall_before=3600))])
    mock = MockServer(scenario, tmp_path / "j.jsonl").start()
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{mock.url}/v1/messages", headers=HEADERS, json=BODY, timeout=0.5)
    mock.stop()  # must not hang on the stalled handler
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{mock.url}/api/hello", timeout=2)
