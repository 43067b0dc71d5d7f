"""Everything a client can make the collector record is bounded, and is the client's account.

Driven over the collector's real Unix socket, as a hostile process inside a run would: a
flood of lines on an MCP relay stream, thousands of connections with a bad header, floods
of each kind of record, and more idle connections than the collector serves at once. What
is kept stays at its cap (the first records, verbatim), the rest is counted ("and N more, X
bytes, not kept"), the harness's memory stays flat (tracemalloc), and none of it is a
harness error: only the harness's own failures fail ``harness.evidence-intact``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from probes.core.checks import Checks
from probes.core.evidence import Evidence
from probes.core.verdicts import harness_checks
from probes.inside import hook_recorder
from probes.run import collected
from probes.run.collector import CONNECTION_LIMIT, Collector

MiB = 1 << 20


@contextmanager
def _serving(tmp_path: Path) -> Iterator[Collector]:
    with tempfile.TemporaryDirectory(prefix="lp-") as short:  # a socket path is short
        with Collector(Path(short) / "record.sock", tmp_path,
                       {"PreToolUse": {"action": "deny", "reason": "no", "times": 1}}) as kept:
            yield kept


def _connect(kept: Collector) -> socket.socket:
    channel = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    channel.connect(str(kept.socket_path))  # blocking: waits while the listen queue is full
    channel.settimeout(30)
    return channel


def _send(kept: Collector, *lines: bytes, answer: bool = False) -> bytes:
    """Send ``lines`` on a connection of their own; its answer line (b"": refused), or, with
    no answer wanted, wait until the collector has read everything and closed its side."""
    with _connect(kept) as channel:
        try:
            channel.sendall(b"".join(lines))
            if answer:
                return channel.makefile("rb").readline()
            channel.shutdown(socket.SHUT_WR)
            while channel.recv(65536):
                pass
        except (BrokenPipeError, ConnectionResetError):  # refused: closed, our lines unread
            pass
    return b""


def _line(value: object) -> bytes:
    return json.dumps(value).encode() + b"\n"


def _until(condition: Any, what: str) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.02)


def _faults_file(kept: Collector) -> bytes:
    path = kept.evidence / "collector-faults.jsonl"
    return path.read_bytes() if path.exists() else b""


def _checks(kept: Collector) -> dict[str, Any]:
    evidence = Evidence(probe="p", client={}, runs={}, journal=[],
                        evidence_faults=list(kept.faults), not_kept=kept.not_kept())
    checks = Checks("p")
    harness_checks(evidence, checks)
    return {c.id.removeprefix("p."): c for c in checks.results}


# ---- the two floods of the issue, at the real caps ----------------------------------------

# a collector in a process of its own, flooded from a thread of it: how much its resident
# memory grew (getrusage's peak, from a fresh process's), its faults and what it left out
_FLOOD = """\
import json, resource, socket, sys, tempfile, threading
from pathlib import Path
from probes.run.collector import Collector

def peak():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

def send(path, data):
    with socket.socket(socket.AF_UNIX) as channel:
        channel.connect(path)
        channel.sendall(data)
        channel.shutdown(socket.SHUT_WR)
        while channel.recv(65536):
            pass

evidence, flood = Path(sys.argv[1]), sys.argv[2]
with tempfile.TemporaryDirectory(prefix="lp-") as short:
    with Collector(Path(short) / "record.sock", evidence) as kept:
        path = str(kept.socket_path)
        kept.begin_run("run1")
        before = peak()
        if flood == "mcp":
            send(path, b'{"stream": "mcp", "run": "run1"}\\n' + b"1\\n" * 400_000)
        else:
            def connect(count):
                for _ in range(count):
                    send(path, b'{"stream": "telemetry"}\\n')
            senders = [threading.Thread(target=connect, args=(5000,)) for _ in range(4)]
            for sender in senders:
                sender.start()
            for sender in senders:
                sender.join()
        grown = peak() - before
        kept.end_run()
