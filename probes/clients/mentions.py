"""Static evidence: whether the installed client's files mention a string at all.

Only where no run evidence can tell "this version does not know it" from "it knows it and
behaves otherwise" (a hook output field or an environment variable the client ignores
silently) a probe names the strings it needs looked up (``Probe.client_mentions``). They
are searched as bytes, read-only, in the client's installed package files: the entry (a
native executable embeds its JavaScript, so a byte search finds it there) and the package
folder's ``.js``/``.cjs``/``.mjs``/``.json`` files, within fixed bounds. The answer is kept
per binary sha256 for the life of the process: one search per binary and string.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from probes.clients.base import ClientBinary

__all__ = ["MAX_FILES", "MAX_FILE_BYTES", "SEARCHED_SUFFIXES", "look_up", "searched_files"]

SEARCHED_SUFFIXES = (".js", ".cjs", ".mjs", ".json")
MAX_FILES = 400
MAX_FILE_BYTES = 1 << 30  # a native client is a few hundred MB
_CHUNK = 1 << 24
_LOCK = threading.Lock()
_FOUND: dict[tuple[str, str], bool] = {}


def searched_files(binary: ClientBinary) -> list[Path]:
    """The entry, then the package folder's script and JSON files (no links followed), in a
    stable order, at most ``MAX_FILES``."""
    files = [binary.entry] if binary.entry.is_file() and not binary.entry.is_symlink() else []
    package = binary.root / "node_modules" / binary.package
    if package.is_dir() and not package.is_symlink():
        found = sorted(p for p in package.rglob("*")
                       if p.suffix in SEARCHED_SUFFIXES and p.is_file() and not p.is_symlink()
                       and "node_modules" not in p.relative_to(package).parts)
        files += [p for p in found if p != binary.entry]
    return files[:MAX_FILES]


def _contains(path: Path, needles: list[bytes]) -> set[bytes]:
    """The needles found in ``path``, read in chunks that overlap by the longest needle."""
    found: set[bytes] = set()
    overlap = max(len(n) for n in needles) - 1
    read = 0
    tail = b""
    with path.open("rb") as handle:
        while read < MAX_FILE_BYTES and len(found) < len(needles):
            chunk = handle.read(min(_CHUNK, MAX_FILE_BYTES - read))
            if not chunk:
                break
            read += len(chunk)
            window = tail + chunk
            found.update(n for n in needles if n not in found and n in window)
            tail = window[-overlap:] if overlap else b""
    return found


def look_up(binary: ClientBinary, needles: Iterable[str]) -> dict[str, Any]:
    """Whether the installed client mentions each of ``needles``, as the evidence keeps it:
    ``{"binary_sha256", "files" (relative to the install), "found": {needle: bool}}``."""
    wanted = sorted(set(needles))
    files = searched_files(binary)
    with _LOCK:
        missing = [n for n in wanted if (binary.sha256, n) not in _FOUND]
        if missing:
            hits: set[bytes] = set()
            encoded = [n.encode() for n in missing]
            for path in files:
                hits |= _contains(path, [n for n in encoded if n not in hits])
                if len(hits) == len(encoded):
                    break
            for needle in missing:
                _FOUND[(binary.sha256, needle)] = needle.encode() in hits
        found = {n: _FOUND[(binary.sha256, n)] for n in wanted}
    return {"binary_sha256": binary.sha256,
            "files": [str(p.relative_to(binary.root)) if p.is_relative_to(binary.root)
                      else p.name for p in files],
            "found": found}
