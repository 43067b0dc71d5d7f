"""Streaming tool start: a tool_use block runs as soon as it is complete, while the rest of
the message still streams."""

from __future__ import annotations

from mockapi import Match, Message, Rule, Scenario, ToolUseBlock, text
from mockapi.script.replies import StreamStall
from probes.catalog.common import check_ended, tool_pairs
from probes.catalog.premises import HOOK_TOOL_IDS
from probes.catalog.tool_scheduling.windows import TIMELINE, tool_windows, unpaired
from probes.catalog.variants import answering, with_rules
from probes.core.checks import Checks
from probes.core.evidence import Evidence
from probes.core.probe import Claim, Counterfactual, Hooks, Invocation, Probe
from probes.core.provenance import from_analysis

__all__ = ["HOLD_SECONDS", "STREAMING", "STREAMING_PROBE", "STREAM_PROMPT", "STREAM_TOOL",
           "check_streaming"]

STREAMING = "probe.streaming-tool-start"
HOLD_SECONDS = 3.0
STREAM_PROMPT = "STREAMING_TOOL_START_PROMPT"
STREAM_TOOL = "toolu_streaming_start"


def _response_end(ev: Evidence, seq: int | None) -> float | None:
    return next((r["time"] for r in ev.journal
                 if r["type"] == "response_end" and r["seq"] == seq), None)


def check_streaming(ev: Evidence, c: Checks) -> None:
    first = ev.request("stream", 0)
    windows = tool_windows(ev)
    window = windows.get(STREAM_TOOL, {})
    released = _response_end(ev, first.get("seq"))
    c.that("tool-finished-before-message-end", STREAMING,
           f"the tool ran and finished while the mock held back message_delta/message_stop "
           f"for {HOLD_SECONDS}s after the tool_use block closed",
           passed=bool(window.get("end")) and released is not None
           and window["end"] < released,
           expected="PostToolUse before the message's end was sent",
           observed=unpaired(ev) or ("no PostToolUse for the tool" if not window.get("end") else
                     "the message end was never sent" if released is None else
                     "PostToolUse before the message end" if window["end"] < released else
                     "PostToolUse after the message end"),
           evidence=f"{TIMELINE}: hook_start of PostToolUse for {STREAM_TOOL} vs the "
                    "response_end of the run's first request")
    pairs = tool_pairs(ev.request("stream", 1))
    c.equal("result-in-next-request", STREAMING, "the early result is fed back once",
            expected=[STREAM_TOOL], observed=pairs["tool_result_ids"],
            evidence="request 2 tool_result ids")
    check_ended(c, STREAMING, ev, "stream", final_text="STREAMING_DONE", prefix="result")


def _block_held_open(p: Probe) -> Probe:
    held = Message(content=[ToolUseBlock(name="Read", id=STREAM_TOOL,
                                         input={"file_path": "{workspace}/early.txt"})],
                   stall=StreamStall(before_event="content_block_stop",
                                     seconds=HOLD_SECONDS))
    return with_rules(p, [answering(p, "held-tool-use", held)])


STREAMING_PROBE = Probe(
    name="streaming-tool-start",
    premises=(HOOK_TOOL_IDS,),
    revision=3,  # premises: a version lacking one is absent or not observable, never contradicted
    title="A tool_use block is executed as soon as it is complete, before the message ends",
    claims=(Claim(STREAMING, "The client starts executing a tool_use block at its "
                             "content_block_stop, while the rest of the message is still "
                             "streaming (before message_delta/message_stop).",
                  source=from_analysis(
                      "最关键的细节:模型仍在流式输出时,工具已经可以开始执行",
                      "这发生在整个 message_stop 到达之前。Waf 会同时等待“下一个模型"
                      "流事件”和“工具执行器有新结果可排出”。如果工具先产生 progress "
                      "或 result,它返回 tool_drain_tick,主循环立即把工具事件向 "
                      "UI/SDK 输出,然后继续消费模型流。", 185)),),
    scenario=Scenario(name="streaming-tool-start", rules=[
        Rule(id="final", match=Match(tool_result_for=STREAM_TOOL), reply=text("STREAMING_DONE")),
        Rule(id="held-tool-use", match=Match(last_user_text_contains=STREAM_PROMPT),
             reply=Message(content=[ToolUseBlock(name="Read", id=STREAM_TOOL,
                                                 input={"file_path": "{workspace}/early.txt"})],
                           stall=StreamStall(before_event="message_delta",
                                             seconds=HOLD_SECONDS))),
    ]),
    fixtures={"early.txt": "EARLY\n"},
    hooks=Hooks(),
    invocations=(Invocation("stream", STREAM_PROMPT),),
    check=check_streaming,
    boundaries=("One Read; tools whose permission needs a prompt are not covered.",),
    counterfactuals=(
        Counterfactual(
            "block-held-open",
            f"The mock holds the tool_use block itself open for {HOLD_SECONDS}s (before its "
            "content_block_stop) and then ends the message at once, so the block is complete only "
            "when the message ends: the tool cannot run while the message still streams.",
            (STREAMING,),
            _block_held_open),
    ),
)
