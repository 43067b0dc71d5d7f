"""The collector: what processes inside a run report, kept where the client cannot reach.

Driven over its real Unix socket, as the hook relay, the MCP server and the sandbox's first
process speak to it, including as a hostile process inside a run would.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from probes.inside import sandbox_init
from probes.run import ancestry
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
        while channel.recv(4096):  # until the collector closes its side: everything was read
            pass
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
    served.launched("run1", os.getpid())  # this test is the run's launch
    _send(served, _line({"stream": "egress"}), _line(attempt), _line({"end": 0}))
    _send(served, _line({"stream": "egress"}), _line({**attempt, "host": "forged"}))
    served.end_run()
    assert [a["host"] for a in served.egress] == ["evil.example:443"]
    faults = [f["fault"] for f in served.faults]
    # no run under way, and this test had launched none: not of any run of this collector
    assert faults[0].startswith("an egress reporter from outside the run")
    assert faults[1].startswith("a second egress reporter")
    assert served.run_end("run1") == {"end": 0}


def test_the_egress_stream_is_claimed_for_the_run_under_way_and_said_so(
        served: Collector) -> None:
    """The sandbox's first process starts the client only on this answer, so a claim is
    made while its run is under way, never late into the next run (a loaded machine)."""
    assert json.loads(_send(served, _line({"stream": "egress"}), answer=True)) == \
        {"claimed": None}  # no run under way
    served.begin_run("run1")
    served.launched("run1", os.getpid())
    assert not served.claimed("run1")
    assert json.loads(_send(served, _line({"stream": "egress"}), answer=True)) == \
        {"claimed": "run1"}
    assert served.claimed("run1")
    assert json.loads(_send(served, _line({"stream": "egress"}), answer=True)) == \
        {"claimed": None}  # a second reporter of the run: refused, and told so
    served.end_run()


def test_the_first_process_waits_for_the_claim_and_gives_up_in_time(tmp_path: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="lp-") as short, \
            socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        path = str(Path(short) / "record.sock")
        listener.bind(path)
        listener.listen(2)
        silent = sandbox_init._Reporter(path)  # a collector that never answers
        peer, _ = listener.accept()
        started = time.monotonic()
        assert silent.claimed(timeout=0.5) is None
        assert time.monotonic() - started < 5
        peer.close()
        late = sandbox_init._Reporter(path)  # one that answers late: still waited for
        peer, _ = listener.accept()
        threading.Timer(0.3, lambda: peer.sendall(b'{"claimed": "run1"}\n')).start()
        assert late.claimed(timeout=10) == "run1"
        peer.close()


def test_a_reporter_cut_off_before_its_end_is_a_fault(served: Collector) -> None:
    served.begin_run("run1")
    served.launched("run1", os.getpid())
    _send(served, _line({"stream": "egress"}))
    served.end_run()
    assert served.run_end("run1") == {}
    assert [(f["kind"], f["run"]) for f in served.faults] == [("cut_off", "run1")]


# a reporter in its own process: it connects, says it is the egress stream, prints the answer
_REPORTER = """\
import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(b'{"stream": "egress"}\\n')
print(s.makefile("rb").readline().decode().strip(), flush=True)
s.sendall(b'{"end": 0}\\n')
"""


def _reporter(kept: Collector) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", _REPORTER, str(kept.socket_path)],
                            stdout=subprocess.PIPE, text=True)


def test_only_a_process_of_the_runs_launch_claims_its_egress_stream(served: Collector) -> None:
    """A process elsewhere on the host (here: this test, which launched nothing of the run)
    is refused as an outsider before it could claim the run; the run's own first process
    (here: the process the run launched) claims it after."""
    served.begin_run("run1")
    own = _reporter(served)
    served.launched("run1", own.pid)
    outsider = _send(served, _line({"stream": "egress"}), answer=True)
    assert json.loads(outsider) == {"claimed": None}
    out, _ = own.communicate(timeout=30)
    assert json.loads(out) == {"claimed": "run1"}, out
    served.end_run()
    assert served.claimed("run1") and served.run_end("run1") == {"end": 0}
    assert [(f["kind"], f["stream"]) for f in served.faults] == [("outsider", "egress")]
    assert f"pid {os.getpid()}" in served.faults[0]["fault"]


def test_a_claim_waits_for_the_runner_to_name_its_launch(served: Collector,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The first process may connect before the runner's Popen has returned: the claim
    waits for the launch to be named, and refuses only when it never is."""
    served.begin_run("run1")
    early = _reporter(served)
    time.sleep(0.3)  # connected and waiting; the launch is named only now
    served.launched("run1", early.pid)
    assert json.loads(early.communicate(timeout=30)[0]) == {"claimed": "run1"}
    served.end_run()
    monkeypatch.setattr(collector_module, "LAUNCH_WAIT", 0.3)
    served.begin_run("run2")  # a launch never named: nobody can be shown to belong to it
    unnamed = _reporter(served)
    assert json.loads(unnamed.communicate(timeout=30)[0]) == {"claimed": None}
    assert not served.claimed("run2")
    assert [f["kind"] for f in served.faults] == ["outsider"]


def test_a_process_is_known_by_its_parents() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert ancestry.descends_from(child.pid, {os.getpid()})
        assert ancestry.descends_from(child.pid, {child.pid})
        assert not ancestry.descends_from(os.getpid(), {child.pid})
        assert not ancestry.descends_from(None, {os.getpid()})
        assert not ancestry.descends_from(child.pid, set())
        assert ancestry.unproven(child.pid) == \
            "not started by the process the run launched"
    finally:
        child.kill()
        child.wait()
    # a reporter that left before it was checked cannot be shown to be of the run
    assert not ancestry.descends_from(child.pid, {os.getpid()})
    assert ancestry.unproven(child.pid) == "gone before its parents could be read"


@pytest.mark.parametrize(("lines", "fault"), [
    ([b"not json\n"], "not JSON"),
    ([_line({"stream": "telemetry"})], "expected {\"stream\""),
    ([b"[1]\n"], "expected {\"stream\""),  # not an object (was an AttributeError)
    ([_line({"stream": "mcp", "run": "../../etc"})], "expected {\"stream\""),
    ([_line({"stream": "hook"}), _line({"stdin": 5})], "expected {\"stdin\": TEXT}"),
    ([b"x" * (collector_module.LINE_LIMIT + 10) + b"\n"], "was cut and not read"),
])
def test_what_the_protocol_does_not_have_is_a_fault(served: Collector, lines: list[bytes],
                                                    fault: str) -> None:
    _send(served, *lines)
    assert any(fault in f["fault"] for f in served.faults), served.faults
    assert served.hook_calls == [] and served.mcp == {}
