"""Streamed input: what a caller writes while the loop runs, as the Agent SDK does.

Every run here reads stream-json on stdin (``probes.core.streamed``): a user message written
while a tool runs, an ``interrupt`` while a tool runs or while the model streams, the
client's ``can_use_tool`` requests answered by the caller, and ``set_model`` /
``set_permission_mode`` between turns.
"""

from __future__ import annotations

from typing import Any

from mockapi import Match, Rule, Scenario, text, tool_use
from mockapi.replies import StreamStall
from probes.catalog.common import body_text, check_ended, last_user_locations, result_of, tool_pairs
from probes.catalog.variants import answering, with_rules, with_runs, with_steps
from probes.core.checks import Checks
from probes.core.evidence import Evidence, blocks_of_type
from probes.core.probe import Claim, Counterfactual, Invocation, Probe
from probes.core.provenance import from_analysis, project_expectation
from probes.core.streamed import PermissionAnswer, Step, StreamedInput, control_request, user_message

__all__ = ["ABSORBED_CLAIM", "ALLOWED_TOOL", "ASKED_CLAIM", "ASKED_FILE", "ASSISTANT",
           "BASH_DENIED_INPUT", "CANCELLED_CLAIM", "DENIED_FILE", "DENIED_TOOL", "DENY_CLAIM",
           "DENY_MESSAGE", "INTERRUPT_FINISHED", "INTERRUPT_PROMPT", "INTERRUPT_STARTED",
           "INTERRUPT_STREAMING_PROBE", "INTERRUPT_TOOL", "INTERRUPT_TOOLS_PROBE",
           "LIFECYCLE_CLAIM", "LOOP_DELAY", "LOOP_HORIZON", "LOOP_PROBE", "LOOP_PROMPT",
           "LOOP_TOOL", "LOOP_WAITING", "LOOP_WOKE", "MODEL_CLAIM", "MODEL_PROMPT",
           "MODEL_SECOND", "MODE_CLAIM", "MODE_FIRST_TOOL", "MODE_PROMPT", "MODE_SECOND",
           "MODE_SECOND_TOOL", "NEW_MODEL", "PERMISSIONS_PROBE", "PERMISSION_ANSWER",
           "PERMISSION_DOCS", "PERMISSION_PROMPT", "PROBES", "QUEUED", "QUEUE_ANSWER",
           "QUEUE_CLAIM", "QUEUE_DONE", "QUEUE_PROBE", "QUEUE_PROMPT", "QUEUE_STARTED",
           "QUEUE_TOOL", "READ_TOOL", "RESULT", "RESUME_ANSWER", "RESUME_CLAIM", "RESUME_PROMPT",
           "SDK_DOCS", "SET_MODEL_PROBE", "SET_MODE_PROBE", "STREAM_CLAIM", "STREAM_PROMPT",
           "TOOLS_CLAIM", "UPDATED_CLAIM", "UPDATED_CONTENT", "UPDATED_FILE", "WAKEUP_CLAIM",
           "WRITE_INPUT", "WRITE_UPDATED", "check_cancelled", "check_interrupt_streaming",
           "check_interrupt_tools", "check_loop", "check_permissions", "check_queue",
           "check_set_mode", "check_set_model", "tool_result_content"]

SDK_DOCS = "https://docs.claude.com/en/docs/agent-sdk/streaming-vs-single-mode"
PERMISSION_DOCS = "https://docs.claude.com/en/docs/agent-sdk/permissions"
ASSISTANT: dict[str, Any] = {"type": "assistant"}
RESULT: dict[str, Any] = {"type": "result"}


def _events(ev: Evidence, run: str, kind: str) -> list[dict[str, Any]]:
    record = ev.run(run)
    return [e for e in (record.output.events if record else []) if e.get("type") == kind]


def _stdin(ev: Evidence, run: str) -> list[dict[str, Any]]:
    record = ev.run(run)
    return record.stdin if record else []


def _control_requests(ev: Evidence, run: str, subtype: str) -> list[dict[str, Any]]:
    # the client's output is input: a request that is not an object is no such request
    return [e["request"] for e in _events(ev, run, "control_request")
            if isinstance(e.get("request"), dict) and e["request"].get("subtype") == subtype]


def _control_response(ev: Evidence, run: str, request_id: str) -> str | None:
    """The subtype (success, error) of the client's answer to one of our control requests."""
    for event in _events(ev, run, "control_response"):
        response = event.get("response") or {}
        if response.get("request_id") == request_id:
            return str(response.get("subtype"))
    return None


def _lifecycle(ev: Evidence, run: str) -> dict[str, list[str]]:
    """command_lifecycle states by command uuid, in the order printed."""
    states: dict[str, list[str]] = {}
    for event in _events(ev, run, "command_lifecycle"):
        states.setdefault(str(event.get("command_uuid")), []).append(str(event.get("state")))
    return states


def _written_uuid(ev: Evidence, run: str, needle: str) -> str | None:
    """The uuid of the user line the harness wrote that holds ``needle``."""
    for entry in _stdin(ev, run):
        line = entry.get("line") or {}
        if line.get("type") == "user" and needle in str(line.get("message")):
            return str(line.get("uuid"))
    return None


def _timeline(ev: Evidence, run: str, uuid: str | None, tool_use_id: str) -> list[str]:
    """The printed order of one command's states and of the tool's result."""
    record = ev.run(run)
    order = []
    for event in record.output.events if record else []:
        if event.get("type") == "command_lifecycle" and event.get("command_uuid") == uuid:
            order.append(str(event.get("state")))
        elif event.get("type") == "user" and any(
                isinstance(b, dict) and b.get("tool_use_id") == tool_use_id
                for b in (event.get("message") or {}).get("content") or []):
            order.append("tool_result")
    return order


