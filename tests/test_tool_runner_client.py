"""The Anthropic SDK's tool runner as a probed client kind (``anthropic-tool-runner@V``).

Fast: which probes apply to which client kind. sdk tier: the tool runner catalog on the real
runner (anthropic 2.16.0 and 2.0.0, installed by ./scripts/test): every claim confirmed where
it applies, each counterfactual makes its claims fail, and the committed reports are what a
run gives.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from probes.catalog import REPORTS as CLAUDE_CODE_REPORTS
from probes.catalog.tool_runner import PROBES, REPORTS
from probes.cli import catalog_for, run_suite
from probes.clients.base import ClientBinary
from probes.clients.claude_cli import NOT_CLAUDE_CODE
from probes.clients.registry import client_for
from probes.clients.tool_runner import AnthropicToolRunner
from probes.core.probe import Counterfactual, Probe
from probes.run.runner import run_probe
from tests.conftest import missing_install

ROOT = Path(__file__).resolve().parent.parent
VERSIONS = ("2.0.0", "2.16.0")


def _binary(tmp_path: Path, threads: bool) -> ClientBinary:
    (tmp_path / "install.json").write_text(json.dumps({
        "package": "anthropic", "version": "9.9.9", "platform": "linux-x86_64",
        "entry": "entry.py", "sha256": "0" * 64, "threads": threads}))
    (tmp_path / "entry.py").write_text("")
    return ClientBinary("anthropic-tool-runner", "9.9.9", "linux-x86_64", "anthropic",
                        tmp_path, tmp_path / "entry.py", ("python",), "0" * 64)


def test_claude_code_probes_do_not_apply_to_the_runner_nor_the_runner_probes_to_it(
        tmp_path: Path) -> None:
    runner = AnthropicToolRunner(tmp_path)
    capabilities = runner.capabilities(_binary(tmp_path, threads=True))
    for spec in CLAUDE_CODE_REPORTS:
        for probe in spec.probes:
            assert capabilities.lacking(probe.capabilities()), probe.name
    assert all(not capabilities.lacking(p.capabilities()) for p in PROBES)
    no_threads = runner.capabilities(_binary(tmp_path, threads=False))
    assert [p.name for p in PROBES if no_threads.lacking(p.capabilities())] == [
        "tool-runner.threads"]
    # and Claude Code lacks what the runner's probes need
    assert all(set(p.capabilities()) & set(NOT_CLAUDE_CODE) for p in PROBES)


def test_each_kind_runs_its_own_catalog_by_default() -> None:
    assert catalog_for("anthropic-tool-runner@2.16.0", None) == REPORTS
    assert catalog_for("2.1.235", None) == CLAUDE_CODE_REPORTS
    assert isinstance(client_for("anthropic-tool-runner"), AnthropicToolRunner)


def test_every_runner_claim_is_named_by_a_counterfactual() -> None:
    named = {c for p in PROBES for cf in p.counterfactuals for c in cf.claims}
    assert named == {c.id for p in PROBES for c in p.claims}
    assert all(c.source.kind == "project" for p in PROBES for c in p.claims)


def _installed(version: str) -> ClientBinary:
    for binary in AnthropicToolRunner().installed():
        if binary.version == version:
            return binary
    missing_install(f"anthropic-tool-runner@{version}",
                    f"loopprobe clients install anthropic-tool-runner@{version}")
    raise AssertionError("unreachable")


@pytest.mark.sdk
@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("probe", PROBES, ids=[p.name for p in PROBES])
def test_the_runner_does_what_its_claims_say(probe: Probe, version: str,
                                              tmp_path: Path) -> None:
    binary = _installed(version)
    outcome = run_probe(probe, AnthropicToolRunner(), binary, tmp_path)
    if "threads" in probe.capabilities() and version == "2.0.0":
        # message threads came with a later SDK: this version lacks them (absent), the tool
        # runner as a kind does not
        assert outcome.absent is not None and "threads" in outcome.absent
        assert outcome.not_applicable is None
        return
    assert outcome.error is None and outcome.not_applicable is None
    failed = [(c.id, c.expected, c.observed) for c in outcome.checks if not c.passed]
    assert failed == []


CASES = [pytest.param(p, cf, id=f"{p.name}:{cf.name}") for p in PROBES
         for cf in p.counterfactuals]


@pytest.mark.sdk
@pytest.mark.parametrize(("probe", "counterfactual"), CASES)
def test_a_counterfactual_makes_its_runner_claims_fail(probe: Probe,
                                                       counterfactual: Counterfactual,
                                                       tmp_path: Path) -> None:
    outcome = run_probe(counterfactual.probe(probe), AnthropicToolRunner(),
                        _installed("2.16.0"), tmp_path)
    assert outcome.error is None and outcome.evidence is not None
    harness = [c.id for c in outcome.checks if c.claim is None and not c.passed]
    assert harness == [], "the variant did not run normally"
    for claim in counterfactual.claims:
        assert any(c.status == "failed" for c in outcome.checks if c.claim == claim), claim


@pytest.mark.sdk
@pytest.mark.parametrize("version", VERSIONS)
def test_the_committed_reports_are_what_a_run_gives(version: str, tmp_path: Path) -> None:
    _installed(version)
    out = tmp_path / version
    run_suite(f"anthropic-tool-runner@{version}", out,
              catalog=REPORTS, jobs=2)
    committed = ROOT / "reports" / f"anthropic-tool-runner-{version}"
    names = sorted(p.name for p in committed.iterdir())
    assert sorted(p.name for p in out.iterdir()) == names
    differing = [n for n in names if not n.endswith(".timing.json")
                 and (out / n).read_bytes() != (committed / n).read_bytes()]
    assert differing == [], f"regenerate: loopprobe run --client anthropic-tool-runner@" \
                            f"{version} --out {committed}"

