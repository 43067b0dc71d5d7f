"""Split a suite into shards that run anywhere (a CI job each) and merge what they wrote.

The unit is a report (a ``ReportSpec`` and all its probes): shard ``i/n`` runs the reports at
positions ``i-1, i-1+n, ...`` of the suite and writes their files as an unsharded run would,
plus a partial fingerprint that says which shard it is. ``merge_folders`` is pure file work:
it copies every shard's reports of a version into one folder and combines the partial
fingerprints into the one an unsharded run writes (sets united, counts added, the system
prompt taken from the shard holding the suite's first report).
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

from probes.core.files import write_json

__all__ = ["FINGERPRINT_FILE", "SHARD_KEY", "ShardError", "merge_fingerprints", "merge_folders",
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
    ordered = sorted(parts, key=lambda p: p.get(SHARD_KEY, {}).get("first_report", 0))
    merged = {k: v for k, v in ordered[0].items() if k != SHARD_KEY}
    prints = [p["fingerprint"] for p in ordered]
    merged["fingerprint"] = {
        key: (next((f[key] for f in prints if f.get(key)), prints[0].get(key))
              if key == "system_blocks" else _merge_value(key, [f[key] for f in prints
                                                                if key in f]))
        for key in prints[0]}
    return merged


def merge_folders(sources: Sequence[Path], out: Path) -> list[str]:
    """Copy every version folder of every shard output into ``out`` and merge their
    fingerprints; returns the version folders written."""
    folders: dict[str, list[Path]] = {}
    for source in sources:
        if not source.is_dir():
            raise ShardError(f"{source}: expected a folder written by matrix --shard")
        for folder in sorted(p for p in source.iterdir() if p.is_dir()):
            folders.setdefault(folder.name, []).append(folder)
    if not folders:
        raise ShardError(f"no version folders in {', '.join(map(str, sources))}")
    for name, parts in folders.items():
        target = out / name
        target.mkdir(parents=True, exist_ok=True)
        prints = []
        for part in parts:
            for file in sorted(part.iterdir()):
                if file.name == FINGERPRINT_FILE:
                    prints.append(json.loads(file.read_text()))
                elif file.is_file() and file.name != "EVIDENCE.md":
                    shutil.copyfile(file, target / file.name)
        if prints:
            write_json(target / FINGERPRINT_FILE, merge_fingerprints(prints))
    return sorted(folders)
