"""/goal, /loop and command_lifecycle decided by what the run shows: evidence shaped as the
real versions left it (reports/2.1.117, 2.1.235, 2.1.307 and 2.1.332), checked and decided.

A version that does not know the command or tool is absent, in the client's own words; one
whose ScheduleWakeup refuses the call (its runtime gate off, the probe's input refused) is
not reached; one that has the feature, was triggered and behaves otherwise is contradicted;
a run that never prints command_lifecycle makes those claims absent.
"""

from __future__ import annotations

from typing import Any

import pytest

from probes.catalog.goal import GOAL_CLAIM, IMPOSSIBLE_CLAIM
from probes.catalog.goal import PROBE as GOAL_PROBE
from probes.catalog.streamed_input import (
    ABSORBED_CLAIM,
    LIFECYCLE_CLAIM,
    LOOP_PROBE,
    LOOP_TOOL,
    LOOP_WAITING,
    QUEUE_PROBE,
    WAKEUP_CLAIM,
)
from probes.core.evidence import Evidence, Output, RunRecord
from probes.core.probe import Probe
from probes.core.verdicts import check_evidence, decide_claim

GATE_OFF = ("Wakeup not scheduled. Either the /loop dynamic runtime gate is off or the loop "
            "reached its maximum duration — the loop has ended; do not re-issue.")
NOOP_REQUIRED = "`noop` is required when `stop` is not true."
SCHEDULED = "Next wakeup scheduled for 03:51:00 (in 80s)."
WAKEUP_TOOL = {"name": "ScheduleWakeup", "input_schema": {"type": "object", "properties": {
    "delaySeconds": {}, "prompt": {}, "reason": {}}}}


def _init(commands: list[str]) -> dict[str, Any]:
    return {"type": "system", "subtype": "init", "slash_commands": commands}


def _result(text: str) -> dict[str, Any]:
    return {"type": "result", "subtype": "success", "is_error": False, "result": text}


def _request(seq: int, tools: list[dict[str, Any]] | None = None,
             system: str = "main") -> dict[str, Any]:
    return {"type": "request", "seq": seq, "path": "/v1/messages", "kind": "main",
            "outcome": "replied", "body": {"system": system, "tools": tools or [],
                                           "messages": [{"role": "user", "content": "x"}]}}


def _evidence(probe: Probe, runs: dict[str, tuple[list[dict[str, Any]], tuple[int, int]]],
              journal: list[dict[str, Any]]) -> Evidence:
    invocations = {i.name: i for i in probe.invocations}
    return Evidence(probe=probe.name, client={}, journal=journal, runs={
        name: RunRecord(name=name, invocation=invocations[name], argv=[], env={}, exit_code=0,
                        timed_out=False, duration=1.0, stdout="", stderr="",
                        output=Output(events, []), session_id="s", seqs=seqs)
        for name, (events, seqs) in runs.items()})


def _verdicts(probe: Probe, ev: Evidence) -> dict[str, tuple[str, str]]:
    results, error = check_evidence(probe, ev)
    assert error is None, error
    every = [c.to_json() for c in results]
    return {claim.id: decide_claim([c for c in every if c["claim"] == claim.id], every)
            for claim in probe.claims}


# ---- /goal -------------------------------------------------------------------------------

def _goal(commands: list[str], answer: str, requests: int) -> Evidence:
    journal = [_request(seq) for seq in range(1, requests + 1)]
    return _evidence(GOAL_PROBE, {
        "achieved": ([_init(commands), _result(answer)], (0, requests)),
        "impossible": ([_init(commands), _result(answer)], (requests, requests))}, journal)


@pytest.mark.parametrize("answer", ["Unknown skill: goal", "Unknown command: /goal", ""])
def test_a_version_without_goal_is_absent_in_its_own_words(answer: str) -> None:
    verdicts = _verdicts(GOAL_PROBE, _goal(["loop", "compact"], answer, 0))
    for claim in (GOAL_CLAIM, IMPOSSIBLE_CLAIM):
        verdict, reason = verdicts[claim]
        assert verdict == "absent", reason
        assert repr(answer) in reason


def test_a_version_that_lists_goal_and_never_evaluates_is_contradicted() -> None:
    verdicts = _verdicts(GOAL_PROBE, _goal(["goal", "loop"], "GOAL_WORKING_ON_IT", 1))
    assert verdicts[GOAL_CLAIM][0] == "contradicted", verdicts[GOAL_CLAIM]
    assert "goal-evaluator.sequence" in verdicts[GOAL_CLAIM][1]


# ---- /loop -------------------------------------------------------------------------------

def _tool_result(text: str, is_error: bool | None = None) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": LOOP_TOOL, "content": text}
    if is_error is not None:
        block["is_error"] = is_error
    return {"type": "user", "message": {"role": "user", "content": [block]}}


