"""The files of a report folder: their formats, versions, and the one loader for them.

A report folder holds one ``<report>.json`` per report (with ``<report>.journal.jsonl``
beside it), ``fingerprint.json`` and ``EVIDENCE.md``. Reading a folder needs nothing
of the runner, the mock server or any client.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NotRequired

from typing_extensions import TypedDict

from mockapi.journal.blobs import BlobError
from probes.core.safe_read import ReadRefused, confined, json_lines, read_journal, read_json
from probes.core.verdicts import CLAIM_VERDICTS
from probes.report.journal_blobs import expand_lines
from probes.report.not_kept import ReportNotKept

__all__ = ["COUNTERFACTUALS_FILE", "FINGERPRINT_FILE", "FINGERPRINT_FILE_VERSION", "NOT_REPORTS",
           "READABLE_REPORT_VERSIONS", "REPORT_SCHEMA_VERSION", "TIMING_SUFFIX", "VERDICTS",
           "CheckEntry", "ClaimEntry", "ClientIdentity", "FingerprintFile", "Report",
           "ReportError", "ReportFolder", "ReportStatus", "Status", "journal_path", "load_fingerprint",
           "load_folder", "load_json_file", "load_report", "read_journal_lines", "verdict"]

# 2: run-specific values (timings, the generation time) moved out to <report>.timing.json
# 3: claim verdicts confirmed / contradicted / not_observable / not_applicable / error;
#    claim provenance and counterfactuals; check status
# 4: "timing" names <report>.timing.json, now committed: a timeline per client run
# 5: claim verdicts absent, not_reached and differs_from_baseline; a check's role (reach,
#    reporting; behaviour when not written) and, for a failed reach check, its status
#    absent / not_reached; a harness failure makes its probe's claims "error" (it was
#    "contradicted"); an egress attempt no longer fails the report; sources of kind baseline
REPORT_SCHEMA_VERSION = 5
READABLE_REPORT_VERSIONS = (1, 2, 3, 4, 5)
VERDICTS = CLAIM_VERDICTS
# how reports before schema 3 named the verdicts
_OLD_VERDICTS = {"passed": "confirmed", "failed": "contradicted"}
FINGERPRINT_FILE = "fingerprint.json"
# what each counterfactual did on the folder's binary (probes.report.counterfactuals)
COUNTERFACTUALS_FILE = "counterfactuals.json"
# the JSON files of a version folder that are not reports
NOT_REPORTS = (FINGERPRINT_FILE, COUNTERFACTUALS_FILE)
FINGERPRINT_FILE_VERSION = 1
TIMING_SUFFIX = ".timing.json"

Status = Literal["passed", "failed", "error", "not_applicable", "incomplete"]


ReportStatus = Literal["passed", "failed", "error", "not_applicable"]


class ReportError(ValueError):
    """A file or folder that is not what a loopprobe reader expects; says what and where."""


class ClientIdentity(TypedDict):
    name: str
    version: str
    platform: str
    package: str
    entry: str
    binary_sha256: str
    plugin: NotRequired[str]  # a plugin kind's module:Class ($LOOPPROBE_CLIENTS); else absent


class CheckEntry(TypedDict):
    id: str
    claim: str | None  # None for the harness's own checks
    description: str
    passed: bool
    expected: Any
    observed: Any
    evidence: str
    # passed, failed, not_observable (schema 3); absent, not_reached (5)
    status: NotRequired[Literal["passed", "failed", "not_observable", "absent", "not_reached"]]
    observable: NotRequired[bool]
    role: NotRequired[str]  # reach or reporting (schema 5); behaviour when not written
    unreached: NotRequired[str]  # a failed reach check: absent or not_reached (schema 5)
    # lines of <report>.journal.jsonl the check function read since the check before this one
    journal_lines: NotRequired[list[int]]


class ClaimEntry(TypedDict):
    id: str
    statement: str
    source: dict[str, Any]  # probes.core.provenance.Source.to_json()
    beyond_source: str | None  # what the statement adds to its source, and why
    # the setups in which the claimed behaviour cannot happen, whose runs make it fail
    counterfactuals: list[str] | None
    probe: str
    # a verdict (probes.core.verdicts.CLAIM_VERDICTS); passed/failed before schema 3
    status: Literal["confirmed", "contradicted", "differs_from_baseline", "absent", "not_reached",
                    "not_observable", "not_applicable", "error", "passed", "failed"]
    passed: bool
    reason: str
    checks: list[str]


class Report(TypedDict):
    schema_version: int
    timing: NotRequired[str]  # <report>.timing.json (schema 4)
    report: str
    title: str
    summary: str
    generator: dict[str, str]
    client: ClientIdentity
    status: ReportStatus
    passed: bool
    complete: bool
    claims: list[ClaimEntry]
    checks: list[CheckEntry]
    probes: list[dict[str, Any]]
    terminal_reasons: list[dict[str, Any]]
    trust: dict[str, Any]
    boundaries: list[str]
    journal: str
    # a run of some of the report's probes: which ran, which did not (then not complete)
    partial: NotRequired[dict[str, list[str]]]
    # some probes run now into the report of the same binary written earlier: which is which
    merged: NotRequired[dict[str, list[str]]]
    # what the probes' records left out past their caps, when some did (probes.core.tally)
    not_kept: NotRequired[list[ReportNotKept]]


class FingerprintFile(TypedDict):
    schema_version: int
    kind: Literal["fingerprint"]
    client: ClientIdentity
    fingerprint: dict[str, Any]


def load_json_file(path: Path, what: str, versions: tuple[int, ...], *,
                   within: Path | None = None) -> dict[str, Any]:
    """A loopprobe JSON file of one of ``versions``, or a ReportError saying what is wrong;
    a file that must not be read (``probes.core.safe_read``) is refused (ReadRefused)."""
    try:
        data = read_json(path, within=within)
    except FileNotFoundError:
        raise ReportError(f"{path}: no such {what}") from None
    except ValueError as error:
        raise ReportError(f"{path}: not JSON: {error}") from None
    if not isinstance(data, dict) or data.get("schema_version") not in versions:
        found = data.get("schema_version") if isinstance(data, dict) else type(data).__name__
        raise ReportError(f"{path}: expected a loopprobe {what} with schema_version "
                          f"{' or '.join(map(str, versions))}, found {found!r}")
    return data


def read_journal_lines(path: Path, *, within: Path | None = None) -> list[str]:
    """A report's journal, plain (``.jsonl``) or gzipped (``.jsonl.gz``), as its lines,
    each request line whole again (``probes.report.journal_blobs.expand_lines``)."""
    data = read_journal(path, within=within)
    try:
        return expand_lines(json_lines(data.decode()))
    except UnicodeDecodeError as error:
        raise ReadRefused(f"{path}: expected UTF-8 JSON lines, found byte "
                          f"{data[error.start]:#04x} at offset {error.start}: refused") from None
    except BlobError as error:
        raise ReadRefused(f"{path}: {error}: refused") from None
    except ValueError as error:  # a line with references that is not JSON
        raise ReadRefused(f"{path}: expected JSON lines, found {error}: refused") from None


def journal_path(folder: Path, report: Report) -> Path:
    """The report's journal: the file its ``journal`` names, which must be in ``folder``."""
    return confined(folder, report.get("journal"), folder / f"{report['report']}.json",
                    "journal")


