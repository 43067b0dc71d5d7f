"""The client is hostile input: what it prints, how much, and the names a catalog gives.

Small Python processes stand in for the client (no real client needed): one prints without
end, one never reads its stdin, one prints malformed control requests, one leaves a
grandchild behind. Each test fails on the harness before these bounds existed.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import textwrap
import threading
import time
import tracemalloc
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from mockapi import Scenario
from probes.clients.base import Capabilities, ClientBinary, Command, RunContext
from probes.core.checks import Checks
from probes.core.evidence import (
    MAX_EVENT_DEPTH,
    PROTOCOL_FAULTS,
    Evidence,
    Output,
    RunRecord,
    message_outline,
)
from probes.core.invocation import Invocation
from probes.core.mcp import McpReply, McpServer, McpTool
from probes.core.probe import Claim, Probe, ReportSpec
from probes.core.streamed import PermissionAnswer, Step, StreamedInput, user_message
from probes.core.verdicts import harness_checks
from probes.report.build import OUTLINE_HEAD, OUTLINE_TAIL, build_report, report_outline
from probes.run.conversation import (
    KEPT_FAULTS,
    KEPT_LINES,
    STDIN_LINES,
    UNSCRIPTED,
    Conversation,
    streamed_record,
)
from probes.run.pipes import LINE_CAP, OUTPUT_CAP
from probes.run.process import STOP_POLL, run_conversation, run_process
from probes.run.runner import run_probe
from tests.fakeloop import FakeLoopClient

# ---- names a catalog gives ---------------------------------------------------------------

BAD_NAMES = ["/etc/passwd", "../x", "a/b", "", ".", ".hidden", "-flag", "a\x00b", "a" * 65]
TOOL = McpTool("t", (McpReply(text="x"),))


def _invocation(name: str) -> Any:
    return Invocation(name, "prompt")


def _server(name: str) -> Any:
    return McpServer((TOOL,), name=name)


def _probe(name: str) -> Any:
    return Probe(name=name, title="t", claims=(Claim("c", "s"),), scenario=Scenario(rules=[]),
                 invocations=(Invocation("run", "p"),), check=lambda ev, c: None)


MAKERS: list[tuple[str, Callable[[str], Any]]] = [
    ("invocation", _invocation), ("MCP server", _server), ("probe", _probe)]


@pytest.mark.parametrize("name", BAD_NAMES)
@pytest.mark.parametrize(("kind", "make"), MAKERS)
def test_a_name_that_is_not_simple_is_refused_saying_what_was_expected(
        kind: str, make: Callable[[str], Any], name: str) -> None:
    """Fails on the old code: the declarations took any name (a path made files there)."""
    longest = 128 if kind == "probe" else 64
    if kind == "probe" and name == "a" * 65:
        name = "a" * 129
    expected = (f"{kind} name {name!r}: expected a simple name (letters, digits, '.', '_', '-', "
                f"at most {longest}, not starting with '.' or '-')")
    with pytest.raises(ValueError) as raised:
        make(name)
    assert str(raised.value) == expected


@pytest.mark.parametrize("name", ["run", "Run_2", "a.b-c", "0", "a" * 64])
@pytest.mark.parametrize(("kind", "make"), MAKERS)
def test_a_simple_name_is_taken(kind: str, make: Callable[[str], Any], name: str) -> None:
    assert make(name).name == name


# ---- output beyond the cap ---------------------------------------------------------------

MIB = 1 << 20
ENV = {"PATH": "/usr/bin:/bin"}


def _child(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


def test_stdout_beyond_the_cap_is_counted_and_not_kept(tmp_path: Path) -> None:
    """Fails on the old code: communicate() kept all 50 MB (there was no cap to pass)."""
    tracemalloc.start()
    try:
        result = run_process(_child("""
            import sys
            for _ in range(50):
                sys.stdout.buffer.write(b"x" * (1 << 20))
        """), env=ENV, cwd=tmp_path, timeout=60, output_cap=MIB)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.exit_code == 0 and not result.timed_out
    assert len(result.stdout) == MIB and set(result.stdout) == {"x"}
    assert result.stdout_dropped == 50 * MIB - MIB
    assert result.stderr == "" and result.stderr_dropped == 0
    assert peak < 8 * MIB, f"the harness held {peak} bytes at its peak for a 1 MiB cap"


def test_each_stream_has_its_own_cap(tmp_path: Path) -> None:
    """Fails on the old code: no cap, no counts."""
    result = run_process(_child("""
        import sys
        sys.stderr.buffer.write(b"e" * (3 << 20))
        sys.stdout.write("kept whole")
    """), env=ENV, cwd=tmp_path, timeout=60, output_cap=MIB)
    assert (result.stdout, result.stdout_dropped) == ("kept whole", 0)
    assert (len(result.stderr), result.stderr_dropped) == (MIB, 2 * MIB)


def test_a_streamed_run_keeps_whole_lines_and_never_reads_an_overlong_line(
        tmp_path: Path) -> None:
    """Fails on the old code: the 1.5 MiB control request was answered, and all was kept."""
    short = json.dumps({"type": "assistant", "n": 1})
    kept: list[Conversation] = []
    result = run_conversation(_child(f"""
        import json, sys
        overlong = json.dumps({{"type": "control_request", "request_id": "long", "request": {{
            "subtype": "interrupt", "pad": "p" * (3 << 19)}}}})
        sys.stdout.write(overlong + "\\n" + {short!r} + "\\n")
        sys.stdout.write(("y" * 1000 + "\\n") * 3000)
    """), env=ENV, cwd=tmp_path, timeout=60, start=_conversation(kept),
        new_requests=lambda: [], output_cap=2 * MIB)
    overlong = len(json.dumps({"type": "control_request", "request_id": "long", "request": {
        "subtype": "interrupt", "pad": "p" * (3 << 19)}}))
    lines = result.stdout.splitlines(keepends=True)
    assert len(lines[0]) == LINE_CAP + 1 and lines[0].endswith("\n")
    assert lines[1] == short + "\n"
    # whole lines up to the cap, then nothing: what was printed is what was kept and dropped
    printed = overlong + 1 + len(short) + 1 + 1001 * 3000
    assert len(result.stdout) <= 2 * MIB and all(len(line) == 1001 for line in lines[2:])
    assert len(result.stdout) + result.stdout_dropped == printed
    assert [e.get("why") for e in kept[0].transcript][:1] == ["the prompt, at start"]
    assert not any((e.get("line") or {}).get("type") == "control_response"
                   for e in kept[0].transcript), "the cut-short line was read as a request"



def test_a_flood_of_short_lines_costs_no_object_per_line(tmp_path: Path) -> None:
    """Fails on the old code (and on a Capture keeping a bytes object per line, fed through
    an unbounded queue: 16 MB held for a 256 KiB cap)."""
    cap = 256 * 1024
    tracemalloc.start()
    try:
        result = run_conversation(_child("""
            import sys
            sys.stdout.write("1\\n" * (1 << 19))
        """), env=ENV, cwd=tmp_path, timeout=60, start=_conversation([]),
            new_requests=lambda: [], output_cap=cap)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (len(result.stdout), result.stdout_dropped) == (cap, (1 << 20) - cap)
    assert peak < 8 * MIB, f"the harness held {peak} bytes at its peak for a 256 KiB cap"

def _conversation(kept: list[Conversation],
                  script: StreamedInput | None = None) -> Callable[..., Conversation]:
    def start(write: Callable[[str], None], close: Callable[[], None]) -> Conversation:
        conversation = Conversation("P", script or StreamedInput(), write, close,
                                    lambda: 0.0, lambda _: False)
        kept.append(conversation)
        return conversation
    return start


# ---- a client that never reads its stdin ---------------------------------------------------

FLOOD = """
    import json, os, sys, time
    for n in range({count}):
        print(json.dumps({{"type": "control_request", "request_id": f"r{{n}}", "request": {{
            "subtype": "can_use_tool", "tool_name": "Bash", "input": {{"command": "x" * 100}}}}}}))
    sys.stdout.flush()
    time.sleep(600)
