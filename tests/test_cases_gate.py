"""The gate after ``loopprobe check``'s runs, on hand-made report folders: each outcome, the
baseline's semantics (a listed failure passes, a stale entry fails, a harness problem is
never the user's failure), the exit codes, and what CI reads (summary, JUnit, CTRF, outputs).
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from probes.core.files import write_json
from probes.gate.baseline import Baseline, BaselineError, load_baseline
from probes.gate.ctrf import check_ctrf
from probes.gate.gate import CHECK_FILE, GateResult, judge, write_check
from probes.gate.github_outputs import append_github_outputs
from probes.gate.junit import check_junit_xml
from probes.gate.summary import summary_markdown
from probes.report.format import REPORT_SCHEMA_VERSION
from probes.report.schemas import validate_path

# each verdict as a check status would make it (probes.core.verdicts.decide_claim)
_CHECK_STATUS = {"confirmed": "passed", "contradicted": "failed", "absent": "absent",
                 "not_reached": "not_reached", "not_observable": "not_observable",
                 "not_applicable": "passed", "error": "passed"}


def make_report_folder(root: Path, version: str, verdicts: dict[str, str],
                       name: str = "my-plugin") -> Path:
    """A version folder as ``loopprobe run`` writes one, reduced to what readers need:
    ``verdicts`` maps ``<case>.<expectation>`` to its claim verdict, one check each."""
    folder = root / version
    claims, checks, probes = [], [], {}
    for claim_id, verdict in verdicts.items():
        case = claim_id.split(".")[0]
        check_id = f"{claim_id}.check"
        status = _CHECK_STATUS[verdict]
        checks.append({"id": check_id, "claim": claim_id, "description": "the expectation",
                       "passed": status == "passed", "expected": f"wanted {claim_id}",
                       "observed": "seen" if status == "passed" else f"not {claim_id}",
                       "evidence": "the run", "status": status, "observable": True,
                       "role": "behaviour", "journal_lines": []})
        reason = {"confirmed": "all 1 checks passed",
                  "error": "the harness failed: harness.main.finished observed killed"}.get(
                      verdict, f"{check_id} expected wanted {claim_id}, observed not {claim_id}")
        claims.append({"id": claim_id, "statement": f"{claim_id} holds",
                       "source": {"kind": "project", "citation": "the case file"},
                       "beyond_source": None, "counterfactuals": None, "probe": case,
                       "status": verdict, "passed": verdict == "confirmed", "reason": reason,
                       "checks": [check_id]})
        probes.setdefault(case, {"name": case, "title": case, "status": "passed",
                                 "not_applicable": None, "error": None,
                                 "claims": []})["claims"].append(claim_id)
    report: dict[str, Any] = {
        "schema_version": REPORT_SCHEMA_VERSION, "report": name, "title": "My plugin",
        "summary": "cases", "generator": {"name": "loopprobe", "version": "0"},
        "client": {"name": "claude-code", "version": version, "platform": "linux-x86_64",
                   "package": "@anthropic-ai/claude-code", "entry": "cli.js",
                   "binary_sha256": "0" * 64},
        "status": "passed", "passed": True, "complete": True, "claims": claims,
        "checks": checks, "probes": list(probes.values()), "terminal_reasons": [],
        "trust": {}, "boundaries": [], "journal": f"{name}.journal.jsonl"}
    write_json(folder / f"{name}.json", report)
    (folder / f"{name}.journal.jsonl").write_text("")
    return folder


def baseline(*entries: dict[str, Any]) -> Baseline:
    return Baseline.model_validate({"loopprobe": "baseline/1", "expected_failures": entries})


def entry(case: str, expectation: str, versions: str | list[str]) -> dict[str, Any]:
    return {"case": case, "expectation": expectation, "versions": versions, "reason": "known"}


def outcomes(result: GateResult) -> dict[tuple[str, str], str]:
    return {(row.version, row.claim): row.outcome for row in result.rows}


def test_every_verdict_gets_its_outcome_and_keeps_expected_and_observed(tmp_path: Path) -> None:
    folder = make_report_folder(tmp_path, "2.1.100", {
        "a.tool_called-1": "confirmed", "a.hook_ran-1": "contradicted",
        "b.file_exists-1": "contradicted", "b.result-1": "confirmed",
        "c.max_requests-1": "error", "d.hook_ran-1": "absent", "d.tool_order-1": "not_reached",
        "d.result-1": "not_observable", "d.file_absent-1": "not_applicable"})
    result = judge([("2.1.100", folder)],
                   baseline(entry("b", "file_exists-1", "<3"), entry("b", "result-1", "*")))
    assert outcomes(result) == {
        ("2.1.100", "a.tool_called-1"): "passed", ("2.1.100", "a.hook_ran-1"): "failed",
        ("2.1.100", "b.file_exists-1"): "expected_failure", ("2.1.100", "b.result-1"): "stale",
        ("2.1.100", "c.max_requests-1"): "harness_problem",
        ("2.1.100", "d.hook_ran-1"): "skipped", ("2.1.100", "d.tool_order-1"): "skipped",
        ("2.1.100", "d.result-1"): "skipped", ("2.1.100", "d.file_absent-1"): "skipped"}
    failed = next(r for r in result.rows if r.claim == "a.hook_ran-1")
    assert (failed.case, failed.expectation, failed.check) == ("a", "hook_ran-1",
                                                               "a.hook_ran-1.check")
    assert (failed.expected, failed.observed) == ("wanted a.hook_ran-1", "not a.hook_ran-1")
    assert "observed not a.hook_ran-1" in failed.reason
    assert next(r for r in result.rows if r.outcome == "skipped").reason
    assert (result.exit_code, result.failed) == (1, True)


def test_a_listed_failure_passes_the_gate(tmp_path: Path) -> None:
    folder = make_report_folder(tmp_path, "2.1.90", {"a.hook_result-1": "contradicted",
                                                     "a.tool_called-1": "confirmed"})
    result = judge([("2.1.90", folder)], baseline(entry("a", "hook_result-1", "<2.1.94")))
    assert outcomes(result)[("2.1.90", "a.hook_result-1")] == "expected_failure"
    assert next(r for r in result.rows if r.outcome == "expected_failure").baseline_reason == \
        "known"
    assert (result.exit_code, result.failed, result.first_bad_version) == (0, False, None)


def test_a_listed_entry_covers_only_its_versions(tmp_path: Path) -> None:
    folders = [(v, make_report_folder(tmp_path, v, {"a.x-1": "contradicted"}))
               for v in ("2.1.90", "2.1.94", "2.1.100")]
    result = judge(folders, baseline(entry("a", "x-1", ["2.1.90", "2.1.100"])))
    assert [r.outcome for r in result.rows] == ["expected_failure", "failed", "expected_failure"]
    assert result.first_bad_version == "2.1.94"


def test_a_stale_entry_fails_the_gate(tmp_path: Path) -> None:
    folder = make_report_folder(tmp_path, "2.1.200", {"a.hook_result-1": "confirmed"})
    result = judge([("2.1.200", folder)], baseline(entry("a", "*", ">=2.1")))
    assert outcomes(result) == {("2.1.200", "a.hook_result-1"): "stale"}
    assert (result.exit_code, result.failed, result.regressed) == (1, True, False)
    assert result.first_bad_version is None  # no behaviour failed: the baseline is out of date


def test_a_harness_problem_is_never_a_failure_nor_stale(tmp_path: Path) -> None:
    good = make_report_folder(tmp_path, "2.1.100", {"a.x-1": "confirmed"})
    broken = make_report_folder(tmp_path, "2.1.101", {"a.x-1": "error"})
    result = judge([("2.1.100", good), ("2.1.101", broken)], baseline(entry("a", "x-1", "*")))
    assert [r.outcome for r in result.rows] == ["stale", "harness_problem"]
    result = judge([("2.1.100", good), ("2.1.101", broken)], None)
    assert (result.exit_code, result.failed) == (0, False)


def test_nothing_judged_exits_2(tmp_path: Path) -> None:
    broken = make_report_folder(tmp_path, "2.1.101", {"a.x-1": "error", "b.y-1": "error"})
    result = judge([("2.1.101", broken)], None)
    assert (result.exit_code, result.failed) == (2, False)
    missing = judge([("2.1.102", tmp_path / "nowhere"), ("2.1.103", tmp_path)], None)
    assert missing.exit_code == 2 and [u.version for u in missing.unreadable] == ["2.1.102",
                                                                                  "2.1.103"]
    assert "not a directory" in missing.unreadable[0].error
    assert judge([], None).exit_code == 2


def test_an_unreadable_folder_beside_judged_ones_is_a_harness_problem(tmp_path: Path) -> None:
    good = make_report_folder(tmp_path, "2.1.100", {"a.x-1": "confirmed"})
    (tmp_path / "2.1.101").mkdir()
    (tmp_path / "2.1.101" / "my-plugin.json").write_text("{not json")
    result = judge([("2.1.100", good), ("2.1.101", tmp_path / "2.1.101")], None)
    assert result.exit_code == 0 and "not JSON" in result.unreadable[0].error
    assert "2.1.101" in summary_markdown(result).split("### Harness problems")[1]


def test_a_failure_after_a_pass_is_a_regression_and_names_the_first_bad_version(
        tmp_path: Path) -> None:
    verdicts = {"2.1.90": "contradicted", "2.1.100": "confirmed", "2.1.110": "contradicted",
                "2.1.120": "contradicted"}
    # given out of order: the gate orders by version number
    folders = [(v, make_report_folder(tmp_path, v, {"a.x-1": verdicts[v]}))
               for v in ("2.1.120", "2.1.90", "2.1.110", "2.1.100")]
    result = judge(folders, None)
    assert result.versions == ["2.1.90", "2.1.100", "2.1.110", "2.1.120"]
    assert result.regressed and [r.version for r in result.regressions()] == ["2.1.110",
                                                                             "2.1.120"]
    assert result.first_bad_version == "2.1.90"  # the oldest failure, regressed or not
    only_old = judge([folders[1], folders[3]], None)
    assert not only_old.regressed and only_old.failed


def test_check_json_is_written_and_valid_against_its_schema(tmp_path: Path) -> None:
    folder = make_report_folder(tmp_path / "runs", "2.1.100", {"a.x-1": "contradicted",
                                                               "a.y-1": "error"})
    result = judge([("2.1.100", folder), ("2.1.101", tmp_path / "missing")],
                   baseline(entry("zz", "*", "*")))
    path = write_check(result, tmp_path / "out")
    assert path.name == CHECK_FILE
    data = json.loads(path.read_text())
    assert data["kind"] == "check" and data["exit_code"] == 1 and data["failed"]
    assert data["counts"]["failed"] == 1 and data["unused_baseline"][0]["case"] == "zz"
    checked, problems = validate_path(path)
    assert (checked, problems) == (1, [])
    data["results"][0]["outcome"] = "fine"
    path.write_text(json.dumps(data))
    assert "outcome" in str(validate_path(path)[1][0])


def test_the_summary_table_has_a_cell_per_case_and_version(tmp_path: Path) -> None:
    folders = [("2.1.90", make_report_folder(tmp_path, "2.1.90", {
        "a.x-1": "contradicted", "a.y-1": "confirmed", "b.z-1": "confirmed"})),
        ("2.1.100", make_report_folder(tmp_path, "2.1.100", {
            "a.x-1": "confirmed", "a.y-1": "confirmed", "b.z-1": "error"}))]
    text = summary_markdown(judge(folders, baseline(entry("a", "x-1", "<2.1.94"))))
    assert "| case | 2.1.90 | 2.1.100 |" in text
    assert "| a | ☑️ 1 expected failure, 1 passed | ✅ 2 passed |" in text
    assert "| b | ✅ 1 passed | 🛠️ 1 harness problem |" in text
    not_passed, harness = text.split("### Not passed")[1].split("### Harness problems")
    assert "x-1" in not_passed and "wanted a.x-1" in not_passed and "b.z-1" not in not_passed
    assert "b.z-1" in harness
    assert "**Passed**" in text


def test_the_summary_escapes_what_would_break_its_table(tmp_path: Path) -> None:
    folder = make_report_folder(tmp_path, "2.1.90", {"a.x-1": "contradicted"})
    result = judge([("2.1.90", folder)], None)
    row = result.rows[0]
    result.rows[0] = type(row)(**{**row.__dict__, "observed": "a | b\nc `d`"})
    text = summary_markdown(result)
    assert "a \\| b c 'd'" in text and "**Failed**" in text


def test_junit_has_a_suite_per_version_and_a_case_per_expectation(tmp_path: Path) -> None:
    folders = [("2.1.90", make_report_folder(tmp_path, "2.1.90", {
        "a.x-1": "contradicted", "a.y-1": "confirmed", "a.z-1": "absent",
        "b.w-1": "contradicted", "b.v-1": "confirmed"})),
        ("2.1.100", make_report_folder(tmp_path, "2.1.100", {"a.x-1": "error"}))]
    result = judge([*folders, ("2.1.110", tmp_path / "gone")],
                   baseline(entry("b", "*", "*")))
    root = ET.fromstring(check_junit_xml(result))
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    assert list(suites) == ["2.1.90", "2.1.100", "2.1.110"]
    first = suites["2.1.90"]
    assert (first.get("tests"), first.get("failures"), first.get("errors"),
            first.get("skipped")) == ("5", "2", "0", "2")
    kinds = {case.get("name"): [child.tag for child in case]
             for case in first.iter("testcase")}
    assert kinds == {"a.x-1": ["failure"], "a.y-1": [], "a.z-1": ["skipped"],
                     "b.w-1": ["skipped"], "b.v-1": ["failure"]}
    stale = next(c for c in first.iter("testcase") if c.get("name") == "b.v-1")
    assert "remove the entry" in stale.find("failure").get("message", "")  # type: ignore[union-attr]
    assert [c.tag for c in suites["2.1.100"].find("testcase")] == ["error"]  # type: ignore[union-attr]
    assert suites["2.1.110"].get("errors") == "1"


def test_junit_escapes_what_xml_cannot_hold(tmp_path: Path) -> None:
    folder = make_report_folder(tmp_path, "2.1.90", {"a.x-1": "contradicted"})
    result = judge([("2.1.90", folder)], None)
    row = result.rows[0]
    result.rows[0] = type(row)(**{**row.__dict__, "reason": "printed \x1b[31m red"})
    failure = ET.fromstring(check_junit_xml(result)).find(".//failure")
    assert failure is not None and "\\u001b" in failure.get("message", "")


# the CTRF shape (https://ctrf.io, schema/ctrf.schema.json), reduced to what a reader needs
_STATUS = {"enum": ["passed", "failed", "skipped", "pending", "other"]}
CTRF_SHAPE: dict[str, Any] = {
    "type": "object", "required": ["reportFormat", "specVersion", "results"],
    "properties": {
        "reportFormat": {"const": "CTRF"},
        "specVersion": {"type": "string", "pattern": r"^[0-9]+\.[0-9]+\.[0-9]+$"},
        "results": {"type": "object", "required": ["tool", "summary", "tests"], "properties": {
            "tool": {"type": "object", "required": ["name"], "additionalProperties": False,
                     "properties": {"name": {"type": "string", "minLength": 1},
                                    "version": {"type": "string"},
                                    "extra": {"type": "object"}}},
            "summary": {"type": "object", "additionalProperties": False,
                        "required": ["tests", "passed", "failed", "skipped", "pending",
                                     "other", "start", "stop"],
                        "properties": {k: {"type": "integer"} for k in (
                            "tests", "passed", "failed", "skipped", "pending", "other",
                            "start", "stop")}},
            "tests": {"type": "array", "items": {
                "type": "object", "required": ["name", "status", "duration"],
                "properties": {"name": {"type": "string", "minLength": 1}, "status": _STATUS,
                               "duration": {"type": "integer"}, "message": {"type": "string"},
                               "rawStatus": {"type": "string"},
                               "suite": {"type": "array", "minItems": 1,
                                         "items": {"type": "string"}},
                               "filePath": {"type": "string"},
                               "extra": {"type": "object"}}}}}}}}


def test_ctrf_follows_the_shape_and_counts_by_status(tmp_path: Path) -> None:
    folder = make_report_folder(tmp_path, "2.1.90", {
        "a.x-1": "contradicted", "a.y-1": "confirmed", "a.z-1": "absent", "b.w-1": "error",
        "b.v-1": "contradicted", "c.u-1": "confirmed"})
    result = judge([("2.1.90", folder), ("2.1.91", tmp_path / "gone")],
                   baseline(entry("b", "v-1", "*"), entry("c", "u-1", "*")))
    report = check_ctrf(result, start_ms=1, stop_ms=2)
    jsonschema.validate(report, CTRF_SHAPE)
    assert report["results"]["summary"] == {"tests": 7, "passed": 1, "failed": 2, "skipped": 2,
                                            "pending": 0, "other": 2, "start": 1, "stop": 2}
    raw = {t["name"]: (t["status"], t["rawStatus"]) for t in report["results"]["tests"]}
    assert raw["2.1.90 c.u-1"] == ("failed", "stale")
    assert raw["2.1.90 b.v-1"] == ("skipped", "expected_failure")
    assert raw["2.1.91 report folder"] == ("other", "harness_problem")


def test_github_outputs_are_appended(tmp_path: Path) -> None:
    folders = [(v, make_report_folder(tmp_path, v, {"a.x-1": verdict}))
               for v, verdict in (("2.1.90", "confirmed"), ("2.1.100", "contradicted"))]
    outputs = tmp_path / "github-output"
    outputs.write_text("earlier=1\n")
    append_github_outputs(outputs, judge(folders, None))
    assert outputs.read_text().splitlines() == ["earlier=1", "failed=true", "regressed=true",
                                                "first-bad-version=2.1.100"]
    append_github_outputs(outputs, judge(folders[:1], None))
    assert outputs.read_text().splitlines()[-3:] == ["failed=false", "regressed=false",
                                                     "first-bad-version="]


def test_a_baseline_file_is_read_and_its_mistakes_named(tmp_path: Path) -> None:
    path = tmp_path / "baseline.yaml"
    path.write_text("loopprobe: baseline/1\nexpected_failures:\n"
                    "  - {case: a, expectation: '*', versions: '<2.1.94', reason: old}\n"
                    "  - {case: b, expectation: x-1, versions: [2.1.90, 2.1.100], reason: r}\n")
    loaded = load_baseline(path)
    assert loaded.source == str(path)
    assert loaded.entry_for("a", "anything", "2.1.93") is not None
    assert loaded.entry_for("a", "anything", "2.1.94") is None
    assert loaded.entry_for("b", "x-1", "2.1.100") is not None
    assert loaded.entry_for("b", "x-1", "2.1.101") is None


@pytest.mark.parametrize(("text", "said"), [
    ("loopprobe: baseline/2\n", "loopprobe: expected 'baseline/1', found 'baseline/2'"),
    ("- a\n", "expected a mapping"),
    ("loopprobe: baseline/1\nexpected_failures:\n  - {case: a, expectation: x, "
     "versions: '<<1', reason: r}\n", "expected_failures[0].versions"),
    ("loopprobe: baseline/1\nexpected_failures:\n  - {case: a, expectation: x, "
     "versions: '<1', reason: r, why: w}\n", "expected_failures[0]"),
    ("loopprobe: baseline/1\nexpected_failures:\n  - {case: a, versions: '<1', reason: r}\n",
     "expectation"),
    ("loopprobe: baseline/1\nexpected_failures: [{case: a, expectation: x, versions: [], "
     "reason: r}]\n", "at least one version"),
    ("a: &x [1]\nb: *x\n", "refused"),
])
def test_a_wrong_baseline_is_refused_in_one_line(tmp_path: Path, text: str, said: str) -> None:
    path = tmp_path / "baseline.yaml"
    path.write_text(text)
    with pytest.raises(BaselineError) as raised:
        load_baseline(path)
    message = str(raised.value)
    assert "\n" not in message and str(path) in message and said in message, message


def test_a_missing_baseline_is_named(tmp_path: Path) -> None:
    with pytest.raises(BaselineError, match="expected a baseline file, but there is no such file"):
        load_baseline(tmp_path / "nope.yaml")
