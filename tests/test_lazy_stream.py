"""A streamed reply's events are made while it streams: loading a scenario and playing a
reply cost memory in proportion to the scenario's size, not to its number of events.

The wire stays what it was: ``fixtures/stream_golden.json`` holds, for every reply of
``CASES``, the plan and the bytes a real client received and the journal's
``response_end``, as the mock made them when it still encoded every event at load
(regenerate only on purpose: ``python tests/test_lazy_stream.py``). Memory is measured
as the growth of a process's peak resident memory; nothing here is timed.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from mockapi import MockServer, Rule, Scenario
from mockapi.script.events import PreparedMessage, prepare
from mockapi.script.plan import End, Send, Sleep, Step
from mockapi.script.replies import Message
from tests.mock_process import read_line

GOLDEN = Path(__file__).parent / "fixtures" / "stream_golden.json"
START = b"event: message_start\ndata: {}\n\n"
BIG = "".join(chr(0x61 + i % 26) if i % 97 else "é\"\n" for i in range(3000))

CASES: dict[str, dict[str, Any]] = {
    "text": {"content": [{"type": "text", "text": "hello world", "chunk_size": 5}]},
    "text-escapes": {"text": 'héllo "wörld"\n\t</script> 😀 \\ end', "content": []},
    "empty-text": {"text": ""},
    "tool-input": {"content": [{"type": "tool_use", "name": "Read",
                                 "input": {"file_path": "/tmp/a b.txt", "n": [1, 2.5, None]}}]},
    "tool-input-json-chunks": {"content": [{"type": "tool_use", "name": "Bash", "id": "toolu_x",
                                            "input_json": '{"command": "ls -la /tmp"}',
                                            "chunk_size": 7}]},
    "tool-invalid-json": {"content": [{"type": "tool_use", "name": "Bash",
                                       "input_json": '{"command": "ls', "chunk_size": 4}]},
    "tool-empty-json": {"content": [{"type": "tool_use", "name": "Bash", "input_json": ""}]},
    "thinking": {"content": [{"type": "thinking", "thinking": "let me think about it",
                              "chunk_size": 6}, {"type": "text", "text": "answer"}]},
    "thinking-signed": {"content": [{"type": "thinking", "thinking": "", "signature": "sig"}]},
    "redacted": {"content": [{"type": "redacted_thinking", "data": "xyz"},
                             {"type": "text", "text": "ok"}]},
    "mixed": {"content": [{"type": "text", "text": "I will read two files", "chunk_size": 8},
                          {"type": "tool_use", "name": "Read", "input": {"p": "a"}},
                          {"type": "tool_use", "name": "Read", "input": {"p": "b"}}]},
    "no-ping-usage": {"text": "short", "ping": False, "stop_reason": "max_tokens",
                      "stop_sequence": "STOP",
                      "usage": {"input_tokens": 7, "output_tokens": 3, "service_tier": "x"}},
    "stream-error": {"text": "hello world", "stream_error": {"after_events": 5}},
    "stream-error-custom": {"text": "hello world", "stream_error": {
        "after_events": 0, "type": "api_error", "message": "boom"}},
    "truncate": {"text": "hello world " * 8, "truncate": {"after_events": 4}},
    "disconnect": {"text": "hello world " * 8, "disconnect": {"after_events": 6}},
    "disconnect-late": {"text": "hello", "disconnect": {"after_events": 99}},
    "stall-before-delta": {"text": "hello world", "stall": {"before_event": "content_block_delta",
                                                            "seconds": 0.05}},
    "stall-before-message-delta": {"content": [{"type": "redacted_thinking", "data": "q"}],
                                   "stall": {"before_event": "message_delta", "seconds": 0.05}},
    "stall-before-missing": {"text": "x", "ping": False,
                             "stall": {"before_event": "ping", "seconds": 0.05}},
    "stall-before-stop-in-thinking": {"content": [{"type": "thinking", "thinking": "abc"}],
                                      "stall": {"before_event": "content_block_stop",
                                                "seconds": 0.05}},
    "stall-after": {"text": "hello world", "stall": {"after_events": 3, "seconds": 0.05},
                    "truncate": {"after_events": 7}},
    "big-chunk-1": {"content": [{"type": "text", "text": BIG, "chunk_size": 1},
                                {"type": "tool_use", "name": "W", "input": {"t": BIG},
                                 "chunk_size": 1}]},
    "big-chunk-1-faulty": {"content": [{"type": "thinking", "thinking": BIG, "chunk_size": 1}],
                           "stream_error": {"after_events": 2500}},
}


def _step(step: Step) -> list[Any]:
    if isinstance(step, Send):
        return ["send", step.data.decode()]
    if isinstance(step, Sleep):
        return ["sleep", step.seconds]
    return ["end" if isinstance(step, End) else "abort", step.reason]


def _prepared(name: str) -> PreparedMessage:
    prepared = prepare(Message(**CASES[name]), f"{name}_0")
    assert isinstance(prepared, PreparedMessage)
    return prepared


def _stream(url: str, name: str) -> bytes:
    """The raw body a client got for the rule ``name``, up to where the server cut it."""
    body = {"model": "claude-sonnet-4-5", "max_tokens": 10, "stream": True,
            "messages": [{"role": "user", "content": f"[{name}]"}]}
    got = b""
    try:
        with httpx.stream("POST", url + "/v1/messages", json=body, timeout=10,
                          headers={"x-api-key": "k", "anthropic-version": "2023-06-01"}) as r:
            for chunk in r.iter_raw():
                got += chunk
    except httpx.HTTPError:
        pass  # a scripted disconnect
    return got


def _end_of(mock: MockServer, seq: int) -> dict[str, Any]:
    for _ in range(400):
        ends = [r for r in mock.read().records
                if r.get("type") == "response_end" and r["seq"] == seq]
        if ends:
            return dict(ends[0])
        time.sleep(0.025)
    raise AssertionError(f"no response_end for request #{seq}")


def _scenario() -> Scenario:
    return Scenario(classifier="plain", message_ids="sequential", rules=[
        Rule(id=name, match={"last_user_text_contains": f"[{name}]"},
             reply=Message(**fields), repeat="always")
        for name, fields in CASES.items()])


def _observe() -> dict[str, dict[str, Any]]:
    """Every case planned and streamed through a real server, in the golden's form."""
    out: dict[str, dict[str, Any]] = {}
    # a patient delivery check: the client reads in this process, slowly under load
    with MockServer(_scenario(), Path(tempfile.mkdtemp()) / "j.jsonl",
                    delivery_timeout=30) as mock:
        for name in CASES:
            plan = _prepared(name).plan
            steps = [_step(s) for s in plan.steps(START)]
            body = _stream(mock.url, name)
            end = _end_of(mock, mock.requests()[-1]["seq"])
            entry: dict[str, Any] = {
                "whole": bool(plan.whole),
                "steps_sha256": hashlib.sha256(orjson.dumps(steps)).hexdigest(),
                "wire_sha256": hashlib.sha256(body).hexdigest(), "wire_bytes": len(body),
                "end": [end["reason"], end["events_sent"], end["bytes_sent"],
                        len(end.get("write_offsets_ms", [])),
                        end.get("write_offsets_truncated", False)]}
            if len(body) < 4000:
                entry["steps"], entry["wire"] = steps, body.decode()
            out[name] = entry
    return out