def check_cancelled(ev: Evidence, c: Checks, run: str, prompt: str, claim: str) -> None:
    uuid = _written_uuid(ev, run, prompt)
    c.equal(f"{run}.prompt-cancelled", claim,
            "the interrupted turn's command (the prompt) ends cancelled",
            expected=["queued", "started", "cancelled"],
            observed=_lifecycle(ev, run).get(str(uuid), []),
            evidence=f"run {run}: command_lifecycle events of the prompt's uuid {uuid}")


def _tool_results_printed(ev: Evidence, run: str) -> list[dict[str, Any]]:
    record = ev.run(run)
    return record.output.tool_results() if record else []


# ---- a user message written while a tool runs ---------------------------------------------

QUEUE_PROMPT = "QUEUE_PROBE_PROMPT"
QUEUED = "QUEUED_MID_TURN_MARKER"
QUEUE_TOOL = "toolu_queue_probe_bash"
QUEUE_STARTED = "queue-tool-started"
QUEUE_DONE = "QUEUE_TOOL_DONE"
QUEUE_ANSWER = "QUEUE_PROBE_ANSWER"
QUEUE_CLAIM = "probe.mid-turn-input-absorbed"
ABSORBED_CLAIM = "probe.command-lifecycle-absorbed"
CANCELLED_CLAIM = "probe.command-lifecycle-cancelled"


def check_queue(ev: Evidence, c: Checks) -> None:
    requests = ev.requests("queue")
    first, second = ev.request("queue", 0), ev.request("queue", 1)
    written = [e for e in _stdin(ev, "queue") if QUEUED in str(e.get("line"))]
    c.equal("message-written", QUEUE_CLAIM,
            "the harness wrote the user message while the tool ran (after it started)",
            expected=1, observed=len(written), evidence="run queue: stdin")
    c.that("not-in-first-request", QUEUE_CLAIM,
           "the first request, sent before the message was written, does not carry it",
           passed=bool(first) and QUEUED not in (body_text(first) or ""),
           expected=f"no {QUEUED} in request 1", observed=body_text(first),
           evidence=f"request #{first.get('seq')} messages")
    c.that("absorbed-at-next-request", QUEUE_CLAIM,
           "the next model request (the one carrying the tool's result) carries the message "
           "in its last user turn",
           passed=bool(last_user_locations(second, QUEUED)),
           expected=f"{QUEUED} in the last user message of request 2",
           observed=last_user_locations(second, QUEUED) or body_text(second),
           evidence=f"request #{second.get('seq')} messages")
    pairs = tool_pairs(second) if second else {}
    c.equal("tool-result-paired", QUEUE_CLAIM,
            "the tool's result is in that request, paired with its call",
            expected=[], observed=pairs.get("unpaired_uses", "no request 2"),
            evidence=f"request #{second.get('seq')} tool_use/tool_result pairs")
    results = [b for b in _tool_results_printed(ev, "queue")
               if b.get("tool_use_id") == QUEUE_TOOL]
    c.that("tool-not-cancelled", QUEUE_CLAIM,
           "the running tool was not cancelled by the new message: its result is its output",
           passed=any(QUEUE_DONE in str(b.get("content")) and not b.get("is_error")
                      for b in results),
           expected=f"a tool_result holding {QUEUE_DONE}, not an error",
           observed=[{"content": str(b.get("content"))[:120], "is_error": b.get("is_error")}
                     for b in results] or "no tool_result event",
           evidence="run queue: stream-json user events")
    c.equal("one-turn", QUEUE_CLAIM,
            "the message joined the running turn instead of starting another: two model "
            "requests and one result in all",
            expected={"requests": 2, "results": 1},
            observed={"requests": len(requests), "results": len(_events(ev, "queue", "result"))},
            evidence="journal: main requests; run queue: result events")
    check_ended(c, QUEUE_CLAIM, ev, "queue", final_text=QUEUE_ANSWER, prefix="result")
    message = _written_uuid(ev, "queue", QUEUED)
    c.equal("lifecycle-absorbed", ABSORBED_CLAIM,
            "the mid-turn message is queued while the tool runs, started (absorbed) only "
            "after the tool's result, and completed with the turn",
            expected=["queued", "tool_result", "started", "completed"],
            observed=_timeline(ev, "queue", message, QUEUE_TOOL),
            evidence=f"run queue: printed order of the tool's result and the command_lifecycle "
                     f"events of the message's uuid {message}")
    prompt = _written_uuid(ev, "queue", QUEUE_PROMPT)
    states = _lifecycle(ev, "queue")
    c.equal("lifecycle-prompt", ABSORBED_CLAIM,
            "the prompt's own command goes queued, started, completed",
            expected=["queued", "started", "completed"],
            observed=states.get(str(prompt), []),
            evidence=f"run queue: command_lifecycle events of the prompt's uuid {prompt}")