print(json.dumps({"grown": grown, "faults": kept.faults, "not_kept": kept.not_kept()}))
"""


def _flood(tmp_path: Path, flood: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", _FLOOD, str(tmp_path), flood],
                          capture_output=True, text=True, timeout=600, check=True)
    found: dict[str, Any] = json.loads(done.stdout)
    return found


@pytest.mark.parametrize(("flood", "stream", "fault", "count"), [
    # 800 KB of "1\n" on an MCP relay stream
    ("mcp", "mcp", "expected an object, got 1", 400_000),
    # 20,000 connections with a bad header
    ("headers", "header", "expected {\"stream\"", 20_000),
])
def test_a_flood_keeps_the_first_faults_counts_the_rest_and_leaves_memory_flat(
        tmp_path: Path, flood: str, stream: str, fault: str, count: int) -> None:
    """Fails on the old code: each line or connection left a fault kept in memory and in
    the faults file (400,000 of them: a 55 MiB file, the harness at 990 MiB)."""
    found = _flood(tmp_path, flood)
    cap = collected.CAPS[collected.CLIENT_FAULTS]
    faults = (tmp_path / "collector-faults.jsonl").read_bytes()
    assert len(found["faults"]) <= cap.records and len(faults) <= cap.bytes, \
        f"{len(found['faults'])} faults kept, {len(faults) / MiB:.0f} MiB"
    assert found["grown"] < 32 * MiB, f"the harness grew by {found['grown'] / MiB:.0f} MiB"
    assert found["faults"][0]["fault"].startswith(fault)
    (left_out,) = found["not_kept"]
    assert (left_out["what"], left_out["run"]) == (f"client faults ({stream})", "run1")
    assert left_out["kept"] == len(found["faults"]) == cap.records
    assert left_out["kept"] + left_out["more"] == count
    assert f"; and {count - cap.records:,} more, " in left_out["said"]
    assert left_out["said"].endswith(" MiB, not kept") or flood == "headers"
    assert json.loads((tmp_path / "not-kept.json").read_text()) == [left_out]


# ---- each kind of record, at a small cap --------------------------------------------------

@pytest.fixture
def small_caps(monkeypatch: pytest.MonkeyPatch) -> dict[str, collected.Cap]:
    caps = {what: collected.Cap(10, 4000) for what in collected.CAPS}
    monkeypatch.setattr(collected, "CAPS", caps)
    return caps


def _hook(kept: Collector) -> dict[str, Any]:
    payload = json.dumps({"hook_event_name": "PreToolUse", "tool_name": "Bash",
                          "tool_use_id": "t"})
    answer: dict[str, Any] = json.loads(_send(kept, _line({"stream": "hook"}),
                                              _line({"stdin": payload}), answer=True))
    return answer


def _left_out(kept: Collector, what: str) -> dict[str, Any]:
    found = [n for n in kept.not_kept() if n["what"] == what]
    assert len(found) == 1, kept.not_kept()
    return dict(found[0])


def _within(kept: Collector, what: str, file_name: str, records: int) -> None:
    """The first records of ``what`` kept whole, at the cap, and the rest counted."""
    left_out = _left_out(kept, what)
    lines = (kept.evidence / file_name).read_bytes().splitlines(keepends=True)
    assert len(lines) == left_out["kept"] <= 10 and len(b"".join(lines)) <= 4000
    assert sum(map(len, lines)) == left_out["kept_bytes"]
    assert left_out["kept"] + left_out["more"] == records, left_out


def test_a_flood_of_hook_calls_is_answered_and_kept_to_the_cap(
        tmp_path: Path, small_caps: Any) -> None:
    with _serving(tmp_path) as kept:
        kept.begin_run("run1")
        answers = [_hook(kept) for _ in range(30)]
        kept.end_run()
    assert answers[0]["output"] is not None and all(a["output"] is None for a in answers[1:]), \
        "every call is answered by the policy, kept or not (times: 1 counts every call)"
    _within(kept, collected.HOOK_CALLS, "hooks.jsonl", 60)  # a start and an end per call
    assert len(kept.hook_calls) == 10


def test_a_flood_of_hook_runs_is_kept_to_the_cap(tmp_path: Path, small_caps: Any) -> None:
    with _serving(tmp_path) as kept:
        kept.begin_run("run1")
        for n in range(25):
            _send(kept, _line({"stream": "hook_run"}), _line({"exit_code": 0, "n": n}))
        kept.end_run()
    _within(kept, collected.HOOK_RUNS, "hook-runs.jsonl", 25)
    assert [r["n"] for r in kept.hook_runs] == list(range(len(kept.hook_runs)))


@pytest.mark.parametrize("pad", [0, 1000], ids=["count", "bytes"])
def test_a_flood_of_mcp_events_is_kept_to_the_cap(tmp_path: Path, small_caps: Any,
                                                  pad: int) -> None:
    with _serving(tmp_path) as kept:
        kept.begin_run("run1")
        _send(kept, _line({"stream": "mcp", "run": "run1"}),
              *[_line({"n": n, "pad": "x" * pad}) for n in range(50)])
        # another stream name of the same run shares the run's cap: past it, nothing is kept
        _send(kept, _line({"stream": "mcp", "run": "other"}), _line({"n": 99}))
        kept.end_run()
    _within(kept, collected.MCP_EVENTS, "mcp-run1.jsonl", 51)
    assert [e["n"] for e in kept.mcp["run1"]] == list(range(len(kept.mcp["run1"])))
    assert not kept.mcp.get("other")


def test_a_flood_of_egress_attempts_is_kept_to_the_cap(tmp_path: Path,
                                                       small_caps: Any) -> None:
    with _serving(tmp_path) as kept:
        kept.begin_run("run1")
        kept.launched("run1", os.getpid())
        attempts = [_line({"time": n, "method": "CONNECT", "target": f"h{n}:443",
                           "host": f"h{n}:443"}) for n in range(40)]
        _send(kept, _line({"stream": "egress"}), *attempts, _line({"end": 0}))
        kept.end_run()
    _within(kept, collected.EGRESS_ATTEMPTS, "egress.jsonl", 40)
    assert kept.run_end("run1") == {"end": 0}, "the end line is never left out"


def test_a_flood_of_posers_is_kept_to_the_cap(tmp_path: Path, small_caps: Any) -> None:
    with _serving(tmp_path) as kept:
        kept.begin_run("run1")
        kept.launched("run1", os.getpid())
        assert json.loads(_send(kept, _line({"stream": "egress"}), answer=True)) == \
            {"claimed": "run1"}
        for _ in range(30):
            _send(kept, _line({"stream": "egress"}), answer=True)
        kept.end_run()
    assert [f["kind"] for f in kept.faults].count("poser") == 10
    left_out = _left_out(kept, "poser faults (egress)")
    assert left_out["kept"] + left_out["more"] == 30
    checks = _checks(kept)
    assert left_out["said"] in json.dumps(checks["client.reporter-posers"].observed)


def test_the_harness_s_own_faults_are_kept_beside_a_flood_of_the_client_s(
        tmp_path: Path, small_caps: Any) -> None:
    """A client flooding faults cannot push out the fault saying its reporter was cut off."""
    with _serving(tmp_path) as kept:
        kept.begin_run("run1")
        kept.launched("run1", os.getpid())
        for _ in range(30):
            _send(kept, b"not json\n")
        _send(kept, _line({"stream": "egress"}))  # the first process, cut off
        kept.end_run()
    assert [f["kind"] for f in kept.faults].count("cut_off") == 1
    checks = _checks(kept)
    assert not checks["harness.evidence-intact"].passed
    assert "cut off" in json.dumps(checks["harness.evidence-intact"].observed)


def test_a_record_the_harness_could_not_write_is_its_own_loss(tmp_path: Path) -> None:
    with _serving(tmp_path) as kept:
        (tmp_path / "hook-runs.jsonl").mkdir()  # the host refuses the append
        kept.begin_run("run1")
        _send(kept, _line({"stream": "hook_run"}), _line({"exit_code": 0}))
        kept.end_run()
    assert [f["kind"] for f in kept.faults] == ["lost"]
    checks = _checks(kept)
    assert not checks["harness.evidence-intact"].passed
    assert "could not be written to hook-runs.jsonl" in json.dumps(
        checks["harness.evidence-intact"].observed)
    assert "client.reporter-faults" not in checks


# ---- the client's acts are the client's -------------------------------------------------

def test_what_the_client_did_to_the_collector_is_its_account_not_a_harness_error(
        tmp_path: Path, small_caps: Any) -> None:
    """Fails on the old code: a refused line or a flood failed harness.evidence-intact, so
    the run's claims became errors ("never your failure" in loopprobe check)."""
    with _serving(tmp_path) as kept:
        kept.begin_run("run1")
        _send(kept, b"not json\n")
        _send(kept, _line({"stream": "mcp", "run": "run1"}), b"1\n" * 50)
        kept.end_run()
    checks = _checks(kept)
    assert checks["harness.evidence-intact"].passed, checks["harness.evidence-intact"].observed
    client = checks["client.reporter-faults"]
    assert not client.passed and client.claim is None
    observed = json.dumps(client.observed)
    assert "not JSON" in observed and _left_out(kept, "client faults (mcp)")["said"] in observed


