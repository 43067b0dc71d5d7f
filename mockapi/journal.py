"""The request journal: append-only JSONL, one line per request, written before the reply.

Each line is written with a single ``write`` on an ``O_APPEND`` descriptor, so
lines never interleave and a killed server loses nothing it had answered; with
``fsync`` the line is also on disk before the first reply byte. The request
body is spliced into the line as received (it is valid JSON by then), so the
journal holds the exact bytes without re-encoding them.

Record types (``mockapi.records``): ``request`` (what arrived, its kind and
turn, the rule and the scripted reply or the error) and ``response_end`` (how
the reply ended: all sent, client gone, deliberately broken).
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from mockapi.records import JournalRecord, RequestRecord, ResponseEndRecord

__all__ = ["REDACTED", "SECRET_HEADERS", "Journal", "JournalContents", "JournalInUse",
           "read_journal", "redact_headers"]

REDACTED = "[redacted]"
SECRET_HEADERS = frozenset({"x-api-key", "authorization", "proxy-authorization", "cookie",
                            "x-loopprobe-admin-token"})


def redact_headers(raw: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for name_b, value_b in raw:
        name = name_b.decode("latin-1").lower()
        value = REDACTED if name in SECRET_HEADERS else value_b.decode("latin-1")
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    return headers


class Journal:
    """Appends records to a JSONL file; safe to use from one event loop thread."""

    def __init__(self, path: str | Path, *, fsync: bool = False):
        self.path = Path(path)
        self.fsync = fsync
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._fd)
            self._fd = -1
            raise JournalInUse(f"the journal {self.path} is being written by another mock "
                               f"({_holder(self.path)}); give each server its own --journal"
                               ) from None
        self._pid_file().write_text(f"{os.getpid()}\n")
        torn = _set_aside_torn_tail(self.path)
        self._seq, self.last_run = _last_numbers(self.path)
        self._lock = threading.Lock()
        if torn is not None:
            self.append({"type": "journal_note", "note": "a torn last line (a write cut by a "
                         "kill) was moved aside before appending", **torn})

    @property
    def last_seq(self) -> int:
        return self._seq

    def next_seq(self) -> int:
        with self._lock:
            self._seq += 1
            return self._seq

    def append(self, record: Mapping[str, Any], *extra_fields: bytes) -> None:
        """Write ``record`` plus pre-encoded ``"name":value`` fields as one line."""
        head = orjson.dumps(record)
        if extra_fields:
            line = head[:-1] + b"," + b",".join(extra_fields) + b"}\n"
        else:
            line = head + b"\n"
        view = memoryview(line)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
        if self.fsync:
            os.fsync(self._fd)

    def _pid_file(self) -> Path:
        return _pid_file(self.path)

    def close(self) -> None:
        if self._fd >= 0:
            self._pid_file().unlink(missing_ok=True)
            os.close(self._fd)  # releases the lock
            self._fd = -1


class JournalInUse(RuntimeError):
    """Another server holds the journal's lock (two servers would write duplicate seqs)."""


def _pid_file(path: Path) -> Path:
    return path.with_name(path.name + ".pid")


def _holder(path: Path) -> str:
    try:
        return f"pid {_pid_file(path).read_text().strip()}"
    except OSError:
        return "another process"


def _last_numbers(path: Path) -> tuple[int, int]:
    """The last seq and run of an existing journal (a restarted server continues them)."""
    seq = run = 0
    records: Sequence[Mapping[str, Any]] = read_journal(path).records
    for record in records:
        if isinstance(record.get("seq"), int):
            seq = max(seq, record["seq"])
        if isinstance(record.get("run"), int):
            run = max(run, record["run"])
    return seq, run


def _set_aside_torn_tail(path: Path) -> dict[str, Any] | None:
    """Move a last line without a newline (a write cut by a kill) to a side file.

    Appending after it would glue the next record onto the fragment and make the
    journal unreadable; the fragment is kept, never dropped.
    """
    try:
        handle = path.open("rb+")
    except FileNotFoundError:
        return None
    with handle:
        size = end = handle.seek(0, os.SEEK_END)
        keep = 0
        while end > 0:
            start = max(0, end - 65536)
            handle.seek(start)
            newline = handle.read(end - start).rfind(b"\n")
            if newline >= 0:
                keep = start + newline + 1
                break
            end = start
        if keep == size:
            return None
        handle.seek(keep)
        fragment = handle.read()
        side = path.with_name(f"{path.name}.torn-at-{keep}")
        side.write_bytes(fragment)
        handle.truncate(keep)
        return {"offset": keep, "bytes": len(fragment), "moved_to": side.name}


@dataclass
class JournalContents:
    records: list[JournalRecord] = field(default_factory=list)
    torn_tail: str | None = None  # why the last line was not read, if it was not

    def requests(self) -> list[RequestRecord]:
        return [r for r in self.records if r["type"] == "request"]

    def ends(self) -> dict[int, ResponseEndRecord]:
        return {r["seq"]: r for r in self.records if r["type"] == "response_end"}


def read_journal(path: str | Path) -> JournalContents:
    """Read a journal; a torn last line (a write cut by a kill) is reported, not fatal."""
    contents = JournalContents()
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return contents
    lines = data.split(b"\n")
    tail = lines.pop()  # b"" when the file ends with a newline
    for number, line in enumerate(lines, start=1):
        if not line:
            continue
        try:
            contents.records.append(orjson.loads(line))
        except orjson.JSONDecodeError as error:
            raise ValueError(f"{path}: line {number} is not a journal record: {error}") from None
    if tail:
        contents.torn_tail = (f"{path}: the last line ({len(tail)} bytes) has no newline: "
                              "a write was cut short; it was skipped")
    return contents