QUEUE_PROBE = Probe(
    name="mid-turn-input-absorbed",
    title="A user message written while a tool runs joins the next model request",
    claims=(Claim(
        QUEUE_CLAIM,
        "A user message that arrives while a tool runs is queued, not sent into the running "
        "request and not a new turn: the running tool completes, and the message reaches "
        "the model in the next request of the same turn, in its last user message beside "
        "the tool's result.",
        source=from_analysis(
            "1. 在请求前吸收外部状态",
            "用户在工具运行期间追加的提示通常不是直接修改正在传输的 HTTP body。它会进入 "
            "message queue,在工具批次后被转换成 attachment,再参与下一轮模型请求。", 144),
        beyond_source="The analysis says the batch's tools are not cancelled by a new "
                      "submission when one of them blocks (Bash does); the run's single "
                      "result event is what 'the same turn' means from outside."),
        Claim(ABSORBED_CLAIM,
              "Commands written with a uuid are reported by command_lifecycle events: a "
              "message written while a tool runs is queued at once, started only when the "
              "tool batch has ended and it is absorbed into the turn, and completed with "
              "the turn; the prompt goes queued, started, completed.",
              source=from_analysis(
                  "command_lifecycle:队列命令的命运,不是回答完成度",
                  "started |\n命令被吸收到某个 turn", 394)),),
    scenario=Scenario(name="mid-turn-input-absorbed", rules=[
        Rule(id="after-tool", match=Match(tool_result_for=QUEUE_TOOL), reply=text(QUEUE_ANSWER)),
        Rule(id="run-tool", match=Match(last_user_text_contains=QUEUE_PROMPT),
             reply=tool_use("Bash", {
                 "command": f"touch {QUEUE_STARTED}; sleep 2; echo {QUEUE_DONE}",
                 "description": "a tool that runs for two seconds"}, id=QUEUE_TOOL)),
    ]),
    invocations=(Invocation(
        "queue", QUEUE_PROMPT, tools=("Bash",),
        streamed=StreamedInput(steps=(
            Step(user_message(f"{QUEUED}: also mention this"), after_file=QUEUE_STARTED),))),),
    check=check_queue,
    fingerprinted=False,
    boundaries=("The message is written once the tool has started (it creates a file "
                "first); the tool then runs two more seconds, the window in which the "
                "message must be read.",
                "Bash is a blocking tool (interruptBehavior block in the analysis): what a "
                "cancel-type tool does with a new message is not shown here."),
    counterfactuals=(Counterfactual(
        "message-after-the-turn",
        "The user message is written only after the turn's result, when no tool runs and no "
        "request is pending: it cannot join the running turn, so it starts a turn of its own.",
        (QUEUE_CLAIM, ABSORBED_CLAIM),
        lambda p: with_rules(with_steps(p, "queue", Step(user_message(QUEUED),
                                                         after_event={"type": "result"})),
                             added=[Rule(id="late-message",
                                     match=Match(last_user_text_contains=QUEUED),
                                     reply=text("LATE_MESSAGE_ANSWER"))])),),
)


# ---- interrupt -------------------------------------------------------------------------------

INTERRUPT_PROMPT = "INTERRUPT_TOOLS_PROMPT"
INTERRUPT_TOOL = "toolu_interrupt_probe_bash"
INTERRUPT_STARTED = "interrupt-tool-started"
INTERRUPT_FINISHED = "interrupt-tool-finished"
RESUME_PROMPT = "INTERRUPT_RESUME_PROMPT"
RESUME_ANSWER = "INTERRUPT_RESUMED_ANSWER"
TOOLS_CLAIM = "probe.interrupt-during-tools"
RESUME_CLAIM = "probe.interrupted-session-resumable"

STREAM_PROMPT = "INTERRUPT_STREAM_PROMPT"
STREAM_CLAIM = "probe.interrupt-during-streaming"


def check_interrupt_tools(ev: Evidence, c: Checks) -> None:
    c.equal("interrupt-acknowledged", TOOLS_CLAIM,
            "the client answered the interrupt control request with success",
            expected="success", observed=_control_response(ev, "interrupted", "loopprobe-1"),
            evidence="run interrupted: control_response events")
    c.equal("requests", TOOLS_CLAIM, "no model request after the interrupt: one in all",
            expected=1, observed=len(ev.requests("interrupted")), evidence="journal: main requests")
    results = [b for b in _tool_results_printed(ev, "interrupted")
               if b.get("tool_use_id") == INTERRUPT_TOOL]
    c.equal("tool-result-for-interrupted-tool", TOOLS_CLAIM,
            "the interrupted tool gets one tool_result, marked as an error",
            expected=[True], observed=[b.get("is_error") for b in results],
            evidence="run interrupted: stream-json user events")
    c.equal("tool-stopped", TOOLS_CLAIM, "the tool did not run to its end",
            expected=False, observed=INTERRUPT_FINISHED in ev.workspace_files,
            evidence=f"workspace: {INTERRUPT_FINISHED}")
    result = result_of(ev, "interrupted")
    c.equal("terminal-reason", TOOLS_CLAIM, "the terminal reason is aborted_tools",
            expected="aborted_tools", observed=result.get("terminal_reason"),
            evidence="run interrupted: result.terminal_reason")
    c.equal("is-error", TOOLS_CLAIM, "the cancelled turn is reported as not successful",
            expected=True, observed=result.get("is_error"),
            evidence="run interrupted: result.is_error")
    resumed = ev.request("resumed", 0)
    pairs = tool_pairs(resumed) if resumed else {}
    c.that("history-paired", RESUME_CLAIM,
           "the resumed session's request holds the interrupted call with its paired result",
           passed=bool(resumed) and INTERRUPT_TOOL in pairs.get("tool_use_ids", [])
           and not pairs.get("unpaired_uses") and not pairs.get("orphan_results"),
           expected=f"{INTERRUPT_TOOL} used once and answered in the next message",
           observed=pairs or "no request", evidence=f"request #{resumed.get('seq')} messages")
    c.that("new-prompt-last", RESUME_CLAIM, "the resumed run's prompt is the last user turn",
           passed=bool(last_user_locations(resumed, RESUME_PROMPT)),
           expected=f"{RESUME_PROMPT} in the last user message",
           observed=last_user_locations(resumed, RESUME_PROMPT) or body_text(resumed),
           evidence=f"request #{resumed.get('seq')} messages")
    check_ended(c, RESUME_CLAIM, ev, "resumed", final_text=RESUME_ANSWER, prefix="resumed")
    check_cancelled(ev, c, "interrupted", INTERRUPT_PROMPT, CANCELLED_CLAIM)


