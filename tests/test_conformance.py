"""The conformance table (``loopprobe conformance``), its baseline gate, its page and ``explain``.

Fast: the generic catalog on two "versions" of the fake tool loop, the second with a planted
violation (pause_turn ends its loop): scores, tiers, deltas, the baseline (a listed failure
passes, a stale entry fails), the schema, the Markdown, the page in a real browser, the bug
report. The committed table (``reports/conformance.json``) is checked against its folders.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from probes import cli
from probes.catalog.agent_loop import PAUSE, REPORTS
from probes.clients.base import ClientKey
from probes.clients.registry import report_folder
from probes.gate.baseline import load_baseline
from probes.gate.conformance import (
    CONFORMANCE_FILE,
    CONFORMANCE_SUBDIR,
    build_conformance,
    render_conformance,
    tier_of,
)
from probes.report.explain import explain_claim
from probes.report.render import CONFORMANCE_PAGE, render_conformance_page
from probes.report.schemas import validate_path
from tests.fakeloop.toolloop_client import FakeToolLoopClient
from tests.test_render import _browser, _Elements

ROOT = Path(__file__).resolve().parent.parent
KIND = "fake-tool-loop"
PLUGIN = f"{KIND}=tests.fakeloop.toolloop_client:FakeToolLoopClient"


class _Planted(FakeToolLoopClient):
    """Version 2 of the fake tool loop: its pause_turn ends the loop (a planted regression)."""

    def __init__(self) -> None:
        super().__init__(("pause-ends",))


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("conformance")
    for client, version in ((FakeToolLoopClient(), "1"), (_Planted(), "2")):
        cli.run_suite((client, version), root / CONFORMANCE_SUBDIR /
                      report_folder(ClientKey(KIND, version)), catalog=REPORTS, jobs=2)
    return root


def _folders(out: Path) -> list[Path]:
    return [out / CONFORMANCE_SUBDIR / f"{KIND}-{v}" for v in ("1", "2")]


def _baseline(tmp_path: Path, entries: str) -> Path:
    path = tmp_path / "baseline.yaml"
    path.write_text(f"loopprobe: baseline/1\nexpected_failures:\n{entries}")
    return path


def test_scores_tiers_and_the_deltas_between_oldest_and_newest(out: Path) -> None:
    table = build_conformance(_folders(out))
    first, second = table["clients"]
    assert (first["label"], first["score"], first["tier"]) == (f"{KIND}@1", 1.0, "tier 1")
    assert (second["confirmed"], second["applicable"], second["tier"]) == (7, 8, "tier 2")
    assert second["cells"][PAUSE]["status"] == "contradicted"
    assert table["kinds"] == [{"kind": KIND, "oldest": "1", "newest": "2", "versions": ["1", "2"],
                               "deltas": [{"claim": PAUSE, "oldest": "confirmed",
                                           "newest": "contradicted", "change": "regressed"}]}]
    assert [(r["client"], r["claim"], r["outcome"]) for r in table["gate"]] == [
        (f"{KIND}@2", PAUSE, "failed")]
    assert table["exit_code"] == 1
    assert [tier_of(s) for s in (1.0, 0.8, 0.79, None)] == ["tier 1", "tier 2", None, None]


def test_a_harness_error_or_a_claim_not_applicable_never_counts(out: Path,
                                                                tmp_path: Path) -> None:
    folder = tmp_path / f"{KIND}-2"
    shutil.copytree(_folders(out)[1], folder)
    path = folder / "agent-loop-conformance.json"
    report = json.loads(path.read_text())
    for claim in report["claims"]:
        if claim["id"] == PAUSE:
            claim["status"] = "error"
        elif claim["id"] == "loop.step-limit":
            claim["status"] = "not_applicable"
    path.write_text(json.dumps(report))
    client = build_conformance([folder])["clients"][0]
    assert (client["confirmed"], client["applicable"], client["score"]) == (6, 6, 1.0)
    assert build_conformance([folder])["gate"][0]["outcome"] in ("harness_problem", "skipped")


def test_the_baseline_passes_a_listed_failure_and_fails_a_stale_entry(out: Path,
                                                                      tmp_path: Path) -> None:
    listed = load_baseline(_baseline(tmp_path, f"""  - case: {KIND}
    expectation: {PAUSE}
    versions: ["2"]
    reason: "planted: pause_turn ends the loop"
  - case: another-kind
    expectation: {PAUSE}
    versions: "*"
    reason: "lists nothing judged here"
"""))
    table = build_conformance(_folders(out), listed)
    assert [r["outcome"] for r in table["gate"]] == ["expected_failure"]
    assert table["exit_code"] == 0
    assert [e["case"] for e in table["unused_baseline"]] == ["another-kind"]
    stale = load_baseline(_baseline(tmp_path, f"""  - case: {KIND}
    expectation: {PAUSE}
    versions: "*"
    reason: "listed on every version, but version 1 keeps it"
