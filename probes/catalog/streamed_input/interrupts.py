"""An interrupt written while a tool runs or while the model streams: what it ends, and a
session resumed after it.
"""

from __future__ import annotations

from mockapi import Match, Rule, Scenario, text, tool_use
from mockapi.script.replies import StreamStall
from probes.catalog.common import (
    body_text,
    check_ended,
    check_mentioned,
    last_user_locations,
    result_of,
    tool_pairs,
)
from probes.catalog.premises import STREAMED_INPUT
from probes.catalog.streamed_input.common import (
    SDK_DOCS,
    _control_response,
    _tool_results_printed,
    check_cancelled,
)
from probes.catalog.streamed_input.queue import CANCELLED_CLAIM
from probes.catalog.variants import answering, with_rules, with_runs, with_steps
from probes.core.checks import Checks
from probes.core.evidence import Evidence
from probes.core.probe import Claim, Counterfactual, Invocation, Probe
from probes.core.provenance import from_analysis, project_expectation
from probes.core.streamed import Step, StreamedInput, control_request

__all__ = ["BLOCK_CLAIM", "CANCEL_DECLARATIONS", "INTERRUPT_FINISHED", "INTERRUPT_PROMPT",
           "INTERRUPT_STARTED", "INTERRUPT_STREAMING_PROBE", "INTERRUPT_TOOL",
           "INTERRUPT_TOOLS_PROBE", "RESUME_ANSWER", "RESUME_CLAIM", "RESUME_PROMPT",
           "STREAM_CLAIM", "STREAM_PROMPT", "TOOLS_CLAIM", "check_interrupt_streaming",
           "check_interrupt_tools"]


INTERRUPT_PROMPT = "INTERRUPT_TOOLS_PROMPT"
INTERRUPT_TOOL = "toolu_interrupt_probe_bash"
INTERRUPT_STARTED = "interrupt-tool-started"
INTERRUPT_FINISHED = "interrupt-tool-finished"
RESUME_PROMPT = "INTERRUPT_RESUME_PROMPT"
RESUME_ANSWER = "INTERRUPT_RESUMED_ANSWER"
TOOLS_CLAIM = "probe.interrupt-during-tools"
BLOCK_CLAIM = "probe.interrupt-block-tool-completes"
# how a tool definition declares that an interrupt cancels it, minified as the client ships
# it (a method or an arrow); without it a tool is a block tool
CANCEL_DECLARATIONS = ('interruptBehavior(){return"cancel"}', 'interruptBehavior:()=>"cancel"')
RESUME_CLAIM = "probe.interrupted-session-resumable"

STREAM_PROMPT = "INTERRUPT_STREAM_PROMPT"
STREAM_CLAIM = "probe.interrupt-during-streaming"


def _bash_is_block(ev: Evidence, c: Checks) -> bool:
    """Static evidence of what the version declares: it has per-tool interrupt behaviour at
    all (else the claim is absent), and no tool of it declares cancel, so Bash is a block
    tool by the default (else which one Bash is cannot be told: not reached)."""
    if not check_mentioned(c, BLOCK_CLAIM, ev, "interruptBehavior",
                           "the per-tool interrupt behaviour (cancel or block)"):
        return False
    found = {needle: ev.mentions(needle) for needle in CANCEL_DECLARATIONS}
    if None in found.values():
        raise LookupError("the cancel declarations were not looked up: name them in the "
                          "probe's client_mentions")
    cancelling = [needle for needle, seen in found.items() if seen]
    return c.reach("bash-is-block", BLOCK_CLAIM,
                   "static evidence: no tool of the installed client declares the cancel "
                   "behaviour, so Bash is a block tool (undeclared means block)",
                   held=not cancelling, absent=False,
                   expected=f"none of {list(CANCEL_DECLARATIONS)} in the client's files",
                   observed="no cancel declaration" if not cancelling else
                   f"the client's files declare {cancelling}: which tools cancel, Bash among "
                   "them or not, the files do not say",
                   evidence="static: a byte search of the client's installed package files")


