"""JSON Schemas of every file loopprobe writes or reads, from the code's own models, and a
validator that says where a file breaks them.

Each schema is generated from the type the writers and readers use (pydantic's JSON Schema
of a TypedDict or model), so it cannot drift from them; the generated files ship in the
package (``probes/report/json_schemas/<kind>.schema.json``, a test keeps them current) for
editors and other tools. ``validate_path`` checks a file, or every file in a folder, against them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Literal, NotRequired

import jsonschema
from pydantic import Field, TypeAdapter
from typing_extensions import TypedDict

from mockapi.journal_read import parse_journal
from mockapi.records import BlobRecord, JournalNote, RequestRecord, ResponseEndRecord
from mockapi.scenario import Scenario, ScenarioError
from probes.cases.format import CASES_FORMAT, CaseFile
from probes.core.safe_read import (
    ReadRefused,
    confined,
    json_lines,
    loads,
    read_bytes,
    read_journal,
    read_yaml,
)
from probes.report.format import FingerprintFile, Report
from probes.report.normalise import JOURNAL_VOLATILE, REPORT_JOURNAL_OMITTED

__all__ = [
    "DESCRIPTIONS",
    "DIALECT",
    "KINDS",
    "REPORT_JOURNAL_VOLATILE",
    "SCHEMA_DIR",
    "AlmanacChange",
    "AlmanacClaim",
    "AlmanacCost",
    "AlmanacFile",
    "AlmanacFlip",
    "AlmanacLine",
    "AlmanacMethod",
    "AlmanacRange",
    "AlmanacRetraction",
    "AlmanacRun",
    "AlmanacSegment",
    "AlmanacVersion",
    "BisectFile",
    "CheckFile",
    "CheckNote",
    "CheckRow",
    "CheckUnreadable",
    "CheckVersion",
    "ConformanceCell",
    "ConformanceClaim",
    "ConformanceClient",
    "ConformanceDelta",
    "ConformanceFile",
    "ConformanceGateRow",
    "ConformanceKind",
    "ConformanceVerdict",
    "CounterfactualCheck",
    "CounterfactualClaim",
    "CounterfactualEntry",
    "CounterfactualsFile",
    "JournalLine",
    "MatrixCell",
    "MatrixClaim",
    "MatrixFile",
    "MatrixVersion",
    "Problem",
    "SessionCheck",
    "SessionPair",
    "SessionSide",
    "SessionsFile",
    "TimingFile",
    "kind_of",
    "schema",
    "validate_path",
    "write_schemas",
]

SCHEMA_DIR = Path(__file__).with_name("json_schemas")
DIALECT = "https://json-schema.org/draft/2020-12/schema"


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
    transition: NotRequired[Literal["behaviour", "presence", "reach", "reporting", "source"]
                            | None]
    change: NotRequired[Literal["regressed", "error", "removed", "changed", "introduced",
                                "newly applicable", "now reached", "fixed", "not run", "same"]
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
_VERDICT = Literal["confirmed", "contradicted", "differs_from_baseline", "absent", "not_reached",
                  "not_observable", "not_applicable", "error"]
# a version's verdict in an almanac: a claim verdict, or what the search could say of it
_ALMANAC_VERDICT = Literal["confirmed", "contradicted", "differs_from_baseline", "absent",
                           "not_reached", "not_observable", "not_applicable", "error",
                           "flaky", "unresolved", "missing"]


class AlmanacSegment(TypedDict):
    first: str
    last: str
    verdict: _ALMANAC_VERDICT  # held on every version first..last
    probed: list[str]  # the versions of the range where it was run
    outcomes: NotRequired[list[str]]  # flaky: what each attempt gave


class AlmanacFlip(TypedDict):
    id: str
    before: str
    after: str


AlmanacChange = TypedDict("AlmanacChange", {
    "before": str,  # the last version of the old verdict
    "after": str,  # the first of the new one (adjacent releases when located)
    "from": str,
    "to": str,
    "located": bool,
    "candidates": NotRequired[list[str]],  # not located: the versions that may hold it
    "kind": Literal["behaviour", "presence", "reach", "reporting", "source"] | None,
    "change": str | None,  # its name in probes.core.verdicts.CHANGES
    "verified": bool,  # both sides run again in a fresh sandbox, the same
    "flipped_checks": list[AlmanacFlip],
    "witnesses": dict[str, str | None],  # before/after -> evidence folder, relative
})


class AlmanacClaim(TypedDict):
    id: str
    probe: str
    area: str  # the report it is in
    statement: str
    introduced: str | None  # the first version of a presence: introduced change
    segments: list[AlmanacSegment]
    changes: list[AlmanacChange]


class AlmanacVersion(TypedDict):
    version: str
    binary_sha256: str
    screen: str  # the screen's digest (error: its run failed)
    probes_run: int  # probes with a verdict of their own on it
    witness: str | None  # its evidence folder, relative to almanac.json


class AlmanacRange(TypedDict):
    first: str
    last: str
    count: int


class AlmanacMethod(TypedDict):
    grid: int
    screen_probe: str
    grid_versions: list[str]
    guarantee: str


class AlmanacCost(TypedDict):
    builds: int  # builds that ended (a killed one's runs count, its installs do not)
    suite_runs: int
    probe_runs: int
    screens: int
    installs: int
    wall_s: float  # seconds of the suite runs that recorded it, without lock waits


class AlmanacFile(TypedDict):
    """Every version of a range, per claim (``loopprobe almanac``)."""

    schema_version: int
    kind: Literal["almanac"]
    generator: str
    client: str
    method: AlmanacMethod
    range: AlmanacRange
    not_built: list[AlmanacRange]  # published 2.x versions the almanac does not cover yet
    versions: list[AlmanacVersion]
    claims: list[AlmanacClaim]
    cost: AlmanacCost


class AlmanacRun(TypedDict):
    """One finished run of an almanac build's state (``cells/<version>.runs.jsonl``)."""

    version: str
    binary_sha256: str
    folder: str
    screen: NotRequired[str]
    probe: NotRequired[str]
    attempt: NotRequired[int]
    claims: NotRequired[dict[str, _VERDICT]]
    checks: NotRequired[dict[str, dict[str, str]]]
    # the probe's revision (probes.core.probe.Probe.revision) when it is past the first
    revision: NotRequired[Annotated[int, Field(ge=2)]]
    batch_s: NotRequired[float]  # the suite run it came from: seconds (no lock wait), probes
    batch_probes: NotRequired[int]


