"""Premises (probes.core.premises): each kind established from a run, or from the client's
files where no run can tell, in both directions; the verdict follows them (a feature's
premise missing: absent; an instrument's: not observable; nothing established: not
observable; only with every premise held does a failed check contradict); an unmeasured
value is not observable; a change between releases is named from the verdicts and the
premise checks that flipped (probes.core.changes)."""

from __future__ import annotations

from typing import Any

import pytest

from mockapi import Scenario
from probes.core.changes import CHANGE_KINDS, release_change
from probes.core.checks import Checks, Unmeasured
from probes.core.evidence import Evidence, Output, RunRecord
from probes.core.premises import Premise, establish
from probes.core.probe import CatalogError, Claim, Invocation, Probe
from probes.core.verdicts import check_evidence, decide_claim

CLAIM = "test.claim"


def _run(name: str = "run", *, argv: tuple[str, ...] = (), stdout: str = "", stderr: str = "",
         events: list[dict[str, Any]] | None = None, seqs: tuple[int, int] = (0, 1),
         prompt: str = "go", env: dict[str, str | None] | None = None) -> RunRecord:
    return RunRecord(name=name, invocation=Invocation(name, prompt, env=env or {}),
                     argv=list(argv), env={},
                     exit_code=0, timed_out=False, duration=1.0, stdout=stdout, stderr=stderr,
                     output=Output(events or [], []), session_id="s", seqs=seqs)


def _request(seq: int, tools: list[str] = ()) -> dict[str, Any]:  # type: ignore[assignment]
    return {"type": "request", "seq": seq, "path": "/v1/messages", "kind": "main",
            "outcome": "replied",
            "body": {"tools": [{"name": t} for t in tools], "messages": []}}


def _evidence(run: RunRecord | None = None, *, requests: int = 1, tools: list[str] = (),  # type: ignore[assignment]
              hooks: list[dict[str, Any]] | None = None,
              mentions: dict[str, bool] | None = None) -> Evidence:
    ev = Evidence(probe="p", client={"binary_sha256": "ab" * 32}, runs={"run": run or _run()},
                  journal=[_request(seq, tools) for seq in range(1, requests + 1)],
                  hook_calls=hooks or [])
    if mentions is not None:
        ev.client_mentions = {"binary_sha256": "ab" * 32, "files": 1, "found": mentions}
    return ev


# ---- each kind, from the run and from the files, both ways ---------------------------------

FLAG = Premise("flag", "--fork-session", "feature", "forks")


def test_a_flag_refused_by_the_client_is_missing_in_its_own_words() -> None:
    run = _run(argv=("claude", "--fork-session"),
               stderr="error: unknown option '--fork-session'\n")
    found = establish(FLAG, _evidence(run, requests=0, mentions={"--fork-session": True}))
    assert found.present is False
    assert "unknown option '--fork-session'" in found.observed


def test_a_flag_passed_to_a_run_that_reached_the_mock_is_present_even_if_never_listed() -> None:
    found = establish(FLAG, _evidence(_run(argv=("claude", "--fork-session")),
                                      mentions={"--fork-session": False}))
    assert found.present is True, found


def test_a_flag_no_run_passed_is_decided_by_the_client_s_files_both_ways() -> None:
    assert establish(FLAG, _evidence(mentions={"--fork-session": True})).present is True
    missing = establish(FLAG, _evidence(mentions={"--fork-session": False}))
    assert missing.present is False and "never mentions --fork-session" in missing.observed


HOOK_IDS = Premise("hook_input", "tool_use_id", "instrument", "pairs", event="PreToolUse",
                   static=False)


def test_a_hook_field_is_decided_by_the_recorded_hook_calls_both_ways() -> None:
    def call(value: Any) -> dict[str, Any]:
        return {"event": "PreToolUse", "input": {"tool_name": "Read", "tool_use_id": value}}
    assert establish(HOOK_IDS, _evidence(hooks=[call("toolu_1")])).present is True
    missing = establish(HOOK_IDS, _evidence(hooks=[call(None), call(None)]))
    assert missing.present is False and "none of the 2 hook calls of PreToolUse" in missing.observed
    # calls of another event decide nothing; a field of a name every version writes for
    # other reasons is never decided by the files
    undecided = establish(HOOK_IDS, _evidence(hooks=[{"event": "Stop", "input": {}}],
                                              mentions={}))
    assert undecided.present is None


def test_a_tool_is_decided_by_what_the_requests_offer_both_ways() -> None:
    tool = Premise("tool", "StructuredOutput", "feature", "answers the schema")
    assert establish(tool, _evidence(tools=["Read", "StructuredOutput"])).present is True
    assert establish(tool, _evidence(tools=["Read"])).present is False
    assert establish(tool, _evidence(requests=0)).present is None  # no request: undecided


