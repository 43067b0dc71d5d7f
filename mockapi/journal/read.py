"""Reading a journal (``mockapi.journal.write`` writes it): its records, and the lines that are
not records (writes cut short), skipped and listed with where they are, never fatal.

A request record that references blobs (journal format 4, ``mockapi.journal.blobs``) is
given back whole: each blob's value put back in its place, so readers see the body as it
arrived. Blob records themselves are not records to a reader. A request whose blob is
missing or altered is listed with the skipped lines, with why.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from mockapi.journal.blobs import BLOB_LINE_HEAD, BlobError, parse_blob_line, resolve_body
from mockapi.journal.records import JournalRecord, RequestRecord, ResponseEndRecord

__all__ = ["JournalContents", "TornLine", "parse_journal", "read_journal", "record_or_none"]


@dataclass(frozen=True)
class TornLine:
    """A line that is not a journal record (a write cut short), with where it is."""

    line: int  # 1-based line number in the file (or the part of it read)
    offset: int
    size: int
    last: bool  # the file's last line, without its newline
    why: str = ""  # set when the line is whole but cannot be read (a blob missing, altered)


def record_or_none(line: bytes) -> dict[str, Any] | None:
    """The record a line holds; None for a line that is not one (a write cut short)."""
    try:
        record = orjson.loads(line) if line else None
    except orjson.JSONDecodeError:
        return None
    return record if isinstance(record, dict) and isinstance(record.get("type"), str) else None


@dataclass
class JournalContents:
    """What a journal held: its records in order, and the lines skipped."""

    records: list[JournalRecord] = field(default_factory=list)
    torn: list[TornLine] = field(default_factory=list)  # lines that are not records, skipped
    source: str = ""

    @property
    def torn_tail(self) -> str | None:
        """What was skipped, in one sentence; None when every line was read."""
        if not self.torn:
            return None
        if len(self.torn) == 1 and self.torn[0].last:
            return (f"{self.source}: the last line ({self.torn[0].size} bytes) has no newline: "
                    "a write was cut short; it was skipped")
        places = ", ".join(f"line {t.line} ({t.size} bytes at offset {t.offset}"
                           f"{': ' + t.why if t.why else ''})" for t in self.torn[:10])
        more = f" and {len(self.torn) - 10} more" if len(self.torn) > 10 else ""
        return (f"{self.source}: {len(self.torn)} line(s) are not journal records (writes cut "
                f"short) and were skipped: {places}{more}")

    def requests(self) -> list[RequestRecord]:
        return [r for r in self.records if r["type"] == "request"]

    def ends(self) -> dict[int, ResponseEndRecord]:
        return {r["seq"]: r for r in self.records if r["type"] == "response_end"}


def parse_journal(data: bytes, source: str, *, base_offset: int = 0,
                  blob_elsewhere: Callable[[str], bytes | None] | None = None
                  ) -> JournalContents:
    """The records in ``data`` (whole lines of a journal, from ``base_offset`` of
    ``source``), and the lines that are not records, with where they are. A blob that is
    not in ``data`` is asked of ``blob_elsewhere`` (the value's bytes, or None)."""
    contents = JournalContents(source=source)
    lines = data.split(b"\n")
    tail = lines.pop()  # b"" when the data ends with a newline
    offset = base_offset
    blobs: dict[str, bytes] = {}
    referencing: list[tuple[int, TornLine]] = []  # records to resolve once every blob is known
    for number, line in enumerate(lines, start=1):
        if line:
            # a blob line is parsed once, by parse_blob_line below
            record = {"type": "blob"} if line.startswith(BLOB_LINE_HEAD) \
                else record_or_none(line)
            place = TornLine(number, offset, len(line), last=False)
            if record is None:
                contents.torn.append(place)
            elif record["type"] == "blob":
                try:
                    digest, value = parse_blob_line(line)
                except BlobError as error:
                    contents.torn.append(TornLine(number, offset, len(line), False, str(error)))
                else:
                    blobs[digest] = value
            else:
                if "body_refs" in record:
                    referencing.append((len(contents.records), place))
                contents.records.append(record)  # type: ignore[arg-type]
        offset += len(line) + 1
    if tail:
        contents.torn.append(TornLine(len(lines) + 1, offset, len(tail), last=True))
    if referencing:
        _resolve(contents, referencing, blobs, blob_elsewhere)
    return contents


def _resolve(contents: JournalContents, referencing: list[tuple[int, TornLine]],
             blobs: dict[str, bytes], elsewhere: Callable[[str], bytes | None] | None) -> None:
    def value_of(digest: str) -> Any:
        value = blobs.get(digest)
        if value is None and elsewhere is not None:
            value = elsewhere(digest)
        if value is None:
            raise BlobError(f"it references blob {digest[:12]}…, which the journal does not hold")
        return orjson.loads(value)  # a fresh value each time: no two records share one

    unreadable: set[int] = set()
    for index, place in referencing:
        record: dict[str, Any] = contents.records[index]  # type: ignore[assignment]
        try:
            resolve_body(record.get("body"), record.pop("body_refs"), value_of)
        except BlobError as error:
            unreadable.add(index)
            contents.torn.append(TornLine(place.line, place.offset, place.size, False,
                                          str(error)))
    if unreadable:
        contents.records = [r for i, r in enumerate(contents.records) if i not in unreadable]
        contents.torn.sort(key=lambda t: t.line)


def read_journal(path: str | Path) -> JournalContents:
    """Read a journal; lines that are not records (writes cut short) are skipped and listed
    in ``torn``, never fatal."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return JournalContents(source=str(path))
    return parse_journal(data, str(path))
