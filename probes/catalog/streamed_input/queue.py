"""A user message written while a tool runs: it joins the running turn.
"""

from __future__ import annotations

from mockapi import Match, Rule, Scenario, text, tool_use
from probes.catalog.common import body_text, check_ended, last_user_locations, tool_pairs
from probes.catalog.premises import STREAMED_INPUT
from probes.catalog.streamed_input.common import (
    _events,
    _lifecycle,
    _stdin,
    _timeline,
    _tool_results_printed,
    _written_uuid,
    check_lifecycle_emitted,
)
from probes.catalog.variants import with_steps
from probes.core.checks import Checks
from probes.core.evidence import Evidence
from probes.core.probe import Claim, Counterfactual, Invocation, Probe
from probes.core.provenance import from_analysis
from probes.core.streamed import Step, StreamedInput, user_message

__all__ = ["ABSORBED_CLAIM", "CANCELLED_CLAIM", "QUEUED", "QUEUE_ANSWER", "QUEUE_CLAIM",
           "QUEUE_DONE", "QUEUE_OWN_TURN_ANSWER", "QUEUE_PROBE", "QUEUE_PROMPT", "QUEUE_STARTED",
           "QUEUE_TOOL", "check_queue"]


QUEUE_PROMPT = "QUEUE_PROBE_PROMPT"
QUEUED = "QUEUED_MID_TURN_MARKER"
QUEUE_TOOL = "toolu_queue_probe_bash"
QUEUE_STARTED = "queue-tool-started"
QUEUE_DONE = "QUEUE_TOOL_DONE"
QUEUE_ANSWER = "QUEUE_PROBE_ANSWER"
QUEUE_OWN_TURN_ANSWER = "QUEUE_MESSAGE_OWN_TURN_ANSWER"
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
    check_lifecycle_emitted(ev, c, "queue", ABSORBED_CLAIM)
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
    premises=(STREAMED_INPUT,),
    revision=2,  # the final text where the result event's is empty
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
        # A client that also (or only) sends the message as a turn of its own is answered, so
        # the run ends and one-turn fails with what it did, rather than the script ending it
        # (2.0.77 absorbs the message beside the tool's result and then sends it again).
        Rule(id="message-as-own-turn", match=Match(last_user_text_contains=QUEUED),
             reply=text(QUEUE_OWN_TURN_ANSWER)),
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
        # the scenario's message-as-own-turn rule answers the late message
        lambda p: with_steps(p, "queue", Step(user_message(QUEUED),
                                              after_event={"type": "result"}))),),
)
