"""The gate as CTRF JSON (the Common Test Report Format, https://ctrf.io): one test per
(version, expectation), for the dashboards and PR comments that read CTRF.

CTRF has five statuses: ``failed`` and ``stale`` are failed, ``passed`` passed, ``skipped``
and ``expected_failure`` skipped, ``harness_problem`` other (neither the case's pass nor its
failure); the gate's own outcome is kept as ``rawStatus``. Durations are 0: the gate judges
reports after the runs, and run timings live in each report's timing file.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from probes import __version__
from probes.core.files import write_json
from probes.gate.gate import GateResult, GateRow

__all__ = ["CTRF_SPEC_VERSION", "CTRF_STATUS", "check_ctrf", "write_check_ctrf"]

CTRF_SPEC_VERSION = "0.0.0"
CTRF_STATUS = {"passed": "passed", "failed": "failed", "stale": "failed",
               "skipped": "skipped", "expected_failure": "skipped", "harness_problem": "other"}


def _message(row: GateRow) -> str:
    if row.outcome == "stale":
        return f"listed in the baseline but passed: remove the entry ({row.baseline_reason})"
    if row.outcome == "expected_failure":
        return f"expected failure ({row.baseline_reason}): {row.reason}"
    return row.reason


def _test(row: GateRow) -> dict[str, Any]:
    return {"name": f"{row.version} {row.claim}", "status": CTRF_STATUS[row.outcome],
            "rawStatus": row.outcome, "duration": 0, "message": _message(row),
            "suite": [row.version, row.case], "filePath": row.report,
            "extra": {"version": row.version, "case": row.case, "expectation": row.expectation,
                      "verdict": row.verdict, "check": row.check, "expected": row.expected,
                      "observed": row.observed, "baseline_reason": row.baseline_reason}}


def check_ctrf(result: GateResult, *, start_ms: int | None = None,
               stop_ms: int | None = None) -> dict[str, Any]:
    now = int(time.time() * 1000)
    tests = [_test(row) for row in result.rows]
    tests += [{"name": f"{u.version} report folder", "status": "other",
               "rawStatus": "harness_problem", "duration": 0, "message": u.error,
               "suite": [u.version], "extra": {"version": u.version, "folder": u.folder}}
              for u in result.unreadable]
    summary = {status: sum(t["status"] == status for t in tests)
               for status in ("passed", "failed", "skipped", "pending", "other")}
    return {"reportFormat": "CTRF", "specVersion": CTRF_SPEC_VERSION,
            "generatedBy": "loopprobe",
            "results": {"tool": {"name": "loopprobe", "version": __version__},
                        "summary": {"tests": len(tests), **summary,
                                    "start": start_ms if start_ms is not None else now,
                                    "stop": stop_ms if stop_ms is not None else now},
                        "tests": tests,
                        "extra": {"exit_code": result.exit_code, "failed": result.failed,
                                  "regressed": result.regressed,
                                  "first_bad_version": result.first_bad_version}}}


def write_check_ctrf(path: Path, result: GateResult, **times: int | None) -> Path:
    return write_json(path, check_ctrf(result, **times))
