"""A report's journal written compact: large repeated parts of request bodies once, by hash.

A report's journal holds every request of every probe (``probes.report.build``), and
each Claude Code request repeats the same system prompt and tool list: most of a version
folder's bytes. ``compact_lines`` writes each such part once, as a blob record after
the records (``mockapi.journal.blobs``: the mock's journal format 4, in the report's line
format: sorted keys, ``json.dumps``'s separators), so the line numbers reports cite stay
those of the records. ``expand_lines`` gives back the lines exactly as they were before
(a test checks every committed journal): every reader of a report's journal goes
through it (``probes.report.format.read_journal_lines``).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from mockapi.journal.blobs import BLOB_LINE_HEAD, BlobError, BlobSplitter, parse_blob_line, resolve_body
from probes.core.safe_read import json_lines, loads

__all__ = ["compact_journal_file", "compact_lines", "expand_lines"]


def _encode(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, ensure_ascii=False).encode()


def compact_lines(lines: list[str]) -> list[str]:
    """The report journal's lines with each large part of a request body written once,
    as a blob line after the records; lines already compact are taken as they are."""
    lines = expand_lines(lines)  # a merge may hand over lines of two compact journals
    splitter = BlobSplitter(encode=_encode)
    records: list[str] = []
    blobs: dict[str, bytes] = {}
    for line in lines:
        if _is_blob(line):
            continue
        record = json.loads(line) if '"body": {' in line else None
        if not isinstance(record, dict) or record.get("type") != "request" \
                or not isinstance(record.get("body"), dict):
            records.append(line)
            continue
        split = splitter.split(record["body"])
        if not split.refs:
            records.append(line)
            continue
        for digest, value in split.blobs.items():
            blobs.setdefault(digest, value)
        splitter.written.update(split.blobs)
        records.append(json.dumps({**record, "body": json.loads(split.body),
                                   "body_refs": split.refs}, sort_keys=True,
                                  ensure_ascii=False))
    return records + [f'{{"sha256": "{digest}", "type": "blob", "value": {value.decode()}}}'
                      for digest, value in blobs.items()]


def expand_lines(lines: list[str]) -> list[str]:
    """The lines with each reference put back: every request line as it was written before
    it was compacted; blob lines stay where they are (no reader takes them for a record).
    ``BlobError`` names a reference no blob resolves, or a blob whose value is not its
    hash's."""
    blobs: dict[str, bytes] = {}
    for number, line in enumerate(lines, 1):
        if _is_blob(line):
            try:
                digest, value = parse_blob_line(line.encode())
            except BlobError as error:
                raise BlobError(f"line {number}: {error}") from None
            blobs[digest] = value

    def value_of(digest: str) -> Any:
        if digest not in blobs:
            raise BlobError(f"it references blob {digest[:12]}…, which the journal does not "
                            "hold")
        return loads(blobs[digest], f"blob {digest[:12]}…")

    expanded = []
    for number, line in enumerate(lines, 1):
        if '"body_refs": ' in line:
            record = loads(line, f"line {number}")  # hostile input: bounded depth
            if isinstance(record, dict) and "body_refs" in record:
                try:
                    resolve_body(record.get("body"), record.pop("body_refs"), value_of)
                except BlobError as error:
                    raise BlobError(f"line {number}: {error}") from None
                line = json.dumps(record, sort_keys=True, ensure_ascii=False)
        expanded.append(line)
    return expanded


def _is_blob(line: str) -> bool:
    # a report's own blob lines (sorted keys), or a mock journal's
    return line.startswith(('{"sha256": ', BLOB_LINE_HEAD.decode()))


def compact_journal_file(path: Path) -> tuple[int, int]:
    """Rewrite a report's journal (``.jsonl`` or reproducible ``.jsonl.gz``) compact, in
    place; its (size before, size after) in bytes on disk."""
    before = path.read_bytes()
    gzipped = path.name.endswith(".gz")
    text = gzip.decompress(before).decode() if gzipped else before.decode()
    lines = compact_lines(json_lines(text))
    data = "".join(line + "\n" for line in lines).encode()
    after = gzip.compress(data, 9, mtime=0) if gzipped else data
    path.write_bytes(after)
    return len(before), len(after)