_REPORTER = """\
import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(b'{"stream": "egress"}\\n')
print(s.makefile("rb").readline().decode().strip(), flush=True)
sys.stdin.readline()  # the test's word: an attempt made now is reported on the held stream
s.sendall(b'{"time": 1, "method": "CONNECT", "target": "late:443", "host": "late:443"}\\n')
s.sendall(b'{"end": 0}\\n')
"""


def _reporter(kept: Collector) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", _REPORTER, str(kept.socket_path)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def test_140_idle_connections_are_refused_as_the_client_s_and_cost_the_harness_nothing(
        tmp_path: Path) -> None:
    """Fails on the old code: the refusals failed harness.evidence-intact, so every claim of
    the run was an error (exit 2: "never your failure" in loopprobe check). The first
    process's stream, held from before its client started, is not displaced."""
    with _serving(tmp_path) as kept:
        kept.begin_run("run1")
        first = _reporter(kept)
        kept.launched("run1", first.pid)
        assert first.stdout is not None
        assert json.loads(first.stdout.readline()) == {"claimed": "run1"}
        idle = [_connect(kept) for _ in range(140)]  # the client's, after it started
        try:
            _until(lambda: len(kept.faults) == 140 - (CONNECTION_LIMIT - 1),
                   "every idle connection served or refused")
            # a hook call of the client's own is refused too: its account, its doing
            assert _send(kept, _line({"stream": "hook"}), answer=True) == b""
            first.communicate("\n", timeout=30)
        finally:
            for channel in idle:
                channel.close()
        kept.end_run()
    assert kept.run_end("run1") == {"end": 0}
    assert [a["host"] for a in kept.egress] == ["late:443"]
    refusals = [f for f in kept.faults if "reporters at once" in f["fault"]]
    assert len(refusals) >= 140 - CONNECTION_LIMIT and {f["kind"] for f in refusals} == \
        {"refused"}
    checks = _checks(kept)
    assert checks["harness.evidence-intact"].passed, checks["harness.evidence-intact"].observed
    assert not checks["client.reporter-faults"].passed
    assert "reporters at once" in json.dumps(checks["client.reporter-faults"].observed)


