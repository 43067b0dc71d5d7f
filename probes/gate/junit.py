"""The gate as JUnit XML: one test suite per client version, one test case per expectation.

``failed`` and ``stale`` are failures, ``harness_problem`` an error, ``skipped`` and
``expected_failure`` skipped with their reason. Text goes through the reports' JUnit
escaping (``probes.report.junit``): a reason quotes what the client printed.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from probes.core.files import write_bytes
from probes.gate.gate import GateResult, GateRow
from probes.report.junit import xml_text

__all__ = ["check_junit_xml", "write_check_junit"]


def _detail(row: GateRow) -> str:
    return xml_text(f"{row.statement}\nexpected: {row.expected!r}\nobserved: {row.observed!r}\n"
                    f"{row.reason}")


def _case(suite: ET.Element, row: GateRow) -> None:
    case = ET.SubElement(suite, "testcase", classname=xml_text(f"{row.version}.{row.case}"),
                         name=xml_text(row.claim))
    reason = xml_text(row.reason)
    if row.outcome == "failed":
        ET.SubElement(case, "failure", message=reason[:500], type="failed").text = _detail(row)
    elif row.outcome == "stale":
        message = xml_text(f"listed in the baseline but passed: remove the entry "
                           f"({row.baseline_reason})")
        ET.SubElement(case, "failure", message=message[:500], type="stale").text = _detail(row)
    elif row.outcome == "harness_problem":
        ET.SubElement(case, "error", message=reason[:500], type="harness_problem").text = reason
    elif row.outcome == "expected_failure":
        ET.SubElement(case, "skipped", message=xml_text(
            f"expected failure: {row.baseline_reason}; {row.reason}")[:500])
    elif row.outcome == "skipped":
        ET.SubElement(case, "skipped", message=f"{row.verdict}: {reason}"[:500])


def check_junit_xml(result: GateResult) -> bytes:
    root = ET.Element("testsuites", name="loopprobe check")
    for version in result.versions:
        rows = [row for row in result.rows if row.version == version]
        unreadable = [u for u in result.unreadable if u.version == version]
        suite = ET.SubElement(root, "testsuite", {
            "name": xml_text(version), "tests": str(len(rows) + len(unreadable)),
            "failures": str(sum(r.outcome in ("failed", "stale") for r in rows)),
            "errors": str(sum(r.outcome == "harness_problem" for r in rows) + len(unreadable)),
            "skipped": str(sum(r.outcome in ("skipped", "expected_failure") for r in rows))})
        for row in rows:
            _case(suite, row)
        for folder in unreadable:  # nothing of the version was judged: one error says why
            case = ET.SubElement(suite, "testcase", classname=xml_text(version),
                                 name="report folder")
            ET.SubElement(case, "error", message=xml_text(folder.error)[:500],
                          type="harness_problem").text = xml_text(folder.error)
    ET.indent(root)
    data: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return data + b"\n"


def write_check_junit(path: Path, result: GateResult) -> Path:
    return write_bytes(path, check_junit_xml(result))