INTERRUPT_TOOLS_PROBE = Probe(
    name="interrupt-during-tools",
    title="An interrupt while a tool runs ends the turn as aborted_tools; the session resumes",
    claims=(
        Claim(TOOLS_CLAIM,
              "An interrupt control request while a tool runs cancels the turn: no further "
              "model request, the tool gets a tool_result marked as an error, and the result "
              "says terminal reason aborted_tools and is_error.",
              source=from_analysis("有工具调用时的后半程",
                                   "abort?\n-> aborted_tools", 293),
              beyond_source="The analysis's terminal table maps aborted_tools to cancelled "
                            "(an error for the caller). It also says only tools whose "
                            "interruptBehavior is 'cancel' get a synthesized result while "
                            "'block' tools run to their end; which one Bash is cannot be read "
                            "from outside, so that the Bash call is stopped and answered with "
                            "an error result is our expectation (the Agent SDK documents "
                            "interrupt as stopping the current execution)."),
        Claim(RESUME_CLAIM,
              "A session whose turn was interrupted during a tool resumes: the next request "
              "holds the interrupted tool_use with a paired tool_result and the new prompt, "
              "and the resumed run ends with success.",
              source=project_expectation(
                  "an interrupted turn must leave a transcript the API accepts (every "
                  "tool_use answered); SDK users resume sessions after interrupting them",
                  f"{SDK_DOCS} (interrupt) and "
                  "https://docs.claude.com/en/docs/agent-sdk/sessions")),
        Claim(CANCELLED_CLAIM,
              "The command of a turn ended by an interrupt is reported cancelled "
              "(command_lifecycle queued, started, cancelled).",
              source=from_analysis(
                  "command_lifecycle:队列命令的命运,不是回答完成度",
                  "cancelled |\n用户取消、interrupt sweep,或吸收它的 turn 因 abort/hard "
                  "failure 结束", 398))),
    scenario=Scenario(name="interrupt-during-tools", rules=[
        Rule(id="resumed", match=Match(last_user_text_contains=RESUME_PROMPT),
             reply=text(RESUME_ANSWER)),
        Rule(id="after-tool", match=Match(tool_result_for=INTERRUPT_TOOL),
             reply=text("THIS_REQUEST_SHOULD_NOT_HAPPEN")),
        Rule(id="run-tool", match=Match(last_user_text_contains=INTERRUPT_PROMPT),
             reply=tool_use("Bash", {
                 "command": f"touch {INTERRUPT_STARTED}; sleep 30; touch {INTERRUPT_FINISHED}",
                 "description": "a tool that would run for thirty seconds"},
                 id=INTERRUPT_TOOL)),
    ]),
    invocations=(
        Invocation("interrupted", INTERRUPT_PROMPT, tools=("Bash",),
                   streamed=StreamedInput(steps=(
                       Step(control_request("interrupt"), after_file=INTERRUPT_STARTED),))),
        Invocation("resumed", RESUME_PROMPT, tools=("Bash",), session="resume",
                   resume_from="interrupted"),
    ),
    check=check_interrupt_tools,
    fingerprinted=False,
    boundaries=("The interrupt is written once the tool has started (it creates a file "
                "first); the tool would run 30 s more, so its end cannot come first.",),
    counterfactuals=(
        Counterfactual(
            "no-interrupt",
            "Nothing is written after the prompt and the tool ends at once: there is nothing to "
            "cancel, so the turn goes on to the next request and completes.",
            (TOOLS_CLAIM, CANCELLED_CLAIM),
            lambda p: with_rules(with_runs(with_steps(p, "interrupted"), keep=("interrupted",)), [
                answering(p, "run-tool", tool_use("Bash", {
                    "command": f"touch {INTERRUPT_STARTED} "
                               f"{INTERRUPT_FINISHED}",
                    "description": "a tool that ends at once"}, id=INTERRUPT_TOOL))])),
        Counterfactual(
            "resume-as-new-session",
            "The second run starts a new session instead of resuming the interrupted one, so "
            "its request cannot hold the interrupted call.",
            (RESUME_CLAIM,),
            lambda p: with_runs(p, changes={"resumed": {"session": "new", "resume_from": None}})),
    ),
)


def check_interrupt_streaming(ev: Evidence, c: Checks) -> None:
    c.equal("requests", STREAM_CLAIM, "one model request, interrupted while it streams",
            expected=1, observed=len(ev.requests("streaming")), evidence="journal: main requests")
    first = ev.request("streaming", 0)
    ends = [r for r in ev.journal
            if r.get("type") == "response_end" and r.get("seq") == first.get("seq")]
    c.equal("stream-cut", STREAM_CLAIM,
            "the client left the stream before it was complete",
            expected="client_disconnected", observed=ends[0].get("reason") if ends else None,
            evidence=f"journal: response_end of request #{first.get('seq')}")
    result = result_of(ev, "streaming")
    c.equal("terminal-reason", STREAM_CLAIM, "the terminal reason is aborted_streaming",
            expected="aborted_streaming", observed=result.get("terminal_reason"),
            evidence="run streaming: result.terminal_reason")
    c.equal("is-error", STREAM_CLAIM, "the cancelled turn is reported as not successful",
            expected=True, observed=result.get("is_error"),
            evidence="run streaming: result.is_error")
    c.equal("no-tool-ran", STREAM_CLAIM,
            "the tool_use that would have come later in the stream never ran",
            expected=[], observed=[b.get("tool_use_id")
                                   for b in _tool_results_printed(ev, "streaming")],
            evidence="run streaming: stream-json user events")


