"""The gate after ``loopprobe check``'s runs: each expectation on each version judged against
the baseline, one exit code, and what CI reads (``OUT/check.json``, schema ``check``).

Per (version, case, expectation), from the claim verdict in the version's report folder:

| verdict | listed in the baseline | outcome |
|---|---|---|
| contradicted, differs_from_baseline | no / yes | ``failed`` / ``expected_failure`` |
| confirmed | no / yes | ``passed`` / ``stale`` (remove the entry) |
| error | either | ``harness_problem``: never the user's failure, never stale |
| absent, not_applicable, not_reached, not_observable | either | ``skipped``, with the reason |

Exit 0 when every row passed or is a listed failure (skipped rows too); 1 on a failure or a
stale entry; 2 when nothing could be judged: no folder was readable or every row is a
harness problem. A folder that cannot be read is a harness problem of its version.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from packaging.version import InvalidVersion, Version

from probes.cases.format import DEFAULT_RULE
from probes.core.files import write_json
from probes.core.safe_read import ReadRefused
from probes.core.verdicts import AGAINST, NOT_SHOWN
from probes.gate.baseline import Baseline, ExpectedFailure
from probes.report.format import CheckEntry, Report, ReportError, load_folder, verdict
from probes.report.schemas import CheckFile

__all__ = ["CHECK_FILE", "CHECK_SCHEMA_VERSION", "EXIT_FAILED", "EXIT_NOTHING_JUDGED", "EXIT_PASSED",
           "OUTCOMES", "GateResult", "GateRow", "Outcome", "RunNote", "UnreadableFolder", "judge",
           "order_by_version", "outcome_of", "write_check"]

CHECK_FILE = "check.json"
CHECK_SCHEMA_VERSION = 1
EXIT_PASSED, EXIT_FAILED, EXIT_NOTHING_JUDGED = 0, 1, 2
Outcome = Literal["passed", "failed", "expected_failure", "stale", "harness_problem", "skipped"]
# worst first: a summary cell shows the first of these among its rows
OUTCOMES: tuple[Outcome, ...] = ("failed", "stale", "harness_problem", "expected_failure",
                                 "skipped", "passed")
_FAILING: tuple[Outcome, ...] = ("failed", "stale")


@dataclass(frozen=True)
class GateRow:
    """One expectation of one case on one client version, and why it got its outcome."""

    version: str
    case: str
    expectation: str
    claim: str  # the report's claim id, <case>.<expectation>
    outcome: Outcome
    verdict: str  # the report's claim verdict
    reason: str  # the report's one sentence for the verdict
    check: str | None  # the check that decided (the failing one, when one failed)
    expected: Any
    observed: Any
    statement: str
    report: str  # the report file's name in the version folder (without .json)
    baseline_reason: str | None = None  # the listed entry's reason, when one covers the row


@dataclass(frozen=True)
class UnreadableFolder:
    """A version whose report folder could not be read: nothing of it is judged."""

    version: str
    folder: str
    error: str


@dataclass(frozen=True)
class RunNote:
    """What the harness did or refused in a case's runs: said beside the verdicts, never one
    (``default_answer``: requests no case scripted, answered by the default rule;
    ``egress_refused``: connections the client tried past the mock, refused)."""

    version: str
    case: str
    kind: str
    detail: str


def _notes_of(version: str, report: Report) -> list[RunNote]:
    notes = []
    for probe in report["probes"]:
        defaults = [r for r in probe.get("requests", []) if r.get("rule") == DEFAULT_RULE]
        if defaults:
            kinds = sorted({str(r.get("kind")) for r in defaults})
            notes.append(RunNote(version, probe["name"], "default_answer",
                                 f"{len(defaults)} request(s) no rule of the case answered "
                                 f"(kind {', '.join(kinds)}; seq "
                                 f"{', '.join(str(r.get('seq')) for r in defaults)}) got the "
                                 "default answer \"OK\""))
        hosts = sorted({str(a.get("host")) for a in probe.get("egress_attempts", [])})
        if hosts:
            notes.append(RunNote(version, probe["name"], "egress_refused",
                                 f"the client tried to reach {', '.join(hosts)}: refused"))
    return notes


@dataclass
class GateResult:
    rows: list[GateRow]
    versions: list[str]  # oldest first
    folders: dict[str, str]  # version -> the folder judged
    unreadable: list[UnreadableFolder] = field(default_factory=list)
    baseline: str | None = None
    unused_baseline: list[ExpectedFailure] = field(default_factory=list)
    notes: list[RunNote] = field(default_factory=list)
    # the first failing release a bisect found (``loopprobe check --bisect``), when one did
    bisected_first_bad: str | None = None

    def of(self, *outcomes: Outcome) -> list[GateRow]:
        return [row for row in self.rows if row.outcome in outcomes]

    @property
    def judged(self) -> bool:
        return any(row.outcome != "harness_problem" for row in self.rows)

    @property
    def exit_code(self) -> int:
        if not self.judged:
            return EXIT_NOTHING_JUDGED
        return EXIT_FAILED if self.failed else EXIT_PASSED

    @property
    def failed(self) -> bool:
        """A user's expectation failed unlisted, or a baseline entry is stale."""
        return bool(self.of(*_FAILING))

    @property
    def regressed(self) -> bool:
        """An expectation failed on a version newer than one where it passed."""
        return bool(self.regressions())

    def regressions(self) -> list[GateRow]:
        """Each failed row with an older version where the same expectation passed (its
        verdict confirmed: a stale entry's behaviour passed too)."""
        rank = {version: index for index, version in enumerate(self.versions)}
        passed_at: dict[tuple[str, str], int] = {}
        for row in self.rows:
            if row.verdict == "confirmed":
                key = (row.case, row.expectation)
                passed_at[key] = min(passed_at.get(key, rank[row.version]), rank[row.version])
        return [row for row in self.of("failed")
                if passed_at.get((row.case, row.expectation), len(rank)) < rank[row.version]]

    @property
    def first_bad_version(self) -> str | None:
        """The first failing release a bisect found, else the oldest version run with a
        failure."""
        if self.bisected_first_bad is not None:
            return self.bisected_first_bad
        failing = {row.version for row in self.of("failed")}
        return next((v for v in self.versions if v in failing), None)

    def counts(self) -> dict[str, int]:
        return {outcome: len(self.of(outcome)) for outcome in OUTCOMES}

    def cases(self) -> list[str]:
        """The case names in the order their rows first appear."""
        return list(dict.fromkeys(row.case for row in self.rows))

    def to_json(self) -> CheckFile:
        return {
            "schema_version": CHECK_SCHEMA_VERSION, "kind": "check",
            "exit_code": self.exit_code, "failed": self.failed, "regressed": self.regressed,
            "first_bad_version": self.first_bad_version,
            "versions": [{"version": v, "folder": self.folders[v]} for v in self.versions],
            "unreadable": [asdict(u) for u in self.unreadable],  # type: ignore[misc]
            "counts": self.counts(),
            "baseline": self.baseline,
            "unused_baseline": [e.model_dump() for e in self.unused_baseline],
            "results": [asdict(row) for row in self.rows],  # type: ignore[misc]
            "notes": [asdict(note) for note in self.notes],  # type: ignore[misc]
        }


