"""``/goal``: a stop condition judged by an evaluator request after each turn.

Setting a goal installs a session-scoped Stop hook of the prompt kind: when the model ends
a turn, the client asks the model (a separate request, no tools, a JSON answer ``ok`` /
``reason`` / ``impossible``) whether the condition holds; ``ok: false`` blocks the stop and
the reason goes back to the model, ``ok: true`` lets the loop end. The ``impossible`` verdict
came later than /goal (2.1.139-2.1.142 offer the evaluator only ``ok`` and ``reason``): a
version whose evaluator is not offered it lacks that claim's feature, and the scenario answers
a model sent back after it, so such a run ends scripted.
"""

from __future__ import annotations

import json
from typing import Any

from mockapi import Match, Rule, Scenario, text
from probes.catalog.common import body_text, check_ended, last_user_locations
from probes.catalog.variants import answering, with_rules, with_runs
from probes.core.checks import Checks
from probes.core.evidence import Evidence
from probes.core.premises import Premise
from probes.core.probe import Claim, Counterfactual, Invocation, Probe
from probes.core.provenance import project_expectation

__all__ = ["ACHIEVED", "CONDITION", "EVALUATOR_SYSTEM", "GOAL_CLAIM", "GOAL_DOCS",
           "IMPOSSIBLE_ANSWER", "IMPOSSIBLE_CLAIM", "IMPOSSIBLE_CONDITION", "IMPOSSIBLE_REASON",
           "IMPOSSIBLE_SENT_BACK", "NOT_YET", "PROBE", "WORKING", "check_goal", "check_goal_accepted",
           "check_impossible_offered"]

EVALUATOR_SYSTEM = "evaluating a stop-condition hook"
CONDITION = "GOAL_CONDITION_MARKER appears in an answer"
WORKING = "GOAL_WORKING_ON_IT"
NOT_YET = "GOAL_NOT_MET_REASON"
ACHIEVED = "GOAL_CONDITION_MARKER"
IMPOSSIBLE_CONDITION = "GOAL_IMPOSSIBLE_CONDITION_MARKER holds"
IMPOSSIBLE_ANSWER = "GOAL_IMPOSSIBLE_FIRST_ANSWER"
IMPOSSIBLE_REASON = "GOAL_CANNOT_EVER_HOLD"
# the model's answer when a version sends it back after an impossible verdict
IMPOSSIBLE_SENT_BACK = "GOAL_IMPOSSIBLE_SENT_BACK_ANSWER"
GOAL_CLAIM = "probe.goal-evaluator-loop"
IMPOSSIBLE_CLAIM = "probe.goal-impossible-ends"
GOAL_DOCS = "https://code.claude.com/docs/en/goal"


def _verdict(ok: bool, reason: str, impossible: bool = False) -> str:
    answer: dict[str, Any] = {"ok": ok, "reason": reason}
    if impossible:
        answer["impossible"] = True
    return json.dumps(answer)


def _evaluations(ev: Evidence, run: str) -> list[Any]:
    return [r for r in ev.requests(run, kind=None)
            if EVALUATOR_SYSTEM in json.dumps((r.get("body") or {}).get("system"))]


def _sequence(ev: Evidence, run: str) -> list[str]:
    """Each request of the run in order: ``main`` or ``evaluator``."""
    evaluations = {r["seq"] for r in _evaluations(ev, run)}
    return ["evaluator" if r["seq"] in evaluations else str(r.get("kind"))
            for r in ev.requests(run, kind=None) if r.get("path") == "/v1/messages"]


def check_goal_accepted(ev: Evidence, c: Checks, run: str, claim: str) -> bool:
    """That this version has /goal: its init event lists goal among its slash commands (a
    client that prints no init event: a request reached the mock). Not listed, the claim is
    absent, said in the client's own answer to the command ("Unknown skill: goal")."""
    record = ev.run(run)
    init = next(iter(record.output.of_type("system", "init")), None) if record else None
    listed = init.get("slash_commands") if init else None
    said = (record.result or {}).get("result") if record else None
    accepted = "goal" in listed if isinstance(listed, list) else \
        bool(ev.requests(run, kind=None))
    return c.reach(f"{run}.goal-accepted", claim,
                   "this version knows /goal: its init event lists goal among its slash "
                   "commands",
                   held=accepted, absent=True,
                   expected="goal among the init event's slash_commands",
                   observed=("goal listed" if isinstance(listed, list) else
                             "no init event; a request reached the mock") if accepted else
                   f"the client answered {said!r}; goal not among its slash commands",
                   evidence=f"run {run}: the system init event's slash_commands and the result")


