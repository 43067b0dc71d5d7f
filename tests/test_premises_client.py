"""Premises established on the real client, both ways: a variable 2.0.77's files never
mention (the auto-compaction window, 2.1.75's; the non-streaming fallback switch, 2.1.83's)
makes its claim not observable (an instrument) or absent (the feature) there, where the
old rule called both contradicted; the same premises hold on 2.1.235 (tests/test_probe_checks.py
holds every premise of the shared run to that). A flag the client refuses is missing in its
own words; one it takes is present."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mockapi import Match, Rule, Scenario, text
from probes.catalog.recovery.compaction import AUTO_COMPACT, AUTO_COMPACT_PROBE
from probes.catalog.recovery.retries import NO_STREAM_FALLBACK, NO_STREAM_FALLBACK_PROBE
from probes.clients.claude_code import ClaudeCode
from probes.core.checks import Checks
from probes.core.evidence import Evidence
from probes.core.outcome import ProbeOutcome
from probes.core.premises import Premise
from probes.core.probe import Claim, Invocation, Probe
from probes.core.verdicts import decide_claim
from probes.run.runner import run_probe
from tests.conftest import installed_client

pytestmark = pytest.mark.client

OLD = "claude-code@2.0.77"


def _verdicts(outcome: ProbeOutcome) -> dict[str, tuple[str, str]]:
    every = [c.to_json() for c in outcome.checks]
    return {claim.id: decide_claim([c for c in every if c["claim"] == claim.id], every,
                                   error=outcome.error)
            for claim in outcome.probe.claims}


def _premise(outcome: ProbeOutcome, slug: str) -> Any:
    return next(c for c in outcome.checks if c.id.startswith(f"{outcome.probe.name}.premise.{slug}"))


def test_a_knob_the_version_never_mentions_decides_before_any_behaviour_check(
        tmp_path: Path) -> None:
    client, binary = installed_client(OLD)
    window = run_probe(AUTO_COMPACT_PROBE, client, binary, tmp_path)
    assert window.error is None, window.error
    status, reason = _verdicts(window)[AUTO_COMPACT]
    assert status == "not_observable", reason
    check = _premise(window, "env.CLAUDE_CODE_AUTO_COMPACT_WINDOW")
    assert check.status == "not_observable"
    assert "never mentions CLAUDE_CODE_AUTO_COMPACT_WINDOW" in str(check.observed)
    fallback = run_probe(NO_STREAM_FALLBACK_PROBE, client, binary, tmp_path)
    status, reason = _verdicts(fallback)[NO_STREAM_FALLBACK]
    assert status == "absent", reason
    assert "never mentions CLAUDE_CODE_DISABLE_NONSTREAMING_FALLBACK" in reason


def _flag_probe(flag: str, invocation: Invocation) -> Probe:
    def check(ev: Evidence, c: Checks) -> None:
        c.equal("answered", "test.flag", "the run got its answer", expected="FLAG_DONE",
                observed=(ev.run("run").result or {}).get("result") if ev.run("run") else None,
                evidence="run run: result")
    return Probe(name="flag-premise", title="a flag premise", claims=(Claim("test.flag", "t"),),
                 scenario=Scenario(name="flag", rules=[
                     Rule(id="done", match=Match(), reply=text("FLAG_DONE"), repeat="always")]),
                 invocations=(invocation,), check=check,
                 premises=(Premise("flag", flag, "feature", "what the run passes"),))


def test_a_flag_the_client_refuses_is_missing_and_one_it_takes_is_present(
        claude_code_binary: Any, tmp_path: Path) -> None:
    refused = run_probe(_flag_probe("--flag-from-the-future", Invocation(
        "run", "go", extra_args=("--flag-from-the-future",))), ClaudeCode(), claude_code_binary,
        tmp_path / "refused")
    check = _premise(refused, "flag.flag-from-the-future")
    assert check.status == "absent", check
    assert "unknown option" in str(check.observed)
    assert _verdicts(refused)["test.flag"][0] == "absent"
    taken = run_probe(_flag_probe("--max-turns", Invocation("run", "go", max_turns=2)),
                      ClaudeCode(), claude_code_binary, tmp_path / "taken")
    assert _premise(taken, "flag.max-turns").status == "passed"
    assert _verdicts(taken)["test.flag"][0] == "confirmed"
