"""The streamed-input conversation: steps at their moments, permission answers, closing stdin.

``Conversation`` is driven directly with events, and ``run_conversation`` against a small
stand-in process speaking the CLI's stream-json protocol (a protocol test of the harness,
not a claim about any client).
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from probes.core.streamed import PermissionAnswer, Step, StreamedInput, control_request, user_message
from probes.run.conversation import Conversation
from probes.run.process import run_conversation


class Wire:
    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []
        self.closed = False

    def write(self, text: str) -> None:
        assert text.endswith("\n")
        self.lines.append(json.loads(text))

    def close(self) -> None:
        self.closed = True


def _conversation(script: StreamedInput, files: set[str] | None = None,
                  context: dict[str, str] | None = None) -> tuple[Conversation, Wire]:
    wire = Wire()
    found = files if files is not None else set()
    return Conversation("PROMPT", script, wire.write, wire.close, lambda: 1.0,
                        lambda name: name in found, context), wire


def test_the_prompt_goes_first_and_unconditioned_steps_follow_at_once() -> None:
    conversation, wire = _conversation(StreamedInput(steps=(
        Step(user_message("SECOND")), Step(user_message("THIRD"), after_rule="r"))))
    assert [line["message"]["content"] for line in wire.lines] == ["PROMPT", "SECOND"]
    assert [line["uuid"] for line in wire.lines] == [
        "00000000-0000-4000-8000-000000000001", "00000000-0000-4000-8000-000000000002"]
    assert conversation.pending == [{"line": user_message("THIRD"),
                                     "when": "after a request answered by rule 'r' reached "
                                             "the mock"}]


def test_each_step_waits_for_its_moment_in_order() -> None:
    files: set[str] = set()
    conversation, wire = _conversation(StreamedInput(steps=(
        Step(user_message("A"), after_event={"type": "assistant"}),
        Step(control_request("interrupt"), after_file="started"),
        Step(user_message("C"), after_rule="later"))), files)
    conversation.on_request({"rule": "later"})  # not yet: B comes first
    conversation.on_event({"type": "assistant", "message": {}})
    conversation.on_tick()
    assert len(wire.lines) == 2
    files.add("started")
    conversation.on_tick()
    assert wire.lines[-1] == {"type": "control_request", "request_id": "loopprobe-1",
                              "request": {"subtype": "interrupt"}}
    conversation.on_request({"rule": "other"})
    assert len(wire.lines) == 3
    conversation.on_request({"rule": "later"})
    assert wire.lines[-1]["message"]["content"] == "C"
    assert [e["why"] for e in conversation.transcript][1:] == [
        "after the client printed an event including {'type': 'assistant'}",
        "after started appeared in the workspace",
        "after a request answered by rule 'later' reached the mock"]


def test_event_patterns_match_nested_fields() -> None:
    conversation, wire = _conversation(StreamedInput(steps=(
        Step(user_message("X"), after_event={"type": "system",
                                             "data": {"subtype": "task_started"}}),)))
    conversation.on_event({"type": "system", "data": {"subtype": "other"}})
    assert len(wire.lines) == 1
    conversation.on_event({"type": "system", "data": {"subtype": "task_started", "id": 1}})
    assert len(wire.lines) == 2


def test_stdin_closes_at_the_first_result_after_the_last_step_not_at_its_own_moment() -> None:
    conversation, wire = _conversation(StreamedInput(steps=(
        Step(user_message("NEXT TURN"), after_event={"type": "result"}),)))
    conversation.on_event({"type": "result", "result": "first"})
    assert not wire.closed and wire.lines[-1]["message"]["content"] == "NEXT TURN"
    conversation.on_event({"type": "result", "result": "second"})
    assert wire.closed and conversation.transcript[-1]["close"] is True


def test_a_horizon_closes_stdin_when_the_awaited_event_never_comes() -> None:
    now = [0.0]
    wire = Wire()
    conversation = Conversation("P", StreamedInput(close_on={"type": "result", "result": "X"},
                                                   close_after=10),
                                wire.write, wire.close, lambda: now[0], lambda _: False)
    conversation.on_event({"type": "result", "result": "other"})
    now[0] = 9.0
    conversation.on_tick()
    assert not wire.closed
    now[0] = 10.5
    conversation.on_tick()
    assert wire.closed
    assert "within 10 s" in conversation.transcript[-1]["why"]


def test_permission_requests_get_the_first_matching_answer_and_others_an_error() -> None:
    conversation, wire = _conversation(StreamedInput(permissions=(
        PermissionAnswer("Bash", "deny", "NO"),
        PermissionAnswer("*", "allow", updated_input={"file_path": "{workspace}/x"}))),
        context={"workspace": "/sandbox/workspace"})
    conversation.on_event({"type": "control_request", "request_id": "a",
                           "request": {"subtype": "can_use_tool", "tool_name": "Bash",
                                       "input": {"command": "ls"}}})
    conversation.on_event({"type": "control_request", "request_id": "b",
                           "request": {"subtype": "can_use_tool", "tool_name": "Write",
                                       "input": {"file_path": "y"}}})
    conversation.on_event({"type": "control_request", "request_id": "c",
                           "request": {"subtype": "hook_callback"}})
    responses = [line["response"] for line in wire.lines[1:]]
    assert responses[0] == {"subtype": "success", "request_id": "a",
                            "response": {"behavior": "deny", "message": "NO"}}
    assert responses[1]["response"] == {"behavior": "allow",
                                        "updatedInput": {"file_path": "/sandbox/workspace/x"}}
    assert responses[2]["subtype"] == "error" and "hook_callback" in responses[2]["error"]
    assert conversation.unanswered[0]["request_id"] == "c"


def test_an_unmatched_permission_request_is_denied_with_the_reason() -> None:
    script = StreamedInput(permissions=(PermissionAnswer("Read"),))
    assert script.answer("Bash").response({}) == {
        "behavior": "deny", "message": "no scripted permission answer for Bash"}


@pytest.mark.parametrize(("make", "message"), [
    (lambda: Step(user_message("x"), after_rule="r", after_file="f"),
     "a step waits for one moment; got after_rule, after_file"),
    (lambda: Step({"type": "control_response"}),
     "a step writes a user message or a control request; got a line of type "
     "'control_response'"),
    (lambda: PermissionAnswer("Bash", "deny", updated_input={}),
     "a denial carries no updated_input"),
    (lambda: PermissionAnswer("Bash", "maybe"),  # type: ignore[arg-type]
     "a permission answer is 'allow' or 'deny', got 'maybe'"),
])
def test_bad_declarations_say_what_was_expected(make: Any, message: str) -> None:
    with pytest.raises(ValueError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        make()


def test_a_write_to_a_closed_stdin_is_kept_with_its_error() -> None:
    def broken(_: str) -> None:
        raise BrokenPipeError("the client exited")

    conversation = Conversation("P", StreamedInput(), broken, lambda: None, lambda: 0.0,
                                lambda _: False)
    assert conversation.transcript[0]["write_error"] == "BrokenPipeError: the client exited"


# ---- run_conversation against a stand-in process ---------------------------------------------

STAND_IN = textwrap.dedent('''
    import json, sys
    def out(event):
        print(json.dumps(event), flush=True)
    prompt = json.loads(sys.stdin.readline())
    out({"type": "assistant", "message": {"content": prompt["message"]["content"]}})
    out({"type": "control_request", "request_id": "perm-1",
         "request": {"subtype": "can_use_tool", "tool_name": "Bash", "input": {}}})
    answer = json.loads(sys.stdin.readline())
    out({"type": "echo", "answer": answer["response"]["response"]})
    out({"type": "result", "result": "done"})
    rest = [json.loads(line) for line in sys.stdin]   # until stdin is closed
    out({"type": "after-close", "lines": len(rest)})
''')


def _stand_in(tmp_path: Path, body: str = STAND_IN) -> list[str]:
    script = tmp_path / "stand_in.py"
    script.write_text(body)
    return [sys.executable, str(script)]


def test_run_conversation_answers_requests_closes_at_the_result_and_keeps_everything(
        tmp_path: Path) -> None:
    kept: list[Conversation] = []

    def start(write: Any, close: Any) -> Conversation:
        conversation = Conversation("HELLO", StreamedInput(permissions=(
            PermissionAnswer("Bash", "deny", "NOPE"),)), write, close, lambda: 0.0,
            lambda _: False)
        kept.append(conversation)
        return conversation

    result = run_conversation(_stand_in(tmp_path), env={"PATH": "/usr/bin:/bin"}, cwd=tmp_path,
                              timeout=30, start=start, new_requests=lambda: [])
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert result.exit_code == 0 and not result.timed_out
    assert events[0]["message"]["content"] == "HELLO"
    assert events[2] == {"type": "echo", "answer": {"behavior": "deny", "message": "NOPE"}}
    assert events[-1] == {"type": "after-close", "lines": 0}
    assert [e.get("why") for e in kept[0].transcript] == [
        "the prompt, at start", "can_use_tool Bash: scripted deny",
        "stdin closed: the client printed an event including {'type': 'result'} after the "
        "last step"]


def test_run_conversation_kills_the_process_at_its_timeout(tmp_path: Path) -> None:
    hang = "import sys, time\nsys.stdin.readline()\nprint('{\"type\": \"x\"}', flush=True)\n" \
           "time.sleep(60)\n"
    kept: list[Conversation] = []

    def start(write: Any, close: Any) -> Conversation:
        kept.append(Conversation("P", StreamedInput(), write, close, lambda: 0.0,
                                 lambda _: False))
        return kept[0]

    result = run_conversation(_stand_in(tmp_path, hang), env={"PATH": "/usr/bin:/bin"},
                              cwd=tmp_path, timeout=1.5, start=start, new_requests=lambda: [])
    assert result.timed_out and result.exit_code is None
    assert json.loads(result.stdout) == {"type": "x"}
    assert kept[0].transcript[-1]["why"] == "stdin closed: the run's timeout"