def check_impossible_offered(ev: Evidence, c: Checks) -> bool:
    """That this version's evaluator may answer ``impossible``: its request's output schema
    has the field, or its instructions show the shape. Neither: the claim's feature is
    absent (the evaluator can only say met or not met). No evaluator request: not judged
    here (the sequence check fails)."""
    evaluations = _evaluations(ev, "impossible")
    if not evaluations:  # nothing to tell it by: the run's own checks decide
        return True
    first: Any = evaluations[0]
    body = first.get("body") or {}
    config = body.get("output_config")
    schema = ((config.get("format") or {}).get("schema") or {}) \
        if isinstance(config, dict) else {}
    fields = sorted((schema.get("properties") or {}) if isinstance(schema, dict) else {})
    instructions = json.dumps(body.get("system"))
    offered = "impossible" in fields or '\\"impossible\\": true' in instructions
    return c.reach("impossible.verdict-offered", IMPOSSIBLE_CLAIM,
                   "this version's evaluator is offered an impossible verdict: its output "
                   "schema has the field, or its instructions show the shape",
                   held=offered, absent=True,
                   expected="'impossible' among the evaluator's output schema properties",
                   observed=f"output schema properties {fields}; impossible "
                            f"{'' if offered else 'not '}in its instructions",
                   evidence=f"request #{first.get('seq')} body.output_config and system")


def check_goal(ev: Evidence, c: Checks) -> None:
    check_goal_accepted(ev, c, "achieved", GOAL_CLAIM)
    if check_goal_accepted(ev, c, "impossible", IMPOSSIBLE_CLAIM):
        check_impossible_offered(ev, c)
    c.equal("sequence", GOAL_CLAIM,
            "after each model answer the client sends an evaluator request; the first "
            "verdict (not met) sends the model back to work, the second (met) ends the loop",
            expected=["main", "evaluator", "main", "evaluator"],
            observed=_sequence(ev, "achieved"),
            evidence="journal: requests of run achieved (evaluator = its system prompt)")
    evaluations = _evaluations(ev, "achieved")
    first: Any = evaluations[0] if evaluations else {}
    asked = body_text(first) or ""
    c.that("evaluator-sees-condition-and-answer", GOAL_CLAIM,
           "the evaluator request states the condition and carries the model's last answer",
           passed=CONDITION in asked and WORKING in asked,
           expected=f"{CONDITION!r} and {WORKING} in the evaluator request",
           observed=asked[-600:] or "no evaluator request",
           evidence=f"request #{first.get('seq')} messages")
    body = first.get("body") or {}
    c.equal("evaluator-has-no-tools", GOAL_CLAIM, "the evaluator is offered no tools",
            expected=[], observed=body.get("tools", "no evaluator request"),
            evidence=f"request #{first.get('seq')} body.tools")
    mains = ev.requests("achieved")
    second: Any = mains[1] if len(mains) > 1 else {}
    c.that("reason-sent-back", GOAL_CLAIM,
           "the verdict's reason is the last user turn of the next model request",
           passed=bool(last_user_locations(second, NOT_YET)),
           expected=f"{NOT_YET} in the last user message of the second main request",
           observed=last_user_locations(second, NOT_YET) or body_text(second),
           evidence=f"request #{second.get('seq')} messages")
    check_ended(c, GOAL_CLAIM, ev, "achieved", final_text=ACHIEVED, prefix="achieved")
    c.equal("impossible-sequence", IMPOSSIBLE_CLAIM,
            "a verdict that the condition can never hold ends the loop: no further model "
            "request",
            expected=["main", "evaluator"], observed=_sequence(ev, "impossible"),
            evidence="journal: requests of run impossible")
    check_ended(c, IMPOSSIBLE_CLAIM, ev, "impossible", final_text=IMPOSSIBLE_ANSWER,
                prefix="impossible")




def _evaluator(answer_contains: str) -> Match:
    """The evaluator's request when the answer it judges contains ``answer_contains``."""
    return Match(kind="side", system_contains=EVALUATOR_SYSTEM,
                 last_user_text_contains=answer_contains)


