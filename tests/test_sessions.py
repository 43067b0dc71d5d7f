"""Sessions across versions: the pair probe, the table, the sandbox showing two clients.

The client tests run real pairs (2.1.235 and 2.1.332, each way) and compare each verdict
with the committed table; the counterfactual shows the checks fail where the reader cannot
see the writer's session.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from probes.clients.base import ClientBinary
from probes.clients.claude_code import ClaudeCode
from probes.core.outcome import ProbeOutcome
from probes.core.probe import Probe
from probes.report.format import read_journal_lines
from probes.report.schemas import validate_path
from probes.run.containment import CLIENT_DIR, _SandboxPlace
from probes.run.runner import run_probe
from probes.sandbox.folders import Sandbox
from probes.scale.sessions import (
    FORK_CLAIM,
    RESUME_CLAIM,
    compat_probe,
    failed_checks,
    pair_entry,
    render_table,
    run_table,
)
from tests.fakeloop import FakeLoopClient

COMMITTED = Path(__file__).resolve().parent.parent / "reports" / "sessions" / "sessions.json"


def _entry(writer: str, reader: str, resume: str = "ok", fork: str = "ok",
           **more: Any) -> dict[str, Any]:
    return {"writer": {"version": writer, "binary_sha256": "a" * 64},
            "reader": {"version": reader, "binary_sha256": "b" * 64}, "resume": resume,
            "fork": fork, "not_applicable": None, "error": None, "runs": [],
            "failed_checks": [], **more}


def test_a_cross_pair_runs_the_reader_for_resume_and_fork_and_the_diagonal_one_version() -> None:
    cross = compat_probe("2.1.235", "2.1.332")
    assert [(i.name, i.client_version, i.session, i.fork) for i in cross.invocations] == [
        ("write", None, "new", False), ("resume", "2.1.332", "resume", False),
        ("fork", "2.1.332", "resume", True)]
    assert all(i.client_version is None for i in compat_probe("2.1.235", "2.1.235").invocations)
    assert {c.id for c in cross.claims} == {RESUME_CLAIM, FORK_CLAIM}
    starts_anew = cross.counterfactuals[0].probe(cross)
    assert [i.session for i in starts_anew.invocations] == ["new", "new", "new"]


def test_the_table_orders_versions_numerically_and_lists_every_failure() -> None:
    lines = render_table([
        _entry("2.1.9", "2.1.10"), _entry("2.1.10", "2.1.9", resume="fails", failed_checks=[
            {"id": "x.resume.writer-prompt", "claim": RESUME_CLAIM, "expected": "a",
             "observed": "b"}]),
        _entry("2.1.9", "2.1.9"),
        _entry("2.1.10", "2.1.10", fork="not applicable",
               not_applicable="claude-code 2.1.10 lacks fork"),
    ])
    table = "\n".join(lines)
    assert "| writer ↓ reader → | 2.1.9 | 2.1.10 |" in table
    assert "| **2.1.9** | ok / ok | ok / ok |" in table
    assert "| **2.1.10** | **fails** / ok | ok / n/a |" in table
    assert ("- **2.1.10 → 2.1.9** (resume fails, fork ok): `x.resume.writer-prompt` expected "
            "'a', observed 'b'") in table
    assert "- **2.1.10 → 2.1.10** (resume ok, fork not applicable): claude-code 2.1.10 lacks " \
           "fork" in table


def test_an_ok_pair_keeps_every_check_and_its_journal(tmp_path: Path) -> None:
    """Run on the fake loop (which has no fork: the pair's fork run is left out), the table
    keeps the passed checks with what they observed, and the pair's requests gzipped."""
    client = FakeLoopClient()

    def run(probe: Probe, binary: ClientBinary) -> ProbeOutcome:
        no_fork = replace(probe, invocations=probe.invocations[:2])
        return run_probe(no_fork, client, binary, tmp_path / "work")

    out = tmp_path / "sessions"
    (entry,) = run_table(client, ["1"], out, jobs=1, run=run)
    assert entry["resume"] == "ok", failed_checks(entry)
    passed = {c["id"].split(".", 1)[1]: c for c in entry["checks"] if c["status"] == "passed"}
    assert passed["write.ended"]["observed"] == "SESSION_COMPAT_WRITER_ANSWER"
    seen = passed["resume.writer-prompt"]["observed"]  # placeholders, as in reports
    assert "SESSION_COMPAT_WRITE_MARKER" in seen and "$WORKSPACE/notes.txt" in seen
    assert all(len(json.dumps(c[side])) < 340 for c in entry["checks"]
               for side in ("expected", "observed"))
    assert [c["id"] for c in failed_checks(entry)] == [
        c["id"] for c in entry["checks"] if c["status"] != "passed"] != []
    lines = [json.loads(line) for line in read_journal_lines(out / entry["journal"])]
    assert [r["seq"] for r in lines if r["type"] == "request"] == [1, 2, 3]
    assert all(r["probe"] == "session-compat-1-to-1" for r in lines)
    assert (out / entry["journal"]).read_bytes()[4:8] == b"\0\0\0\0"  # no gzip timestamp
    assert validate_path(out / "sessions.json") == (1, [])


# four pairs of the table committed before every check was kept (reports/sessions at 7473a33)
BEFORE_EVERY_CHECK = Path(__file__).resolve().parent / "fixtures" / "data" / \
    "sessions-before-every-check.json"


def test_a_table_written_before_every_check_was_kept_still_reads() -> None:
    older = json.loads(BEFORE_EVERY_CHECK.read_text())
    assert all("failed_checks" in p and "checks" not in p for p in older["pairs"])
    assert validate_path(BEFORE_EVERY_CHECK) == (1, [])
    assert "| **2.1.235** | ok / ok |" in "\n".join(render_table(older["pairs"]))
    # what they kept: the failed checks alone (here the refused egress of older versions)
    pair = next(p for p in older["pairs"]
                if (p["writer"]["version"], p["reader"]["version"]) == ("2.0.77", "2.0.77"))
    assert failed_checks(pair)[0]["id"].endswith("no-egress")
    # the committed table keeps every check of every pair
    committed = json.loads(COMMITTED.read_text())
    assert all("checks" in p for p in committed["pairs"])


def test_a_missing_pair_is_shown_as_such() -> None:
    assert "| **2.1.1** | ok / ok | — |" in "\n".join(
        render_table([_entry("2.1.1", "2.1.1"), _entry("2.1.2", "2.1.1")]))


def test_the_sandbox_shows_other_versions_and_harness_runtimes_read_only(tmp_path: Path) -> None:
    def binary(version: str) -> ClientBinary:
        root = tmp_path / version
        return ClientBinary("claude-code", version, "linux-x64", "p", root,
                            root / "claude.exe", (str(root / "claude.exe"),), "0" * 64)

    box = Sandbox.create(tmp_path / "work", "probe")
    place = _SandboxPlace(box, binary("2.1.235"), tmp_path / "run", "bwrap", False,
                          readonly=[tmp_path / "venv"], others=[binary("2.1.332")])
    mounts = place._mounts()
    pairs = list(zip(mounts, mounts[1:], mounts[2:], strict=False))
    assert ("--ro-bind", str(tmp_path / "2.1.332"), f"{CLIENT_DIR}-2.1.332") in pairs
    assert ("--ro-bind", str(tmp_path / "venv"), str(tmp_path / "venv")) in pairs
    assert not any(m == "--bind" and n in (str(tmp_path / "venv"), str(tmp_path / "2.1.332"))
                   for m, n in itertools.pairwise(mounts))
    assert place.seen(tmp_path / "2.1.332" / "claude.exe") == f"{CLIENT_DIR}-2.1.332/claude.exe"
    assert place.placeholders()[f"{CLIENT_DIR}-2.1.332"] == "$CLIENT_DIR[2.1.332]"


def _committed(writer: str, reader: str) -> dict[str, Any]:
    pairs = json.loads(COMMITTED.read_text())["pairs"]
    return next(p for p in pairs
                if (p["writer"]["version"], p["reader"]["version"]) == (writer, reader))


@pytest.mark.client
@pytest.mark.parametrize(("writer", "reader"), [("2.1.235", "2.1.332"), ("2.1.332", "2.1.235")])
def test_a_real_pair_gives_the_committed_verdicts(writer: str, reader: str, tmp_path: Path,
                                                  claude_code_binary: Any,
                                                  newest_claude_code_binary: Any) -> None:
    binaries = {b.version: b for b in (claude_code_binary, newest_claude_code_binary)}
    outcome = run_probe(compat_probe(writer, reader), ClaudeCode(), binaries[writer], tmp_path)
    assert outcome.error is None and outcome.not_applicable is None
    assert outcome.evidence is not None
    assert {r.name: (r.client or {}).get("version", writer)
            for r in outcome.evidence.runs.values()} == {
        "write": writer, "resume": reader, "fork": reader}
    entry = pair_entry(binaries[writer], binaries[reader], outcome)
    committed = _committed(writer, reader)
    assert (entry["resume"], entry["fork"]) == (committed["resume"], committed["fork"]), \
        failed_checks(entry)


@pytest.mark.client
def test_the_reader_starting_anew_makes_both_claims_fail(tmp_path: Path,
                                                         claude_code_binary: Any,
                                                         newest_claude_code_binary: Any) -> None:
    probe = compat_probe("2.1.235", "2.1.332")
    variant = probe.counterfactuals[0].probe(probe)
    outcome = run_probe(variant, ClaudeCode(), claude_code_binary, tmp_path)
    assert outcome.error is None and outcome.evidence is not None
    assert not [c for c in outcome.checks if c.claim is None and not c.passed]
    for claim in (RESUME_CLAIM, FORK_CLAIM):
        assert any(c.claim == claim and c.status == "failed" for c in outcome.checks), claim
