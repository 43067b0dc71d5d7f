"""The request journal: append-only JSONL, one line per request, written before the reply.

Each line is written with ``write`` on an ``O_APPEND`` descriptor, so lines
never interleave and a killed server loses nothing it had answered; with
``fsync`` the line is also on disk before the first reply byte. The request
body is spliced into the line as received (it is valid JSON by then), so the
journal holds the exact bytes without re-encoding them.

A line is on disk whole or not at all: a write that fails (a full disk, a file
size limit) is truncated back to the last whole line and raises
``JournalWriteFailed``; the failure is noted in the journal once a write
succeeds again. A journal whose file vanished or was replaced while serving
raises ``JournalUnavailable`` before anything is written (writing on would lose
the lines into an unlinked file). Lines that could not be written when a
reply had already been sent (its ``response_end``) are kept and written first
once the journal can be written again. Readers skip unreadable lines wherever
they are, and report them. The file is opened, and the files beside it made, never
through a link (``mockapi.journal.file``): a link, a pipe or a device at its name is refused.

What is secret is never written: the writers pass every line's headers and query string
through ``mockapi.journal.redact`` first.

Record types (``mockapi.journal.records``): ``request`` (what arrived, its kind and
turn, the rule and the scripted reply or the error), ``response_end`` (how
the reply ended), ``journal_note`` (what the journal itself noted) and ``blob``
(a large part of request bodies, written once and referenced by its SHA-256:
``mockapi.journal.blobs``; ``append_request`` splits a body). Reading
is ``mockapi.journal.read``'s (``read_journal``, ``JournalContents``, ``TornLine``).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from array import array
from bisect import bisect_right
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import orjson

from mockapi.journal.blobs import (
    BlobError,
    BlobPlaces,
    BlobSplitter,
    EncodedPart,
    PartPath,
    blob_line,
    parse_blob_line,
)
from mockapi.journal.file import (
    JournalError,
    JournalInUse,
    JournalRefused,
    open_journal,
    read_at,
    remove_pid_file,
    set_aside_torn_tail,
    write_pid_file,
)
from mockapi.journal.read import (
    JournalContents,
    TornLine,
    parse_journal,
    record_or_none,
)
from mockapi.journal.records import fits_in_a_record, spliced_fields

__all__ = ["Journal", "JournalError", "JournalInUse", "JournalRefused", "JournalUnavailable",
           "JournalWriteFailed"]

_MAX_PENDING_LINES = 10_000  # response_end lines kept while the journal cannot be written


class JournalWriteFailed(JournalError):
    """A write failed (e.g. the disk is full); the file was cut back to its last whole line."""


class JournalUnavailable(JournalError):
    """The journal's file was deleted or replaced while the server was writing it."""