PROBE = Probe(
    name="goal-evaluator",
    premises=(
        Premise("command", "goal", "feature", "sets the goal the evaluator checks"),
    ),
    title="/goal: an evaluator request after each turn decides whether the loop goes on",
    claims=(
        Claim(GOAL_CLAIM,
              "With a goal set (/goal CONDITION), every end of a model turn is followed by an "
              "evaluator request (no tools) that states the condition and carries the last "
              "answer; a 'not met' verdict blocks the stop and its reason is sent back to the "
              "model in a new request, a 'met' verdict lets the run end with success.",
              source=project_expectation(
                  "/goal sets a completion condition; after each turn a small fast model "
                  "checks whether it holds: not yet met, Claude starts another turn instead of "
                  "returning control; met, the goal clears", GOAL_DOCS),
              beyond_source="The documentation says a model judges the condition after each "
                            "turn. That the judgement is one more Messages request without "
                            "tools, carrying the condition and the last answer, and that its "
                            "reason is the next request's last user turn, is what the client "
                            "announces when a goal is set ('A session-scoped Stop hook is now "
                            "active with condition ...'), first recorded on claude-code "
                            "2.1.235 (reports/2.1.235/goal.json)."),
        Claim(IMPOSSIBLE_CLAIM,
              "An evaluator verdict that the condition can never hold (impossible) ends the "
              "loop after that evaluation, without sending the model back.",
              source=project_expectation(
                  "the goal clears automatically once the condition is met or if the model "
                  "judges the condition impossible to satisfy", GOAL_DOCS),
              beyond_source="The 'impossible' field of the verdict is the evaluator's own "
                            "instructions (the JSON shapes in its system prompt); the "
                            "documentation says only that the goal clears."),
    ),
    scenario=Scenario(name="goal-evaluator", rules=[
        Rule(id="met", match=_evaluator(ACHIEVED + '"'),
             reply=text(_verdict(True, f"the answer is {ACHIEVED}"))),
        Rule(id="not-met", match=_evaluator(WORKING),
             reply=text(_verdict(False, f"{NOT_YET}: answer with {ACHIEVED}"))),
        # a version that sends the model back after an impossible verdict: met at once
        Rule(id="sent-back-met", match=_evaluator(IMPOSSIBLE_SENT_BACK),
             reply=text(_verdict(True, f"the answer is {IMPOSSIBLE_SENT_BACK}"))),
        Rule(id="impossible-verdict",
             match=_evaluator(IMPOSSIBLE_ANSWER),
             reply=text(_verdict(False, IMPOSSIBLE_REASON, impossible=True))),
        Rule(id="back-to-work", match=Match(last_user_text_contains=NOT_YET),
             reply=text(ACHIEVED)),
        Rule(id="sent-back", match=Match(last_user_text_contains=IMPOSSIBLE_REASON),
             reply=text(IMPOSSIBLE_SENT_BACK)),
        Rule(id="impossible-first", match=Match(last_user_text_contains=IMPOSSIBLE_CONDITION),
             reply=text(IMPOSSIBLE_ANSWER)),
        Rule(id="first", match=Match(last_user_text_contains=CONDITION), reply=text(WORKING)),
    ]),
    invocations=(Invocation("achieved", f"/goal {CONDITION}"),
                 Invocation("impossible", f"/goal {IMPOSSIBLE_CONDITION}")),
    check=check_goal,
    fingerprinted=False,
    # 2: the impossible verdict's reach (absent where the evaluator is not offered it), and
    # a model sent back after it answered (2.1.139-2.1.142 were harness errors at 1);
    # 3: the final text where the result event's is empty
    revision=3,
    boundaries=("/goal in print mode with the prompt as the command; the evaluator's verdicts "
                "are scripted JSON texts (the real service would answer under the request's "
                "output_config json_schema).",),
    counterfactuals=(
        Counterfactual(
            "no-goal",
            "The same prompts without /goal: no stop condition is set, so there is nothing to "
            "evaluate and each run ends after its first answer.",
            (GOAL_CLAIM, IMPOSSIBLE_CLAIM),
            lambda p: with_runs(p, changes={i.name: {"prompt": i.prompt.removeprefix("/goal ")}
                                            for i in p.invocations})),
        Counterfactual(
            "impossible-unflagged",
            "The evaluator answers the impossible run with a plain 'not met' (no impossible "
            "flag): the model is sent back with the reason, so the loop goes on after it.",
            (IMPOSSIBLE_CLAIM,),
            lambda p: with_runs(with_rules(p, [answering(p, "impossible-verdict", text(
                _verdict(False, IMPOSSIBLE_REASON)))]), keep=("impossible",))),
        Counterfactual(
            "met-at-once",
            "The evaluator answers 'met' to the first answer: the model is never sent back.",
            (GOAL_CLAIM,),
            lambda p: with_runs(with_rules(p, [answering(p, "not-met", text(
                '{"ok": true, "reason": "met at once"}'))]), keep=("achieved",))),
    ),
)