class AlmanacRetraction(TypedDict):
    """A line of an almanac build's state withdrawing the runs made into one report folder
    (``loopprobe almanac retract``): they stay in the file and the cost, and are run again."""

    version: str
    retract: str  # the runs' report folder, as the runs name it
    probe: NotRequired[str]  # only this probe's run (none: every run of the folder)
    reason: Annotated[str, Field(min_length=1)]  # what the harness got wrong there


AlmanacLine = AlmanacRun | AlmanacRetraction

JournalLine = Annotated[RequestRecord | ResponseEndRecord | JournalNote | BlobRecord,
                        Field(discriminator="type")]

KINDS: dict[str, Any] = {
    "report": Report, "fingerprint": FingerprintFile, "matrix": MatrixFile,
    "timing": TimingFile, "sessions": SessionsFile, "bisect": BisectFile,
    "counterfactuals": CounterfactualsFile, "check": CheckFile,
    "conformance": ConformanceFile, "almanac": AlmanacFile, "almanac-run": AlmanacLine,
    "journal-line": JournalLine, "report-journal-line": JournalLine, "scenario": Scenario,
    "cases": CaseFile,
}
# what a report's copy of the journal changes in each line (probes.report.normalise.journal_line)
REPORT_JOURNAL_VOLATILE = (*JOURNAL_VOLATILE, "body_size")
DESCRIPTIONS = {
    "report": "a loopprobe report (<report>.json): claims, checks, probes, trust",
    "fingerprint": "a client version's fingerprint (fingerprint.json)",
    "matrix": "claims × client versions (matrix.json)",
    "timing": "a report's timing (<report>.timing.json)",
    "sessions": "the cross-version session table (sessions.json)",
    "bisect": "a bisect result (bisect-<claim>.json)",
    "counterfactuals": "what each counterfactual did on a folder's binary (counterfactuals.json)",
    "check": "what loopprobe check's gate decided per version and expectation (check.json)",
    "conformance": "the agent-loop conformance table: claims × client versions, scores, tiers, "
                   "deltas and the baseline gate (conformance.json)",
    "almanac": "every version of a range per claim: ranges, change points, witnesses "
               "(almanac.json)",
    "almanac-run": "one line of an almanac build's state: a finished run or a retraction "
                   "(cells/<version>.runs.jsonl)",
    "journal-line": "one line of a mock's journal (JSONL, one record per line)",
    "report-journal-line": "one line of a report's journal (<report>.journal.jsonl): the "
                           "mock's record with its probe, timing fields \"$VOLATILE\"",
    "scenario": "a mock scenario (YAML or JSON); point an editor at this with `$schema`",
    "cases": "a case file (loopprobe: cases/1): your own setup, the scripted model and what "
             "you expect (loopprobe check)",
}