INTERRUPT_STREAMING_PROBE = Probe(
    name="interrupt-during-streaming",
    title="An interrupt while the model streams ends the turn as aborted_streaming",
    claims=(Claim(
        STREAM_CLAIM,
        "An interrupt control request while the model's answer streams cancels the request "
        "(the client leaves the stream), runs no tool, and the result says terminal reason "
        "aborted_streaming and is_error.",
        source=from_analysis("终止状态字典", "aborted_streaming |\n模型流阶段被取消 | cancelled |",
                             358)),),
    scenario=Scenario(name="interrupt-during-streaming", rules=[
        Rule(id="stalled-stream", match=Match(last_user_text_contains=STREAM_PROMPT),
             reply=tool_use("Bash", {"command": "touch never-run", "description": "never"},
                            id="toolu_interrupt_stream_probe",
                            stall=StreamStall(before_event="content_block_start",
                                              seconds=60))),
    ]),
    invocations=(Invocation(
        "streaming", STREAM_PROMPT, tools=("Bash",),
        streamed=StreamedInput(steps=(
            Step(control_request("interrupt"), after_rule="stalled-stream"),))),),
    check=check_interrupt_streaming,
    fingerprinted=False,
    boundaries=("The stream pauses 60 s before its first content block; the interrupt is "
                "written once the request reached the mock, so it lands while the client "
                "waits on the stream.",),
    counterfactuals=(Counterfactual(
        "no-interrupt",
        "Nothing is written after the prompt and the stream does not pause: the answer arrives "
        "whole, its tool runs and the turn completes.",
        (STREAM_CLAIM,),
        lambda p: with_rules(with_steps(p, "streaming"), [
            answering(p, "stalled-stream", tool_use("Bash", {"command": "touch never-run",
                                                             "description": "never"},
                                                    id="toolu_interrupt_stream_probe"))],
            added=[Rule(id="after-tool", match=Match(tool_result_for="toolu_interrupt_stream_probe"),
                        reply=text("STREAM_NOT_INTERRUPTED"))])),),
)


# ---- the caller decides permissions (can_use_tool) ------------------------------------------

PERMISSION_PROMPT = "CAN_USE_TOOL_PROMPT"
DENIED_TOOL, ALLOWED_TOOL, READ_TOOL = ("toolu_permission_denied", "toolu_permission_allowed",
                                        "toolu_permission_read")
DENIED_FILE, ASKED_FILE, UPDATED_FILE = "denied.txt", "asked.txt", "updated.txt"
DENY_MESSAGE = "CALLER_DENIED_MARKER"
UPDATED_CONTENT = "UPDATED_BY_CALLER_MARKER"
PERMISSION_ANSWER = "CAN_USE_TOOL_ANSWER"
ASKED_CLAIM = "probe.can-use-tool-asked"
DENY_CLAIM = "probe.can-use-tool-deny"
UPDATED_CLAIM = "probe.can-use-tool-updated-input"
BASH_DENIED_INPUT = {"command": f"echo DENIED_COMMAND_RAN > {DENIED_FILE}",
                     "description": "write a file"}
WRITE_INPUT = {"file_path": f"{{workspace}}/{ASKED_FILE}", "content": "AS_THE_MODEL_ASKED\n"}
WRITE_UPDATED = {"file_path": f"{{workspace}}/{UPDATED_FILE}", "content": f"{UPDATED_CONTENT}\n"}


def _asked_for(tool_input: dict[str, Any]) -> str:
    """A call's command, or the name of the file it writes."""
    return str(tool_input.get("command") or tool_input.get("file_path", "")).rsplit("/", 1)[-1]


def check_permissions(ev: Evidence, c: Checks) -> None:
    asked = _control_requests(ev, "permissions", "can_use_tool")
    c.equal("asked-per-call", ASKED_CLAIM,
            "the client asked the caller once for each call that needs permission (Bash, "
            "Write) and not for the read-only Read",
            expected=[["Bash", BASH_DENIED_INPUT["command"]], ["Write", ASKED_FILE]],
            observed=[[a.get("tool_name"), _asked_for(a.get("input") or {})] for a in asked],
            evidence="run permissions: control_request events (can_use_tool)")
    results = {b.get("tool_use_id"): b for b in _tool_results_printed(ev, "permissions")}
    denied = results.get(DENIED_TOOL) or {}
    c.that("denied-error-result", DENY_CLAIM,
           "the denied call gets an error tool_result carrying the caller's message",
           passed=bool(denied.get("is_error")) and DENY_MESSAGE in str(denied.get("content")),
           expected=f"is_error true, content holding {DENY_MESSAGE}",
           observed={"is_error": denied.get("is_error"),
                     "content": str(denied.get("content"))[:160]} if denied else "no result",
           evidence="run permissions: stream-json user events")
    c.equal("denied-not-run", DENY_CLAIM, "the denied command did not run",
            expected=False, observed=DENIED_FILE in ev.workspace_files,
            evidence=f"workspace: {DENIED_FILE}")
    third = ev.request("permissions", 2)  # prompt -> Read; its result -> Bash; denial -> Write
    c.that("denial-sent-to-model", DENY_CLAIM,
           "the model's next request carries the denial as the call's result",
           passed=DENY_MESSAGE in str(tool_result_content(third, DENIED_TOOL)),
           expected=f"the tool_result for {DENIED_TOOL} holding {DENY_MESSAGE}",
           observed=tool_result_content(third, DENIED_TOOL),
           evidence=f"request #{third.get('seq')} messages")
    c.equal("updated-input-ran", UPDATED_CLAIM,
            "the allowed call ran with the caller's updated input: the updated file exists "
            "with the updated content, the asked-for file does not",
            expected={UPDATED_FILE: f"{UPDATED_CONTENT}\n", ASKED_FILE: None},
            observed={UPDATED_FILE: ev.workspace_files.get(UPDATED_FILE),
                      ASKED_FILE: ev.workspace_files.get(ASKED_FILE)},
            evidence="workspace files after the run")
    allowed = results.get(ALLOWED_TOOL) or {}
    c.equal("allowed-result-ok", UPDATED_CLAIM, "the allowed call's result is not an error",
            expected=False, observed=bool(allowed.get("is_error")) if allowed else "no result",
            evidence="run permissions: stream-json user events")
    check_ended(c, UPDATED_CLAIM, ev, "permissions", final_text=PERMISSION_ANSWER,
                prefix="result")


