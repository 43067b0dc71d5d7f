"""The shapes of what a gate decided: ``loopprobe check``'s check.json and the agent-loop
conformance table, conformance.json."""

from __future__ import annotations

from typing import Any, Literal

from typing_extensions import TypedDict

__all__ = ["CheckFile", "CheckNote", "CheckRow", "CheckUnreadable", "CheckVersion",
           "ConformanceCell", "ConformanceClaim", "ConformanceClient", "ConformanceDelta",
           "ConformanceFile", "ConformanceGateRow", "ConformanceKind", "ConformanceVerdict"]


class CheckVersion(TypedDict):
    version: str
    folder: str  # the report folder judged


class CheckUnreadable(TypedDict):
    version: str
    folder: str
    error: str  # why the folder could not be read: a harness problem of that version


class CheckRow(TypedDict):
    version: str
    case: str
    expectation: str
    claim: str  # <case>.<expectation>
    outcome: Literal["passed", "failed", "expected_failure", "stale", "harness_problem",
                     "skipped"]
    verdict: Literal["confirmed", "contradicted", "differs_from_baseline", "absent",
                     "not_reached", "not_observable", "not_applicable", "error"]
    reason: str
    check: str | None  # the check that decided: the first not passed, else the first
    expected: Any
    observed: Any
    statement: str
    report: str
    baseline_reason: str | None  # the baseline entry listing the row, when one does


class CheckFile(TypedDict):
    """What ``loopprobe check``'s gate decided (probes.gate.gate)."""

    schema_version: int
    kind: Literal["check"]
    exit_code: int
    failed: bool
    regressed: bool
    first_bad_version: str | None
    versions: list[CheckVersion]
    unreadable: list[CheckUnreadable]
    counts: dict[str, int]  # outcome -> rows
    baseline: str | None  # the baseline file given
    unused_baseline: list[dict[str, Any]]  # entries that listed no row judged
    results: list[CheckRow]
    # what the harness did or refused in a case's runs, never a verdict: requests no case
    # scripted answered by the default rule, egress attempts refused
    notes: list[CheckNote]


class CheckNote(TypedDict):
    version: str
    case: str
    kind: Literal["default_answer", "egress_refused"]
    detail: str


ConformanceVerdict = Literal["confirmed", "contradicted", "differs_from_baseline", "absent", "not_reached",
                  "not_observable", "not_applicable", "error"]


class ConformanceClaim(TypedDict):
    id: str
    statement: str
    citation: str  # where the expectation comes from (the Messages API docs page, a quote)


class ConformanceCell(TypedDict):
    status: ConformanceVerdict
    reason: str
    probe: str
    check: str | None  # the first failing check, when one failed


class ConformanceClient(TypedDict):
    label: str  # kind@version
    kind: str
    version: str
    dir: str  # its folder under conformance/
    binary_sha256: str
    entry: str  # the file the SHA-256 is of
    applicable: int  # claims scored: not not_applicable, not a harness error
    confirmed: int
    score: float | None  # confirmed / applicable; None when nothing is applicable
    tier: Literal["tier 1", "tier 2"] | None  # 100 %; >= 80 %
    cells: dict[str, ConformanceCell]  # claim id -> its verdict on this client


class ConformanceDelta(TypedDict):
    claim: str
    oldest: str | None
    newest: str | None
    change: str  # probes.core.verdicts.CHANGES


class ConformanceKind(TypedDict):
    kind: str
    oldest: str
    newest: str
    versions: list[str]  # oldest first
    deltas: list[ConformanceDelta]  # claims whose verdict differs between oldest and newest


class ConformanceGateRow(TypedDict):
    client: str
    claim: str
    outcome: Literal["failed", "expected_failure", "stale", "harness_problem", "skipped"]
    verdict: ConformanceVerdict
    baseline_reason: str | None


class ConformanceFile(TypedDict):
    """The agent-loop conformance table (probes.gate.conformance)."""

    schema_version: int
    kind: Literal["conformance"]
    report: str  # the report each client folder holds
    claims: list[ConformanceClaim]
    clients: list[ConformanceClient]  # by kind, oldest version first
    kinds: list[ConformanceKind]
    baseline: str | None  # the baseline file given
    gate: list[ConformanceGateRow]  # every cell that did not pass plainly
    unused_baseline: list[dict[str, Any]]  # entries that listed no cell judged
    exit_code: int  # 0 passed, 1 an unlisted failure or a stale entry, 2 nothing judged
