"""Reports as JUnit XML, so CI systems show each claim as a test case."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

from probes.core.files import write_bytes
from probes.core.verdicts import AGAINST, LABELS, NOT_SHOWN
from probes.report.format import Report

__all__ = ["junit_xml", "write_junit", "xml_text"]


# what XML 1.0 cannot hold (ElementTree writes it as is, and CI readers then refuse the whole
# file): a reason quotes what the client printed, which may hold any character
_NOT_XML = re.compile("[^\x09\x0a\x0d\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_text(text: str) -> str:
    """``text`` with what XML 1.0 cannot hold written as ``\\uXXXX``."""
    return _NOT_XML.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def junit_xml(reports: list[Report]) -> bytes:
    """One test suite per report (named ``<client>@<version>/<report>``), one test case per
    claim: contradicted (or differing from its baseline) is a failure, error an error,
    absent, not reached, not observable and not applicable skipped, each with the claim's
    reason."""
    root = ET.Element("testsuites", name="loopprobe")
    for report in reports:
        client = report["client"]
        claims = report["claims"]
        suite = ET.SubElement(root, "testsuite", {
            "name": f"{client['name']}@{client['version']}/{report['report']}",
            "tests": str(len(claims)),
            "failures": str(sum(c["status"] in AGAINST for c in claims)),
            "errors": str(sum(c["status"] == "error" for c in claims)),
            "skipped": str(sum(c["status"] in NOT_SHOWN for c in claims))})
        properties = ET.SubElement(suite, "properties")
        for name, value in (("binary_sha256", client["binary_sha256"]),
                            ("report_status", report["status"]),
                            ("complete", str(report["complete"]).lower())):
            ET.SubElement(properties, "property", name=name, value=value)
        for claim in claims:
            case = ET.SubElement(suite, "testcase", classname=f"{report['report']}.{claim['probe']}",
                                 name=claim["id"])
            reason = xml_text(claim["reason"])
            detail = f"{claim['statement']}\n{reason}"
            if claim["status"] in AGAINST:
                ET.SubElement(case, "failure", message=reason[:500],
                              type=claim["status"]).text = detail
            elif claim["status"] == "error":
                ET.SubElement(case, "error", message=reason[:500],
                              type="error").text = detail
            elif claim["status"] in NOT_SHOWN:
                ET.SubElement(case, "skipped", message=f"{LABELS[claim['status']]}: "
                              f"{reason[:480]}")
    ET.indent(root)
    data: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return data + b"\n"


def write_junit(path: Path, reports: list[Report]) -> Path:
    return write_bytes(path, junit_xml(reports))