@cache
def schema(kind: str) -> dict[str, Any]:
    """The JSON Schema of one kind of file."""
    if kind not in KINDS:
        raise KeyError(f"no schema {kind!r}; known: {', '.join(KINDS)}")
    model = KINDS[kind]
    generated: dict[str, Any] = (model.model_json_schema() if kind in ("scenario", "cases")
                                 else TypeAdapter(model).json_schema())
    if kind == "scenario":  # an editor's pointer to this schema is allowed in the file
        generated.setdefault("properties", {})["$schema"] = {"type": "string"}
    if kind == "report-journal-line":
        for record in generated["$defs"].values():
            properties = record.get("properties", {})
            if "type" not in properties or record.get("title") == "BlobRecord":
                continue  # a blob belongs to no probe: requests of any probe reference it
            for key in REPORT_JOURNAL_VOLATILE:
                if key in properties:
                    properties[key] = {"anyOf": [properties[key], {"const": "$VOLATILE"}]}
            for key in REPORT_JOURNAL_OMITTED:
                properties.pop(key, None)
            properties["probe"] = {"type": "string"}
            record["required"] = [*record.get("required", []), "probe"]
    return {"$schema": DIALECT, "$id": f"loopprobe:{kind}", "title": f"loopprobe {kind}",
            "description": DESCRIPTIONS[kind], **generated}


def write_schemas(directory: Path = SCHEMA_DIR) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for kind in KINDS:
        path = directory / f"{kind}.schema.json"
        path.write_text(json.dumps(schema(kind), indent=2, sort_keys=True) + "\n")
        written.append(path)
    return written


@dataclass(frozen=True)
class Problem:
    path: Path
    where: str  # line N (journals, YAML's document) and a JSON pointer
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.where}: {self.message}"


def kind_of(path: Path, data: Any) -> str | None:
    """What a decoded file is, from its name and its fields; None if not a loopprobe file."""
    name = path.name.removesuffix(".gz")
    if name.endswith(".runs.jsonl"):
        return "almanac-run"
    if name.endswith(".journal.jsonl"):
        return "report-journal-line"
    if name.endswith(".jsonl"):
        return "journal-line"
    if name.endswith(".timing.json"):
        return "timing"
    if not isinstance(data, dict):
        return None
    if data.get("kind") in ("fingerprint", "matrix", "counterfactuals", "check", "conformance",
                            "almanac"):
        return str(data["kind"])
    if "report" in data and "claims" in data:
        return "report"
    if "pairs" in data and "claims" in data:
        return "sessions"
    if "first_changed" in data and "good" in data:
        return "bisect"
    if data.get("loopprobe") == CASES_FORMAT:
        return "cases"
    if "rules" in data or "$schema" in data:
        return "scenario"
    return None


def _pointer(parts: Any) -> str:
    return "/" + "/".join(str(p) for p in parts) if parts else "(top level)"


