"""The collector: what processes inside a run report, kept where the client cannot reach.

Driven over its real Unix socket, as the hook relay, the MCP server and the sandbox's first
process speak to it, including as a hostile process inside a run would.
"""

from __future__ import annotations

import json
import socket
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from probes.run import collector as collector_module
from probes.run.collector import Collector


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Collector]:
    with tempfile.TemporaryDirectory(prefix="lp-") as short:  # a socket path is short
        with Collector(Path(short) / "record.sock", tmp_path,
                       {"PreToolUse": {"action": "deny", "reason": "no", "times": 1}}) as kept:
            yield kept


def _send(kept: Collector, *lines: bytes, answer: bool = False) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as channel:
        channel.settimeout(10)
        channel.connect(str(kept.socket_path))
        channel.sendall(b"".join(lines))
        if answer:
            return channel.makefile("rb").readline()
        channel.shutdown(socket.SHUT_WR)
        channel.recv(1)  # the collector closed its side: everything was read
    return b""


def _line(value: object) -> bytes:
    return json.dumps(value).encode() + b"\n"


def _hook(kept: Collector, event: str = "PreToolUse") -> dict[str, object]:
    payload = json.dumps({"hook_event_name": event, "tool_name": "Bash", "tool_use_id": "t"})
    answer = _send(kept, _line({"stream": "hook"}), _line({"stdin": payload}), answer=True)
    result: dict[str, object] = json.loads(answer)
    return result


def test_a_hook_call_is_recorded_on_the_host_and_answered_by_the_policy(
        served: Collector) -> None:
    first, second = _hook(served), _hook(served)
    assert first["output"] == {"hookSpecificOutput": {
        "hookEventName": "PreToolUse", "permissionDecision": "deny",
        "permissionDecisionReason": "no"}}
    assert second["output"] is None, "times: 1 applies to the first call only"
    starts = [c for c in served.hook_calls if "input" in c]
    assert [c["index"] for c in starts] == [0, 1]
    kept = [json.loads(line) for line in
            (served.evidence / "hooks.jsonl").read_text().splitlines()]
    assert kept == served.hook_calls and len(kept) == 4  # a start and an end per call


def test_concurrent_hook_calls_get_distinct_indexes(served: Collector) -> None:
    threads = [threading.Thread(target=_hook, args=(served,)) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    indexes = sorted(int(c["index"]) for c in served.hook_calls  # type: ignore[call-overload]
                     if "input" in c)
    assert indexes == list(range(20))


def test_one_egress_reporter_per_run_the_next_is_refused_and_listed(served: Collector) -> None:
    attempt = {"time": 1.0, "method": "CONNECT", "target": "evil.example:443",
               "host": "evil.example:443"}
    _send(served, _line({"stream": "egress"}), _line(attempt))  # before any run: refused
    served.begin_run("run1")
    _send(served, _line({"stream": "egress"}), _line(attempt), _line({"end": 0}))
    _send(served, _line({"stream": "egress"}), _line({**attempt, "host": "forged"}))
    served.end_run()
    assert [a["host"] for a in served.egress] == ["evil.example:443"]
    faults = [f["fault"] for f in served.faults]
    assert faults[0] == "an egress reporter outside a run was refused"
    assert faults[1].startswith("a second egress reporter")
    assert served.run_end("run1") == {"end": 0}


def test_a_reporter_cut_off_before_its_end_is_a_fault(served: Collector) -> None:
    served.begin_run("run1")
    _send(served, _line({"stream": "egress"}))
    served.end_run()
    assert served.run_end("run1") == {}
    assert [(f["kind"], f["run"]) for f in served.faults] == [("cut_off", "run1")]


@pytest.mark.parametrize(("lines", "fault"), [
    ([b"not json\n"], "not JSON"),
    ([_line({"stream": "telemetry"})], "expected {\"stream\""),
    ([_line({"stream": "mcp", "run": "../../etc"})], "expected {\"stream\""),
    ([_line({"stream": "hook"}), _line({"stdin": 5})], "expected {\"stdin\": TEXT}"),
    ([b"x" * (collector_module.LINE_LIMIT + 10) + b"\n"], "was cut and not read"),
])
def test_what_the_protocol_does_not_have_is_a_fault(served: Collector, lines: list[bytes],
                                                    fault: str) -> None:
    _send(served, *lines)
    assert any(fault in f["fault"] for f in served.faults), served.faults
    assert served.hook_calls == [] and served.mcp == {}


def test_streams_are_bounded_each_and_together(served: Collector,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(collector_module, "STREAM_LIMIT", 2000)
    monkeypatch.setattr(collector_module, "TOTAL_LIMIT", 5000)
    event = _line({"event": "x", "pad": "y" * 80})
    _send(served, _line({"stream": "mcp", "run": "a"}), event * 100)
    assert 10 < len(served.mcp["a"]) < 25, "one stream stops at its limit"
    for name in "bcdefgh":
        _send(served, _line({"stream": "mcp", "run": name}), event * 100)
    kept = sum(len(events) for events in served.mcp.values())
    assert kept * len(event) <= 5000 + len(event), "all streams stop at the total"
    served.stop()
    assert any("dropped" in f["fault"] for f in served.faults)
