"""The JSON Schemas: shipped current, every committed file valid, what the writers write valid,
and a broken file named with where it breaks."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import httpx
import pytest
import yaml

from mockapi import Rule, Scenario, load_scenario, text
from probes import cli
from probes.report.schemas import KINDS, SCHEMA_DIR, schema, validate_path
from tests.fakeloop import FakeLoopClient
from tests.fakeloop.catalog import REPORTS

ROOT = Path(__file__).resolve().parent.parent


def test_the_shipped_schemas_are_the_generated_ones() -> None:
    shipped = sorted(p.name for p in SCHEMA_DIR.glob("*.schema.json"))
    assert shipped == sorted(f"{kind}.schema.json" for kind in KINDS)
    for kind in KINDS:
        on_disk = json.loads((SCHEMA_DIR / f"{kind}.schema.json").read_text())
        assert on_disk == json.loads(json.dumps(schema(kind))), \
            f"{kind}: run `loopprobe schemas --out probes/report/json_schemas` to regenerate it"


def test_schemas_without_out_writes_to_the_working_directory_not_the_package(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Before: ``loopprobe schemas`` wrote into the installed package's folder."""
    before = {p.name: p.stat().st_mtime_ns for p in SCHEMA_DIR.glob("*.schema.json")}
    monkeypatch.chdir(tmp_path)
    assert cli.main(["schemas"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        f"{kind}.schema.json" for kind in KINDS)
    assert {p.name: p.stat().st_mtime_ns for p in SCHEMA_DIR.glob("*.schema.json")} == before
    assert f"wrote {Path('cases.schema.json')}" in capsys.readouterr().out


@pytest.mark.parametrize("folder", ["reports", "examples"])
def test_every_committed_file_is_valid(folder: str) -> None:
    checked, problems = validate_path(ROOT / folder)
    assert checked > 0
    assert [str(p) for p in problems] == []


def test_what_the_writers_write_is_valid(tmp_path: Path) -> None:
    out = tmp_path / "reports"
    assert cli.run_suite((FakeLoopClient(), "1"), out, catalog=REPORTS) == 0
    checked, problems = validate_path(out)
    kinds = {p.name.split(".", 1)[-1] for p in out.iterdir()}
    assert {"json", "journal.jsonl", "timing.json"} <= kinds
    assert checked >= 3 and [str(p) for p in problems] == []


def test_a_mock_journal_is_valid(mock_api, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    journal = tmp_path / "own.jsonl"
    server = mock_api(Scenario(rules=[Rule(reply=text("hi"))]), journal_path=journal)
    httpx.post(f"{server.url}/v1/messages", json={
        "model": "m", "max_tokens": 5, "stream": True,
        "messages": [{"role": "user", "content": "x"}]}, timeout=10)
    httpx.post(f"{server.url}/v1/messages", content=b"{not json", timeout=10)
    server.stop()
    checked, problems = validate_path(journal)
    assert checked == 1 and [str(p) for p in problems] == []


def _broken_copy(tmp_path: Path, name: str) -> Path:
    copy = tmp_path / name
    shutil.copy(ROOT / "reports" / "2.1.235" / name, copy)
    return copy


def test_a_broken_report_is_named_with_its_pointer(tmp_path: Path) -> None:
    path = _broken_copy(tmp_path, "goal.json")
    report = json.loads(path.read_text())
    report["claims"][1]["statement"] = 5
    del report["client"]["binary_sha256"]
    path.write_text(json.dumps(report))
    checked, problems = validate_path(path)
    shown = [str(p) for p in problems]
    assert checked == 1 and len(shown) == 2, shown
    assert shown[0] == f"{path}: at /claims/1/statement: 5 is not of type 'string' " \
                       "(expected by the report schema)"
    assert shown[1] == f"{path}: at /client: 'binary_sha256' is a required property " \
                       "(expected by the report schema)"


def test_a_broken_journal_line_is_named_with_its_line(tmp_path: Path) -> None:
    path = _broken_copy(tmp_path, "goal.journal.jsonl")
    lines = path.read_text().splitlines()
    record = json.loads(lines[1])
    record["seq"] = "two"
    lines[1] = json.dumps(record)
    lines.append("{torn")
    path.write_text("\n".join(lines) + "\n")
    problems = validate_path(path)[1]
    assert [p.where for p in problems] == ["line 2 at (top level)", f"line {len(lines)}"]
    assert "not valid under any of the given schemas" in problems[0].message
    assert problems[1].message.startswith("not JSON")


def test_a_scenario_may_point_at_its_schema_and_a_broken_one_is_located(tmp_path: Path) -> None:
    example = yaml.safe_load((ROOT / "examples/scenarios/tool-then-text.yaml").read_text())
    pointed = tmp_path / "pointed.yaml"
    pointed.write_text(yaml.safe_dump({"$schema": str(SCHEMA_DIR / "scenario.schema.json"),
                                       **example}))
    assert load_scenario(pointed).rules == load_scenario(
        ROOT / "examples/scenarios/tool-then-text.yaml").rules
    assert validate_path(pointed) == (1, [])
    broken = tmp_path / "broken.yaml"
    broken.write_text(yaml.safe_dump({"rules": [{"match": {"turn": "one"},
                                                 "reply": {"text": "x"}}]}))
    problems = validate_path(broken)[1]
    assert [p.where for p in problems] == ["at /rules/0/match/turn"]


def test_what_is_not_a_loopprobe_file_is_said_so(tmp_path: Path) -> None:
    other = tmp_path / "other.json"
    other.write_text('{"hello": 1}')
    (problem,) = validate_path(other)[1]
    assert problem.message.startswith("not a loopprobe file: expected one of a loopprobe report")
    (missing,) = validate_path(tmp_path / "absent.json")[1]
    assert missing.message == "no such file or folder"
    assert validate_path(tmp_path) == (0, [])  # a folder skips what it does not know


def test_the_cli_exits_2_with_the_problems(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    path = _broken_copy(tmp_path, "fingerprint.json")
    assert cli.main(["validate", str(path)]) == 0
    data = json.loads(path.read_text())
    data["kind"] = "fingerprint"
    data["schema_version"] = "one"
    path.write_text(json.dumps(data))
    assert cli.main(["validate", str(path)]) == 2  # bad input, never 1 (a regression)
    assert cli.main(["validate", str(tmp_path / "absent.json")]) == 2
    assert f"{path}: at /schema_version: 'one' is not of type 'integer'" in capsys.readouterr().out


def test_a_verdict_outside_the_vocabulary_is_refused_by_validate_too(tmp_path: Path) -> None:
    """diff, render, guide and mechanisms refused an unknown claim verdict (one line, exit
    2) while validate passed it: the schema now lists the verdicts and the statuses."""
    path = _broken_copy(tmp_path, "goal.json")
    report = json.loads(path.read_text())
    report["claims"][0]["status"] = "<script>alert(1)</script>"
    report["checks"][0]["status"] = "maybe"
    report["status"] = "green"
    path.write_text(json.dumps(report))
    problems = {p.where for p in validate_path(path)[1]}
    assert problems == {"at /claims/0/status", "at /checks/0/status", "at /status"}
    assert cli.main(["validate", str(path)]) == 2
