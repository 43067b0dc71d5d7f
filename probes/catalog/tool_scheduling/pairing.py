"""Pairing: results find their calls by tool_use_id, whatever order the calls finish in."""

from __future__ import annotations

from dataclasses import replace

from mockapi import Match, Message, Rule, Scenario, ToolUseBlock, text
from probes.catalog.common import check_ended, tool_pairs
from probes.catalog.premises import HOOK_TOOL_IDS, hook_tool_ids
from probes.catalog.tool_scheduling.windows import TIMELINE, tool_windows, unpaired
from probes.catalog.variants import answering, with_rules
from probes.core.checks import Checks
from probes.core.evidence import Evidence, blocks_of_type
from probes.core.probe import Claim, Counterfactual, Hooks, Invocation, Probe
from probes.core.provenance import from_analysis

__all__ = ["PAIRING", "PAIRING_PROBE", "PAIR_PROMPT", "check_pairing"]

PAIRING = "probe.result-pairing-by-id"

PAIR_PROMPT = "PAIRING_PROMPT"
SLOW, FAST = "toolu_pair_slow", "toolu_pair_fast"


def check_pairing(ev: Evidence, c: Checks) -> None:
    w, blind = tool_windows(ev), unpaired(ev)
    slow, fast = w.get(SLOW, {}), w.get(FAST, {})
    c.that("completed-out-of-order", PAIRING,
           "the second call finished before the first (the setup the claim needs)",
           passed=bool(slow.get("end") and fast.get("end") and fast["end"] < slow["end"]),
           expected="the fast call's PostToolUse before the slow call's",
           observed=blind or {"slow_end_after_fast_end": (slow["end"] > fast["end"])
                              if slow.get("end") and fast.get("end") else None},
           evidence=f"{TIMELINE}: hook_start PostToolUse of {FAST} vs {SLOW}")
    second = ev.request("pair", 1)
    results = {b.get("tool_use_id"): str(b.get("content"))
               for _, b in blocks_of_type(second, "tool_result")}
    c.that("paired-by-id", PAIRING, "each result is attached to its own call's id",
           passed="SLOW_FILE" in results.get(SLOW, "") and "FAST_FILE" in results.get(FAST, ""),
           expected={SLOW: "holds SLOW_FILE", FAST: "holds FAST_FILE"},
           observed={k: [m for m in ("SLOW_FILE", "FAST_FILE") if m in v] for k, v in results.items()},
           evidence="request 2 tool_results (which file's content each holds)")
    pairs = tool_pairs(second)
    c.that("exactly-one-each", PAIRING, "every tool_use has exactly one tool_result",
           passed=sorted(pairs["tool_result_ids"]) == sorted([SLOW, FAST])
           and not pairs["unpaired_uses"] and not pairs["orphan_results"],
           expected=sorted([SLOW, FAST]), observed=pairs, evidence="request 2 messages")
    check_ended(c, PAIRING, ev, "pair", final_text="PAIR_DONE", prefix="result")


def _same_id(p: Probe) -> Probe:
    both = Message(content=[
        ToolUseBlock(name="Read", id=SLOW, input={"file_path": "{workspace}/slow.txt"}),
        ToolUseBlock(name="Read", id=SLOW, input={"file_path": "{workspace}/fast.txt"})])
    return with_rules(p, [answering(p, "two-reads", both)])


PAIRING_PROBE = Probe(
    name="result-pairing",
    premises=(HOOK_TOOL_IDS, hook_tool_ids("PostToolUse")),
    revision=3,  # premises: a version lacking one is absent or not observable, never contradicted
    title="Results pair by tool_use_id whatever the completion order",
    claims=(Claim(PAIRING, "Tool results are paired with their calls by tool_use_id, not by "
                           "completion order; every tool_use gets exactly one tool_result.",
                  source=from_analysis(
                      "工具并发不是“全部 Promise.all”",
                      "工具结果用 tool_use_id 配对,不依赖完成顺序。", 211)),),
    scenario=Scenario(name="result-pairing", rules=[
        Rule(id="final", match=Match(tool_result_for=SLOW), reply=text("PAIR_DONE")),
        Rule(id="two-reads", match=Match(last_user_text_contains=PAIR_PROMPT), reply=Message(content=[
            ToolUseBlock(name="Read", id=SLOW, input={"file_path": "{workspace}/slow.txt"}),
            ToolUseBlock(name="Read", id=FAST, input={"file_path": "{workspace}/fast.txt"}),
        ])),
    ]),
    fixtures={"slow.txt": "SLOW_FILE\n", "fast.txt": "FAST_FILE\n"},
    hooks=Hooks({"PreToolUse": [{"action": "record", "input_contains": "slow.txt", "sleep": 2.0},
                          {"action": "record", "input_contains": "fast.txt", "sleep": 0.1}]}),
    invocations=(Invocation("pair", PAIR_PROMPT),),
    check=check_pairing,
    boundaries=("The completion order is forced by a PreToolUse hook that delays the first call.",),
    counterfactuals=(
        Counterfactual(
            "same-id-twice",
            "Both Read calls carry the same tool_use id, so their results cannot be told apart by "
            "id: no call has the fast call's id, and one id cannot carry both files' results.",
            (PAIRING,),
            _same_id),
        Counterfactual(
            "calls-finish-in-order",
            "The hook delays the second call instead of the first, so the calls finish in the "
            "order they were issued: pairing by id cannot be told from pairing by completion "
            "order, and the setup the claim needs is missing.",
            (PAIRING,),
            lambda p: replace(p, hooks=Hooks({"PreToolUse": [
                {"action": "record", "input_contains": "slow.txt", "sleep": 0.1},
                {"action": "record", "input_contains": "fast.txt", "sleep": 2.0}]}))),
    ),
)
