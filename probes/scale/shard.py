"""Split a suite into shards that run anywhere (a CI job each) and merge what they wrote.

The unit is a report (a ``ReportSpec`` and all its probes): shard ``i/n`` runs the reports at
positions ``i-1, i-1+n, ...`` of the suite and writes their files as an unsharded run would,
plus a partial fingerprint that says which shard it is. ``merge_folders`` is pure file work:
it copies every shard's reports of a version into one folder and combines the partial
fingerprints into the one an unsharded run writes (sets united, counts added, the system
prompt taken from the shard holding the suite's first report). A slice is read as hostile
input: symlinks, reports two slices hold differently, and an ``--out`` inside a slice are
refused before anything is written.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

from probes.core.files import write_bytes, write_json
from probes.core.safe_read import MAX_JOURNAL_BYTES, read_bytes, read_journal
from probes.report.format import TIMING_SUFFIX, load_fingerprint, load_folder

__all__ = ["FINGERPRINT_FILE", "SHARD_KEY", "ShardError", "check_slices", "merge_fingerprints",
           "merge_folders",
           "parse_shard", "shard_of"]

FINGERPRINT_FILE = "fingerprint.json"
SHARD_KEY = "shard"
_T = TypeVar("_T")


class ShardError(ValueError):
    pass


def parse_shard(text: str) -> tuple[int, int]:
    """``"2/3"`` -> (2, 3)."""
    match = re.fullmatch(r"(\d+)/(\d+)", text.strip())
    if not match or not 1 <= int(match[1]) <= int(match[2]):
        raise ShardError(f"--shard {text!r}: expected I/N with 1 <= I <= N, e.g. 1/4")
    return int(match[1]), int(match[2])


def shard_of(items: Sequence[_T], index: int, count: int) -> list[_T]:
    """The items of shard ``index`` (1-based) of ``count``: every count-th from index-1."""
    return list(items[index - 1::count])


def _merge_value(key: str, values: list[Any]) -> Any:
    if all(isinstance(v, list) for v in values) and key != "system_blocks":
        return sorted({item for v in values for item in v})
    if all(isinstance(v, dict) for v in values):
        keys = sorted({k for v in values for k in v})
        if all(isinstance(x, int) for v in values for x in v.values()):
            return {k: sum(v.get(k, 0) for v in values) for k in keys}
        return {k: sorted({item for v in values for item in v.get(k, [])}) for k in keys}
    return values[0]


def merge_fingerprints(parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One fingerprint file from shards' partial ones (each with its ``shard`` note)."""
    if not parts:
        raise ShardError("no fingerprints to merge")
    notes = [p.get(SHARD_KEY) for p in parts]
    repeated = next((n for i, n in enumerate(notes) if n is not None and n in notes[:i]), None)
    if repeated is not None:  # its counts would be added twice
        raise ShardError(f"slice {repeated.get('index')}/{repeated.get('count')} given twice: "
                         "refused; expected each slice of the run once")
    ordered = sorted(parts, key=lambda p: p.get(SHARD_KEY, {}).get("first_report", 0))
    merged = {k: v for k, v in ordered[0].items() if k != SHARD_KEY}
    prints = [p["fingerprint"] for p in ordered]
    merged["fingerprint"] = {
        key: (next((f[key] for f in prints if f.get(key)), prints[0].get(key))
              if key == "system_blocks" else _merge_value(key, [f[key] for f in prints
                                                                if key in f]))
        for key in prints[0]}
    return merged


def _report_of(name: str) -> str:
    """The report a file of a version folder belongs to (its name without the suffixes)."""
    for suffix in (".journal.jsonl.gz", ".journal.jsonl", TIMING_SUFFIX, ".json"):
        if name.endswith(suffix):
            return name.removesuffix(suffix)
    return name


