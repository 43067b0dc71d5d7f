"""Reading a journal (``mockapi.journal`` writes it): its records, and the lines that are
not records (writes cut short), skipped and listed with where they are, never fatal.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from mockapi.records import JournalRecord, RequestRecord, ResponseEndRecord

__all__ = ["JournalContents", "TornLine", "parse_journal", "read_journal", "record_or_none"]


@dataclass(frozen=True)
class TornLine:
    """A line that is not a journal record (a write cut short), with where it is."""

    line: int  # 1-based line number in the file (or the part of it read)
    offset: int
    size: int
    last: bool  # the file's last line, without its newline


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
        places = ", ".join(f"line {t.line} ({t.size} bytes at offset {t.offset})"
                           for t in self.torn[:10])
        more = f" and {len(self.torn) - 10} more" if len(self.torn) > 10 else ""
        return (f"{self.source}: {len(self.torn)} line(s) are not journal records (writes cut "
                f"short) and were skipped: {places}{more}")

    def requests(self) -> list[RequestRecord]:
        return [r for r in self.records if r["type"] == "request"]

    def ends(self) -> dict[int, ResponseEndRecord]:
        return {r["seq"]: r for r in self.records if r["type"] == "response_end"}


def parse_journal(data: bytes, source: str, *, base_offset: int = 0) -> JournalContents:
    """The records in ``data`` (whole lines of a journal, from ``base_offset`` of
    ``source``), and the lines that are not records, with where they are."""
    contents = JournalContents(source=source)
    lines = data.split(b"\n")
    tail = lines.pop()  # b"" when the data ends with a newline
    offset = base_offset
    for number, line in enumerate(lines, start=1):
        if line:
            record = record_or_none(line)
            if record is not None:
                contents.records.append(record)  # type: ignore[arg-type]
            else:
                contents.torn.append(TornLine(number, offset, len(line), last=False))
        offset += len(line) + 1
    if tail:
        contents.torn.append(TornLine(len(lines) + 1, offset, len(tail), last=True))
    return contents


def read_journal(path: str | Path) -> JournalContents:
    """Read a journal; lines that are not records (writes cut short) are skipped and listed
    in ``torn``, never fatal."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return JournalContents(source=str(path))
    return parse_journal(data, str(path))