def _check(path: Path, kind: str, data: Any, where: str = "") -> Iterator[Problem]:
    validator = jsonschema.Draft202012Validator(schema(kind))
    for error in sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path)):
        yield Problem(path, f"{where}at {_pointer(list(error.absolute_path))}",
                      f"{error.message[:300]} (expected by the {kind} schema)")


_SUFFIXES = (".json", ".jsonl", ".jsonl.gz", ".yaml", ".yml")


def _files(target: Path) -> list[Path]:
    """The files of ``target`` a loopprobe file may be in. A folder is walked without
    following symlinked folders (their files are already in it, or are outside it: then the
    link is refused); files are checked as they are read (``probes.core.safe_read``)."""
    if not target.is_dir():
        return [target]
    root, found = target.resolve(), []
    for folder, dirs, names in os.walk(target):  # a symlinked folder is listed, not entered
        for name in dirs:
            link = Path(folder) / name
            if link.is_symlink() and not link.resolve().is_relative_to(root):
                raise ReadRefused(f"{link}: a symlink to {link.resolve()}, outside the folder "
                                  f"{target} being read: refused")
        found += [Path(folder) / name for name in names if name.endswith(_SUFFIXES)]
    return sorted(found)


def validate_path(target: Path) -> tuple[int, list[Problem]]:
    """Every loopprobe file at ``target`` (a file, or a folder searched recursively) against
    its schema: how many files were checked, and every problem found. A file that must not
    be read (a pipe, a symlink out of the folder, too large, too deep, a gzip or YAML bomb)
    is refused: ``ReadRefused``."""
    try:
        os.lstat(target)
    except FileNotFoundError:
        return 0, [Problem(target, "(file)", "no such file or folder")]
    except (OSError, ValueError) as error:  # a name too long, a NUL in it
        said = error.strerror if isinstance(error, OSError) and error.strerror else error
        return 0, [Problem(target, "(file)", f"cannot be read: {said}")]
    within = target if target.is_dir() else None
    checked, problems = 0, []
    for path in _files(target):
        found = list(_validate_file(path, explicit=path == target, within=within))
        if found and found[0].message == "skipped":
            continue
        checked += 1
        problems += found
    return checked, problems


def _validate_file(path: Path, *, explicit: bool, within: Path | None) -> Iterator[Problem]:
    if path.name.endswith((".jsonl", ".jsonl.gz")):
        kind = kind_of(path, None) or "journal-line"
        data = read_journal(path, within=within)
        for number, line in enumerate(json_lines(data.decode(errors="replace")), 1):
            try:
                record = loads(line, f"{path}: line {number}")
            except ValueError as error:
                yield Problem(path, f"line {number}", f"not JSON: {error}")
                continue
            yield from _check(path, kind, record, f"line {number} ")
        # every blob hashes to its name and every reference finds its blob
        for torn in parse_journal(data, str(path)).torn if kind != "almanac-run" else ():
            if torn.why:
                yield Problem(path, f"line {torn.line}", torn.why)
        return
    try:
        if path.suffix in (".yaml", ".yml"):
            data = read_yaml(path, within=within)
        else:
            data = loads(read_bytes(path, within=within), str(path))
    except ScenarioError as error:
        yield Problem(path, "(file)", f"not YAML: {'; '.join(error.problems)}")
        return
    except OSError as error:  # a link to nothing, an I/O error
        yield Problem(path, "(file)", f"cannot be read: {error.strerror or error}")
        return
    except ValueError as error:
        yield Problem(path, "(file)", f"not JSON: {error}")
        return
    found = kind_of(path, data)
    if found is None:
        if explicit:
            yield Problem(path, "(file)", "not a loopprobe file: expected one of "
                          + ", ".join(DESCRIPTIONS.values()))
        else:
            yield Problem(path, "(file)", "skipped")
        return
    if found == "report":  # the files a report names are beside it, as its readers require
        for field in ("journal", "timing"):
            if field in data:
                confined(path.parent, data[field], path, field)
    yield from _check(path, found, data)
