"""loopprobe diff and matrix over report directories (committed evidence and injected changes)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from probes.core.verdicts import CLAIM_VERDICTS
from probes.report.diff import diff_directories, render_markdown
from probes.report.format import ReportError
from probes.report.matrix import build_matrix, render_matrix
from probes.scale.almanac import load_bisects, render_timeline
from probes.scale.almanac_doc import load_almanac, with_almanac_text

ROOT = Path(__file__).resolve().parent.parent
REPORTS = ROOT / "reports"


def _loopprobe(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "probes", *args], capture_output=True,
                          text=True, timeout=120, cwd=ROOT)


def _copy(version: str, tmp_path: Path) -> Path:
    target = tmp_path / version
    shutil.copytree(REPORTS / version, target)
    return target


def test_identical_directories_show_no_change(tmp_path: Path) -> None:
    result = diff_directories(REPORTS / "2.1.235", _copy("2.1.235", tmp_path))
    assert result.regressions == []
    assert result["checks_flipped"] == []
    assert {c["change"] for c in result["claims"]} == {"same"}
    assert _loopprobe("diff", str(REPORTS / "2.1.235"), str(REPORTS / "2.1.235")).returncode == 0


def test_an_injected_regression_exits_1_and_names_it(tmp_path: Path) -> None:
    broken = _copy("2.1.235", tmp_path)
    path = broken / "runtime-controls.json"
    report = json.loads(path.read_text())
    claim = next(c for c in report["claims"] if c["id"] == "probe.stop-hook-reentry")
    claim.update(status="contradicted", passed=False, reason="failed checks: injected")
    check = next(c for c in report["checks"] if c["id"] == "stop-hook-reentry.hook-calls")
    check.update(passed=False, observed=1)
    path.write_text(json.dumps(report))
    done = _loopprobe("diff", str(REPORTS / "2.1.235"), str(broken))
    assert done.returncode == 1
    assert "probe.stop-hook-reentry" in done.stderr
    assert "| `probe.stop-hook-reentry` | confirmed | contradicted | **regressed** |" in done.stdout
    assert "| `stop-hook-reentry.hook-calls` | True | False | 2 | 2 | 1 |" in done.stdout
    # the other way round it is a fix, not a regression
    assert _loopprobe("diff", str(broken), str(REPORTS / "2.1.235")).returncode == 0


def test_diff_of_2_0_77_names_tools_betas_and_subagent_mode() -> None:
    result = diff_directories(REPORTS / "2.1.235", REPORTS / "2.0.77")
    fp = result["fingerprint"]
    assert ("Task" in fp["tools"]["added"], "Agent" in fp["tools"]["removed"]) == (True, True)
    assert "context-management-2025-06-27" in fp["anthropic_beta"]["removed"]
    assert "system/task_notification" in fp["stream_event_types"]["removed"]
    flipped = {c["id"] for c in result["checks_flipped"]}
    # 2.0.77 acknowledges the background Task, but its result never comes by notification
    assert "subagent-loop.notification-carries-result" in flipped
    assert "POST /v1/messages warmup" in fp["requests_seen"]["added"]
    text = render_markdown(result)
    assert "**tools**: added ['Task'], removed ['Agent']" in text


def test_diff_of_2_1_332_names_the_changed_betas() -> None:
    fp = diff_directories(REPORTS / "2.1.235", REPORTS / "2.1.332")["fingerprint"]
    assert fp["anthropic_beta"]["added"] or fp["anthropic_beta"]["removed"]
    assert fp["system_blocks"], "the system prompt changed between these versions"


def test_diff_refuses_what_is_not_a_report_directory(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match="no loopprobe reports"):
        diff_directories(REPORTS / "2.1.235", tmp_path)
    (tmp_path / "x.json").write_text('{"schema_version": 99}')
    done = _loopprobe("diff", str(REPORTS / "2.1.235"), str(tmp_path))
    assert done.returncode == 2
    assert "expected a loopprobe report with schema_version 1 or 2 or 3 or 4 or 5, found 99" in done.stderr


def test_matrix_tabulates_every_claim_per_version() -> None:
    committed = json.loads((REPORTS / "matrix.json").read_text())
    folders = [v["dir"] for v in committed["versions"]]
    matrix = build_matrix([REPORTS / v for v in folders])
    columns = [v["client"] for v in committed["versions"]]
    assert len(columns) >= 13  # the almanac: twelve CLI versions and the Agent SDK
    assert [v["client"] for v in matrix["versions"]] == columns
    run = {v["client"]: {c["id"] for path in (REPORTS / v["dir"]).glob("*.json")
                         for c in json.loads(path.read_text()).get("claims", [])
                         if isinstance(c, dict)}
           for v in committed["versions"]}
    for claim in matrix["claims"]:
        # a version without a verdict is one whose reports predate the claim (not run)
        assert set(claim["results"]) == {c for c in columns if claim["id"] in run[c]}
        assert claim["results"], claim["id"]
        for cell in claim["results"].values():
            assert cell["status"] in CLAIM_VERDICTS
            assert cell["reason"]
    assert matrix == committed
    timeline = render_timeline(matrix, load_bisects(REPORTS / "bisect"), REPORTS)
    text = render_matrix(matrix) + "\n" + timeline
    almanac = load_almanac(REPORTS)  # and the almanac's text form, when one is committed
    assert (with_almanac_text(text, almanac) if almanac else text) == \
        (REPORTS / "MATRIX.md").read_text()


def test_a_reordering_alone_is_named_as_such(tmp_path: Path) -> None:
    swapped = _copy("2.1.235", tmp_path)
    path = swapped / "subagent-loop.json"
    report = json.loads(path.read_text())
    requests = report["probes"][0]["requests"]
    loop = [i for i, r in enumerate(requests) if r["path"] == "/v1/messages"]
    requests[loop[1]], requests[loop[2]] = requests[loop[2]], requests[loop[1]]
    path.write_text(json.dumps(report))
    result = diff_directories(REPORTS / "2.1.235", swapped)
    (sequence,) = result["request_sequences"]
    assert (sequence["probe"], sequence["order_only"]) == ("subagent-loop", True)
    assert "the same 4 requests in another order" in render_markdown(result)
