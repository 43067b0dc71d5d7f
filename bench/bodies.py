"""Real Claude Code request bodies, taken from the committed probe journals.

Every ``request`` record of ``POST /v1/messages`` with a JSON-object body is a
body Claude Code really sent, as the reports keep it (keys sorted; session ids,
random ids and sandbox paths replaced by placeholders such as ``$SESSION[..]``).
Each distinct body is serialised once, compactly as a client sends it, in a
streaming (``stream: true``, as recorded) and a non-streaming variant; nothing
else in it is changed.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from probes.core.safe_read import json_lines
from probes.report.journal_blobs import expand_lines

__all__ = ["Bodies", "BodiesError", "load_bodies"]

GIT_TIMEOUT = 30.0


class BodiesError(RuntimeError):
    pass


@dataclass
class Bodies:
    source: str
    files: list[str]
    streaming: list[bytes] = field(default_factory=list)
    non_streaming: list[bytes] = field(default_factory=list)

    def variant(self, stream: bool) -> list[bytes]:
        return self.streaming if stream else self.non_streaming

    def describe(self) -> dict[str, Any]:
        sizes = [len(b) for b in self.streaming]
        return {"source": self.source, "files": self.files, "count": len(sizes),
                "bytes_min": min(sizes), "bytes_max": max(sizes),
                "bytes_mean": round(sum(sizes) / len(sizes))}


def _bodies_of(data: bytes) -> list[dict[str, Any]]:
    found = []
    # a report's journal: its large parts written once (blobs), put back here
    for line in expand_lines(json_lines(data.decode())):
        if not line.strip():
            continue
        record = orjson.loads(line)
        if (record.get("type") == "request" and record.get("path") == "/v1/messages"
                and isinstance(record.get("body"), dict)):
            found.append(record["body"])
    return found


def _from_git(root: Path, directory: Path) -> list[tuple[str, bytes]]:
    """The journals of ``directory`` as committed at HEAD (while a probe run rewrites them)."""
    relative = directory.resolve().relative_to(root.resolve()).as_posix()
    try:
        listed = subprocess.run(["git", "ls-tree", "--name-only", "HEAD", f"{relative}/"],
                                cwd=root, capture_output=True, timeout=GIT_TIMEOUT, check=True)
        names = [n for n in listed.stdout.decode().splitlines() if n.endswith(".journal.jsonl")]
        return [(f"HEAD:{name}", subprocess.run(
            ["git", "show", f"HEAD:{name}"], cwd=root, capture_output=True,
            timeout=GIT_TIMEOUT, check=True).stdout) for name in names]
    except (OSError, ValueError, subprocess.SubprocessError):
        return []


def load_bodies(directory: Path, root: Path) -> Bodies:
    """Distinct bodies of ``directory/*.journal.jsonl`` (or of its committed version)."""
    journals = [(str(p), p.read_bytes()) for p in sorted(directory.glob("*.journal.jsonl"))]
    source = str(directory)
    if not journals:
        journals = _from_git(root, directory)
        source = f"git HEAD:{directory} (no journals in the work tree)"
    bodies = Bodies(source=source, files=[name for name, _ in journals])
    seen: set[bytes] = set()
    for _, data in journals:
        for body in _bodies_of(data):
            streaming = orjson.dumps({**body, "stream": True})
            if streaming in seen:
                continue
            seen.add(streaming)
            bodies.streaming.append(streaming)
            bodies.non_streaming.append(orjson.dumps({**body, "stream": False}))
    if not bodies.streaming:
        raise BodiesError(f"no /v1/messages request bodies found in {directory}/*.journal.jsonl "
                          "(nor committed at HEAD)")
    return bodies