def test_a_command_is_decided_by_the_client_s_answer_both_ways() -> None:
    goal = Premise("command", "goal", "feature", "sets the goal")
    refused = _run(prompt="/goal X", stdout='{"type":"result","result":"Unknown skill: goal"}')
    assert establish(goal, _evidence(refused, requests=0)).present is False
    assert establish(goal, _evidence(_run(prompt="/goal X"))).present is True


def test_an_event_printed_is_present_and_one_unprinted_is_asked_of_the_files() -> None:
    event = Premise("event", "system/command_lifecycle", "feature", "reports commands")
    printed = _run(events=[{"type": "system", "subtype": "command_lifecycle"}])
    assert establish(event, _evidence(printed)).present is True
    assert establish(event, _evidence(mentions={"command_lifecycle": False})).present is False


@pytest.mark.parametrize("kind", ["env", "setting", "hook_output"])
def test_what_a_version_ignores_silently_is_decided_by_its_files_both_ways(kind: str) -> None:
    premise = Premise(kind, "SOME_KNOB", "feature", "turns the knob")  # type: ignore[arg-type]
    assert establish(premise, _evidence(mentions={"SOME_KNOB": True})).present is True
    assert establish(premise, _evidence(mentions={"SOME_KNOB": False})).present is False
    assert establish(premise, _evidence()).present is None  # not searched: undecided


# ---- the verdict follows the premises ------------------------------------------------------

def _probe(*premises: Premise, observed: Any = "other") -> Probe:
    def check(ev: Evidence, c: Checks) -> None:
        c.equal("behaviour", CLAIM, "what the claim states", expected="same", observed=observed,
                evidence="test")
    return Probe(name="p", title="p", claims=(Claim(CLAIM, "a claim"),),
                 scenario=Scenario(name="p", rules=[]),
                 invocations=(Invocation("run", "go"),), check=check, premises=premises)


def _verdict(probe: Probe, ev: Evidence) -> tuple[str, str]:
    results, error = check_evidence(probe, ev)
    assert error is None
    every = [r.to_json() for r in results]
    return decide_claim([c for c in every if c["claim"] == CLAIM], every)


KNOB = Premise("env", "KNOB", "feature", "turns the feature on")
SETS_BOTH = _run(env={"KNOB": "1", "GAUGE": "1"})
GAUGE = Premise("env", "GAUGE", "instrument", "sets what the harness measures with")


@pytest.mark.parametrize(("found", "verdict"), [
    ({"KNOB": True, "GAUGE": True}, "contradicted"),  # every premise held: the check decides
    ({"KNOB": False, "GAUGE": True}, "absent"),  # the feature's premise missing
    ({"KNOB": True, "GAUGE": False}, "not_observable"),  # the instrument missing
    ({"KNOB": True}, "not_observable"),  # GAUGE not established either way
])
def test_a_failed_check_contradicts_only_with_every_premise_held(found: dict[str, bool],
                                                                 verdict: str) -> None:
    decided, reason = _verdict(_probe(KNOB, GAUGE), _evidence(SETS_BOTH, mentions=found))
    assert decided == verdict, reason


def test_a_premise_no_run_relied_on_decides_nothing() -> None:
    """A variant that sets neither variable (a counterfactual) rests nothing on them: its
    failed check contradicts, whatever the files say of the variables."""
    decided, reason = _verdict(_probe(KNOB, GAUGE), _evidence(mentions={"KNOB": False}))
    assert decided == "contradicted", reason
    results, _ = check_evidence(_probe(KNOB), _evidence(mentions={"KNOB": False}))
    assert not [r for r in results if r.role == "premise"]


def test_a_missing_premise_is_not_covered_by_passing_checks() -> None:
    """Behaviour that happened anyway (a default) proves nothing of a knob the version lacks."""
    decided, reason = _verdict(_probe(KNOB, observed="same"),
                               _evidence(SETS_BOTH, mentions={"KNOB": False}))
    assert decided == "absent", reason
    assert "never mentions KNOB" in reason


def test_an_unmeasured_value_is_not_observable_and_a_measured_one_still_fails() -> None:
    unmeasured = _probe(observed={"a/b": Unmeasured("no hook call names its tool call")})
    decided, reason = _verdict(unmeasured, _evidence())
    assert decided == "not_observable", reason
    assert "not measured: no hook call names its tool call" in reason
    decided, _ = _verdict(_probe(observed={"a/b": False}), _evidence())
    assert decided == "contradicted"


