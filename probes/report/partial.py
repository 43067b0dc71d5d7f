"""A run of some of a report's probes (``--probe X``) next to a full report already written.

A partial report never passes for a full one: when the folder holds a report of the same
binary, the probes run now replace theirs in it and the report names what came from which
run (``merged``); otherwise the report says it is partial (``partial``) and is not complete.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from probes.core.probe import ReportSpec
from probes.core.safe_read import ReadRefused, loads, read_json
from probes.report.build import TRUST_CHECK, report_status
from probes.report.format import (
    TIMING_SUFFIX,
    Report,
    ReportError,
    journal_path,
    load_report,
    read_journal_lines,
)

__all__ = ["mark_partial", "merge_into_earlier"]


def mark_partial(report: Report, full: ReportSpec) -> None:
    ran = [p["name"] for p in report["probes"]]
    report["partial"] = {"probes_run": ran,
                         "probes_not_run": [p.name for p in full.probes if p.name not in ran]}
    report["complete"] = False


def _owner(check_id: str, names: list[str]) -> str | None:
    owners = [n for n in names if check_id.startswith(f"{n}.")]
    return max(owners, key=len) if owners else None


def merge_into_earlier(new: Report, journal: list[str], timing: dict[str, Any],
                       full: ReportSpec, folder: Path
                       ) -> tuple[Report, list[str], dict[str, Any]] | None:
    """``new`` (some probes of ``full``) merged into ``folder``'s report of the same binary,
    or None when there is none to merge into (another binary, unreadable, none yet)."""
    path = folder / f"{full.name}.json"
    try:
        old = load_report(path, within=folder)
        old_journal = read_journal_lines(journal_path(folder, old), within=folder)
        if not all(isinstance(loads(line, str(path)), dict) for line in old_journal):
            return None
        timing_path = folder / f"{full.name}{TIMING_SUFFIX}"
        old_timing = read_json(timing_path, within=folder) if timing_path.is_file() \
            else {"probes": {}}
        if not isinstance(old_timing, dict):
            return None
    except (ReportError, OSError, ValueError, ReadRefused):  # a hostile one is not merged into
        return None
    if old["client"] != new["client"] or old["schema_version"] != new["schema_version"]:
        return None
    rerun = {p["name"] for p in new["probes"]}
    sources = [(new, journal, timing) if p.name in rerun else (old, old_journal, old_timing)
               for p in full.probes]
    merged_lines: list[str] = []
    claims, checks, sections, terminal, left_out = [], [], [], [], []
    probe_timing: dict[str, Any] = {}
    for one, (report, lines, times) in zip(full.probes, sources, strict=True):
        section = next((s for s in report["probes"] if s["name"] == one.name), None)
        if section is None:
            continue
        moved: dict[int, int] = {}
        for number, line in enumerate(lines, 1):
            if json.loads(line).get("probe") == one.name:
                merged_lines.append(line)
                moved[number] = len(merged_lines)
        names = [s["name"] for s in report["probes"]]
        for check in report["checks"]:
            if _owner(check["id"], names) == one.name:
                if "journal_lines" in check:
                    check = {**check, "journal_lines": [moved[n] for n in check["journal_lines"]
                                                        if n in moved]}
                checks.append(check)
        claims += [c for c in report["claims"] if c["probe"] == one.name]
        terminal += [t for t in report["terminal_reasons"] if t.get("probe") == one.name]
        left_out += [n for n in report.get("not_kept", []) if n["probe"] == one.name]
        sections.append(section)
        if one.name in times.get("probes", {}):
            probe_timing[one.name] = times["probes"][one.name]
    merged: Report = {**new, "claims": claims, "checks": checks, "probes": sections,
                      "terminal_reasons": terminal}
    merged.pop("partial", None)
    merged.pop("not_kept", None)
    if left_out:
        merged["not_kept"] = left_out
    merged["boundaries"] = sorted({*old["boundaries"], *new["boundaries"]})
    egress = sorted({host for c in checks if c["id"].endswith(TRUST_CHECK) and not c["passed"]
                     for host in c["observed"]})
    merged["trust"] = {**new["trust"], "egress_refused": egress}
    present = [s["name"] for s in sections]
    merged["complete"] = old["complete"] and len(present) == len(full.probes)
    merged["merged"] = {"probes_run_now": sorted(rerun),
                        "probes_from_earlier_run": [n for n in present if n not in rerun]}
    if not merged["complete"]:
        merged["partial"] = {"probes_run": present,
                             "probes_not_run": [p.name for p in full.probes
                                                if p.name not in present]}
    merged["status"] = report_status(
        errors=any(s.get("error") for s in sections),
        ran_any=not all(s.get("not_applicable") for s in sections),
        claims=claims)
    merged["passed"] = merged["status"] == "passed"
    return merged, merged_lines, {**timing, "probes": probe_timing}

