"""The generic agent-loop catalog on the fake tool loop: every check can fail.

Fast tier: the conforming fake loop (``tests/fakeloop/toolloop.py``) confirms every claim;
each planted violation makes its claim contradicted; each counterfactual (the probe changed
so that the behaviour cannot happen) makes its claims contradicted on the conforming loop.
What the fake does is what these tests scripted: no claim about a real client.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from probes.catalog import REPORTS as CLAUDE_CODE_REPORTS
from probes.catalog import agent_loop
from probes.catalog.agent_loop import CLAIMS, PROBES
from probes.clients.claude_cli import NOT_CLAUDE_CODE
from probes.core.outcome import ProbeOutcome
from probes.core.probe import Counterfactual, Probe
from probes.core.verdicts import decide_claim
from probes.report.counterfactuals import counterfactual_entry
from probes.run.runner import run_probe
from tests.fakeloop.toolloop import PLANTS
from tests.fakeloop.toolloop_client import FakeToolLoopClient

# each planted violation, the probe that shows it and the claim it breaks
PLANTED = {
    "wrong-id": ("loop.parallel-calls", agent_loop.PAIRING),
    "split-results": ("loop.parallel-calls", agent_loop.PARALLEL),
    "error-not-flagged": ("loop.tool-error", agent_loop.ERROR),
    "no-step-limit": ("loop.step-limit", agent_loop.STEP_LIMIT),
    "no-retry": ("loop.retry", agent_loop.RETRY),
    "ignore-retry-after": ("loop.retry", agent_loop.RETRY),
    "truncate-silently": ("loop.stream-cut", agent_loop.CUT),
    "drop-thinking": ("loop.thinking", agent_loop.THINKING),
    "pause-ends": ("loop.pause-turn", agent_loop.PAUSE),
}
BY_NAME = {p.name: p for p in PROBES}


def _verdicts(outcome: ProbeOutcome) -> dict[str, str]:
    checks = [c.to_json() for c in outcome.checks]
    return {claim.id: decide_claim([c for c in checks if c["claim"] == claim.id], checks,
                                   not_applicable=outcome.not_applicable, error=outcome.error,
                                   absent=outcome.absent)[0]
            for claim in outcome.probe.claims}


def _run(probe: Probe, work: Path, *plant: str) -> ProbeOutcome:
    client = FakeToolLoopClient(plant)
    return run_probe(probe, client, client.install("1"), work, keep=False)


def test_every_claim_cites_its_source_and_has_a_counterfactual_and_a_plant() -> None:
    claims = {c.id: c for p in PROBES for c in p.claims}
    assert set(claims) == set(CLAIMS)
    assert {c for p in PROBES for cf in p.counterfactuals for c in cf.claims} == set(CLAIMS)
    assert {claim for _, claim in PLANTED.values()} == set(CLAIMS)
    assert set(PLANTED) == set(PLANTS) - {"crash-at-start"}
    for claim in claims.values():
        assert claim.source.kind == "project" and claim.source.where, claim.id
        cited = claim.source.cite()
        assert "docs" in cited or "documentation" in cited, claim.id
    assert all(p.requires == ("loop_tools",) for p in PROBES)


def test_claude_code_lacks_the_loop_tools_so_the_catalog_is_not_applicable_to_it() -> None:
    assert "loop_tools" in NOT_CLAUDE_CODE
    assert all("loop_tools" not in p.capabilities() for s in CLAUDE_CODE_REPORTS
               for p in s.probes)


@pytest.mark.parametrize("probe", PROBES, ids=[p.name for p in PROBES])
def test_the_conforming_fake_loop_confirms_every_claim(probe: Probe, tmp_path: Path) -> None:
    outcome = _run(probe, tmp_path)
    assert outcome.error is None
    assert set(_verdicts(outcome).values()) == {"confirmed"}, \
        [(c.id, c.expected, c.observed) for c in outcome.checks if not c.passed]


@pytest.mark.parametrize("plant", sorted(PLANTED))
def test_a_planted_violation_contradicts_its_claim(plant: str, tmp_path: Path) -> None:
    probe_name, claim = PLANTED[plant]
    outcome = _run(BY_NAME[probe_name], tmp_path, plant)
    assert _verdicts(outcome)[claim] == "contradicted", \
        [(c.id, c.expected, c.observed) for c in outcome.checks]


CASES = [pytest.param(p, cf, id=f"{p.name}:{cf.name}") for p in PROBES
         for cf in p.counterfactuals]


@pytest.mark.parametrize(("probe", "counterfactual"), CASES)
def test_a_counterfactual_contradicts_its_claims_on_the_conforming_loop(
        probe: Probe, counterfactual: Counterfactual, tmp_path: Path) -> None:
    outcome = _run(counterfactual.probe(probe), tmp_path)
    entry = counterfactual_entry(probe, counterfactual, outcome)
    assert entry["harness_failures"] == []
    assert entry["able_to_fail"], entry["claims"]


def test_a_loop_that_never_starts_decides_nothing(tmp_path: Path) -> None:
    outcome = _run(BY_NAME["loop.pause-turn"], tmp_path, "crash-at-start")
    assert set(_verdicts(outcome).values()) == {"error"}
    started = next(c for c in outcome.checks if c.id.endswith("harness.loop-started"))
    assert "planted crash" in str(started.observed)
