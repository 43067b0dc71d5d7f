"""The generic agent-loop catalog on the fake tool loop: every check can fail.

Fast tier: the conforming fake loop (``tests/fakeloop/toolloop.py``) confirms every claim;
each planted violation makes its claim contradicted; each counterfactual (the probe changed
so that the behaviour cannot happen) makes its claims contradicted on the conforming loop.
What the fake does is what these tests scripted: no claim about a real client.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mockapi.script.replies import ToolUseBlock
from probes.catalog import REPORTS as CLAUDE_CODE_REPORTS
from probes.catalog import agent_loop
from probes.catalog.agent_loop import CLAIMS, PROBES
from probes.clients.base import ClientBinary
from probes.clients.claude_cli import CAPABILITY_FLAGS
from probes.clients.claude_code import ClaudeCode
from probes.core.invocation import Invocation
from probes.core.loop_tools import LOOP_TOOLS
from probes.core.outcome import ProbeOutcome
from probes.core.probe import Counterfactual, Probe, served_scenario, with_tool_names
from probes.core.verdicts import decide_claim
from probes.report.counterfactuals import counterfactual_entry
from probes.run.applicable import as_the_client_sees_it
from probes.run.runner import run_probe
from tests.fakeloop.toolloop import PLANTS
from tests.fakeloop.toolloop_client import FakeToolLoopClient

# each planted violation, the probe that shows it and the claim it breaks
PLANTED = {
    "wrong-id": ("loop.parallel-calls", agent_loop.PAIRING),
    "split-results": ("loop.parallel-calls", agent_loop.PARALLEL),
    "error-not-flagged": ("loop.tool-error", agent_loop.ERROR),
    "no-step-limit": ("loop.step-limit", agent_loop.STEP_LIMIT),
    "limit-silent": ("loop.step-limit", agent_loop.STEP_LIMIT),
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
    assert all("loop_tools" in p.capabilities() for p in PROBES)
    assert all(i.loop_tools for p in PROBES for i in p.invocations)
    # Claude Code's own catalog never asks for the loop tools
    assert all("loop_tools" not in p.capabilities() for s in CLAUDE_CODE_REPORTS
               for p in s.probes)


def _cli_binary(root: Path, help_text: str) -> ClientBinary:
    (root / "help.txt").write_text(help_text)  # what ClaudeCliBase.help_text reads first
    return ClientBinary("claude-code", "9.9.9", "linux-x64", "p", root, root / "cli",
                        ("cli",), "0" * 64)


FULL_HELP = " ".join(f for flags in CAPABILITY_FLAGS.values() for f in flags)


def test_a_cli_client_runs_the_catalog_with_the_loop_tools_over_mcp(tmp_path: Path) -> None:
    capabilities = ClaudeCode(tmp_path).capabilities(_cli_binary(tmp_path, FULL_HELP))
    assert all(not capabilities.lacking(p.capabilities()) for p in PROBES)
    assert capabilities.tool_names == {"add": "mcp__loop__add", "fail": "mcp__loop__fail",
                                       "read_file": "mcp__loop__read_file"}
    # its warmups and side requests are told apart from its loop's, as in every Claude
    # Code probe, and the scripted calls named as it names the tools
    seen, names = as_the_client_sees_it(BY_NAME["loop.step-limit"], capabilities)
    assert seen.scenario.classifier == "claude-code" and names == capabilities.tool_names
    assert "mcp__loop__add" in seen.scenario.model_dump_json()
    # a probe of another catalog is served as written, whatever its tools are named
    own = Probe(name="own-add", title="t", claims=(), scenario=BY_NAME["loop.step-limit"].scenario,
                invocations=(Invocation("run", "x"),), check=lambda ev, c: None)
    assert as_the_client_sees_it(own, capabilities) == (own, {})
    loop = FakeToolLoopClient(())
    assert as_the_client_sees_it(BY_NAME["loop.step-limit"],
                                  loop.capabilities(loop.install("1"))) \
        == (BY_NAME["loop.step-limit"], {})
    older = tmp_path / "older"
    older.mkdir()
    lacking = ClaudeCode(tmp_path).capabilities(
        _cli_binary(older, FULL_HELP.replace("--strict-mcp-config", "")))
    # a version without the MCP flags lacks the loop tools: the catalog is absent there
    assert lacking.only_this_version_lacks(BY_NAME["loop.tool-error"].capabilities())
    assert lacking.tool_names == {}


def test_a_loop_invocation_in_the_clis_terms(tmp_path: Path) -> None:
    cli = ClaudeCode(tmp_path)
    retry = cli.cli_invocation(BY_NAME["loop.retry"].invocations[0])
    assert retry.mcp == LOOP_TOOLS and retry.settings is None
    assert retry.env == {"CLAUDE_CODE_MAX_RETRIES": "2"}
    thinking = cli.cli_invocation(BY_NAME["loop.thinking"].invocations[0])
    assert thinking.env == {"MAX_THINKING_TOKENS": "1024"} and thinking.settings is None
    steps = cli.cli_invocation(BY_NAME["loop.step-limit"].invocations[0])
    assert steps.max_turns == agent_loop.LIMIT and steps.mcp == LOOP_TOOLS
    own = Invocation("run", "hello")
    assert cli.cli_invocation(own) is own  # not a loop run: the CLI's already
    with pytest.raises(ValueError, match="no counterpart for: \\['temperature'\\]"):
        cli.cli_invocation(Invocation("run", "x", loop_tools=True,
                                      settings={"temperature": 0}))


def test_the_scripted_calls_are_renamed_for_the_client_and_nothing_else() -> None:
    scenario = served_scenario(BY_NAME["loop.step-limit"].scenario)
    renamed = with_tool_names(scenario, {"add": "mcp__loop__add"})
    calls = [b for r in renamed.rules for reply in (r.replies or [r.reply])
             for b in getattr(reply, "content", None) or [] if isinstance(b, ToolUseBlock)]
    assert [c.name for c in calls] == ["mcp__loop__add"] * 5
    assert [c.id for c in calls] == [f"toolu_lp_step_{i}" for i in range(5)]
    back = with_tool_names(renamed, {"mcp__loop__add": "add"})
    assert back == scenario and back.classifier == "plain"
    assert with_tool_names(scenario, {"read_file": "Read"}) is scenario


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


@pytest.mark.client
def test_claude_code_runs_the_catalog_with_the_loop_tools_served_over_mcp(
        claude_code_binary: ClientBinary, tmp_path: Path) -> None:
    """The real CLI: the scripted calls renamed, the tools answered by the MCP server as
    the drivers' tools answer them, and every check judged (what the verdicts are is the
    committed evidence's business, reports/conformance/)."""
    outcome = run_probe(BY_NAME["loop.parallel-calls"], ClaudeCode(), claude_code_binary,
                        tmp_path)
    assert outcome.error is None and outcome.evidence is not None
    assert "error" not in _verdicts(outcome).values()
    calls = [(e["tool"], e["arguments"]) for e in outcome.evidence.mcp_calls["loop"]
             if e["event"] == "tools/call"]
    assert sorted(calls, key=str) == [("add", {"a": 2, "b": 3}), ("add", {"a": 4, "b": 5})]
    assert "mcp__loop__add" in str(outcome.scenario)
