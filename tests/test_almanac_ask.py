"""``loopprobe almanac show`` and ``almanac at`` on the committed almanac: the claims a query
names (an id, or words matched against statements, mechanisms and mapped changelog text),
each change with its kind, flipped checks with both sides' observed values from the
witnesses, the changelog entries beside it; every verdict on one release; bad input in one
line, exit 2, with the close ids or the nearest versions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from probes import cli

ROOT = Path(__file__).resolve().parent.parent
ALMANAC = ROOT / "reports" / "almanac.json"


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(["almanac", *args, "--almanac", str(ALMANAC)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _shown(capsys: pytest.CaptureFixture[str], *query: str) -> dict[str, Any]:
    code, out, err = _run(capsys, "show", *query, "--json")
    assert code == 0, err
    data: dict[str, Any] = json.loads(out)
    return data


def test_goal_names_the_goal_claims_with_their_change_checks_and_changelog(
        capsys: pytest.CaptureFixture[str]) -> None:
    ids = [c["id"] for c in _shown(capsys, "/goal")["claims"]]
    assert "probe.goal-evaluator-loop" in ids and "probe.goal-impossible-ends" in ids
    code, out, _ = _run(capsys, "show", "/goal")
    assert code == 0
    story = out.split("\n\n")[ids.index("probe.goal-evaluator-loop")]
    assert story.startswith("probe.goal-evaluator-loop  (goal; probe goal-evaluator)")
    assert "2.0.0–2.1.138        absent" in story
    assert "change 2.1.138 → 2.1.139: presence: introduced (absent → confirmed)" in story
    # a flipped check with what each side observed, from the witnesses' reports
    assert "flipped goal-evaluator.sequence: failed → passed" in story
    assert 'before expected ["main", "evaluator", "main", "evaluator"]; observed []' in story
    # the changelog entry of its release, with what the verdicts say of it, and the witnesses
    assert "changelog 2.1.139 [agrees; probe.goal-evaluator-loop] Added `/goal` command" in story
    assert f"witnesses: {ALMANAC.parent}/almanac/witnesses/2.1.138" in story


def test_list_changed_and_max_budget_name_their_claims(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert [c["id"] for c in _shown(capsys, "list_changed")["claims"]] == [
        "probe.mcp-tool-list-refresh"]
    shown = _shown(capsys, "max", "budget")
    assert [c["id"] for c in shown["claims"]] == ["probe.max-budget-usd"]
    claim = shown["claims"][0]
    # every change with its kind and both sides' witnesses; the flipped checks' values
    assert [c["kind"] for c in claim["changes"]] == [c["kind"] for c in next(
        x for x in json.loads(ALMANAC.read_text())["claims"]
        if x["id"] == "probe.max-budget-usd")["changes"]]
    values = [f["values"] for c in claim["changes"] for f in c["flipped_checks"]]
    assert any(v["after"] and "observed" in v["after"] for v in values)
    # its changelog entry outside any change's interval is shown too, with its status
    assert [e["status"] for e in claim["changelog_elsewhere"]
            if e["text"].startswith("SDK: added --max-budget-usd flag")] == [
        "not seen by the probe"]


def test_a_claim_id_with_or_without_its_prefix_names_one_claim(
        capsys: pytest.CaptureFixture[str]) -> None:
    for query in ("probe.stop-hook-block-cap", "stop-hook-block-cap"):
        assert [c["id"] for c in _shown(capsys, query)["claims"]] == ["probe.stop-hook-block-cap"]


def test_no_match_is_one_line_exit_2_naming_close_claims(
        capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "show", "stop-hook-blok-cap")
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1
    assert "no claim matches 'stop-hook-blok-cap'" in err
    assert "close: probe.stop-hook-block-cap" in err


def test_at_gives_every_claim_its_verdict_probed_or_held(
        capsys: pytest.CaptureFixture[str]) -> None:
    document = json.loads(ALMANAC.read_text())
    code, out, err = _run(capsys, "at", "2.1.90", "--json")
    assert code == 0, err
    found = json.loads(out)
    assert [r["id"] for r in found["claims"]] == [c["id"] for c in document["claims"]]
    for row in found["claims"]:
        claim = next(c for c in document["claims"] if c["id"] == row["id"])
        segment = next(s for s in claim["segments"] if s["first"] == row["segment"][0])
        assert row["verdict"] == segment["verdict"]
        assert row["probed"] == ("2.1.90" in segment["probed"])
    code, text, _ = _run(capsys, "at", "2.1.90")
    assert code == 0 and text.startswith("2.1.90: ")
    assert "probe.subagent-isolation" in text and "probed here" in text
    assert "held in 2.0.0–2.1.332, probed on 2.1.88, 2.1.92" in text


@pytest.mark.parametrize(("version", "said"), [
    ("2.1.999", "nearest: 2.1.331, 2.1.332"),
    ("1.0.0", "nearest: 2.0.0, 2.0.1"),
    ("2.1.89x", "expected a version of the almanac's range 2.0.0–2.1.332"),
])
def test_at_an_unknown_version_is_one_line_exit_2_naming_the_nearest(
        capsys: pytest.CaptureFixture[str], version: str, said: str) -> None:
    code, out, err = _run(capsys, "at", version)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and said in err


def test_a_missing_or_broken_almanac_is_one_line_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["almanac", "show", "x", "--almanac", str(tmp_path / "none.json")]) == 2
    assert "no such file" in capsys.readouterr().err
    broken = tmp_path / "almanac.json"
    broken.write_text(json.dumps({**json.loads(ALMANAC.read_text()), "claims": "nope"}))
    assert cli.main(["almanac", "at", "2.1.90", "--almanac", str(broken)]) == 2
    err = capsys.readouterr().err
    assert "claims" in err and len(err.strip().splitlines()) == 1


def test_untrusted_text_never_reaches_the_terminal_raw(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Statements and changelog text are shown with control characters escaped."""
    document = json.loads(ALMANAC.read_text())
    claim = next(c for c in document["claims"] if c["id"] == "probe.goal-evaluator-loop")
    claim["statement"] += " \x1b[2J\x1b]0;owned\x07"
    claim["changes"][0]["changelog"][0]["text"] += "\x1b[31m red"
    path = tmp_path / "almanac.json"
    path.write_text(json.dumps(document))
    assert cli.main(["almanac", "show", "goal-evaluator-loop", "--almanac", str(path)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert "\\x1b[2J" in out and "\\x1b[31m red" in out


def test_a_reader_that_leaves_early_ends_the_output_quietly() -> None:
    """``almanac show ... | head``: the pipe closes mid-output; exit 0, nothing on stderr."""
    import subprocess
    import sys
    process = subprocess.Popen([sys.executable, "-m", "probes", "almanac", "show", "compaction",
                                "--json", "--almanac", str(ALMANAC)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    assert process.stdout is not None and process.stderr is not None
    assert process.stdout.readline().strip() == b"{"
    process.stdout.close()
    assert process.wait(timeout=60) == 0
    assert process.stderr.read() == b""