def verdict(status: str) -> str:
    """A claim verdict in today's vocabulary (reports before schema 3 said passed/failed)."""
    return _OLD_VERDICTS.get(status, status)


def load_report(path: Path, *, within: Path | None = None) -> Report:
    """A report file; the files it names (its journal, its timing) must be beside it."""
    data = load_json_file(path, "report", READABLE_REPORT_VERSIONS, within=within)
    missing = [k for k in ("report", "client", "claims", "checks", "probes") if k not in data]
    if missing:
        raise ReportError(f"{path}: not a loopprobe report (no {', '.join(missing)})")
    wrong = [k for k in ("claims", "checks", "probes")
             if not isinstance(data[k], list) or not all(isinstance(x, dict) for x in data[k])]
    if wrong or not isinstance(data["client"], dict):
        raise ReportError(f"{path}: not a loopprobe report (expected lists of objects under "
                          f"claims, checks and probes and an object under client; found "
                          f"otherwise under {', '.join(wrong) or 'client'})")
    for name in ("journal", "timing"):
        if name in data:
            confined(path.parent, data[name], path, name)
    data.setdefault("trust", {})
    data.setdefault("terminal_reasons", [])
    if data["schema_version"] < 3:
        for claim in data["claims"]:
            claim["status"] = verdict(claim["status"])
            claim["source"] = {"kind": "unstated",
                               "citation": "no source recorded (a report before schema 3)"}
            claim.setdefault("counterfactuals", None)
            claim.setdefault("beyond_source", None)
    unknown = sorted({c.get("status") for c in data["claims"]} - set(VERDICTS))
    if unknown:
        raise ReportError(f"{path}: unknown claim verdicts {unknown}; expected one of "
                          f"{', '.join(VERDICTS)}")
    return data  # type: ignore[return-value]


def load_fingerprint(path: Path, *, within: Path | None = None) -> FingerprintFile:
    data = load_json_file(path, "fingerprint", (FINGERPRINT_FILE_VERSION,), within=within)
    if data.get("kind") != "fingerprint" or not isinstance(data.get("fingerprint"), dict):
        raise ReportError(f"{path}: not a loopprobe fingerprint (expected kind 'fingerprint')")
    return data  # type: ignore[return-value]


@dataclass
class ReportFolder:
    """Every report of one client version, by report name, and its fingerprint."""

    path: Path
    reports: dict[str, Report] = field(default_factory=dict)
    fingerprint: FingerprintFile | None = None

    @property
    def client(self) -> ClientIdentity:
        return next(iter(self.reports.values()))["client"]


def _report_files(directory: Path) -> list[Path]:
    return [p for p in sorted(directory.glob("*.json"))
            if p.name not in NOT_REPORTS and not p.name.endswith(TIMING_SUFFIX)]


def load_folder(directory: Path, *, require_reports: bool = True) -> ReportFolder:
    """Load a report folder; every report in it must be readable and of one client binary."""
    if not directory.is_dir():
        raise ReportError(f"{directory}: not a directory of reports")
    folder = ReportFolder(directory)
    for path in _report_files(directory):
        report = load_report(path, within=directory)
        if folder.reports and report["client"] != folder.client:
            raise ReportError(f"{path}: reports of two clients in one folder: "
                              f"{_label(report['client'])} and {_label(folder.client)}")
        folder.reports[report["report"]] = report
    if require_reports and not folder.reports:
        raise ReportError(f"{directory}: no loopprobe reports (*.json) found")
    fingerprint = directory / FINGERPRINT_FILE
    if fingerprint.is_symlink() or fingerprint.exists():
        folder.fingerprint = load_fingerprint(fingerprint, within=directory)
    return folder


def _label(client: ClientIdentity) -> str:
    return f"{client['name']}@{client['version']} ({client['binary_sha256'][:12]})"