def tool_result_content(record: Any, tool_use_id: str) -> Any:
    for _, block in blocks_of_type(record, "tool_result") if record else []:
        if block.get("tool_use_id") == tool_use_id:
            return block.get("content")
    return None


PERMISSIONS_PROBE = Probe(
    name="can-use-tool",
    title="The caller decides permissions: asked per call, deny, allow with updated input",
    claims=(
        Claim(ASKED_CLAIM,
              "With --permission-prompt-tool stdio and the default permission mode, the "
              "client sends a can_use_tool control request for each tool call that needs "
              "permission (a Bash command, a file Write) with the call's input, and none for "
              "a read-only Read in the workspace.",
              source=project_expectation(
                  "the SDK's canUseTool callback is invoked for each tool call the "
                  "permission rules do not decide; read-only tools need no approval",
                  f"{PERMISSION_DOCS} and https://docs.claude.com/en/docs/claude-code/iam "
                  "(tiered permission system)")),
        Claim(DENY_CLAIM,
              "A can_use_tool answer 'deny' with a message stops the call: the command does "
              "not run, and the model receives an error tool_result carrying the message.",
              source=project_expectation(
                  "a denial returns the caller's message to the model as the tool's result",
                  f"{PERMISSION_DOCS} (PermissionResultDeny message)")),
        Claim(UPDATED_CLAIM,
              "A can_use_tool answer 'allow' with updatedInput runs the tool with the updated "
              "input, not the model's.",
              source=project_expectation(
                  "allow with updated input lets the caller modify the tool input before "
                  "execution", f"{PERMISSION_DOCS} (PermissionResultAllow updatedInput)")),
    ),
    scenario=Scenario(name="can-use-tool", rules=[
        Rule(id="answer", match=Match(tool_result_for=ALLOWED_TOOL),
             reply=text(PERMISSION_ANSWER)),
        Rule(id="write", match=Match(tool_result_for=DENIED_TOOL),
             reply=tool_use("Write", WRITE_INPUT, id=ALLOWED_TOOL)),
        Rule(id="bash", match=Match(tool_result_for=READ_TOOL),
             reply=tool_use("Bash", BASH_DENIED_INPUT, id=DENIED_TOOL)),
        Rule(id="read", match=Match(last_user_text_contains=PERMISSION_PROMPT),
             reply=tool_use("Read", {"file_path": "{workspace}/notes.txt"}, id=READ_TOOL)),
    ]),
    fixtures={"notes.txt": "NOTES\n"},
    invocations=(Invocation(
        "permissions", PERMISSION_PROMPT, tools=("Read", "Bash", "Write"),
        streamed=StreamedInput(permissions=(
            PermissionAnswer("Bash", "deny", DENY_MESSAGE),
            PermissionAnswer("Write", "allow", updated_input=WRITE_UPDATED)))),),
    check=check_permissions,
    fingerprinted=False,
    boundaries=("Permission mode default with no allow or deny rules configured: every "
                "decision that reaches the caller is the client's own classification.",),
    counterfactuals=(Counterfactual(
        "permissions-bypassed",
        "The run bypasses permissions (no --permission-prompt-tool): the caller is never asked, "
        "so it cannot deny the command or change the write.",
        (ASKED_CLAIM, DENY_CLAIM, UPDATED_CLAIM),
        lambda p: with_steps(p, "permissions", permissions=None)),),
)


# ---- set_model / set_permission_mode between turns ---------------------------------------

MODEL_PROMPT, MODEL_SECOND = "SET_MODEL_PROMPT", "SET_MODEL_SECOND_TURN"
NEW_MODEL = "claude-haiku-4-5"
MODEL_CLAIM = "probe.set-model-next-request"
MODE_PROMPT, MODE_SECOND = "SET_MODE_PROMPT", "SET_MODE_SECOND_TURN"
MODE_FIRST_TOOL, MODE_SECOND_TOOL = "toolu_mode_first_write", "toolu_mode_second_write"
MODE_CLAIM = "probe.set-permission-mode-next-call"


def check_set_model(ev: Evidence, c: Checks) -> None:
    requests = ev.requests("model")
    c.equal("acknowledged", MODEL_CLAIM, "the client answered set_model with success",
            expected="success", observed=_control_response(ev, "model", "loopprobe-1"),
            evidence="run model: control_response events")
    c.equal("models", MODEL_CLAIM,
            "the first turn's request uses the starting model, the next turn's the new one",
            expected=["claude-sonnet-4-5", NEW_MODEL],
            observed=[(r.get("body") or {}).get("model") for r in requests],
            evidence="journal: main requests, body.model")
    check_ended(c, MODEL_CLAIM, ev, "model", final_text="SET_MODEL_SECOND_ANSWER",
                prefix="result")


SET_MODEL_PROBE = Probe(
    name="set-model-mid-session",
    title="set_model between turns: the next request uses the new model",
    claims=(Claim(
        MODEL_CLAIM,
        "A set_model control request between two turns of one streamed session is "
        "acknowledged, and the next turn's model request names the new model.",
        source=project_expectation(
            "setModel changes the model of a streaming-input session for what follows",
            "https://docs.claude.com/en/docs/agent-sdk/typescript (Query.setModel)")),),
    scenario=Scenario(name="set-model-mid-session", rules=[
        Rule(id="second", match=Match(last_user_text_contains=MODEL_SECOND),
             reply=text("SET_MODEL_SECOND_ANSWER")),
        Rule(id="first", match=Match(last_user_text_contains=MODEL_PROMPT),
             reply=text("SET_MODEL_FIRST_ANSWER")),
    ]),
    invocations=(Invocation(
        "model", MODEL_PROMPT, tools=("Read",),
        streamed=StreamedInput(steps=(
            Step(control_request("set_model", model=NEW_MODEL), after_event=RESULT),
            Step(user_message(MODEL_SECOND)),))),),
    check=check_set_model,
    fingerprinted=False,
    counterfactuals=(Counterfactual(
        "no-set-model",
        "The second turn follows without a set_model request, so nothing can change its model.",
        (MODEL_CLAIM,),
        lambda p: with_steps(p, "model", Step(user_message(MODEL_SECOND),
                                              after_event={"type": "result"}))),),
)


