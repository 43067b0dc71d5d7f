"""Every claim's checks fail on real behaviour: each probe's counterfactuals, run on the real client.

A counterfactual (declared beside its probe, built with probes.catalog.variants) changes a
probe so that the claimed behaviour cannot happen; the run must still complete normally (no
harness error, no timeout, every request scripted), and every claim it names must fail
through its own checks. The coverage test (fast) lists the claims no counterfactual names.
"""

from __future__ import annotations

import pytest

from probes.catalog import REPORTS
from probes.clients.claude_code import ClaudeCode
from probes.core.checks import CheckResult
from probes.core.outcome import ProbeOutcome
from probes.core.probe import Counterfactual, Probe
from probes.report.counterfactuals import counterfactual_entry
from probes.run.runner import run_probe
from probes.scale.schedule import default_jobs, run_scheduled

# The fast coverage test below runs without a client, so the marker is per test, not the
# module's pytestmark.
CLIENT = pytest.mark.client
# Alone (CONTRIBUTING, "serial tests"): the tool-scheduling variants are told from the
# claims by hook windows of 0.1-2 s; a loaded machine can stretch the client's own steps
# past them, and a variant then passes what it must fail.
SERIAL = pytest.mark.serial

PROBES: tuple[Probe, ...] = tuple(p for spec in REPORTS for p in spec.probes)
CASES = [pytest.param(p, cf, id=f"{p.name}:{cf.name}") for p in PROBES for cf in p.counterfactuals]

# Claims no realistic counterfactual of 2.1.235 makes fail (probe name, claim id); each is a
# finding: its checks may be vacuous. Keep this empty unless a variant was tried and failed.
KNOWN_GAPS: frozenset[tuple[str, str]] = frozenset()
# Probes whose claims do not hold on the default version, so that failing there shows
# nothing: their counterfactuals run on the newest version, where the claims hold.
ON_NEWEST = {"loop-wakeup": "2.1.235 answers ScheduleWakeup 'not scheduled' (its /loop "
                            "dynamic gate is off)"}


def _shown(check: CheckResult) -> str:
    return (f"    [{check.status}] {check.id}: {check.description}\n"
            f"        expected {check.expected!r}\n        observed {check.observed!r}")


@pytest.fixture(scope="module")
def selected_outcomes(request: pytest.FixtureRequest,
                      tmp_path_factory: pytest.TempPathFactory) -> dict[str, ProbeOutcome]:
    """The outcome of every counterfactual selected in this session, run as the suite runs
    probes (``-j``: side by side, each in its own sandbox and mock): the runs dominate the
    client tier's time, and two cores halve it."""
    selected = [item.callspec.params for item in request.session.items
                if item.originalname == "test_counterfactual_makes_its_claims_fail"]
    variants = [params["counterfactual"].probe(params["probe"]) for params in selected]
    fixture_of = {variant.name: "newest_claude_code_binary" if params["probe"].name in ON_NEWEST
                  else "claude_code_binary" for variant, params in zip(variants, selected,
                                                                       strict=True)}
    binaries = {name: request.getfixturevalue(name) for name in set(fixture_of.values())}
    work = tmp_path_factory.mktemp("counterfactuals")

    def run(variant: Probe) -> ProbeOutcome:
        return run_probe(variant, ClaudeCode(), binaries[fixture_of[variant.name]], work)

    scheduled = run_scheduled(variants, run, default_jobs())
    return {v.name: o for v, o in zip(variants, scheduled.outcomes, strict=True) if o}


@CLIENT
@SERIAL
@pytest.mark.parametrize(("probe", "counterfactual"), CASES)
def test_counterfactual_makes_its_claims_fail(probe: Probe, counterfactual: Counterfactual,
                                              selected_outcomes: dict[str, ProbeOutcome]) -> None:
    variant = counterfactual.probe(probe)
    outcome = selected_outcomes[variant.name]
    assert outcome.not_applicable is None, outcome.not_applicable
    assert outcome.error is None, f"harness error: {outcome.error}"
    assert outcome.evidence is not None
    timed_out = sorted(name for name, run in outcome.evidence.runs.items() if run.timed_out)
    assert not timed_out, f"runs killed at their timeout: {timed_out}"
    # a failing harness check (an unscripted request, egress) would be a trivial break
    harness = [c for c in outcome.checks if c.claim is None and not c.passed]
    assert not harness, "the run did not complete normally:\n" + "\n".join(map(_shown, harness))
    still_holding = []
    for claim in counterfactual.claims:
        checks = [c for c in outcome.checks if c.claim == claim]
        if not any(c.status == "failed" for c in checks):
            still_holding.append(f"  {claim}: no check failed ({len(checks)} checks)\n"
                                 + "\n".join(map(_shown, checks)))
    report = "\n".join(f"  {claim}:\n" + "\n".join(_shown(c) for c in outcome.checks
                                                 if c.claim == claim)
                       for claim in counterfactual.claims)
    assert not still_holding, (
        f"{variant.name} ({counterfactual.description}) left claims holding on the real "
        f"client:\n" + "\n".join(still_holding) + f"\nsandbox: {outcome.sandbox}")
    # by the reports' own rule: each named claim contradicted (a variant that takes away
    # the trigger instead makes it "not reached", which shows nothing about the behaviour)
    entry = counterfactual_entry(probe, counterfactual, outcome)
    verdicts = {claim: c["verdict"] for claim, c in entry["claims"].items()}
    assert entry["able_to_fail"], f"{variant.name}: not every claim contradicted: {verdicts}"
    print(f"{variant.name}: every named claim failed\n{report}")


def test_every_claim_is_named_by_a_counterfactual() -> None:
    named = {(p.name, claim) for p in PROBES for cf in p.counterfactuals for claim in cf.claims}
    claims = {(p.name, c.id) for p in PROBES for c in p.claims}
    uncovered = sorted(claims - named - KNOWN_GAPS)
    assert not uncovered, "claims no counterfactual names (add one, or list a known gap): " + \
        ", ".join(f"{probe}: {claim}" for probe, claim in uncovered)
    stale = sorted(KNOWN_GAPS & named) + sorted(KNOWN_GAPS - claims)
    assert not stale, f"known gaps that are covered now, or are no claim any more: {stale}"