def test_the_reserved_slot_serves_only_an_egress_claim_of_an_unclaimed_run(
        tmp_path: Path) -> None:
    """Fails on the old code: with every slot held (here by the run before's connections,
    not yet seen closed), the run's own first process was refused, and its client never
    started (a harness error). The claim of an unclaimed run has a slot of its own."""
    with _serving(tmp_path) as kept:
        kept.begin_run("run1")
        idle = [_connect(kept) for _ in range(CONNECTION_LIMIT)]
        try:
            _until(lambda: kept.serving() == CONNECTION_LIMIT, "every slot held")
            # every slot held: a hook call takes no reserved slot
            assert _send(kept, _line({"stream": "hook"}), answer=True) == b""
            first = _reporter(kept)
            kept.launched("run1", first.pid)
            out, _ = first.communicate("\n", timeout=30)
            assert json.loads(out) == {"claimed": "run1"}
            # the run is claimed now: a poser finds no slot at all
            assert _send(kept, _line({"stream": "egress"}), answer=True) == b""
        finally:
            for channel in idle:
                channel.close()
        kept.end_run()
    assert kept.run_end("run1") == {"end": 0}
    assert [f["kind"] for f in kept.faults] == ["refused", "refused"]


def test_the_hook_relay_refused_says_so_in_one_line(tmp_path: Path) -> None:
    with _serving(tmp_path) as kept:
        idle = [_connect(kept) for _ in range(CONNECTION_LIMIT)]
        try:
            _until(lambda: kept.serving() == CONNECTION_LIMIT, "every slot held")
            done = subprocess.run([sys.executable, "-I", "-S", hook_recorder.__file__,
                                   str(kept.socket_path)], input=b"{}", capture_output=True,
                                  timeout=30)
        finally:
            for channel in idle:
                channel.close()
    assert done.returncode == 1 and done.stdout == b""
    assert done.stderr.decode().count("\n") == 1
    assert "closed the call unanswered (refused; its evidence says why)" in done.stderr.decode()
