"""Large repeated parts of journals stored once across folders: the shared blob store.

A report's journal already writes each large part of its requests (system prompt, tool list)
once, as a blob line after its records (``probes.report.journal_blobs``). The same parts
recur in every report of a version and, mostly unchanged, across versions; evidence kept
for many versions (the almanac's witnesses) moves each journal's blob lines into one store
shared by all of them, ``<store>/<sha256[:2]>/<sha256>.json`` (the blob line exactly as it
was; plain, as git's packs then store near-identical blobs, such as one system prompt a few
words apart, as deltas of each other), and leaves beside the journal ``<journal>.blobs``: the
store's path relative to the journal's folder and the digests of the lines it took, in
order. ``read_journal`` (``probes.core.safe_read.restore_blobs``), through which every reader goes (diff,
render, validate, guide, checks), puts them back: the bytes read are the journal's bytes
before it was stored (a test checks it on committed journals).

A store line is checked on the way back: it must be a blob line whose value hashes to its
name; the store must be a folder named ``blobs`` reached from the journal's folder by
``..`` steps only, no symlink on the way.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from probes.core.safe_read import BLOB_SIDECAR_SUFFIX as SIDECAR_SUFFIX
from probes.core.safe_read import BLOB_STORE_NAME as STORE_NAME

__all__ = ["store_blobs"]

_BLOB_HEAD = b'{"sha256": "'  # a report journal's blob line (sorted keys), as restore_blobs reads it


def _sidecar(journal: Path) -> Path:
    return journal.with_name(journal.name + SIDECAR_SUFFIX)


def _plain(journal: Path) -> bytes:
    data = journal.read_bytes()
    return gzip.decompress(data) if journal.name.endswith(".gz") else data


def store_blobs(journal: Path, store: Path) -> tuple[int, int]:
    """Move the blob lines at the end of a report's journal into ``store``; the journal's
    (bytes before, bytes after) on disk, the sidecar counted."""
    if _sidecar(journal).exists():
        raise ValueError(f"{journal}: its blobs are already stored")
    before = journal.stat().st_size
    lines = _plain(journal).splitlines(keepends=True)
    cut = len(lines)
    while cut and lines[cut - 1].startswith(_BLOB_HEAD):
        cut -= 1
    digests = []
    for line in lines[cut:]:
        digest = json.loads(line)["sha256"]
        target = store / digest[:2] / f"{digest}.json"
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(line.rstrip(b"\n") + b"\n")
        digests.append(digest)
    if not digests:
        return before, before
    kept = b"".join(lines[:cut])
    journal.write_bytes(gzip.compress(kept, 9, mtime=0) if journal.name.endswith(".gz")
                        else kept)
    relative = Path(*[".."] * _depth(journal.parent, store.parent), STORE_NAME)
    _sidecar(journal).write_text(json.dumps({"store": relative.as_posix(), "blobs": digests},
                                            sort_keys=True) + "\n")
    return before, journal.stat().st_size + _sidecar(journal).stat().st_size


def _depth(folder: Path, root: Path) -> int:
    relative = folder.resolve().relative_to(root.resolve())
    return len(relative.parts)