"""
SLACK = 5.0  # KILL_GRACE and a scheduler's worth


def _bounded(call: Callable[[], Any], seconds: float) -> Any:
    """``call()``, which must return within ``seconds`` (the old code hung: the test fails
    instead, and the process group left behind is its own)."""
    outcome: list[Any] = []
    worker = threading.Thread(target=lambda: outcome.append(call()), daemon=True)
    worker.start()
    worker.join(seconds)
    assert outcome, f"the harness was still blocked {seconds} s into the run"
    return outcome[0]


def test_a_client_that_never_reads_stdin_cannot_hold_the_run_past_its_timeout(
        tmp_path: Path) -> None:
    """Fails on the old code: write() blocked on the full pipe; the timeout never fired."""
    kept: list[Conversation] = []
    script = StreamedInput(permissions=(PermissionAnswer("Bash"),))
    started = time.monotonic()
    result = _bounded(lambda: run_conversation(
        _child(FLOOD.format(count=5000)), env=ENV, cwd=tmp_path, timeout=3,
        start=_conversation(kept, script), new_requests=lambda: []), 3 + 2 * SLACK)
    assert result.timed_out and result.exit_code is None and result.stopped is None
    assert time.monotonic() - started < 3 + SLACK
    writers = [t for t in threading.enumerate() if t.name == "stdin-writer"]
    assert not writers, "the writer, blocked on the full pipe, outlived the run"
    transcript = kept[0].transcript
    answers = [e for e in transcript if (e.get("line") or {}).get("type") == "control_response"]
    # every request the harness read in its 3 s is answered, in order (how many it reads
    # in that time is the machine's speed: all 5,000 on an idle one)
    ids = [e["line"]["response"]["request_id"] for e in answers]
    assert ids and ids == [f"r{n}" for n in range(len(ids))]
    # the pipe held the first lines; those still queued at the kill say they were not written
    assert "write_error" not in transcript[0]
    unwritten = [e["write_error"] for e in answers if "write_error" in e]
    assert unwritten and all(
        why == "not written: the run's timeout came first"
        or (why.startswith("cut short after ") and why.endswith(": the run's timeout came first"))
        for why in unwritten), unwritten[:3]
    assert transcript[-1] == {"close": True, "why": "stdin closed: the run's timeout",
                              "at": 0.0}


class _BigAnswers:
    """Answers every control request with a line of 1 MiB: 8 of them fill the queue."""

    def __init__(self, write: Callable[[str], None]) -> None:
        self.write = write
        self.closed = False
        self.refused: list[str] = []
        self.accepted: list[int] = []
        self.failed: dict[int, str] = {}
        self.calls = 0

    def on_event(self, event: Mapping[str, Any]) -> None:
        index, self.calls = self.calls, self.calls + 1
        try:
            self.write("z" * (MIB - 1) + "\n")
        except OSError as error:
            self.refused.append(f"{type(error).__name__}: {error}")
        else:
            self.accepted.append(index)

    def on_request(self, record: Mapping[str, Any]) -> None: ...

    def on_tick(self) -> None: ...

    def end(self, why: str) -> None:
        self.closed = True

    def not_written(self, index: int, why: str) -> None:
        self.failed[index] = why


def test_writes_beyond_the_queue_bound_are_refused_saying_why(tmp_path: Path) -> None:
    """Fails on the old code: the first 1 MiB write blocked for good."""
    dialogues: list[_BigAnswers] = []

    def start(write: Callable[[str], None], close: Callable[[], None]) -> _BigAnswers:
        dialogues.append(_BigAnswers(write))
        return dialogues[0]

    result = _bounded(lambda: run_conversation(
        _child(FLOOD.format(count=100)), env=ENV, cwd=tmp_path, timeout=3, start=start,
        new_requests=lambda: []), 3 + 2 * SLACK)
    dialogue = dialogues[0]
    assert result.timed_out and dialogue.calls == 100
    # 8 MiB may wait (the first line, partly in the pipe, among them): the rest are refused
    assert dialogue.accepted == list(range(8)) and len(dialogue.refused) == 92
    assert dialogue.refused[0].startswith("BlockingIOError: not written: the client had not "
                                          "yet read ")
    assert set(dialogue.failed) == set(dialogue.accepted)
    assert dialogue.failed[0].startswith("cut short after ") and dialogue.failed[0].endswith(
        " bytes: the run's timeout came first")
    assert set(list(dialogue.failed.values())[1:]) == {
        "not written: the run's timeout came first"}


def test_the_transcript_of_a_flood_keeps_a_bounded_number_of_lines() -> None:
    """Fails on the old code: every answer to every request was kept (and every request);
    then, the requests past the cap were not counted."""
    lines: list[str] = []
    conversation = Conversation("P", StreamedInput(), lines.append, lambda: None,
                                lambda: 0.0, lambda _: False)
    for n in range(KEPT_LINES + 50):
        conversation.on_event({"type": "control_request", "request_id": n,
                               "request": {"subtype": "unknown"}})
    assert len(lines) == KEPT_LINES + 51, "every request is still answered"
    assert len(conversation.transcript) == KEPT_LINES + 1 and conversation.omitted == 51
    assert conversation.transcript[-1] == {
        "line": None, "at": 0.0,
        "why": f"later lines written are not kept: the transcript keeps {KEPT_LINES} (16 MiB) "
               "at most"}
    assert len(conversation.unanswered) == KEPT_FAULTS
    left_out = {n["what"]: n for n in conversation.not_kept("talk")}
    assert set(left_out) == {STDIN_LINES, UNSCRIPTED}
    assert (left_out[STDIN_LINES]["kept"], left_out[STDIN_LINES]["more"]) == (KEPT_LINES, 51)
    assert left_out[UNSCRIPTED]["more"] == KEPT_LINES + 50 - KEPT_FAULTS
    assert left_out[UNSCRIPTED]["said"].startswith(f"{KEPT_FAULTS} kept (")
    assert left_out[UNSCRIPTED]["run"] == "talk"


def test_a_flood_of_malformed_requests_keeps_the_first_faults_and_counts_the_rest() -> None:
    """Fails on the old code: the faults past the first 100 were neither kept nor counted,
    so nothing said there were more."""
    conversation = Conversation("P", StreamedInput(), Wire().write, lambda: None, lambda: 0.0,
                                lambda _: False)
    for n in range(1000):
        conversation.on_event({"type": "control_request", "request_id": n, "request": "x"})
    assert len(conversation.protocol_faults) == KEPT_FAULTS
    (left_out,) = [n for n in conversation.not_kept("talk") if n["what"] == PROTOCOL_FAULTS]
    assert (left_out["kept"], left_out["more"]) == (KEPT_FAULTS, 1000 - KEPT_FAULTS)
    assert f"; and {1000 - KEPT_FAULTS:,} more, " in left_out["said"]
    run = RunRecord(name="talk", invocation=Invocation("talk", "p", streamed=StreamedInput()),
                    argv=[], env={}, exit_code=0, timed_out=False, duration=1.0, stdout="",
                    stderr="", output=Output([], []), session_id=None, seqs=(0, 0),
                    **streamed_record("talk", [conversation]))
    checks = Checks("p")
    harness_checks(Evidence(probe="p", client={}, runs={"talk": run}, journal=[]), checks)
    protocol = next(c for c in checks.results if c.id == "p.client.talk.protocol")
    assert not protocol.passed and left_out["said"] in json.dumps(protocol.observed)


# ---- malformed control requests --------------------------------------------------------

class Wire:
    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []

    def write(self, text: str) -> None:
        self.lines.append(json.loads(text))


MALFORMED: list[tuple[dict[str, Any], str, bool]] = [
    ({"type": "control_request", "request_id": "a", "request": "x"},
     "request: expected an object, got a string: \"x\"", True),
    ({"type": "control_request", "request_id": "b", "request": {"subtype": 5}},
     "request.subtype: expected a string, got a number: 5", True),
    ({"type": "control_request", "request_id": [1], "request": {"subtype": "interrupt"}},
     "request_id: expected a string or a number, got an array: [1]", False),
    ({"type": "control_request", "request": {"subtype": "interrupt"}},
     "request_id: expected a string or a number, got nothing (no such field)", False),
    ({"type": "control_request", "request_id": True, "request": None},
     "request_id: expected a string or a number, got a boolean: true; "
     "request: expected an object, got null: null", False),
    ({"type": "control_request", "request_id": 7, "request": {
        "subtype": "can_use_tool", "tool_name": "Bash", "input": "rm -rf /"}},
     "can_use_tool request.input: expected an object, got a string: \"rm -rf /\"", True),
    ({"type": "control_request", "request_id": "c", "request": {
        "subtype": "can_use_tool", "tool_name": {"n": 1}, "input": {}}},
     "can_use_tool request.tool_name: expected a string, got an object: {\"n\": 1}", True),
]
GOOD = {"type": "control_request", "request_id": "good", "request": {
    "subtype": "can_use_tool", "tool_name": "Bash", "input": {"command": "ls"}}}


def test_a_malformed_control_request_is_the_clients_fault_kept_with_what_arrived() -> None:
    """Fails on the old code: ``"request": "x"`` raised AttributeError (a harness crash)."""
    wire = Wire()
    conversation = Conversation("P", StreamedInput(permissions=(PermissionAnswer("Bash"),)),
                                wire.write, lambda: None, lambda: 0.0, lambda _: False)
    for event, _, _ in MALFORMED:
        conversation.on_event(event)
    conversation.on_event(GOOD)
    assert [f["fault"] for f in conversation.protocol_faults] == [f for _, f, _ in MALFORMED]
    assert [json.loads(f["line"]) for f in conversation.protocol_faults] == [
        e for e, _, _ in MALFORMED]
    answered = [line["response"] for line in wire.lines[1:]]
    assert [a["request_id"] for a in answered] == [
        e["request_id"] for e, _, usable in MALFORMED if usable] + ["good"]
    assert [a["error"] for a in answered[:-1]] == [
        f"malformed control request: {f}" for _, f, usable in MALFORMED if usable]
    assert answered[-1] == {"subtype": "success", "request_id": "good", "response": {
        "behavior": "allow", "updatedInput": {"command": "ls"}}}


def test_a_fault_keeps_a_few_kilobytes_of_its_line() -> None:
    """Fails on the old code: there were no protocol faults, and this line raised."""
    conversation = Conversation("P", StreamedInput(), Wire().write, lambda: None, lambda: 0.0,
                                lambda _: False)
    event = {"type": "control_request", "request_id": "x", "request": "y" * 10**6}
    conversation.on_event(event)
    line = conversation.protocol_faults[0]["line"]
    assert line == json.dumps(event)[:4096] + f"… ({len(json.dumps(event)) - 4096} more characters)"


@pytest.mark.parametrize("event", [
    {"type": ["control_request"]}, {"type": {"a": 1}}, {"type": "result", "subtype": [1]},
    {"type": "result", "message": "not an object"}, {"type": 10**4000},
    {"type": "control_request", "request_id": float("nan"), "request": {"subtype": "x"}},
])
def test_odd_shapes_never_raise_on_the_event_path(event: dict[str, Any]) -> None:
    """Fails on the old code: it kept no faults, and answered a NaN id as if usable (the
    other shapes keep the step and close_on matching from raising on what arrives)."""
    wire = Wire()
    script = StreamedInput(steps=(Step(user_message("S"), after_event={"message": {"r": 1}}),),
                           close_on={"type": "result", "subtype": {"x": 1}})
    conversation = Conversation("P", script, wire.write, lambda: None, lambda: 0.0,
                                lambda _: False)
    conversation.on_event(event)
    assert len(wire.lines) == 1 and not conversation.closed
    assert bool(conversation.protocol_faults) == (event.get("type") == "control_request")


def test_a_streamed_run_with_malformed_requests_ends_and_answers_the_good_one(
        tmp_path: Path) -> None:
    """Fails on the old code: run_conversation raised AttributeError out of the harness."""
    kept: list[Conversation] = []
    lines = [json.dumps(e) for e, _, _ in MALFORMED] + ["DEEP", json.dumps(GOOD)]
    result = run_conversation(_child(f"""
        import json, sys
        sys.stdin.readline()
        for line in {lines!r}:  # DEEP: JSON nested deeper than Python parses
            print("[" * 100_000 + "]" * 100_000 if line == "DEEP" else line, flush=True)
        while (answer := json.loads(sys.stdin.readline()))["response"]["request_id"] != "good":
            pass
        print(json.dumps({{"type": "echo", "answer": answer["response"]}}), flush=True)
    """), env=ENV, cwd=tmp_path, timeout=30,
        start=_conversation(kept, StreamedInput(permissions=(PermissionAnswer("Bash"),))),
        new_requests=lambda: [])
    assert result.exit_code == 0 and not result.timed_out, result.stderr
    assert json.loads(result.stdout.splitlines()[-1])["answer"]["subtype"] == "success"
    assert len(kept[0].protocol_faults) == len(MALFORMED)



def test_a_line_nested_too_deep_is_kept_unparsed_never_read_as_an_event() -> None:
    """Fails on the old code: json.loads raised RecursionError out of the harness, and an
    event 500 deep was kept (building the report then recursed past Python's limit)."""
    deep = {"a": json.loads("[" * 499 + "]" * 499)}
    lines = ["[" * 100_000 + "]" * 100_000, json.dumps(deep), '{"type": "result", "n": [[1]]}']
    output = Output.from_json_lines("\n".join(lines))
    assert output.unparsed == lines[:2]
    assert output.events == [{"type": "result", "n": [[1]]}]
    at_limit = "[" * (MAX_EVENT_DEPTH - 1) + "]" * (MAX_EVENT_DEPTH - 1)
    assert len(Output.from_json_lines(f'{{"a": {at_limit}}}').events) == 1

# ---- a stop condition, and what a client leaves behind ----------------------------------------

LEAVES_A_GRANDCHILD = """
    import os, sys, time
    print("before", flush=True)
    if (child := os.fork()) == 0:
        if os.fork() == 0:  # orphaned, but in the client's process group still
            with open("grandchild.pid", "w") as out:
                out.write(str(os.getpid()))
            time.sleep(600)
        os._exit(0)
    os.waitpid(child, 0)
    time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")  # a zombie no one reaps is dead all the same


def _gone(pid: int, within: float) -> bool:
    until = time.monotonic() + within
    while _alive(pid) and time.monotonic() < until:
        time.sleep(0.05)
    return not _alive(pid)


@pytest.mark.parametrize("streamed", [False, True], ids=["process", "conversation"])
def test_a_stop_reason_kills_the_group_and_is_kept(tmp_path: Path, streamed: bool) -> None:
    """Fails on the old code: there was no should_stop (the run went on to its timeout)."""
    began = time.monotonic()
    asked: list[float] = []

    def should_stop() -> str | None:
        asked.append(time.monotonic())
        return "the sandbox holds 5 GB (at most 4)" if asked[-1] - began > 1 else None

    argv = _child(LEAVES_A_GRANDCHILD)
    if streamed:
        result = run_conversation(argv, env=ENV, cwd=tmp_path, timeout=60,
                                  start=_conversation([]), new_requests=lambda: [],
                                  should_stop=should_stop)
    else:
        result = run_process(argv, env=ENV, cwd=tmp_path, timeout=60, should_stop=should_stop)
    assert result.stopped == "the sandbox holds 5 GB (at most 4)"
    assert not result.timed_out and result.exit_code is None
    assert 1 < result.duration < 1 + STOP_POLL + SLACK
    assert result.stdout == "before\n"
    assert len(asked) <= (asked[-1] - began) / STOP_POLL + 2, "asked more often than polled"
    grandchild = int((tmp_path / "grandchild.pid").read_text())
    try:
        assert _gone(grandchild, 2.0), "the grandchild outlived the stopped run"
    finally:
        if _alive(grandchild):
            os.kill(grandchild, signal.SIGKILL)


def test_a_grandchild_outside_the_group_holding_the_pipes_cannot_hold_the_harness(
        tmp_path: Path) -> None:
    """Fails on the old code: after its KILL_GRACE it returned no output at all."""
    try:
        started = time.monotonic()
        result = run_process(_child("""
            import subprocess, sys
            print("before", flush=True)
            sleeper = subprocess.Popen(["sleep", "600"], start_new_session=True)
            open("sleeper.pid", "w").write(str(sleeper.pid))
        """), env=ENV, cwd=tmp_path, timeout=2)
        assert time.monotonic() - started < 2 + SLACK
        assert result.timed_out and result.stdout == "before\n"
    finally:
        pid = tmp_path / "sleeper.pid"
        if pid.exists():
            os.kill(int(pid.read_text()), signal.SIGKILL)


# ---- into the run's record, its checks and its report ------------------------------------------

HOSTILE = f"""
import json, sys
sys.stdin.readline()
for line in {[json.dumps(e) for e, _, _ in MALFORMED[:2]]!r}:
    print(line, flush=True)
sys.stdout.write("o" * (OUTPUT_CAP + 10) + "\\n")
sys.stderr.write("e" * (OUTPUT_CAP + 20))
"""


class _HostileClient(FakeLoopClient):
    """The fake loop's sandbox and output reading, but the run is HOSTILE for ``talk``."""

    def capabilities(self, binary: ClientBinary) -> Capabilities:
        return Capabilities(frozenset({"run", "streamed_input"}))

    def command(self, binary: ClientBinary, invocation: Invocation,
                context: RunContext) -> Command:
        plain = super().command(binary, replace(invocation, streamed=None), context)
        if invocation.name != "talk":
            return plain
        code = HOSTILE.replace("OUTPUT_CAP", str(OUTPUT_CAP))
        return Command([*binary.launcher[:-1], "-c", code], plain.env, plain.cwd)


def test_faults_drops_and_stops_reach_the_record_the_checks_and_the_report(
        tmp_path: Path) -> None:
    """Fails on the old code: RunRecord had no faults or drop counts, and no check said whose
    fault it was; a run without any keeps the report's shape."""
    client = _HostileClient()
    probe = Probe(name="hostile", title="t", claims=(Claim("c", "s"),),
                  scenario=Scenario(rules=[]), check=lambda ev, c: None, invocations=(
                      Invocation("talk", "P", tools=None, timeout=30, streamed=StreamedInput()),
                      Invocation("plain", "P", tools=None, timeout=30, session="none")))
    outcome = run_probe(probe, client, client.install("1"), tmp_path)
    assert outcome.evidence is not None, outcome.error
    talk, plain = outcome.evidence.runs["talk"], outcome.evidence.runs["plain"]
    assert talk.protocol_faults == [{"line": json.dumps(e), "fault": f}
                                    for e, f, _ in MALFORMED[:2]]
    # the long line is cut to LINE_CAP (its newline kept); stderr is kept to OUTPUT_CAP
    assert (talk.stdout_dropped, talk.stderr_dropped) == (OUTPUT_CAP + 10 - LINE_CAP, 20)
    assert (talk.stopped, plain.protocol_faults, plain.stdout_dropped) == (None, [], 0)
    checks = {c.id: c for c in outcome.checks}
    protocol = checks["hostile.client.talk.protocol"]
    assert not protocol.passed and protocol.claim is None
    assert protocol.observed == [{"fault": f, "line": json.dumps(e)} for e, f, _ in MALFORMED[:2]]
    assert "hostile.client.plain.protocol" not in checks, "a plain run reads no control request"
    report, _, _ = build_report(ReportSpec("r", "t", (probe,)), [outcome], client.install("1"))
    runs = {run["name"]: run for run in report["probes"][0]["runs"]}
    assert runs["talk"]["stdout_dropped_bytes"] == OUTPUT_CAP + 10 - LINE_CAP
    assert runs["talk"]["stderr_dropped_bytes"] == 20
    assert [f["fault"] for f in runs["talk"]["protocol_faults"]] == [f for _, f, _ in
                                                                     MALFORMED[:2]]
    bounds = {"stdout_dropped_bytes", "stderr_dropped_bytes", "stopped", "protocol_faults"}
    assert not bounds & set(runs["plain"]) and "stopped" not in runs["talk"]


def test_a_stopped_run_did_not_finish_by_itself() -> None:
    """Fails on the old code: RunRecord had no stopped (a stop would have passed as finished)."""
    run = RunRecord(name="r", invocation=Invocation("r", "p"), argv=[], env={}, exit_code=None,
                    timed_out=False, duration=1.0, stdout="", stderr="",
                    output=Output([], []), session_id=None, seqs=(0, 0),
                    stopped="the sandbox holds 5 GB (at most 4)")
    checks = Checks("p")
    harness_checks(Evidence(probe="p", client={}, runs={"r": run}, journal=[]), checks)
    finished = next(c for c in checks.results if c.id == "p.harness.r.finished")
    assert not finished.passed
    assert finished.observed == "stopped by the harness: the sandbox holds 5 GB (at most 4)"


def test_a_line_separator_inside_a_printed_string_does_not_cut_the_event() -> None:
    """Node's JSON.stringify writes U+2028 and U+2029 as they are, and the model's text can
    hold them (or U+0085): str.splitlines cut such an event in two, both halves unparsed."""
    text = "before\u2028middle\u2029after\x85end\x1c\x1d\x1e"
    stdout = json.dumps({"type": "result", "result": text}, ensure_ascii=False) + "\n"
    output = Output.from_json_lines(stdout)
    assert [e["result"] for e in output.events] == [text]
    assert not output.unparsed


def test_a_looping_clients_requests_keep_a_bounded_outline_in_the_report() -> None:
    """Before: each request's outline listed every message, so a client that asked 906 times,
    each request one message longer (2.1.37 in a stop-hook loop), wrote a 53 MB report that
    no reader accepts; the journal keeps every message."""
    def request(count: int) -> dict[str, Any]:
        return {"body": {"messages": [{"role": "user" if i % 2 == 0 else "assistant",
                                       "content": f"m{i}"} for i in range(count)]}}

    assert report_outline(request(OUTLINE_HEAD + OUTLINE_TAIL + 1)) == \
        message_outline(request(OUTLINE_HEAD + OUTLINE_TAIL + 1))  # one left out: all listed
    outline = report_outline(request(906))
    assert len(outline) == OUTLINE_HEAD + 1 + OUTLINE_TAIL
    assert outline[:OUTLINE_HEAD] == message_outline(request(906))[:OUTLINE_HEAD]
    assert outline[OUTLINE_HEAD] == f"… {906 - OUTLINE_HEAD - OUTLINE_TAIL} messages not " \
        "listed (the journal holds every one)"
    assert outline[-1] == "assistant: text 'm905'"
    sizes = [len(json.dumps(report_outline(request(n)))) for n in (100, 1000, 10_000)]
    assert max(sizes) - min(sizes) < 100  # bounded, whatever the length of the conversation