def _entries(folder: Path) -> list[Path]:
    """A slice's folder, listed; a symlink in it refused (merge copies files, and a link
    would copy whatever it points to into the merged folder)."""
    entries = sorted(folder.iterdir())
    for entry in entries:
        if entry.is_symlink():
            raise ShardError(f"{entry}: a symlink in a slice (to {entry.resolve()}): refused; "
                             "expected the files `matrix --shard` wrote")
    return entries


def check_slices(sources: Sequence[Path], out: Path) -> None:
    """Each slice a folder, ``out`` neither one of them nor inside one; before ``out`` is made."""
    whole = out.resolve()
    for source in sources:
        if not source.is_dir():
            raise ShardError(f"{source}: expected a folder written by matrix --shard")
        if whole == source.resolve() or whole.is_relative_to(source.resolve()):
            where = "is" if whole == source.resolve() else "is inside"
            raise ShardError(f"--out {out}: expected a folder apart from the slices, but it "
                             f"{where} the slice {source}: refused")


def _plan(parts: list[Path]) -> tuple[dict[str, Path], list[tuple[Path, dict[str, Any]]]]:
    """What a version folder of the merge takes from its slices: each file (name -> the
    slice's file) and the partial fingerprints, all read and checked before anything is
    written; a report two slices hold differently is refused."""
    files: dict[str, Path] = {}
    prints: list[tuple[Path, dict[str, Any]]] = []
    for part in parts:
        entries = _entries(part)
        load_folder(part, require_reports=False)  # its reports readable, their files inside it
        for file in entries:
            if file.is_dir() or file.name == "EVIDENCE.md":  # the guide is written anew
                continue
            if file.name == FINGERPRINT_FILE:
                prints.append((file, dict(load_fingerprint(file, within=part))))
                continue
            data = read_bytes(file, limit=MAX_JOURNAL_BYTES, within=part)
            if file.name.endswith(".gz"):  # a gzip bomb refused here, not once copied
                read_journal(file, within=part)
            earlier = files.setdefault(file.name, file)
            if earlier != file and not file.name.endswith(TIMING_SUFFIX) \
                    and read_bytes(earlier, limit=MAX_JOURNAL_BYTES) != data:
                raise ShardError(
                    f"{earlier.parent.parent} and {part.parent}: both slices hold report "
                    f"{_report_of(file.name)!r} of {part.name}, differently ({file.name}): "
                    "refused; expected each report in one slice (the same --shard N)")
    return files, prints


def merge_folders(sources: Sequence[Path], out: Path) -> list[str]:
    """Copy every version folder of every shard output into ``out`` and merge their
    fingerprints; returns the version folders written. Everything is read and checked
    first: a symlink, a report two slices hold differently, a fingerprint that is not one,
    or ``out`` inside a slice is refused before anything is written."""
    check_slices(sources, out)
    folders: dict[str, list[Path]] = {}
    for source in sources:
        for folder in _entries(source):
            if folder.is_dir():
                folders.setdefault(folder.name, []).append(folder)
    if not folders:
        raise ShardError(f"no version folders in {', '.join(map(str, sources))}")
    plans = {name: _plan(parts) for name, parts in folders.items()}
    merged_prints = {}
    for name, (_, prints) in plans.items():
        if prints:
            try:
                merged_prints[name] = merge_fingerprints([p for _, p in prints])
            except (TypeError, ValueError, KeyError, AttributeError) as error:
                raise ShardError(f"{', '.join(str(f) for f, _ in prints)}: expected partial "
                                 f"fingerprints of one binary, found ones that cannot be "
                                 f"merged ({type(error).__name__}: {error})") from None
    for name, (files, _) in plans.items():
        target = out / name
        target.mkdir(parents=True, exist_ok=True)
        for file_name, file in files.items():
            write_bytes(target / file_name, read_bytes(file, limit=MAX_JOURNAL_BYTES))
        if name in merged_prints:
            write_json(target / FINGERPRINT_FILE, merged_prints[name])
    return sorted(folders)