def check_set_mode(ev: Evidence, c: Checks) -> None:
    asked = _control_requests(ev, "mode", "can_use_tool")
    c.equal("acknowledged", MODE_CLAIM,
            "the client answered set_permission_mode with success",
            expected="success", observed=_control_response(ev, "mode", "loopprobe-1"),
            evidence="run mode: control_response events")
    c.equal("asked-before-only", MODE_CLAIM,
            "the Write of the first turn (mode default) is put to the caller; the Write of the "
            "turn after acceptEdits is not",
            expected=["first.txt"],
            observed=[_asked_for(a.get("input") or {}) for a in asked],
            evidence="run mode: control_request events (can_use_tool)")
    c.equal("both-written", MODE_CLAIM, "both writes ran",
            expected=["first.txt", "second.txt"],
            observed=sorted(n for n in ev.workspace_files if n in ("first.txt", "second.txt")),
            evidence="workspace files after the run")
    check_ended(c, MODE_CLAIM, ev, "mode", final_text="SET_MODE_SECOND_ANSWER", prefix="result")


SET_MODE_PROBE = Probe(
    name="set-permission-mode-mid-session",
    title="set_permission_mode between turns: acceptEdits stops the prompts for edits",
    claims=(Claim(
        MODE_CLAIM,
        "A set_permission_mode acceptEdits control request between two turns is "
        "acknowledged and governs the next tool call: a file Write that was put to the "
        "caller (can_use_tool) in default mode runs without asking afterwards.",
        source=project_expectation(
            "setPermissionMode changes the permission mode of a streaming-input session; "
            "acceptEdits auto-accepts file edits",
            f"https://docs.claude.com/en/docs/agent-sdk/typescript (Query.setPermissionMode) "
            f"and {PERMISSION_DOCS} (permission modes)")),),
    scenario=Scenario(name="set-permission-mode-mid-session", rules=[
        Rule(id="second-answer", match=Match(tool_result_for=MODE_SECOND_TOOL),
             reply=text("SET_MODE_SECOND_ANSWER")),
        Rule(id="second-write", match=Match(last_user_text_contains=MODE_SECOND),
             reply=tool_use("Write", {"file_path": "{workspace}/second.txt",
                                      "content": "SECOND\n"}, id=MODE_SECOND_TOOL)),
        Rule(id="first-answer", match=Match(tool_result_for=MODE_FIRST_TOOL),
             reply=text("SET_MODE_FIRST_ANSWER")),
        Rule(id="first-write", match=Match(last_user_text_contains=MODE_PROMPT),
             reply=tool_use("Write", {"file_path": "{workspace}/first.txt",
                                      "content": "FIRST\n"}, id=MODE_FIRST_TOOL)),
    ]),
    invocations=(Invocation(
        "mode", MODE_PROMPT, tools=("Write",),
        streamed=StreamedInput(
            steps=(Step(control_request("set_permission_mode", mode="acceptEdits"),
                        after_event=RESULT),
                   Step(user_message(MODE_SECOND)),),
            permissions=(PermissionAnswer("Write", "allow"),))),),
    check=check_set_mode,
    fingerprinted=False,
    counterfactuals=(Counterfactual(
        "no-set-permission-mode",
        "The second turn follows without a set_permission_mode request: the mode stays default, "
        "so its write must be asked for too.",
        (MODE_CLAIM,),
        lambda p: with_steps(p, "mode", Step(user_message(MODE_SECOND),
                                             after_event={"type": "result"}))),),
)


# ---- /loop: a wake-up the session schedules for itself --------------------------------------

LOOP_PROMPT = "/loop LOOP_WAKE_MARKER"
LOOP_TOOL = "toolu_loop_schedule_wakeup"
LOOP_WAITING, LOOP_WOKE = "LOOP_WAITING_FOR_WAKEUP", "LOOP_WOKE_UP_ANSWER"
LOOP_DELAY = 60  # the least the client accepts (ScheduleWakeup clamps to [60, 3600])
# the wake-up is due within its delay plus the client's rounding up to its next minute
LOOP_HORIZON = LOOP_DELAY + 60 + 15
WAKEUP_CLAIM = "probe.loop-wakeup-fires"
LIFECYCLE_CLAIM = "probe.command-lifecycle-wakeup"


