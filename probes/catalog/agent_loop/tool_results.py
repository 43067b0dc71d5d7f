"""Tool results: every call of a reply answered by its id, the results of one reply in one
user message, and a tool that raises answered with ``is_error``."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from mockapi import Match, Message, Rule, Scenario, ToolUseBlock, text
from probes.catalog.agent_loop.common import (
    ERROR,
    PAIRING,
    PARALLEL,
    RUN,
    _ended,
    _invocation,
    _last_message,
    _started,
    docs,
)
from probes.core.checks import Checks
from probes.core.evidence import Evidence, blocks_of_type
from probes.core.probe import Claim, Counterfactual, Probe

__all__ = ["CALLS", "ERROR_PROBE", "FAIL_ID", "PARALLEL_PROBE", "check_error", "check_parallel"]

CALLS = ("toolu_lp_a", "toolu_lp_b")


def _results(record: Any) -> list[dict[str, Any]]:
    """The tool_result blocks of a request's last message (what the loop just sent)."""
    last = _last_message(record)
    return [b for _, b in blocks_of_type({"body": {"messages": [last]}}, "tool_result")] \
        if last else []


def _text(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, list):
        return "".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return str(content or "")


def _output(block: dict[str, Any]) -> str:
    """A tool_result's output: the first line of its text. A loop may add its own notes
    after the tool's output (Claude Code appends a ``<system-reminder>`` block); the claim is
    that the result carries its call's output, not that it carries nothing else."""
    lines = _text(block).strip().splitlines()
    return lines[0].strip() if lines else ""


# ---- parallel calls: pairing, one message ---------------------------------------------------

def check_parallel(ev: Evidence, c: Checks) -> None:
    _started(ev, c)
    second = ev.request(RUN, 1, kind="main")
    results = _results(second)
    where = f"run {RUN}: the second request's last message"
    c.equal("results.ids", PAIRING, "the request after the tool_use reply answers each call "
            "with a tool_result carrying its id", expected=sorted(CALLS),
            observed=sorted(str(r.get("tool_use_id")) for r in results) if second else None,
            evidence=where)
    c.equal("results.ran", PAIRING, "each result carries its own call's output (add: 2+3, "
            "4+5), as its first line", expected={CALLS[0]: "5", CALLS[1]: "9"},
            observed={str(r.get("tool_use_id")): _output(r) for r in results}
            if second else None, evidence=f"{where}: the tool_result contents")
    last = _last_message(second)
    c.equal("results.one-message", PARALLEL, "both results travel in the one user message "
            "that follows the reply", expected={"role": "user", "tool_use_ids": sorted(CALLS)},
            observed={"role": last.get("role"), "tool_use_ids": sorted(
                str(r.get("tool_use_id")) for r in results)} if second else None,
            evidence=where)
    _ended(c, PAIRING, ev, "LP_PAIRED_DONE")


def _two_calls(*calls: ToolUseBlock) -> Scenario:
    return Scenario(name="loop-parallel", classifier="plain", rules=[
        Rule(id="calls", match=Match(turn=1), reply=Message(content=list(calls))),
        Rule(id="done", reply=text("LP_PAIRED_DONE"))])


PARALLEL_PROBE = Probe(
    name="loop.parallel-calls",
    revision=2,  # the final text where the result event's is empty
    title="Two tool calls in one reply: each answered by its id, both in the next user message",
    claims=(
        Claim(PAIRING, "The loop runs every tool_use of a reply and answers each, in the next "
                       "request, with a tool_result carrying its id and the tool's output.",
              docs("Handle tool calls", "agents-and-tools/tool-use/handle-tool-calls",
                   "tool_use_id: The id of the tool use request this is a result for.")),
        Claim(PARALLEL, "The results of one reply's calls go back together in the one user "
                        "message that follows it.",
              docs("Parallel tool use", "agents-and-tools/tool-use/parallel-tool-use",
                   "无论您使用哪种策略，都要为每个 tool_use 块返回一个 tool_result，并将它们全部"
                   "放在下一条用户消息中 (zh-CN page; in English: whatever strategy you use, "
                   "return one tool_result per tool_use block and put them all in the next "
                   "user message)")),
    ),
    scenario=_two_calls(ToolUseBlock(id=CALLS[0], name="add", input={"a": 2, "b": 3}),
                        ToolUseBlock(id=CALLS[1], name="add", input={"a": 4, "b": 5})),
    invocations=(_invocation("Add 2+3 and 4+5."),),
    check=check_parallel,
    counterfactuals=(Counterfactual(
        "one-call", "the reply has one tool_use only: the second result, and the pair in one "
                    "message, cannot appear", (PAIRING, PARALLEL),
        lambda p: replace(p, scenario=_two_calls(
            ToolUseBlock(id=CALLS[0], name="add", input={"a": 2, "b": 3})))),),
)

# ---- a failing tool --------------------------------------------------------------------------

FAIL_ID = "toolu_lp_fail"


def check_error(ev: Evidence, c: Checks) -> None:
    _started(ev, c)
    second = ev.request(RUN, 1, kind="main")
    found = [r for r in _results(second) if r.get("tool_use_id") == FAIL_ID]
    result = found[0] if found else {}
    c.that("error.result", ERROR, "the call gets a tool_result with is_error: true naming "
           "the error", passed=result.get("is_error") is True and "LP_BOOM" in _text(result),
           expected={"tool_use_id": FAIL_ID, "is_error": True, "content": "contains LP_BOOM"},
           observed={"tool_use_id": result.get("tool_use_id"), "is_error":
                     result.get("is_error"), "content": _text(result)[:160]}
           if result else "no tool_result for the call",
           evidence=f"run {RUN}: the second request's last message")
    _ended(c, ERROR, ev, "LP_ERROR_DONE")


def _error_scenario(call: ToolUseBlock) -> Scenario:
    return Scenario(name="loop-tool-error", classifier="plain", rules=[
        Rule(id="call", match=Match(turn=1), reply=Message(content=[call])),
        Rule(id="done", reply=text("LP_ERROR_DONE"))])


ERROR_PROBE = Probe(
    name="loop.tool-error",
    revision=2,  # the final text where the result event's is empty
    title="A tool that raises: an is_error result, and the loop goes on",
    claims=(Claim(ERROR, "A tool that raises gives a tool_result with is_error: true carrying "
                         "the error, and the loop goes on to the model's next answer.",
                  docs("Handle tool calls", "agents-and-tools/tool-use/handle-tool-calls",
                       "Parse tool_use blocks, format tool_result responses, and handle errors "
                       "with is_error.")),),
    scenario=_error_scenario(ToolUseBlock(id=FAIL_ID, name="fail", input={"reason": "LP_BOOM"})),
    invocations=(_invocation("Call the failing tool."),),
    check=check_error,
    counterfactuals=(Counterfactual(
        "tool-succeeds", "the call goes to add, which cannot raise: no error result can appear",
        (ERROR,), lambda p: replace(p, scenario=_error_scenario(
            ToolUseBlock(id=FAIL_ID, name="add", input={"a": 1, "b": 1})))),),
)
