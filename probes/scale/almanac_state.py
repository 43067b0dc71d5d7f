"""An almanac build's state on disk: every run it finished, one JSON line each.

``<state>/build.json`` holds what the build is (client, grid, screen probe, the claims of each
probe); ``<state>/cells/<version>.runs.jsonl`` one line per run finished on that version: a screen
(``{"screen": digest}``) or a probe's verdicts (``{"probe", "attempt", "claims", "checks"}``),
with the binary's SHA-256 and the report folder it came from. A line is appended in one
write and synced when its run is over, so an interrupted build (even ``kill -9``) loses at
most the run in progress: a torn last line is ignored, and the next build runs it again.

States of several shards merge by union (``merge_states``): the same run twice is kept once;
two runs of one cell that disagree are both kept, and the search reads that cell as flaky.

A line that is JSON but not a run or a retraction (a field of another type, a version that is
no file name, a line nested past ``MAX_DEPTH``) was not torn by a kill: the state is refused
(``StateError`` or ``ReadRefused``, one line naming the file, the line and what was expected).

A run carries its probe's revision (``Probe.revision``; none written: the first). A run of
another revision than the probe's now is superseded: it stays in its file (nothing recorded
is lost, and it still counts in the cost) but no cell holds it, so the probe runs again.

A retraction (``{"version", "retract": folder, "probe", "reason"}``, written by ``retract``)
withdraws the runs made into one report folder (of one probe, or all of them, the screen too)
when the harness is known to have been wrong there: a defect fixed since, or evidence
another machine's run overwrote. Like a superseded run, a withdrawn run stays in its file
and in the cost, its folder name stays taken, and no cell holds it: the search runs it again.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from probes.core.files import write_json
from probes.core.safe_read import loads, read_bytes, read_json
from probes.report.format import ReportError

__all__ = ["BUILD_FILE", "RUNS_SUFFIX", "AlmanacState", "StateError", "merge_states"]

BUILD_FILE = "build.json"
RUNS_SUFFIX = ".runs.jsonl"  # validated as almanac-run lines (probes.report.schemas)
_CELLS = "cells"


class StateError(ReportError):
    """A state that cannot be used for this build (said in one line; a ReportError, so a
    command that meets one says it as the user's file, exit 2)."""


class AlmanacState:
    """The runs of one build, read from and appended to ``folder``."""

    def __init__(self, folder: Path, revisions: Mapping[str, int] | None = None) -> None:
        """``revisions``: probe -> its revision now (a probe not named: the first)."""
        self.folder = folder
        self.revisions = dict(revisions or {})
        self.lines: set[str] = set()
        self._runs: list[dict[str, Any]] = []  # every run line, in the order read or added
        self.retractions: list[dict[str, Any]] = []
        self.cells: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
        self.screens: dict[str, dict[str, Any]] = {}
        self.superseded: list[dict[str, Any]] = []  # runs of an earlier probe revision
        self.withdrawn: list[dict[str, Any]] = []  # runs a retraction names
        self._retracted: set[tuple[str, str, str | None]] = set()
        cells = folder / _CELLS
        for path in sorted(cells.glob("*.jsonl")) if cells.is_dir() else []:
            for number, line in enumerate(_text(path, folder).split("\n"), 1):
                self._take(line, f"{path}: line {number}")
        self._index()

    def build(self) -> dict[str, Any] | None:
        path = self.folder / BUILD_FILE
        if not path.is_file():
            return None
        try:
            found = read_json(path, within=self.folder)
        except ValueError as error:
            raise StateError(f"{path}: expected JSON, found {error}: refused") from None
        if not isinstance(found, dict) or not isinstance(found.get("grid", 1), int) \
                or not isinstance(found.get("client", ""), str):
            raise StateError(f"{path}: expected an object of the build's client (a name) and "
                             "grid (an integer): refused")
        return found

    def start(self, build: Mapping[str, Any]) -> None:
        """Record what the build is, or check it is the one already recorded."""
        found = self.build()
        if found is None:
            write_json(self.folder / BUILD_FILE, dict(build))
            return
        differs = sorted(k for k in build if found.get(k) != build.get(k))
        if differs:
            raise StateError(f"{self.folder}: a build with other {', '.join(differs)} "
                             f"(found {', '.join(f'{k}={found.get(k)!r}' for k in differs)}"
                             "): expected the same build to resume; use another --state")

    def _take(self, line: str, source: str) -> bool:
        line = line.strip()
        if not line or line in self.lines:
            return False
        try:
            record = loads(line, source)  # ReadRefused when nested too deep
        except ValueError:
            return False  # a torn line (a write cut by a kill): that run is run again
        problem = _malformed(record)
        if problem is not None:
            raise StateError(f"{source}: {problem}: refused (expected an almanac-run line: "
                             "a finished run or a retraction)")
        self.lines.add(line)
        (self.retractions if "retract" in record else self._runs).append(record)
        return True

    def _index(self) -> None:
        """Place every run: in its cell (or the version's screen), superseded or withdrawn;
        whatever order the runs and the retractions were read in (a merge adds them after)."""
        self._retracted = {(str(r["version"]), str(r["retract"]), r.get("probe"))
                           for r in self.retractions}
        self.cells, self.screens, self.superseded, self.withdrawn = {}, {}, [], []
        for record in self._runs:
            self._place(record)

    def _place(self, record: dict[str, Any]) -> None:
        version, folder = record["version"], str(record.get("folder"))
        probe = None if "screen" in record else str(record.get("probe"))
        if {(version, folder, None), (version, folder, probe)} & self._retracted:
            self.withdrawn.append(record)
        elif probe is None:
            self.screens.setdefault(version, record)
        elif _revision(record) != self.revision_of(probe):
            self.superseded.append(record)
        else:
            self.cells.setdefault((version, probe, int(record.get("attempt", 1))),
                                  []).append(record)

    def revision_of(self, probe: str) -> int:
        return self.revisions.get(probe, 1)

    def records(self) -> list[dict[str, Any]]:
        """Every run read or added (in cells, superseded or withdrawn); not the retractions."""
        return list(self._runs)

    def add(self, record: Mapping[str, Any]) -> None:
        """Append one finished run or a retraction (one write, synced); a probe's run is
        stamped with the probe's revision when it is past the first."""
        record = dict(record)
        if "probe" in record and "retract" not in record and "revision" not in record and \
                (revision := self.revision_of(str(record["probe"]))) > 1:
            record["revision"] = revision
        line = json.dumps(record, sort_keys=True, ensure_ascii=False)
        if not self._take(line, f"{self.folder}: a run to add"):
            return
        if "retract" in record:
            self._index()
        else:
            self._place(record)
        path = self.folder / _CELLS / f"{record['version']}{RUNS_SUFFIX}"
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            prefix = b"" if _ends_whole(path) else b"\n"  # after a torn line: a line of its own
            os.write(descriptor, prefix + line.encode() + b"\n")
            os.fsync(descriptor)
        finally:
            os.close(descriptor)

    def retract(self, version: str, folder: str, probe: str | None, reason: str) -> int:
        """Withdraw the runs made into ``folder`` on ``version`` (of ``probe``; None: every run
        there, the screen too), saying why; how many runs it withdrew. Refused (``StateError``)
        without a reason, or when no run standing in a cell or screen matches."""
        if not reason.strip():
            raise StateError("retract: expected a reason (what the harness got wrong there), "
                             "found none")
        standing = [r for r in [*self.screens.values(),
                                *(r for rs in self.cells.values() for r in rs)]
                    if r["version"] == version and str(r.get("folder")) == folder
                    and (probe is None or r.get("probe") == probe)]
        if not standing:
            ran = sorted({f"{r.get('folder')} ({r.get('probe') or 'screen'})"
                          for r in self._runs if r["version"] == version})
            raise StateError(f"retract: no standing run of {probe or 'any probe'} in folder "
                             f"{folder!r} on {version}; found: {', '.join(ran) or 'no runs'}")
        self.add({"version": version, "retract": folder, "reason": reason.strip(),
                  **({"probe": probe} if probe else {})})
        return len(standing)

    # the search's two lookups (probes.scale.almanac_search)
    def cell(self, version: str, probe: str, attempt: int) -> list[dict[str, str]] | None:
        runs = self.cells.get((version, probe, attempt))
        return [run["claims"] for run in runs] if runs else None

    def screen(self, version: str) -> str | None:
        found = self.screens.get(version)
        return str(found["screen"]) if found else None

    def runs(self, version: str, probe: str, attempt: int = 1) -> list[dict[str, Any]]:
        return self.cells.get((version, probe, attempt), [])

    def binaries(self) -> dict[str, str]:
        """version -> the binary's SHA-256, from every run on it."""
        found: dict[str, str] = {}
        for record in self._runs:
            if record.get("binary_sha256"):
                found.setdefault(record["version"], record["binary_sha256"])
        return found


def _text(path: Path, folder: Path) -> str:
    data = read_bytes(path, within=folder)
    try:
        return data.decode()
    except UnicodeDecodeError as error:
        raise StateError(f"{path}: expected UTF-8 JSON lines, found byte "
                         f"{data[error.start]:#04x} at offset {error.start}: refused") from None


# the fields a state line may hold and their types (probes.report.schemas.AlmanacLine)
_TEXT_FIELDS = ("binary_sha256", "folder", "screen", "probe", "retract", "reason")
_INT_FIELDS = ("attempt", "revision", "batch_probes")


def _malformed(record: Any) -> str | None:
    """What makes ``record`` no run and no retraction, or None."""
    if not isinstance(record, dict):
        return f"expected an object, found {type(record).__name__}"
    version = record.get("version")
    if not isinstance(version, str) or not version or "/" in version \
            or version in (".", "..") or not version.isprintable():
        return f"version: expected a version name, found {str(version)[:80]!r}"
    for name in _TEXT_FIELDS:
        if name in record and not isinstance(record[name], str):
            return f"{name}: expected a string, found {type(record[name]).__name__}"
    for name in _INT_FIELDS:
        if name in record and (not isinstance(record[name], int)
                               or isinstance(record[name], bool)):
            return f"{name}: expected an integer, found {type(record[name]).__name__}"
    for name in ("claims", "checks"):
        if name in record and not isinstance(record[name], dict):
            return f"{name}: expected an object, found {type(record[name]).__name__}"
    if "retract" in record:
        return None if record.get("reason") else "reason: expected why the runs are withdrawn"
    if "screen" not in record and "probe" not in record:
        return "expected a screen or a probe's run (a screen or probe field), found neither"
    if any(not isinstance(v, str) for v in record.get("claims", {}).values()):
        return "claims: expected a verdict (a string) for each claim"
    return None


def _revision(record: Mapping[str, Any]) -> int:
    revision = record.get("revision", 1)
    return revision if isinstance(revision, int) else 1


def _ends_whole(path: Path) -> bool:
    if not path.is_file() or path.stat().st_size == 0:
        return True
    with path.open("rb") as handle:
        handle.seek(-1, os.SEEK_END)
        return handle.read(1) == b"\n"


def merge_states(sources: Sequence[Path], out: Path) -> AlmanacState:
    """The union of the runs of ``sources`` (shards of one build) in ``out``."""
    builds = [AlmanacState(source).build() for source in sources]
    if any(build is None for build in builds):
        missing = [str(s) for s, b in zip(sources, builds, strict=True) if b is None]
        raise StateError(f"{', '.join(missing)}: no {BUILD_FILE}: expected an almanac state")
    first = builds[0]
    for source, build in zip(sources, builds, strict=True):
        if build != first:
            raise StateError(f"{source} is a state of another build than {sources[0]}: "
                             "expected shards of one build")
    merged = AlmanacState(out)
    assert first is not None
    merged.start(first)
    for source in sources:
        read = AlmanacState(source)
        for record in [*read.records(), *read.retractions]:
            merged.add(record)
    return merged