def test_a_premise_is_checked_when_declared() -> None:
    with pytest.raises(CatalogError, match="kind must be one of"):
        Premise("flags", "--x", "feature", "x")  # type: ignore[arg-type]
    with pytest.raises(CatalogError, match="role must be one of"):
        Premise("flag", "--x", "knob", "x")  # type: ignore[arg-type]
    with pytest.raises(CatalogError, match="named as typed"):
        Premise("flag", "x", "feature", "x")
    with pytest.raises(CatalogError, match="why must say"):
        Premise("env", "X", "feature", " ")
    with pytest.raises(CatalogError, match="names claims"):
        _probe(Premise("env", "X", "feature", "x", claims=("other.claim",)))
    with pytest.raises(CatalogError, match="premises must be unique"):
        _probe(KNOB, KNOB)


def test_every_built_in_premise_names_a_claim_of_its_probe_and_says_why() -> None:
    from probes.catalog import REPORTS
    probes = [p for spec in REPORTS for p in spec.probes]
    assert sum(len(p.premises) for p in probes) >= 30
    for probe in probes:
        for premise in probe.premises:
            assert set(premise.claims) <= {c.id for c in probe.claims}, probe.name
            assert premise.why.strip()


# ---- a change, named -----------------------------------------------------------------------

PREMISE_FLIP = [{"id": "p.premise.hook_input.PreToolUse.tool_use_id",
                 "before": "not_observable", "after": "passed"}]
BEHAVIOUR_FLIP = [{"id": "p.safe-calls-overlap", "before": "failed", "after": "passed"}]


@pytest.mark.parametrize(("before", "after", "flipped", "named"), [
    ("absent", "confirmed", [], "introduced"),
    ("absent", "contradicted", [], "introduced"),
    ("confirmed", "absent", [], "removed"),
    ("contradicted", "confirmed", BEHAVIOUR_FLIP, "fixed"),
    ("confirmed", "contradicted", BEHAVIOUR_FLIP, "regressed"),
    ("not_observable", "confirmed", PREMISE_FLIP, "now observable"),
    ("not_observable", "contradicted", PREMISE_FLIP, "now observable"),
    ("confirmed", "not_observable", [{**PREMISE_FLIP[0], "before": "passed",
                                      "after": "not_observable"}], "no longer observable"),
    ("not_observable", "confirmed", [{"id": "p.run.terminal-reason", "before": "not_observable",
                                      "after": "passed"}], "reporting"),
    ("not_observable", "contradicted", BEHAVIOUR_FLIP, "regressed"),
    ("contradicted", "not_observable", BEHAVIOUR_FLIP, "fixed"),
    ("not_reached", "confirmed", [], "now reached"),
    ("contradicted", "differs_from_baseline", [], "source"),
    ("error", "confirmed", [], "error"),
    ("confirmed", "confirmed", [], None),
])
def test_a_change_is_named_from_its_verdicts_and_flipped_checks(
        before: str, after: str, flipped: list[dict[str, str]], named: str | None) -> None:
    assert release_change(before, after, flipped) == named
    assert named is None or named in CHANGE_KINDS


# ---- on the fake loop: the harness's whole path, run to verdict ----------------------------

@pytest.mark.parametrize(("extra_args", "verdict"), [
    ((), "confirmed"),  # the field is there: the checks decide
    (("--hook-input-without", "stop_hook_active"), "absent"),  # a release before the field
])
def test_a_hook_field_the_release_lacks_makes_the_claim_absent_end_to_end(
        extra_args: tuple[str, ...], verdict: str, tmp_path: Any) -> None:
    """The fake loop's Stop probe, its re-entry field declared a premise of the feature: run
    on a fake release whose hook input lacks it, the claim is absent, where the old rule
    called it contradicted (its check of that field fails)."""
    from dataclasses import replace

    from probes.run.runner import run_probe
    from tests.fakeloop import FakeLoopClient
    from tests.fakeloop.catalog import STOP, STOP_CLAIM
    client = FakeLoopClient()
    probe = replace(STOP, premises=(Premise("hook_input", "stop_hook_active", "feature",
                                            "tells the Stop hook it runs again", event="Stop"),),
                    invocations=tuple(replace(i, extra_args=extra_args) for i in STOP.invocations))
    outcome = run_probe(probe, client, client.install("1"), tmp_path)
    every = [c.to_json() for c in outcome.checks]
    decided, reason = decide_claim([c for c in every if c["claim"] == STOP_CLAIM], every,
                                   error=outcome.error)
    assert decided == verdict, reason
    premise = next(c for c in outcome.checks if c.role == "premise")
    assert premise.status == ("passed" if verdict == "confirmed" else "absent")