"""))
    table = build_conformance(_folders(out), stale)
    assert sorted((r["client"], r["outcome"]) for r in table["gate"]) == [
        (f"{KIND}@1", "stale"), (f"{KIND}@2", "expected_failure")]
    assert table["exit_code"] == 1


def test_the_command_writes_the_table_its_markdown_and_its_page(
        out: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOOPPROBE_CLIENTS", PLUGIN)
    code = cli.main(["conformance", "--out", str(out), "--skip-run",
                     "--clients", f"{KIND}@1,{KIND}@2"])
    assert code == 1
    table = json.loads((out / CONFORMANCE_FILE).read_text())
    assert table == build_conformance(_folders(out))
    assert validate_path(out / CONFORMANCE_FILE)[1] == []
    markdown = (out / "CONFORMANCE.md").read_text()
    assert markdown == render_conformance(table)
    assert f"| `{PAUSE}` | confirmed | **contradicted** |" in markdown
    assert "| **tier** | tier 1 | tier 2 |" in markdown
    assert f"`loopprobe explain {PAUSE} --client {KIND}@2`" in markdown
    page = (out / CONFORMANCE_PAGE).read_text()
    assert page == render_conformance_page(out / CONFORMANCE_FILE)
    cells = {(e["data-claim-id"], c["data-client"]): c.get("data-count-verdict")
             for e, c in _rows(page)}
    assert cells == {(claim["id"], client["label"]): client["cells"][claim["id"]]["status"]
                     for claim in table["claims"] for client in table["clients"]}


def _rows(html: str) -> list[tuple[dict[str, str], dict[str, str]]]:
    found, row = [], None
    for e in _Elements(html).elements:
        if e.get("class") == "conformance-row":
            row = e
        elif e["tag"] == "td" and "data-client" in e and row is not None \
                and "data-count-verdict" in e:
            found.append((row, e))
    return found


def test_the_page_works_in_a_real_browser(out: Path, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOOPPROBE_CLIENTS", PLUGIN)
    cli.main(["conformance", "--out", str(out), "--skip-run", "--clients", f"{KIND}@1,{KIND}@2"])
    done = _browser(out / CONFORMANCE_PAGE, tmp_path / "profile", "--dump-dom")
    assert done.returncode == 0, done.stderr[-2000:]
    dom = _Elements(done.stdout)
    assert next(e for e in dom.elements if e["tag"] == "body").get("data-js") == "ready"
    summary = next(e for e in dom.elements if e.get("id") == "verdict-summary")
    assert summary["data-total"] == "16"
    tiers = {e["data-client"]: e["data-tier"] for e in dom.elements if e.get("class") == "tier"}
    assert tiers == {f"{KIND}@1": "tier 1", f"{KIND}@2": "tier 2"}


def test_explain_prints_a_self_contained_bug_report(out: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    folder = _folders(out)[1]
    report = explain_claim(folder, PAUSE)
    client = json.loads((folder / "agent-loop-conformance.json").read_text())["client"]
    for needed in (f"{KIND}@2", client["binary_sha256"], "contradicted",
                   "Stop reasons and fallback", "## Expected and observed",
                   '"text": "LP_PAUSED_PART"', "## The scripted exchange", '"pause_turn"',
                   "## What the client sent", '"Search, then answer."',
                   f"loopprobe run --client {KIND}@2"):
        assert needed in report, needed
    monkeypatch.setenv("LOOPPROBE_CLIENTS", PLUGIN)
    assert cli.main(["explain", PAUSE, "--client", f"{KIND}@2", "--reports", str(out)]) == 0
    assert capsys.readouterr().out == report
    assert cli.main(["explain", "loop.no-such-claim", "--client", f"{KIND}@2",
                     "--reports", str(out)]) == cli.EXIT_HARNESS
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "known: loop." in err
    assert cli.main(["explain", PAUSE, "--client", f"{KIND}@9", "--reports",
                     str(out)]) == cli.EXIT_HARNESS


def test_the_committed_table_is_what_its_folders_give() -> None:
    reports = ROOT / "reports"
    if not (reports / CONFORMANCE_FILE).is_file():
        pytest.skip("no committed conformance table yet")
    table = json.loads((reports / CONFORMANCE_FILE).read_text())
    folders = [reports / CONFORMANCE_SUBDIR / c["dir"] for c in table["clients"]]
    baseline = load_baseline(ROOT / table["baseline"]) if table["baseline"] else None
    rebuilt = build_conformance(folders, baseline)
    assert rebuilt == {**table, "baseline": rebuilt["baseline"]}
    assert table["exit_code"] == 0, "the committed baseline must list every known failure"
    assert (reports / "CONFORMANCE.md").read_text() == render_conformance(table)
    assert validate_path(reports / CONFORMANCE_FILE)[1] == []
