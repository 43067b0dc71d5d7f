"""The real Claude Code binary against the mock: the example scenario, the harness's faults,
the whole suite through the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mockapi import Match, Rule, Scenario, load_scenario, text
from probes.catalog import REPORTS
from probes.clients.claude_code import ClaudeCode
from probes.core.checks import Checks
from probes.core.evidence import Evidence
from probes.core.probe import Claim, Invocation, Probe
from probes.run.runner import run_probe

pytestmark = pytest.mark.client

ROOT = Path(__file__).resolve().parent.parent


def _probe(name: str, scenario: Scenario, invocation: Invocation) -> Probe:
    def check(ev: Evidence, c: Checks) -> None:
        c.equal("requests", "test.claim", "main requests made", expected=1,
                observed=len(ev.requests()), evidence="journal")
    return Probe(name=name, title=name, claims=(Claim("test.claim", "test"),),
                 scenario=scenario, invocations=(invocation,), check=check)


def test_example_scenario_runs_a_real_read_loop(claude_code_binary, tmp_path: Path) -> None:
    probe = Probe(
        name="example", title="example", claims=(), check=lambda ev, c: None,
        scenario=load_scenario(ROOT / "examples/scenarios/tool-then-text.yaml"),
        fixtures={"probe-fixture.txt": "EXAMPLE_FILE_CONTENT\n"},
        invocations=(Invocation("run", "please read the fixture"),),
    )
    # without the egress guard's proxy: with one, 2.1.235 skips the HEAD /api/hello warm-up
    outcome = run_probe(probe, ClaudeCode(), claude_code_binary, tmp_path, egress_guard=False)
    ev = outcome.evidence
    assert ev is not None
    run = ev.runs["run"]
    assert (run.exit_code, (run.result or {}).get("subtype"), (run.result or {}).get("result")) \
        == (0, "success", "DONE")
    records = [r for r in ev.journal if r["type"] == "request"]
    assert [(r["method"], r["path"]) for r in records] == [
        ("HEAD", "/api/hello"), ("POST", "/v1/messages"), ("POST", "/v1/messages")]
    first, second = records[1], records[2]
    assert (first["rule"], second["rule"]) == ("ask-to-read", "final-answer")
    results = [b for m in second["body"]["messages"] if isinstance(m["content"], list)
               for b in m["content"] if b.get("type") == "tool_result"]
    assert [r["tool_use_id"] for r in results] == ["toolu_example_read"]
    assert "EXAMPLE_FILE_CONTENT" in json.dumps(results)
    assert "EXAMPLE_FILE_CONTENT" not in json.dumps(first["body"]["messages"])


def test_a_hanging_client_is_killed_with_its_process_group(claude_code_binary, tmp_path) -> None:
    stall = Scenario(rules=[Rule(match=Match(), reply=text("late", stall_before=3600))])
    probe = _probe("hang", stall, Invocation("hang", "wait forever", timeout=8))
    outcome = run_probe(probe, ClaudeCode(), claude_code_binary, tmp_path)
    ev = outcome.evidence
    assert ev is not None
    run = ev.runs["hang"]
    assert run.timed_out and run.exit_code is None
    finished = next(c for c in outcome.checks if c.id == "hang.harness.hang.finished")
    assert not finished.passed
    assert "killed at the 8s timeout; last events:" in finished.observed
    with pytest.raises(ProcessLookupError):
        os.killpg(run.pid, 0)


def test_a_client_that_exits_before_any_request_fails_its_checks(claude_code_binary,
                                                                  tmp_path) -> None:
    probe = _probe("early-exit", Scenario(), Invocation(
        "early", "hello", extra_args=("--no-such-flag-for-loopprobe",), timeout=30))
    outcome = run_probe(probe, ClaudeCode(), claude_code_binary, tmp_path)
    assert outcome.evidence is not None
    run = outcome.evidence.runs["early"]
    assert run.exit_code not in (0, None)
    assert "no-such-flag-for-loopprobe" in run.stderr
    requests = next(c for c in outcome.checks if c.id == "early-exit.requests")
    assert (requests.passed, requests.observed) == (False, 0)
    assert not outcome.passed


def test_an_unscripted_request_is_named_in_a_failed_check(claude_code_binary, tmp_path) -> None:
    probe = _probe("unscripted", Scenario(), Invocation("run", "nobody scripted me", timeout=30))
    outcome = run_probe(probe, ClaudeCode(), claude_code_binary, tmp_path)
    covered = next(c for c in outcome.checks if c.id == "unscripted.harness.script-covered")
    assert not covered.passed
    assert "no scenario rule matched request" in covered.observed[0]
    assert "kind=main, turn=1" in covered.observed[0]


def test_unknown_version_is_a_clear_install_error(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "probes", "clients", "install", "claude-code@0.0.999"],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
        env={**os.environ, "LOOPPROBE_CACHE": str(tmp_path)})
    assert done.returncode == 2
    assert "@anthropic-ai/claude-code@0.0.999: not a published version" in done.stderr \
        or "is not a published version" in done.stderr
    assert "Traceback" not in done.stderr


def _stable(report: dict) -> dict:
    """What must not change between two runs of one binary even where the client races."""
    return {k: report[k] for k in ("client", "status", "claims", "checks", "boundaries")}


# Reports whose bytes may differ between two runs because the client itself races, and why;
# every other report (and its journal) must be byte-identical apart from its timing file.
CLIENT_RACES = {
    "subagent-loop": "the parent's and the subagent's requests are made concurrently by the "
                     "client, so their order in the journal may differ from run to run",
}
# Not run twice here (tests.fixtures.suite_without_clock leaves it out: it waits a minute on
# the client's clock), and not byte-reproducible either: loop-wakeup's tool result names the
# wall-clock time of the wake-up, and the woken turn's modelUsage is filled in or not
# (docs/guarantees.md names both).


def test_the_suite_through_the_cli_is_reproducible(real_suite, claude_code_binary,
                                                   tmp_path: Path) -> None:
    """The shared run of the suite (``real_suite``, made as ``loopprobe run`` makes it) and
    one more through the CLI write the same reports."""
    again = tmp_path / "again"
    done = subprocess.run(
        [sys.executable, "-m", "probes", "run", "--client", claude_code_binary.version,
         "--out", str(again), "--work-dir", str(tmp_path / "work"),
         # the /loop probe waits a minute or more on the client's clock: not twice here
         "--catalog", "tests.fixtures.suite_without_clock"],
        capture_output=True, text=True, timeout=900, cwd=ROOT)
    # 1: some claims fail on this version (findings, not harness errors)
    assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-3000:]
    assert real_suite.exit_code in (0, 1), real_suite.error
    outputs = [real_suite.out, again]
    names = sorted(p.name for p in outputs[0].glob("*.json") if not p.name.endswith(".timing.json"))
    assert names == sorted([*(f"{spec.name}.json" for spec in REPORTS), "fingerprint.json"])
    guide = (outputs[0] / "EVIDENCE.md").read_text()
    for name in names:
        if name == "fingerprint.json":
            continue
        first, second = (json.loads((o / name).read_text()) for o in outputs)
        assert first["client"]["binary_sha256"] == claude_code_binary.sha256
        # report level: a harness error is neither a finding nor reproducible evidence
        assert first["status"] in ("passed", "failed"), (name, first["status"])
        if first["report"] in ("agent-loop-tool-result-resume", "runtime-controls",
                               "subagent-loop"):
            assert first["status"] == "passed", name
        assert _stable(first) == _stable(second), name
        if first["report"] not in CLIENT_RACES:
            for part in (name, first["journal"]):
                assert (outputs[0] / part).read_bytes() == (outputs[1] / part).read_bytes(), part
        for claim in first["claims"]:
            assert f"`{claim['id']}`" in guide


def test_a_probe_needing_a_flag_this_version_lacks_is_absent(claude_code_binary,
                                                            tmp_path: Path,
                                                            monkeypatch) -> None:
    from dataclasses import replace

    from probes.catalog.tool_result_resume import PROBE
    from probes.clients import claude_cli
    from probes.core.probe import ReportSpec
    from probes.report.build import build_report
    monkeypatch.setitem(claude_cli.CAPABILITY_FLAGS, "fork", ("--flag-from-the-future",))
    probe = replace(PROBE)
    outcome = run_probe(probe, ClaudeCode(), claude_code_binary, tmp_path)
    # a flag of other versions, not of this one: the version lacks the feature
    assert outcome.absent == (
        f"claude-code {claude_code_binary.version} lacks what this probe needs: "
        "fork (no --flag-from-the-future in its --help nor in its files)")
    assert outcome.not_applicable is None
    assert outcome.evidence is None and outcome.checks == []
    report, _, _ = build_report(ReportSpec("r", "r", (probe,)), [outcome], claude_code_binary)
    assert report["status"] == "passed"  # nothing contradicted, nothing run
    assert {c["status"] for c in report["claims"]} == {"absent"}
    assert all("--flag-from-the-future" in c["reason"] for c in report["claims"])


def test_an_own_probe_file_runs_from_the_cli(claude_code_binary, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "probes", "run", "--client", claude_code_binary.version,
         "--catalog", str(ROOT / "examples/probes/read_twice.py"), "--out", str(tmp_path / "r"),
         "--work-dir", str(tmp_path / "w")],
        capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    report = json.loads((tmp_path / "r" / "read-twice.json").read_text())
    assert [(c["id"], c["status"]) for c in report["claims"]] == [
        ("example.two-reads-two-results", "confirmed")]
    missing = subprocess.run(
        [sys.executable, "-m", "probes", "run", "--catalog", "no/such/file.py", "--out", "x"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert missing.returncode != 0
    assert "--catalog 'no/such/file.py': expected a Python file defining REPORTS, but there " \
        "is no such file" in missing.stderr
