"""The agent-loop client kinds: the TypeScript tool runner, the Vercel AI SDK, pydantic-ai,
LangGraph.

Fast: each kind is registered, runs the generic agent-loop catalog by default, can run all of
it and none of Claude Code's probes, and turns an invocation into its driver's command. sdk
tier (installed by ``loopprobe clients install``): the catalog on each committed version
gives the verdicts of its committed conformance report.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from probes.catalog import REPORTS as CLAUDE_CODE_REPORTS
from probes.catalog.agent_loop import PROBES, REPORTS
from probes.cli import catalog_for, run_suite
from probes.clients.base import ClientBinary, RunContext
from probes.clients.langgraph_agent import LangGraph
from probes.clients.loop_driver import LOOP_CATALOG, DriverLoop, loop_spec
from probes.clients.npm import InstallError
from probes.clients.pydantic_agent import PydanticAi
from probes.clients.registry import client_for
from probes.clients.specs import expected_version
from probes.clients.ts_tool_runner import TsToolRunner
from probes.clients.vercel_ai import VercelAi
from probes.core.invocation import Invocation
from probes.core.probe import Counterfactual, Probe
from probes.report.counterfactuals import counterfactual_entry
from probes.run.runner import run_probe
from probes.sandbox.folders import Sandbox
from tests.conftest import missing_install

KINDS: dict[str, type[DriverLoop]] = {"anthropic-ts-tool-runner": TsToolRunner,
                                      "vercel-ai": VercelAi, "pydantic-ai": PydanticAi,
                                      "langgraph": LangGraph}


def _binary(kind: str, root: Path) -> ClientBinary:
    return ClientBinary(kind, "9.9.9", "linux-x86_64", "pkg", root, root / "entry.js",
                        ("node", "driver"), "0" * 64)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_loop_kind_runs_the_generic_catalog_and_none_of_claude_codes(
        kind: str, tmp_path: Path) -> None:
    client = client_for(kind)
    assert isinstance(client, KINDS[kind]) and client.name == kind
    assert catalog_for(f"{kind}@1.0.0", None) == REPORTS
    assert KINDS[kind].catalog == LOOP_CATALOG
    capabilities = client.capabilities(_binary(kind, tmp_path))
    assert all(not capabilities.lacking(p.capabilities()) for p in PROBES)
    for spec in CLAUDE_CODE_REPORTS:
        for probe in spec.probes:
            assert capabilities.lacking(probe.capabilities()), probe.name
            assert not capabilities.only_this_version_lacks(probe.capabilities())


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_version_is_checked_by_the_grammar_of_its_registry(kind: str) -> None:
    registry = KINDS[kind].registry  # type: ignore[attr-defined]
    assert expected_version(registry, "1.2.3", exact=True) is None
    assert expected_version(registry, "../1.2.3", exact=True) is not None


def test_the_vercel_kind_installs_the_provider_of_its_generation() -> None:
    client = VercelAi(Path("/nonexistent"))
    assert client.companions("5.0.277") == ("@ai-sdk/anthropic@^2",)
    assert client.companions("7.0.185") == ("@ai-sdk/anthropic@^4",)
    with pytest.raises(InstallError, match="ai 5, 6 or 7"):
        client.companions("4.3.19")


def test_the_driver_gets_the_spec_and_an_allow_listed_environment(tmp_path: Path) -> None:
    client = TsToolRunner(tmp_path)
    box = Sandbox.create(tmp_path, "box")
    invocation = Invocation("loop", "Add 1+1.", session="none", tools=None, max_turns=3,
                            env={"ANTHROPIC_MAX_RETRIES": "2"}, settings={"max_tokens": 2048})
    command = client.command(_binary(client.name, tmp_path), invocation,
                             RunContext(box, "http://127.0.0.1:9", {}))
    assert command.argv[:2] == ["node", "driver"]
    assert json.loads(command.argv[2]) == loop_spec(invocation) == {
        "prompt": "Add 1+1.", "model": "claude-sonnet-4-5", "system": loop_spec(
            invocation)["system"], "max_iterations": 3, "max_retries": 2,
        "options": {"max_tokens": 2048}}
    assert command.env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9"
    assert command.env["NODE_PATH"] == str(tmp_path / "node_modules")
    assert "PATH" in command.env and "HOME" in command.env
    assert command.cwd == box.workspace


# ---- the real clients (sdk tier: installed by ./scripts/test) ---------------------------------

NEWEST = {"anthropic-ts-tool-runner": "1.17.0", "vercel-ai": "7.0.185", "pydantic-ai": "2.78.0",
          "langgraph": "1.2.24"}
ROOT = Path(__file__).resolve().parent.parent
COMMITTED = ROOT / "reports" / "conformance"


def _installed(kind: str, version: str) -> ClientBinary:
    for binary in KINDS[kind]().installed():
        if binary.version == version:
            return binary
    missing_install(f"{kind}@{version}", f"loopprobe clients install {kind}@{version}")
    raise AssertionError("unreachable")


def _claims(folder: Path) -> dict[str, str]:
    report = json.loads((folder / "agent-loop-conformance.json").read_text())
    return {c["id"]: c["status"] for c in report["claims"]}


@pytest.mark.sdk
@pytest.mark.parametrize("kind", sorted(NEWEST))
def test_the_committed_verdicts_are_what_a_run_gives(kind: str, tmp_path: Path) -> None:
    version = NEWEST[kind]
    _installed(kind, version)
    run_suite(f"{kind}@{version}", tmp_path / "out", catalog=REPORTS, jobs=2)
    assert _claims(tmp_path / "out") == _claims(COMMITTED / f"{kind}-{version}"), \
        f"regenerate: loopprobe conformance --out reports --clients {kind}@{version}, then " \
        "loopprobe conformance --out reports --skip-run"


CASES = [pytest.param(p, cf, id=f"{p.name}:{cf.name}") for p in PROBES
         for cf in p.counterfactuals]


@pytest.mark.sdk
@pytest.mark.parametrize(("probe", "counterfactual"), CASES)
def test_each_counterfactual_makes_its_claims_fail_on_a_real_loop(
        probe: Probe, counterfactual: Counterfactual, tmp_path: Path) -> None:
    binary = _installed("anthropic-ts-tool-runner", NEWEST["anthropic-ts-tool-runner"])
    outcome = run_probe(counterfactual.probe(probe), TsToolRunner(), binary, tmp_path)
    entry = counterfactual_entry(probe, counterfactual, outcome)
    assert entry["harness_failures"] == [] and entry["able_to_fail"], entry["claims"]