def _lifecycle(*states: str) -> list[dict[str, Any]]:
    return [{"type": "command_lifecycle", "command_uuid": "u-prompt", "state": s}
            for s in states]


def _loop(answer: dict[str, Any] | None, lifecycle: bool = True,
          tools: list[dict[str, Any]] | None = None) -> Evidence:
    events = [_init(["loop"])]
    events += _lifecycle("queued", "started") if lifecycle else []
    events += [answer] if answer else []
    events += [_result(LOOP_WAITING)] + (_lifecycle("completed") if lifecycle else [])
    tools = [WAKEUP_TOOL] if tools is None else tools
    return _evidence(LOOP_PROBE, {"loop": (events, (0, 2))},
                     [_request(1, tools), _request(2, tools)])


@pytest.mark.parametrize(("answer", "words"), [
    (_tool_result(GATE_OFF), "the /loop dynamic runtime gate is off"),
    (_tool_result(NOOP_REQUIRED, is_error=True), NOOP_REQUIRED),
], ids=["gate-off", "input-refused"])
def test_a_wakeup_the_tool_refused_is_not_reached_in_its_words(answer: dict[str, Any],
                                                               words: str) -> None:
    verdicts = _verdicts(LOOP_PROBE, _loop(answer))
    for claim in (WAKEUP_CLAIM, LIFECYCLE_CLAIM):
        verdict, reason = verdicts[claim]
        assert verdict == "not_reached", reason
        assert words in reason


def test_a_version_without_schedulewakeup_is_absent() -> None:
    verdicts = _verdicts(LOOP_PROBE, _loop(None, tools=[{"name": "Bash"}]))
    for claim in (WAKEUP_CLAIM, LIFECYCLE_CLAIM):
        verdict, reason = verdicts[claim]
        assert verdict == "absent", reason
        assert "['Bash']" in reason


def test_a_scheduled_wakeup_that_never_fires_is_contradicted() -> None:
    verdicts = _verdicts(LOOP_PROBE, _loop(_tool_result(SCHEDULED)))
    assert verdicts[WAKEUP_CLAIM][0] == "contradicted", verdicts[WAKEUP_CLAIM]
    assert verdicts[LIFECYCLE_CLAIM][0] == "contradicted", verdicts[LIFECYCLE_CLAIM]


def test_a_scheduled_wakeup_in_a_run_without_command_lifecycle_is_absent_for_its_claim() -> None:
    verdicts = _verdicts(LOOP_PROBE, _loop(_tool_result(SCHEDULED), lifecycle=False))
    assert verdicts[WAKEUP_CLAIM][0] == "contradicted", verdicts[WAKEUP_CLAIM]
    verdict, reason = verdicts[LIFECYCLE_CLAIM]
    assert verdict == "absent", reason
    assert "no command_lifecycle event" in reason


def test_the_scheduling_reply_follows_the_declared_schedulewakeup_schema() -> None:
    """noop where the version's ScheduleWakeup declares it (2.1.268 on), not otherwise."""
    from mockapi.script.matching import facts_from_body
    rules = {r.id: r for r in LOOP_PROBE.scenario.rules}
    prompt = [{"role": "user", "content": "/loop LOOP_WAKE_MARKER"}]
    with_noop = {"name": "ScheduleWakeup", "input_schema": {"properties": {
        "delaySeconds": {}, "noop": {}, "prompt": {}, "reason": {}, "stop": {}}}}
    for tool, rule, noop in ((with_noop, "schedule-noop", {"noop": False}),
                             (WAKEUP_TOOL, "schedule", {})):
        facts = facts_from_body("/v1/messages", {"messages": prompt, "tools": [tool]}, {})
        first = next(r for r in LOOP_PROBE.scenario.rules
                     if not r.match.differences(facts, "main", 1, 1))
        assert first.id == rule
        reply = rules[rule].reply_list()[0].model_dump()
        inputs = [b["input"] for b in reply["content"] if b.get("type") == "tool_use"]
        assert inputs == [{"delaySeconds": 60, "prompt": "/loop LOOP_WAKE_MARKER",
                           "reason": "loopprobe: the least delay", **noop}]


# ---- command_lifecycle of a mid-turn message ---------------------------------------------

def test_a_queue_run_without_command_lifecycle_is_absent_not_contradicted() -> None:
    events = [_init([]), {"type": "user", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_queue_probe_bash",
         "content": "QUEUE_TOOL_DONE"}]}}, _result("QUEUE_PROBE_ANSWER")]
    ev = _evidence(QUEUE_PROBE, {"queue": (events, (0, 2))}, [_request(1, []), _request(2, [])])
    verdict, reason = _verdicts(QUEUE_PROBE, ev)[ABSORBED_CLAIM]
    assert verdict == "absent", reason
    assert "['result', 'system', 'user']" in reason