def check_interrupt_tools(ev: Evidence, c: Checks) -> None:
    c.equal("interrupt-acknowledged", TOOLS_CLAIM,
            "the client answered the interrupt control request with success",
            expected="success", observed=_control_response(ev, "interrupted", "loopprobe-1"),
            evidence="run interrupted: control_response events")
    c.equal("requests", TOOLS_CLAIM, "no model request after the interrupt: one in all",
            expected=1, observed=len(ev.requests("interrupted")), evidence="journal: main requests")
    result = result_of(ev, "interrupted")
    c.reports("terminal-reason", TOOLS_CLAIM, "the terminal reason is aborted_tools",
              expected="aborted_tools", observed=result.get("terminal_reason"),
              evidence="run interrupted: result.terminal_reason")
    c.equal("is-error", TOOLS_CLAIM, "the cancelled turn is reported as not successful",
            expected=True, observed=result.get("is_error"),
            evidence="run interrupted: result.is_error")
    _bash_is_block(ev, c)
    results = [b for b in _tool_results_printed(ev, "interrupted")
               if b.get("tool_use_id") == INTERRUPT_TOOL]
    c.equal("tool-result-is-its-output", BLOCK_CLAIM,
            "the block tool's tool_result is its own output, not a synthetic interrupted error",
            expected=[{"is_error": False}],
            observed=[{"is_error": bool(b.get("is_error"))} if not b.get("is_error") else
                      {"is_error": True, "content": str(b.get("content"))[:160]}
                      for b in results],
            evidence="run interrupted: stream-json user events")
    c.equal("tool-ran-to-end", BLOCK_CLAIM, "the block tool ran to its end",
            expected=True, observed=INTERRUPT_FINISHED in ev.workspace_files,
            evidence=f"workspace: {INTERRUPT_FINISHED}")
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
    premises=(STREAMED_INPUT,),
    revision=2,  # the final text where the result event's is empty
    title="An interrupt while a tool runs ends the turn as aborted_tools; the session resumes",
    claims=(
        Claim(TOOLS_CLAIM,
              "An interrupt control request while a tool runs cancels the turn: the client "
              "acknowledges it, makes no further model request, and the result says terminal "
              "reason aborted_tools and is_error.",
              source=from_analysis("有工具调用时的后半程",
                                   "abort?\n-> aborted_tools", 293),
              beyond_source="The analysis's terminal table maps aborted_tools to cancelled "
                            "(an error for the caller); that an interrupt control request is "
                            "such an abort is the Agent SDK's word (interrupt stops the "
                            "current execution)."),
        Claim(BLOCK_CLAIM,
              "A block tool (one that declares no interrupt behaviour; Bash where no tool of "
              "the version declares cancel) is not cancelled by an interrupt: it runs to its "
              "end and its tool_result is its own output, not a synthetic interrupted error.",
              source=from_analysis("新输入什么时候打断,什么时候排队",
                                   "真正收到 interrupt 后,只有 cancel 工具会得到合成的 "
                                   "user_interrupted result;block 工具继续完成。", 217),
              beyond_source="That a tool without a declaration is a block tool is the "
                            "analysis's line 216 ('没有声明、返回异常或无法解析时都按 block "
                            "处理'); which tools of a version declare cancel is read from its "
                            "installed files (static evidence), not from a run."),
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
    client_mentions=("interruptBehavior", *CANCEL_DECLARATIONS),
    boundaries=("The interrupt is written once the tool has started (it creates a file "
                "first); the tool would run 30 s more, so its end cannot come first.",
                "Only a block tool is probed: no version's files declare a cancel tool "
                "(the cancel half of the analysis's rule has nothing to run here)."),
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
        Counterfactual(
            "tool-fails-by-itself",
            "The tool ends on its own in error before its end (it exits 3 without making the "
            "end's file): whatever the interrupt does, the tool cannot have run to its end "
            "and its result is an error.",
            (BLOCK_CLAIM,),
            lambda p: with_rules(with_runs(p, keep=("interrupted",)), [
                answering(p, "run-tool", tool_use("Bash", {
                    "command": f"touch {INTERRUPT_STARTED}; sleep 3; exit 3",
                    "description": "a tool that fails by itself"}, id=INTERRUPT_TOOL))])),
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
    c.reports("terminal-reason", STREAM_CLAIM, "the terminal reason is aborted_streaming",
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
    premises=(STREAMED_INPUT,),
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