class Journal:
    """Appends records to a JSONL file; safe to use from one event loop thread."""

    def __init__(self, path: str | Path, *, fsync: bool = False):
        self.path = Path(path)
        self._path = os.fsencode(self.path)  # stat on every write: skip Path's conversion
        self.fsync = fsync
        self._fd = -1
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # never through a link: JournalRefused, JournalInUse (mockapi.journal.file)
        self._fd = open_journal(self.path)
        self._identity = _identity(os.fstat(self._fd))
        write_pid_file(self.path)
        torn_tail = set_aside_torn_tail(self._fd, self.path)
        # per line: its offset, and the largest seq of any line up to it (for reads after a seq)
        self._offsets = array("q")
        self._max_seq = array("q")
        self._seq = self.last_run = 0
        self._size = 0
        self._blobs = BlobSplitter()
        self._blob_places = BlobPlaces(self._blobs)
        unreadable = self._index_existing()
        self._lock = threading.Lock()
        self._pending: list[bytes] = []
        self._failures: list[dict[str, Any]] = []
        self.failed_writes = 0
        self._episode_failures = 0
        self.last_failure: str | None = None
        if torn_tail is not None:
            self.append({"type": "journal_note", "note": "a torn last line (a write cut by a "
                         "kill) was moved aside before appending", **torn_tail})
        if unreadable:
            self.append({"type": "journal_note", "note": f"{len(unreadable)} unreadable "
                         "line(s) are kept in place and skipped by readers",
                         "lines": [t.line for t in unreadable[:100]],
                         "offsets": [t.offset for t in unreadable[:100]]})

    def _index_existing(self) -> list[TornLine]:
        data = read_at(self._fd, os.fstat(self._fd).st_size, 0)
        torn: list[TornLine] = []
        offset = max_seq = 0
        lines = data.split(b"\n")
        lines.pop()  # the torn tail was set aside: the data ends with a newline
        for number, line in enumerate(lines, start=1):
            record = record_or_none(line)
            if record is not None and record["type"] == "blob":
                try:
                    digest, value = parse_blob_line(line)
                except BlobError:
                    record = None
                else:
                    self._blob_places.written(digest, offset, line, len(value))
            if record is None:
                if line:
                    torn.append(TornLine(number, offset, len(line), last=False))
            else:
                if isinstance(record.get("seq"), int):
                    max_seq = max(max_seq, record["seq"])
                if isinstance(record.get("run"), int):
                    self.last_run = max(self.last_run, record["run"])
            self._offsets.append(offset)
            self._max_seq.append(max_seq)
            offset += len(line) + 1
        self._seq, self._size = max_seq, offset
        return torn

    @property
    def last_seq(self) -> int:
        return self._seq

    def next_seq(self) -> int:
        with self._lock:
            self._seq += 1
            return self._seq

    def problem(self) -> str | None:
        """Why the journal cannot be written now (its file vanished or was replaced), or None."""
        try:
            current = _identity(os.stat(self._path))
        except FileNotFoundError:
            return (f"the journal {self.path} was deleted while the mock was writing it; "
                    "requests are refused until it is back")
        except OSError as error:
            return f"the journal {self.path} cannot be checked: {error.strerror or error}"
        if current != self._identity:
            return (f"the journal {self.path} was replaced by another file while the mock "
                    "was writing it; requests are refused until the original is back")
        return None

    def append(self, record: Mapping[str, Any], *extra_fields: bytes) -> None:
        """Write ``record`` plus pre-encoded ``"name":value`` fields as one whole line.

        Raises ``JournalUnavailable`` or ``JournalWriteFailed``; nothing of the line is
        then on disk."""
        self._write(_line(record, extra_fields))

    def append_request(self, record: Mapping[str, Any], *, reply: bytes | None,
                       body: bytes | None, body_is_json: bool,
                       parsed: dict[str, Any] | None = None,
                       known: Mapping[PartPath, EncodedPart] | None = None) -> None:
        """Write a request record with its scripted reply and its body as one whole line,
        after the blobs of the body's large parts this journal does not hold yet.

        ``parsed``: the body as parsed from ``body`` (parsed again if not given); a body
        that is not a JSON object, or nests too deep, is written whole as before;
        ``known``: parts of ``parsed`` already encoded (``mockapi.check.repeated_parts``)."""
        split = None
        if body and body_is_json and len(body) >= self._blobs.threshold \
                and fits_in_a_record(body):
            if parsed is None:
                parsed = _object_or_none(body)
            split = self._blobs.split(parsed, known) if parsed is not None else None
        if split is None or not split.refs:  # the body as it came
            self._write(_line(record, spliced_fields(reply, body, body_is_json)))
            return
        fields = [*spliced_fields(reply, None, False), b'"body_refs":' + orjson.dumps(split.refs),
                  b'"body":' + split.body]
        self._write(_line(record, fields), split.blobs)

    def blob(self, digest: str) -> bytes | None:
        """The value of a blob this journal holds, as written; None if it holds none."""
        return self._blob_places.value(self._fd, digest)

    def append_or_keep(self, record: Mapping[str, Any]) -> bool:
        """Append ``record``, or keep it to be written first once the journal is writable
        again (for lines about replies already sent, which no error can take back)."""
        line = _line(record, ())
        try:
            self._write(line)
        except JournalError:
            if len(self._pending) < _MAX_PENDING_LINES:
                self._pending.append(line)
            return False
        return True

    def _write(self, line: bytes, blobs: Mapping[str, bytes] | None = None) -> None:
        problem = self.problem()
        if problem is not None:
            self._failed(problem, unavailable=True)
            raise JournalUnavailable(problem)
        if self._failures:
            self._write_or_fail(self._failure_note())
            self._failures.clear()
            self._episode_failures = 0
        while self._pending:
            self._write_or_fail(self._pending[0])
            self._pending.pop(0)
        if blobs:
            lines = [(digest, blob_line(digest, value), len(value))
                     for digest, value in blobs.items()]
            if self.fsync:  # synced before the line that references them, then the line
                self._write_or_fail(b"".join(line for _, line, _ in lines))
                self._note_blobs(lines)
            else:  # one write: the blobs and their line are on disk whole or not at all
                self._write_or_fail(b"".join(line for _, line, _ in lines) + line)
                self._note_blobs(lines)
                return
        if line:
            self._write_or_fail(line)

    def _note_blobs(self, lines: list[tuple[str, bytes, int]]) -> None:
        """Index the blob lines just written (digest, line, size of the value), which end
        at the last line's start or at the file's end."""
        end = self._offsets[-1] if not self.fsync else self._size
        offset = end - sum(len(line) for _, line, _ in lines)
        for digest, line, size in lines:
            self._blob_places.written(digest, offset, line, size)
            offset += len(line)

    def _write_or_fail(self, line: bytes) -> None:
        try:
            self._write_whole(line)
        except OSError as error:
            why = f"writing the journal {self.path} failed: {error.strerror or error}"
            self._failed(why)
            raise JournalWriteFailed(why) from None

    def _write_whole(self, line: bytes) -> None:
        start = self._size
        view = memoryview(line)
        try:
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
            if self.fsync:
                os.fsync(self._fd)
        except OSError:
            try:  # never leave a partial line for the next one to be glued onto
                os.ftruncate(self._fd, start)
            except OSError:
                pass
            raise
        self._size = start + len(line)
        previous = self._max_seq[-1] if self._max_seq else 0
        # one line, or blob lines and then the request that references them
        lines = [line] if line.find(b"\n") == len(line) - 1 else line.splitlines(keepends=True)
        for one in lines:
            self._offsets.append(start)
            self._max_seq.append(previous := max(_seq_of(one), previous))
            start += len(one)

    def _failed(self, why: str, *, unavailable: bool = False) -> None:
        self.failed_writes += 1
        self._episode_failures += 1
        self.last_failure = why
        if len(self._failures) < 100:
            self._failures.append({"time": round(time.time(), 6), "error": why,
                                   "unavailable": unavailable})

    def _failure_note(self) -> bytes:
        if not self._failures:
            return b""
        note = {"type": "journal_note",
                "note": f"the journal could not be written {self._episode_failures} time(s); "
                        "each request it could not record was answered 500 and got no "
                        "scripted reply",
                "failures": self._failures}
        return orjson.dumps(note) + b"\n"

    def offset_after(self, seq: int) -> int:
        """The offset of the first line holding a seq greater than ``seq``."""
        index = bisect_right(self._max_seq, seq)
        return self._offsets[index] if index < len(self._offsets) else self._size

    def read_after(self, seq: int) -> JournalContents:
        """The records with a seq above ``seq``, reading only the lines from the first of them."""
        start, end = self.offset_after(seq), self._size
        data = read_at(self._fd, end - start, start)
        contents = parse_journal(data, str(self.path), base_offset=start,
                                 blob_elsewhere=self.blob)
        contents.records = [r for r in contents.records
                            if r["type"] == "journal_note" or r["seq"] > seq]
        return contents

    def close(self) -> None:
        if self._fd < 0:
            return
        if self._pending or self._failures:
            try:
                self._write(b"")
            except JournalError:
                lost = len(self._pending)
                if lost:
                    print(f"mockapi: {lost} response_end line(s) could not be written to "
                          f"{self.path}:", file=sys.stderr)
                    for line in self._pending:
                        sys.stderr.write(line.decode("utf-8", "replace"))
        remove_pid_file(self.path)
        os.close(self._fd)  # releases the lock
        self._fd = -1


def _line(record: Mapping[str, Any], extra_fields: Iterable[bytes]) -> bytes:
    head = orjson.dumps(record)
    extra = tuple(extra_fields)
    if extra:
        return head[:-1] + b"," + b",".join(extra) + b"}\n"
    return head + b"\n"


def _object_or_none(body: bytes) -> dict[str, Any] | None:
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _seq_of(line: bytes) -> int:
    # every record builder puts "seq" in the first fields; a note has none
    marker = line.find(b'"seq":', 0, 64)
    if marker < 0:
        return 0
    start = marker + 6
    end = start
    while end < len(line) and 48 <= line[end] <= 57:
        end += 1
    return int(line[start:end]) if end > start else 0


def _identity(stat: os.stat_result) -> tuple[int, int]:
    return stat.st_dev, stat.st_ino