def check_loop(ev: Evidence, c: Checks) -> None:
    requests = ev.requests("loop")
    c.equal("requests", WAKEUP_CLAIM,
            "two requests for the scheduling turn, then one more: the woken turn",
            expected=3, observed=len(requests), evidence="journal: main requests")
    woken: Any = requests[2] if len(requests) > 2 else {}
    c.that("woken-with-the-loop-prompt", WAKEUP_CLAIM,
           "the woken turn's request has the scheduled /loop prompt as its last user turn",
           passed=bool(last_user_locations(woken, "LOOP_WAKE_MARKER")),
           expected="LOOP_WAKE_MARKER in the last user message of request 3",
           observed=last_user_locations(woken, "LOOP_WAKE_MARKER") or body_text(woken),
           evidence=f"request #{woken.get('seq')} messages")
    waited = (round(woken["time"] - requests[1]["time"], 1)
              if len(requests) > 2 else None)
    c.that("not-before-the-delay", WAKEUP_CLAIM,
           f"the woken turn starts no sooner than the {LOOP_DELAY} s asked for",
           passed=waited is not None and waited >= LOOP_DELAY,
           expected=f">= {LOOP_DELAY} s between request 2 and request 3",
           # the measured wait only when it is too short: a report is the same on every run
           observed=("no request 3" if waited is None else
                     f">= {LOOP_DELAY} s" if waited >= LOOP_DELAY else f"{waited} s"),
           evidence="journal: request times")
    results = [e.get("result") for e in _events(ev, "loop", "result")]
    c.equal("two-results", WAKEUP_CLAIM, "each turn ends with its own result",
            expected=[LOOP_WAITING, LOOP_WOKE], observed=results,
            evidence="run loop: result events")
    written = {str((e.get("line") or {}).get("uuid")) for e in _stdin(ev, "loop")}
    woken = [e for e in _events(ev, "loop", "command_lifecycle")
             if str(e.get("command_uuid")) not in written]
    lifecycle = [{"state": e.get("state"), "command": e.get("command_uuid")} for e in woken]
    c.equal("states", LIFECYCLE_CLAIM,
            "the woken turn's command (one the caller did not write) is reported started, "
            "then completed (an internal command: no queued state before it)",
            expected=["started", "completed"], observed=[e["state"] for e in lifecycle],
            evidence="run loop: command_lifecycle events of uuids the caller did not write")
    c.that("one-command", LIFECYCLE_CLAIM, "both states name the same command",
           passed=len(lifecycle) == 2 and lifecycle[0]["command"] == lifecycle[1]["command"]
           and lifecycle[0]["command"] is not None,
           expected="one command_uuid for started and completed",
           observed=[e["command"] for e in lifecycle] or "no command_lifecycle event",
           evidence="run loop: command_lifecycle events")
    run = ev.run("loop")
    printed = [e.get("type") for e in (run.output.events if run else [])
               if e.get("type") == "result" or (e.get("type") == "command_lifecycle"
                                                and str(e.get("command_uuid")) not in written)]
    c.equal("around-the-woken-turn", LIFECYCLE_CLAIM,
            "started comes before the woken turn's result and completed after it",
            expected=["result", "command_lifecycle", "result", "command_lifecycle"],
            observed=printed, evidence="run loop: order of printed events")


LOOP_PROBE = Probe(
    name="loop-wakeup",
    title="/loop in a streamed session: a scheduled wake-up starts a turn by itself",
    claims=(
        Claim(WAKEUP_CLAIM,
              "In a session whose input stays open, /loop's ScheduleWakeup (60 s, the least "
              "it accepts) makes the client start a new turn by itself, no sooner than the "
              "delay, with the scheduled /loop prompt as its user message.",
              source=from_analysis(
                  "Agent Loop 不等于 /loop 命令",
                  "tengu_loop_dynamic_wakeup_* 主要描述 /loop 定时提示和动态唤醒功能", 87),
              beyond_source="The analysis only names the dynamic wake-up and keeps it apart "
                            "from the loop; the delay and the re-entered prompt are what the "
                            "client's own ScheduleWakeup tool description promises."),
        Claim(LIFECYCLE_CLAIM,
              "The woken turn's command is reported to the stream-json consumer by "
              "command_lifecycle events: started before the turn's result and completed "
              "after it, for one command uuid; an internal command has no queued state.",
              source=from_analysis(
                  "command_lifecycle:队列命令的命运,不是回答完成度",
                  "stream-json/SDK 消费者还会收到 queued -> started -> terminal 的 "
                  "command_lifecycle", 389),
              beyond_source="The analysis adds that internally generated commands can lack "
                            "queued (line 395); that a wake-up is such a command is ours."),
    ),
    scenario=Scenario(name="loop-wakeup", rules=[
        Rule(id="woken", match=Match(last_user_text_contains="LOOP_WAKE_MARKER", turn=3),
             reply=text(LOOP_WOKE)),
        Rule(id="after-schedule", match=Match(tool_result_for=LOOP_TOOL),
             reply=text(LOOP_WAITING)),
        Rule(id="schedule", match=Match(last_user_text_contains="LOOP_WAKE_MARKER"),
             reply=tool_use("ScheduleWakeup", {"delaySeconds": LOOP_DELAY,
                                               "prompt": LOOP_PROMPT,
                                               "reason": "loopprobe: the least delay"},
                            id=LOOP_TOOL)),
    ]),
    invocations=(Invocation(
        "loop", LOOP_PROMPT, tools=("ScheduleWakeup",), timeout=200,
        streamed=StreamedInput(close_on={"type": "result", "result": LOOP_WOKE},
                               close_after=LOOP_HORIZON)),),
    check=check_loop,
    fingerprinted=False,
    boundaries=("The one probe that waits on a clock: the wake-up's own delay (60 s, which "
                "the client may round up to its next minute), the behaviour under test. "
                f"Input stays open until the woken turn's result, or {LOOP_HORIZON} s after "
                "the prompt (the delay, a minute of rounding and 15 s of slack).",
                "The dynamic mode only (ScheduleWakeup); /loop with an interval schedules a "
                "cron job (CronCreate) whose least period is a minute, not probed."),
    counterfactuals=(Counterfactual(
        "input-closed-after-the-turn",
        "Input is closed at the scheduling turn's result: the session ends before any wake-up "
        "is due, so no turn can start by itself.",
        (WAKEUP_CLAIM, LIFECYCLE_CLAIM),
        lambda p: with_steps(p, "loop", close_on={"type": "result"}, close_after=None)),),
)


PROBES = (QUEUE_PROBE, INTERRUPT_TOOLS_PROBE, INTERRUPT_STREAMING_PROBE, PERMISSIONS_PROBE,
          SET_MODEL_PROBE, SET_MODE_PROBE, LOOP_PROBE)
