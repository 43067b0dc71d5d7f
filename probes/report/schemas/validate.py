"""A file, or every file of a folder, held against its schema: where it breaks it, read as
hostile input."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema

from mockapi.journal.read import parse_journal
from mockapi.script.scenario import ScenarioError
from probes.cases.format import CASES_FORMAT
from probes.core.safe_read import (
    ReadRefused,
    confined,
    json_lines,
    loads,
    read_bytes,
    read_journal,
    read_yaml,
)
from probes.report.schemas.kinds import DESCRIPTIONS, schema

__all__ = ["Problem", "kind_of", "validate_path"]


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
                            "almanac", "changelog-map"):
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
