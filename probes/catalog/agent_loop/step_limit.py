"""The step limit: given N steps, the loop asks for N replies and says it stopped there."""

from __future__ import annotations

from dataclasses import replace

from mockapi import Message, Rule, Scenario, ToolUseBlock, text
from probes.catalog.agent_loop.common import RUN, STEP_LIMIT, _invocation, _requests, _started
from probes.core.checks import Checks
from probes.core.evidence import Evidence
from probes.core.probe import Claim, Counterfactual, Probe
from probes.core.provenance import project_expectation

__all__ = ["LIMIT", "STEP_PROBE", "STILL_CALLING", "check_steps"]

LIMIT = 3


# a stop reason telling that the last reply still asks for tools: the Messages API's, and the
# Vercel AI SDK's finishReason (what a driver reports of the run, probes.clients.loop_driver)
STILL_CALLING = ("tool_use", "tool-calls")


def check_steps(ev: Evidence, c: Checks) -> None:
    _started(ev, c)
    c.equal("requests", STEP_LIMIT, f"with a step limit of {LIMIT} the loop asks for {LIMIT} "
            "replies, although each asks for another tool call", expected=LIMIT,
            observed=len(_requests(ev)), evidence=f"run {RUN}: the journal")
    run = ev.run(RUN)
    result = (run.result if run else None) or {}
    said = bool(result) and (result.get("is_error") is True
                             or result.get("subtype") not in (None, "success")
                             or result.get("stop_reason") in STILL_CALLING)
    c.that("limit.said", STEP_LIMIT, "the loop says it stopped at its limit: its caller gets "
           "an error, or the last reply still asking for a tool, never a finished answer",
           passed=said, expected={"any of": ["is_error: true", "subtype other than success",
                                             f"stop_reason in {list(STILL_CALLING)}"]},
           observed={k: result.get(k) for k in ("subtype", "is_error", "stop_reason")}
           if result else "no result event", evidence=f"run {RUN}: the result event")


STEP_PROBE = Probe(
    name="loop.step-limit",
    title="The step limit: the loop stops after N model replies",
    claims=(Claim(STEP_LIMIT, f"Given its step limit N (N={LIMIT}) the loop asks for N replies "
                              "(each step it is given, and no more) and stops, even when the "
                              "last one calls a tool, and says so: its caller gets an error or "
                              "the last reply still asking for a tool, not a finished answer.",
                  project_expectation(
                      "each client documents its limit on model requests: the tool runners' "
                      "max_iterations, the Vercel AI SDK's stopWhen: stepCountIs(N), "
                      "pydantic-ai's UsageLimits(request_limit=N); the driver passes N to it; "
                      "and each tells its caller how the run ended (an error, a result "
                      "subtype, the last reply's stop reason or finishReason)",
                      "the client's own documentation of its step limit")),),
    scenario=Scenario(name="loop-step-limit", classifier="plain", rules=[
        Rule(id="calls", replies=[Message(content=[ToolUseBlock(
            id=f"toolu_lp_step_{i}", name="add", input={"a": i, "b": i})]) for i in range(5)]),
        Rule(id="done", reply=text("LP_STEP_DONE"))]),
    invocations=(_invocation("Keep adding.", max_turns=LIMIT),),
    check=check_steps,
    counterfactuals=(Counterfactual(
        "no-limit", "no step limit is given: the loop follows the script's five calls and its "
                    "answer (six replies), so it cannot stop at three",
        (STEP_LIMIT,), lambda p: replace(p, invocations=(_invocation("Keep adding."),))),),
)