@pytest.fixture(scope="module")
def observed() -> dict[str, dict[str, Any]]:
    return _observe()


@pytest.mark.parametrize("name", list(CASES))
def test_plan_wire_and_journal_are_those_of_the_eager_mock(
        observed: dict[str, dict[str, Any]], name: str) -> None:
    golden = json.loads(GOLDEN.read_text())[name]
    got = observed[name]
    if "steps" in golden:  # small enough to show the first difference
        assert got["steps"] == golden["steps"]
        assert got["wire"] == golden["wire"]
    assert got == golden


# ---- memory -----------------------------------------------------------------------------

TEXT_BYTES = 3 * 1024 * 1024


def _large_scenario(tmp_path: Path, size: int, **reply: Any) -> Path:
    """A scenario file of about ``size`` bytes: one text reply streamed a character at a time."""
    text = ("the quick brown fox jumps over the lazy dog. " * (size // 45 + 1))[:size]
    path = tmp_path / "large.json"
    path.write_text(json.dumps({"classifier": "plain", "rules": [{
        "id": "big", "repeat": "always",
        "reply": {"content": [{"type": "text", "text": text, "chunk_size": 1}], **reply}}]}))
    return path


_LOAD = """
import resource, sys
from mockapi.script.events import PreparedMessage
from mockapi.script.scenario import load_scenario
from mockapi.script.decide import Script
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
script = Script(load_scenario(sys.argv[1]).render({}))
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
prepared = script.rules[0].replies[0]
assert isinstance(prepared, PreparedMessage)
print((after - before) * 1024, len(prepared.tail))
"""


def test_loading_a_scenario_of_single_character_chunks_costs_a_few_times_its_size(
        tmp_path: Path) -> None:
    """Measured as the growth of a fresh process's peak resident memory (``ru_maxrss``, KiB
    on Linux): real memory, where ``tracemalloc`` would also count the room orjson reserves
    and never touches."""
    path = _large_scenario(tmp_path, TEXT_BYTES)
    size = path.stat().st_size
    environment = {"PATH": os.environ.get("PATH", ""),
                   "PYTHONPATH": str(Path(__file__).parent.parent)}
    done = subprocess.run([sys.executable, "-c", _LOAD, str(path)], capture_output=True,
                          text=True, env=environment, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    growth, events = map(int, done.stdout.split())
    assert events == TEXT_BYTES + 5  # ping, start, the deltas, stop, message_delta, stop
    assert growth < 10 * size, f"loading {size} bytes grew the process by {growth} bytes"


def _peak_rss(pid: int) -> int:
    """A live process's peak resident memory so far, in bytes (Linux's ``VmHWM``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc (Linux)")
@pytest.mark.parametrize(("size", "reply"), [
    pytest.param(TEXT_BYTES, {}, id="one-write"),
    # a stream error after the last delta: every event is its own write
    pytest.param(256 * 1024, {"stream_error": {"after_events": 256 * 1024 + 3}},
                 id="event-by-event"),
])
def test_streaming_a_reply_of_single_character_chunks_holds_a_bounded_window(
        tmp_path: Path, size: int, reply: dict[str, Any]) -> None:
    """A real ``python -m mockapi`` streams about 100 bytes an event; the growth of its
    peak resident memory while it does is bounded by a few write buffers, not the body."""
    path = _large_scenario(tmp_path, size, **reply)
    journal = tmp_path / "journal.jsonl"
    process = subprocess.Popen(
        [sys.executable, "-m", "mockapi", "--port", "0", "--journal", str(journal),
         "--scenario", str(path)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(Path(__file__).parent.parent)},
        start_new_session=True)
    try:
        line = read_line(process, 60)
        url = line.removeprefix("mockapi listening on ").split()[0]
        loaded = _peak_rss(process.pid)
        body = {"model": "claude-sonnet-4-5", "max_tokens": 10, "stream": True,
                "messages": [{"role": "user", "content": "go"}]}
        received = 0
        with httpx.stream("POST", url + "/v1/messages", json=body, timeout=60,
                          headers={"x-api-key": "k", "anthropic-version": "2023-06-01"}) as r:
            for chunk in r.iter_raw():
                received += len(chunk)
        growth = _peak_rss(process.pid) - loaded
        ends: list[dict[str, Any]] = []
        for _ in range(400):
            ends = [json.loads(line) for line in journal.read_text().splitlines()
                    if '"response_end"' in line]
            if ends:
                break
            time.sleep(0.025)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)
        assert process.stdout is not None
        process.stdout.close()
    assert ends, "no response_end"
    end = ends[0]
    assert received == end["bytes_sent"] > 100 * size
    # message_start, ping, block start, the deltas, then the error or the three closing events
    assert end["events_sent"] == size + (4 if "stream_error" in reply else 6)
    assert growth < 32 * 1024 * 1024, f"streaming {received} bytes grew the mock by {growth}"


if __name__ == "__main__":  # regenerate the golden (only when the wire is meant to change)
    sys.exit(GOLDEN.write_text(json.dumps(_observe(), indent=1, sort_keys=True,
                                          ensure_ascii=False) + "\n") and 0)
