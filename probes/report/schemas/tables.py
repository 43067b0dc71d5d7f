"""The shapes of the files made beside and across reports: a report's timing, the matrix,
the session table, a bisect result, counterfactuals.json."""

from __future__ import annotations

from typing import Any, Literal, NotRequired

from typing_extensions import TypedDict

__all__ = ["BisectFile", "CounterfactualCheck", "CounterfactualClaim", "CounterfactualEntry",
           "CounterfactualsFile", "MatrixCell", "MatrixClaim", "MatrixFile", "MatrixVersion",
           "SessionCheck", "SessionPair", "SessionSide", "SessionsFile", "TimingFile"]


class MatrixVersion(TypedDict):
    client: str
    kind: str
    version: str
    dir: str
    binary_sha256: str


class MatrixCell(TypedDict):
    status: Literal["confirmed", "contradicted", "differs_from_baseline", "absent", "not_reached",
                    "not_observable", "not_applicable", "error"]
    reason: str
    report: str


class MatrixClaim(TypedDict):
    id: str
    statement: str
    results: dict[str, MatrixCell]  # client label -> verdict; absent: not run there


class MatrixFile(TypedDict):
    schema_version: int
    kind: Literal["matrix"]
    versions: list[MatrixVersion]
    claims: list[MatrixClaim]


class TimingFile(TypedDict):
    generated_at: str
    probes: dict[str, Any]


class SessionSide(TypedDict):
    version: str
    binary_sha256: str


class SessionCheck(TypedDict):
    id: str
    claim: str | None
    status: Literal["passed", "failed", "not_observable", "absent", "not_reached"]
    expected: Any  # cut to a string when long
    observed: Any


class SessionPair(TypedDict):
    writer: SessionSide
    reader: SessionSide
    resume: Literal["ok", "fails", "error", "not applicable", "absent", "not reached"]
    fork: Literal["ok", "fails", "error", "not applicable", "absent", "not reached"]
    not_applicable: str | None
    error: str | None
    runs: list[dict[str, Any]]
    checks: NotRequired[list[SessionCheck]]  # every check (tables before: failed_checks)
    failed_checks: NotRequired[list[dict[str, Any]]]  # tables written before checks were kept
    journal: NotRequired[str]  # the pair's recorded requests, gzipped, relative to the table


class SessionsFile(TypedDict):
    claims: list[str]
    sources: dict[str, Any]
    pairs: list[SessionPair]


class BisectFile(TypedDict):
    claims: list[str]
    client: str
    good: str
    good_verdict: Any
    first_changed: Any
    last_same: Any
    changed_verdict: Any
    candidates: list[Any]
    skipped: list[Any]
    target: NotRequired[str]  # the claim, or probe-<name>
    tested: NotRequired[dict[str, str]]  # version -> verdict, in visit order
    flipped_checks: NotRequired[list[dict[str, Any]]]  # when narrowed to one version
    reports: NotRequired[dict[str, str]]  # the report folder of each side, when narrowed
    note: NotRequired[str]  # a word added to a committed result
    # the kind of transition followed, and the kind and name of the change found (results
    # written before bisect followed kinds lack them: their kind is read from the verdicts)
    kind: NotRequired[Literal["behaviour", "presence", "reach", "reporting", "any"]]
    transition: NotRequired[Literal["behaviour", "presence", "reach", "reporting", "instrument",
                                    "source"]
                            | None]
    # named by probes.core.changes.release_change (earlier results: probes.core.verdicts'
    # CHANGES)
    change: NotRequired[Literal["regressed", "error", "removed", "changed", "introduced",
                                "newly applicable", "now reached", "fixed", "not run", "same",
                                "now observable", "no longer observable", "reporting",
                                "no longer reached", "source"]
                        | None]


class CounterfactualCheck(TypedDict):
    id: str
    expected: Any
    observed: Any


class CounterfactualClaim(TypedDict):
    verdict: Literal["confirmed", "contradicted", "differs_from_baseline", "absent",
                     "not_reached", "not_observable", "not_applicable", "error"]
    reason: str
    failed_checks: list[CounterfactualCheck]


class CounterfactualEntry(TypedDict):
    probe: str
    counterfactual: str
    description: str
    claims: dict[str, CounterfactualClaim]  # claim id -> what the variant gave it
    harness_failures: list[dict[str, Any]]
    able_to_fail: bool


class CounterfactualsFile(TypedDict):
    schema_version: int
    kind: Literal["counterfactuals"]
    client: dict[str, str]
    counterfactuals: list[CounterfactualEntry]
    able_to_fail: int
    run: int
