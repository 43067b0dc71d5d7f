"""Compaction: a prompt too long compacted and retried (or surfaced), the automatic compaction a
small context window brings, and the history a compaction needs (the compaction gate).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mockapi import ApiError, Match, Message, Rule, Scenario, api_error, prompt_too_long, text, tool_use
from mockapi.script.replies import PROMPT_TOO_LONG, Usage
from probes.catalog.common import body_text, check_ended, check_terminal, result_of
from probes.catalog.variants import answering, scripted_rule, with_rules, with_runs
from probes.core.checks import Checks
from probes.core.evidence import Evidence
from probes.core.premises import Premise
from probes.core.probe import Claim, Counterfactual, Invocation, Probe
from probes.core.provenance import baseline, from_analysis

__all__ = ["AUTO_COMPACT", "AUTO_COMPACT_PROBE", "COMPACTION_GATE", "FILLER_FILE", "GATE_COMPACTS",
           "GATE_PROBE", "GATE_TURNS", "GROUPS", "PTL_FAIL_PROBE", "PTL_FAIL_TURNS", "PTL_PROBE",
           "PTL_RECOVERED", "PTL_SURFACED", "PTL_TEXT", "SUMMARY", "check_auto_compact",
           "check_compaction_gate", "check_ptl_recovered", "check_ptl_surfaced"]


PTL_RECOVERED = "probe.prompt-too-long-reactive-compact"
PTL_SURFACED = "probe.prompt-too-long-surfaced"
AUTO_COMPACT = "probe.auto-compaction-window"

FILLER_FILE = "".join(f"{i:05d} conversation filler for the history\n" for i in range(20))

def _reads(prefix: str, count: int, last_usage: int | None = None) -> list[Message]:
    """``count`` Read turns (distinct files); the last one may report a large input."""
    turns = []
    for i in range(1, count + 1):
        usage = Usage(input_tokens=last_usage) if last_usage and i == count else Usage()
        turns.append(tool_use("Read", {"file_path": f"{{workspace}}/{prefix}{i}.txt"},
                              id=f"toolu_{prefix}{i}", usage=usage))
    return turns


def _read_chain(prefix: str, count: int, prompt: str, last_usage: int | None = None) -> list[Rule]:
    """Rules answering ``prompt`` with ``count`` Read turns, each after the previous result;
    they match by prompt and tool_result id, so several runs can share one scenario."""
    matches = [Match(last_user_text_contains=prompt),
               *(Match(tool_result_for=f"toolu_{prefix}{i}") for i in range(1, count))]
    return [Rule(id=f"{prefix.rstrip('-')}-read-{i}", match=match, reply=reply) for i, (match, reply)
            in enumerate(zip(matches, _reads(prefix, count, last_usage), strict=True), start=1)]


def _fillers(prefix: str, count: int) -> dict[str, str]:
    return {f"{prefix}{i}.txt": FILLER_FILE for i in range(1, count + 1)}


GROUPS = 4  # more than the client's compaction gate needs (see the compaction-gate probe)

# ---- prompt too long ---------------------------------------------------------------------

SUMMARY = "<summary>PTL_SUMMARY_MARKER</summary>"
# the API's wording; the client prints it capitalised ("Prompt is too long · …")
PTL_TEXT = "prompt is too long"


def _printed(ev: Evidence, run: str) -> str | None:
    """What a run printed (stdout, stderr) and its result text, lower-cased; None without it."""
    record = ev.run(run)
    if record is None:
        return None
    result = str(result_of(ev, run).get("result", ""))
    return "\n".join((record.stdout, record.stderr, result)).lower()


def _compaction_checks(c: Checks, claim: str, ev: Evidence, run: str, trigger: str) -> None:
    compactions = ev.requests(run, kind="compaction")
    c.that("compaction-request", claim, "the client asked for a summary",
           passed=len(compactions) >= 1, expected="at least one compaction request",
           observed=len(compactions), evidence="journal: compaction requests")
    record = ev.run(run)
    boundaries = record.output.of_type("system", "compact_boundary") if record else []
    c.equal("boundary-trigger", claim, f"a compact_boundary with trigger {trigger}",
            expected=[trigger],
            observed=[(b.get("compact_metadata") or {}).get("trigger") for b in boundaries],
            evidence=f"run {run}: stream-json compact_boundary events")


def check_ptl_recovered(ev: Evidence, c: Checks) -> None:
    main = ev.requests("ptl")
    rejected = [r.get("status") for r in main].count(400)
    c.equal("request-rejected", PTL_RECOVERED, "one request got the 400 prompt-too-long",
            expected=1, observed=rejected, evidence="journal: statuses of main requests")
    _compaction_checks(c, PTL_RECOVERED, ev, "ptl", "auto")
    retried: Mapping[str, Any] = main[-1] if main else {}
    c.contains("retry-after-compaction", PTL_RECOVERED,
               "the retried request starts from the summary", needle="PTL_SUMMARY_MARKER",
               haystack=body_text(retried), evidence="the last main request's messages")
    c.absent("error-not-surfaced", PTL_RECOVERED,
             "the prompt-too-long error never reaches the output, in any letter case",
             needle=PTL_TEXT, haystack=_printed(ev, "ptl"),
             evidence="run ptl: stdout, stderr and result.result, lower-cased")
    check_ended(c, PTL_RECOVERED, ev, "ptl", final_text="PTL_RECOVERED", prefix="result")


def _other_400(p: Probe) -> Probe:
    too_long = PROMPT_TOO_LONG.split(":")[0]
    turns = scripted_rule(p, "turns").reply_list()
    others = [api_error(400, "loopprobe: an ordinary invalid request")
              if isinstance(r, ApiError) and too_long in r.error.message else r for r in turns]
    assert others != turns, "the prompt-too-long reply was not found"
    return with_rules(p, [answering(p, "turns", *others)])


PTL_PROBE = Probe(
    name="prompt-too-long-recovered",
    revision=2,  # the final text where the result event's is empty
    title="400 prompt-too-long: reactive compaction and a retry; the error is not surfaced",
    claims=(Claim(PTL_RECOVERED, "A 400 'prompt is too long' makes the client compact "
                                 "reactively (compact_boundary trigger auto) and retry the "
                                 "turn; when that succeeds the error is not surfaced.",
                  source=from_analysis(
                      "Prompt-too-long 为什么不一定立刻显示",
                      "precomputed_compact_swap或reactive_compact_retry,同一逻辑turn"
                      "再次请求;原PTL不显示。", 261),
                  beyond_source=('The analysis lists gates before a reactive compaction (rapid-refill '
                                'breaker, a legal message group, the auto-compact/abort gate, a prior '
                                'attempt) and does not name the trigger; compaction of an eligible '
                                "history and trigger 'auto' are expected from the recorded behaviour.")),),
    scenario=Scenario(name="prompt-too-long-recovered", rules=[
        Rule(id="summary", match=Match(kind="compaction"), reply=text(SUMMARY)),
        Rule(id="turns", match=Match(),
             replies=[*_reads("ptl", GROUPS), prompt_too_long(), text("PTL_RECOVERED")]),
    ]),
    fixtures={f"ptl{i}.txt": FILLER_FILE for i in range(1, GROUPS + 1)},
    invocations=(Invocation("ptl", "PTL_PROMPT"),),
    check=check_ptl_recovered,
    counterfactuals=(
        Counterfactual(
            "ordinary-400",
            "The rejected request gets an ordinary 400 invalid_request_error instead of 'prompt is "
            "too long', so compacting cannot help and the client has no reason to.",
            (PTL_RECOVERED,),
            _other_400),
        Counterfactual(
            "compaction-too-long",
            "The summary request is itself rejected as too long, so reactive compaction cannot "
            "succeed: no boundary, no retry from a summary, and the error is surfaced.",
            (PTL_RECOVERED,),
            lambda p: with_rules(p, [answering(p, "summary", prompt_too_long(), repeat="always")])),
    ),
)


PTL_FAIL_TURNS = 2  # enough history for the client to try compacting (one turn is too few)


def check_ptl_surfaced(ev: Evidence, c: Checks) -> None:
    main = ev.requests("ptl-fails")
    c.equal("rejected-after-tool-turns", PTL_SURFACED,
            f"the request after {PTL_FAIL_TURNS} tool turns is the one rejected as too long",
            expected=[200] * PTL_FAIL_TURNS + [400], observed=[r.get("status") for r in main],
            evidence="journal: statuses of the main requests")
    compactions = ev.requests("ptl-fails", kind="compaction")
    c.that("compaction-tried-and-failed", PTL_SURFACED,
           "the client tries to compact, and the summary request is itself rejected",
           passed=bool(compactions) and all(r.get("status") == 400 for r in compactions),
           expected="at least one compaction request, each answered 400",
           observed=[r.get("status") for r in compactions] or "no compaction request",
           evidence="journal: compaction requests of run ptl-fails")
    check_terminal(c, PTL_SURFACED, ev, "ptl-fails", "prompt_too_long")
    c.equal("is-error", PTL_SURFACED, "the error is surfaced",
            expected=True, observed=result_of(ev, "ptl-fails").get("is_error"),
            evidence="run ptl-fails: result.is_error")
    result = str(result_of(ev, "ptl-fails").get("result", "")).lower()
    c.contains("error-text", PTL_SURFACED, "the result carries the prompt-too-long error",
               needle=PTL_TEXT, haystack=result if ev.run("ptl-fails") else None,
               evidence="run ptl-fails: result.result, lower-cased")


PTL_FAIL_PROBE = Probe(
    name="prompt-too-long-surfaced",
    title="400 prompt-too-long when compaction cannot help: the error is surfaced",
    claims=(Claim(PTL_SURFACED, "When reactive compaction fails, the prompt-too-long error is "
                                "surfaced with terminal reason prompt_too_long.",
                  source=from_analysis(
                      "Prompt-too-long 为什么不一定立刻显示",
                      "普通失败或不具备资格:才把原错误和可选compact failure detail交"
                      "给上层,terminal reason为\nprompt_too_long。", 261)),),
    scenario=Scenario(name="prompt-too-long-surfaced", rules=[
        *_read_chain("fail", PTL_FAIL_TURNS, "PTL_FAIL_PROMPT"),
        Rule(id="always-too-long", match=Match(kind=["main", "compaction"]),
             reply=prompt_too_long(), repeat="always"),
    ]),
    fixtures=_fillers("fail", PTL_FAIL_TURNS),
    invocations=(Invocation("ptl-fails", "PTL_FAIL_PROMPT"),),
    check=check_ptl_surfaced,
    boundaries=(f"The history holds {PTL_FAIL_TURNS} tool turns, so the client does try to "
                "compact; every later request, the summary request included, is rejected as "
                "too long.",),
    counterfactuals=(
        Counterfactual(
            "answered",
            "Every request is answered normally, so there is no prompt-too-long error to surface.",
            (PTL_SURFACED,),
            lambda p: with_rules(p, [answering(p, "always-too-long", text("ANSWERED_NORMALLY"))])),
    ),
)


# ---- auto-compaction ----------------------------------------------------------------------

def check_auto_compact(ev: Evidence, c: Checks) -> None:
    _compaction_checks(c, AUTO_COMPACT, ev, "auto", "auto")
    requests = ev.requests("auto", kind=None)
    kinds = [r.get("kind") for r in requests if r.get("kind") in ("main", "compaction")]
    expected = ["main"] * GROUPS + ["compaction", "main"]
    c.equal("compaction-before-next-call", AUTO_COMPACT,
            "the compaction happens between the large turn and the next model request",
            expected=expected, observed=kinds, evidence="journal: order of main and compaction requests")
    check_ended(c, AUTO_COMPACT, ev, "auto", final_text="AUTO_COMPACT_DONE", prefix="result")


AUTO_COMPACT_PROBE = Probe(
    name="auto-compaction-window",
    premises=(
        Premise("env", "CLAUDE_CODE_AUTO_COMPACT_WINDOW", "instrument",
                "sets the context window the automatic compaction's threshold is taken from"),
    ),
    revision=3,  # premises: a version lacking one is absent or not observable, never contradicted
    title="Auto-compaction with a configured window runs inside the loop",
    claims=(Claim(AUTO_COMPACT, "With a configured context window, a turn whose reported "
                                "input_tokens exceed the threshold is followed by an automatic "
                                "compaction (trigger auto) before the next model request.",
                  source=from_analysis(
                      "3. 每次模型调用前都检查上下文治理",
                      "Auto-compact 位于 Agent Loop 内部,不是会话结束后的清理任务。每"
                      "次准备调用模型前都会执行", 151),
                  beyond_source=('The analysis says only that auto-compaction runs inside the loop before '
                                'each model call; the configured window '
                                '(CLAUDE_CODE_AUTO_COMPACT_WINDOW), the threshold against the reported '
                                "input_tokens, trigger 'auto' and the message-group gate are expected "
                                "from the client's documented settings and its recorded behaviour on "
                                '2.1.235.')),),
    scenario=Scenario(name="auto-compaction-window", rules=[
        Rule(id="summary", match=Match(kind="compaction"),
             reply=text("<summary>AUTO_SUMMARY_MARKER</summary>")),
        Rule(id="turns", match=Match(),
             replies=[*_reads("auto", GROUPS, last_usage=99000), text("AUTO_COMPACT_DONE")]),
    ]),
    fixtures={f"auto{i}.txt": FILLER_FILE for i in range(1, GROUPS + 1)},
    invocations=(Invocation("auto", "AUTO_COMPACT_PROMPT",
                            env={"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "100000"}),),
    check=check_auto_compact,
    boundaries=("The window is set with CLAUDE_CODE_AUTO_COMPACT_WINDOW=100000 and the "
                "reported input_tokens (99000) are scripted, not real.",
                f"The history holds {GROUPS} tool turns, more than the client's compaction "
                "gate needs: a single tool turn is not compacted at all (compact_error "
                "too_few_groups), two are (measured by the compaction-gate probe)."),
    counterfactuals=(
        Counterfactual(
            "default-window",
            "No context window is configured, so the 99000 reported input tokens stay far below "
            "the model's own auto-compaction threshold: nothing is compacted.",
            (AUTO_COMPACT,),
            lambda p: with_runs(p, changes={"auto": {"env": {}}})),
    ),
)


# ---- the compaction gate ----------------------------------------------------------------------

COMPACTION_GATE = "probe.compaction-group-gate"
GATE_TURNS = (1, 2, 3)
GATE_COMPACTS = {1: False, 2: True, 3: True}  # one tool turn is too few message groups


def _compaction_outcome(ev: Evidence, run: str) -> dict[str, Any] | None:
    record = ev.run(run)
    if record is None:
        return None
    failed = [e.get("compact_error") for e in record.output.of_type("system", "status")
              if e.get("compact_result") == "failed"]
    return {"compacted": bool(record.output.of_type("system", "compact_boundary")),
            "summary_requests": len(ev.requests(run, kind="compaction")),
            "compact_error": failed[0] if failed else None}


def check_compaction_gate(ev: Evidence, c: Checks) -> None:
    for trigger in ("reactive", "auto"):
        for turns in GATE_TURNS:
            run, compacts = f"{trigger}-{turns}", GATE_COMPACTS[turns]
            outcome = _compaction_outcome(ev, run)
            c.that(f"{run}.compacted", COMPACTION_GATE,
                   f"a history of {turns} tool turn(s) is {'' if compacts else 'not '}compacted "
                   f"({trigger})",
                   passed=outcome is not None and outcome["compacted"] == compacts
                   and (outcome["summary_requests"] > 0) == compacts,
                   expected={"compacted": compacts}, observed=outcome,
                   evidence=f"run {run}: stream-json compact_boundary and status events; "
                            "journal: summary requests")
    check_terminal(c, COMPACTION_GATE, ev, "reactive-1", "prompt_too_long")


def _gate_rules() -> list[Rule]:
    rules = [Rule(id="summary", match=Match(kind="compaction"), repeat="always",
                  reply=text("<summary>GATE_SUMMARY_MARKER</summary>"))]
    for turns in GATE_TURNS:
        reactive, auto = f"gate-reactive-{turns}-", f"gate-auto-{turns}-"
        rules += [*_read_chain(reactive, turns, f"GATE_REACTIVE_{turns}_PROMPT"),
                  Rule(id=f"{reactive}end", match=Match(tool_result_for=f"toolu_{reactive}{turns}"),
                       replies=[prompt_too_long(), text(f"GATE_REACTIVE_{turns}_DONE")]),
                  *_read_chain(auto, turns, f"GATE_AUTO_{turns}_PROMPT", last_usage=99000),
                  Rule(id=f"{auto}end", match=Match(tool_result_for=f"toolu_{auto}{turns}"),
                       reply=text(f"GATE_AUTO_{turns}_DONE"))]
    # a client that compacts a history the others refuse retries from the summary alone: answer
    # it, so the gate check (not an unscripted request) tells what happened
    rules.append(Rule(id="after-summary", match=Match(), repeat="always",
                      reply=text("GATE_AFTER_SUMMARY")))
    return rules


GATE_PROBE = Probe(
    name="compaction-gate",
    revision=2,  # premises: a version lacking one is absent or not observable, never contradicted
    premises=(
        Premise("env", "CLAUDE_CODE_AUTO_COMPACT_WINDOW", "instrument",
                "sets the context window of the automatic compaction runs"),
    ),
    title="How much history the client compacts: one, two and three tool turns",
    claims=(Claim(COMPACTION_GATE,
                  "Compaction needs at least two message groups: with one tool turn of history "
                  "the client does not compact (compact_error too_few_groups; after a 400 "
                  "prompt-too-long the error is then surfaced with terminal reason "
                  "prompt_too_long); with two or three tool turns it compacts, both reactively "
                  "after a 400 prompt-too-long and automatically past a configured window.",
                  # the analysis (line 259) names a legal message group among the gates
                  # before a compaction but gives no count: the count is what 2.1.235 did
                  source=baseline(
                      "claude-code 2.1.235",
                      "one tool turn of history refused (compact_error too_few_groups, then "
                      "prompt_too_long after a 400), two and three tool turns compacted, both "
                      "reactively and past a configured window (reports/2.1.235/recovery.json, "
                      "probe compaction-gate)")),),
    scenario=Scenario(name="compaction-gate", rules=_gate_rules()),
    fixtures={name: FILLER_FILE for turns in GATE_TURNS for trigger in ("reactive", "auto")
              for name in _fillers(f"gate-{trigger}-{turns}-", turns)},
    invocations=tuple(
        Invocation(f"{trigger}-{turns}", f"GATE_{trigger.upper()}_{turns}_PROMPT",
                   env={"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "100000"} if trigger == "auto" else {})
        for trigger in ("reactive", "auto") for turns in GATE_TURNS),
    check=check_compaction_gate,
    boundaries=("reactive-N: after N Read turns the next request is rejected as too long; "
                "auto-N: the Nth Read reports 99000 input tokens against a 100000 window "
                "(CLAUDE_CODE_AUTO_COMPACT_WINDOW).",),
    counterfactuals=(
        Counterfactual(
            "summary-rejected",
            "Every summary request is itself rejected as too long, so no history, of any length, "
            "can be compacted.",
            (COMPACTION_GATE,),
            lambda p: with_rules(p, [answering(p, "summary", prompt_too_long(), repeat="always")])),
    ),
)
