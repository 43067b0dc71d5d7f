"""Large repeated parts of journals stored once across folders: the shared blob store.

A report's journal already writes each large part of its requests (system prompt, tool list)
once, as a blob line after its records (``probes.report.journal_blobs``). The same parts
recur in every report of a version and, mostly unchanged, across versions; evidence kept
for many versions (the almanac's witnesses) moves each journal's blob lines into one store
shared by all of them, ``<store>/<sha256[:2]>/<sha256>.json`` (the blob line exactly as it
was; plain, as git's packs then store near-identical blobs, such as one system prompt a few
words apart, as deltas of each other), and leaves beside the journal ``<journal>.blobs``: the
store's path relative to the journal's folder and the digests of the lines it took, in
order. ``read_journal`` (``probes.core.safe_read``), through which every reader goes (diff,
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

from probes.core.safe_read import MAX_JOURNAL_BYTES, ReadRefused, read_bytes

__all__ = ["SIDECAR_SUFFIX", "STORE_NAME", "restore_blobs", "store_blobs"]

SIDECAR_SUFFIX = ".blobs"  # not .json: readers take every *.json of a folder for a report
STORE_NAME = "blobs"
_BLOB_HEAD = b'{"sha256": "'  # a report journal's blob line (sorted keys)


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


def restore_blobs(journal: Path, data: bytes) -> bytes:
    """``data`` (the journal's plain bytes) with the blob lines its sidecar names put back;
    ``data`` unchanged when it has none."""
    sidecar = _sidecar(journal)
    if not sidecar.is_file():
        return data
    try:
        index = json.loads(read_bytes(sidecar, limit=1 << 22))
        store_text, digests = index["store"], index["blobs"]
    except (ValueError, KeyError, TypeError):
        raise ReadRefused(f"{sidecar}: expected {{store, blobs}}: refused") from None
    parts = Path(str(store_text)).parts
    if not parts or parts[-1] != STORE_NAME or any(p != ".." for p in parts[:-1]):
        raise ReadRefused(f"{sidecar}: store {store_text!r}: expected ../…/{STORE_NAME}: "
                          "refused")
    store = journal.parent
    for part in parts:
        store = store / part
        if store.is_symlink():
            raise ReadRefused(f"{sidecar}: {store} is a symlink: refused")
    restored = [data if not data or data.endswith(b"\n") else data + b"\n"]
    total = len(data)
    for digest in digests:
        if not isinstance(digest, str) or len(digest) != 64 or \
                any(c not in "0123456789abcdef" for c in digest):
            raise ReadRefused(f"{sidecar}: {digest!r}: expected a SHA-256: refused")
        path = store / digest[:2] / f"{digest}.json"
        if not path.is_file() or path.is_symlink():
            raise ReadRefused(f"{journal}: blob {digest[:12]}… is not in the store {store}: "
                              "refused")
        line = read_bytes(path, limit=MAX_JOURNAL_BYTES).rstrip(b"\n")
        total += len(line) + 1
        if total > MAX_JOURNAL_BYTES:
            raise ReadRefused(f"{journal}: more than {MAX_JOURNAL_BYTES} bytes restored: "
                              "refused")
        if not line.startswith(_BLOB_HEAD + digest.encode()):
            raise ReadRefused(f"{path}: not the blob line of {digest[:12]}…: refused")
        restored.append(line + b"\n")
    return b"".join(restored)