def order_by_version(versions: Sequence[str]) -> list[str]:
    """Oldest first by PEP 440 where every version parses; else as given (a plugin kind's
    plain names have no order but the caller's)."""
    try:
        return sorted(dict.fromkeys(versions), key=Version)
    except InvalidVersion:
        return list(dict.fromkeys(versions))


def outcome_of(verdict_now: str, listed: bool) -> Outcome:
    """A verdict's outcome at the gate, listed in the baseline or not (the table above)."""
    return _outcome(verdict_now, listed)


def _outcome(verdict_now: str, listed: bool) -> Outcome:
    if verdict_now == "error":
        return "harness_problem"
    if verdict_now in NOT_SHOWN:
        return "skipped"
    if verdict_now in AGAINST:
        return "expected_failure" if listed else "failed"
    return "stale" if listed else "passed"


def _deciding_check(claim_checks: list[CheckEntry]) -> CheckEntry | None:
    """The check whose expected/observed explain the verdict: the first not passed, else
    the first."""
    return next((c for c in claim_checks if not c.get("passed")),
                claim_checks[0] if claim_checks else None)


def _rows_of(version: str, report: Report, baseline: Baseline | None,
             used: set[int]) -> list[GateRow]:
    checks = {c["id"]: c for c in report["checks"]}
    rows = []
    for claim in report["claims"]:
        case = claim["probe"]
        expectation = claim["id"].removeprefix(f"{case}.")
        now = verdict(claim["status"])
        entry = baseline.entry_for(case, expectation, version) if baseline else None
        if entry is not None and baseline is not None:
            used.add(baseline.expected_failures.index(entry))
        decided = _deciding_check([checks[i] for i in claim.get("checks", []) if i in checks])
        rows.append(GateRow(
            version=version, case=case, expectation=expectation, claim=claim["id"],
            outcome=_outcome(now, entry is not None), verdict=now, reason=claim["reason"],
            check=decided["id"] if decided else None,
            expected=decided.get("expected") if decided else None,
            observed=decided.get("observed") if decided else None,
            statement=claim["statement"], report=report["report"],
            baseline_reason=entry.reason if entry else None))
    return rows


def judge(folders: Sequence[tuple[str, Path]], baseline: Baseline | None) -> GateResult:
    """Judge each (version, folder ``loopprobe run`` wrote) against ``baseline``."""
    versions = order_by_version([version for version, _ in folders])
    by_version = dict(folders)
    result = GateResult(rows=[], versions=versions,
                        folders={v: str(by_version[v]) for v in versions},
                        baseline=baseline.source if baseline else None)
    used: set[int] = set()
    for version in versions:
        try:
            folder = load_folder(by_version[version])
        except (ReportError, ReadRefused, OSError) as error:
            result.unreadable.append(UnreadableFolder(version, str(by_version[version]),
                                                      " ".join(str(error).split())))
            continue
        for name in sorted(folder.reports):
            result.rows += _rows_of(version, folder.reports[name], baseline, used)
            result.notes += _notes_of(version, folder.reports[name])
    if baseline is not None:
        result.unused_baseline = [e for i, e in enumerate(baseline.expected_failures)
                                  if i not in used]
    return result


def write_check(result: GateResult, out: Path) -> Path:
    """``out/check.json``: the gate's result (schema ``check``)."""
    return write_json(out / CHECK_FILE, result.to_json())
