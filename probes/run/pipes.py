"""A client's pipes, each read or written by a thread of its own: a client that prints without
end, or never reads its stdin, can neither exhaust the harness nor block it.

``Capture`` reads one output stream to its end, keeps its first ``cap`` bytes and counts the
rest (it reads on, so the client never blocks on a full pipe), under the same ``Tally`` as
every other record the client can cause (``probes.core.tally``). ``StdinWriter`` writes what
the caller queues; the caller never waits on the client, and ``stop`` ends the writer
whatever the client does.
"""

from __future__ import annotations

import os
import queue
import select
import threading
from collections import deque
from typing import IO

from probes.core.tally import UNCOUNTED, Cap, Tally

__all__ = ["FEED_LINES", "LINE_CAP", "OUTPUT_CAP", "STDIN_QUEUE_CAP", "Capture", "StdinWriter"]

OUTPUT_CAP = 16 * 1024 * 1024  # bytes kept of each output stream
LINE_CAP = 1024 * 1024  # bytes kept of one line; a longer line is never read as an event
STDIN_QUEUE_CAP = 8 * 1024 * 1024  # bytes waiting for the client to read them
FEED_LINES = 10_000  # lines read and not yet taken by the harness
_CHUNK = 1 << 16
_WAKE = 0.1  # how often a writer blocked on a full pipe looks whether it must stop


class Capture:
    """One output stream, read to its end by a thread. Keeps its first ``cap`` bytes; with
    ``lines``, whole lines only (each at most ``line_cap`` bytes, a longer one cut short),
    each whole line kept also put on ``feed`` (then None at the end) until
    ``stop_feeding``."""

    def __init__(self, stream: IO[bytes], cap: int, *, lines: bool = False,
                 line_cap: int = LINE_CAP):
        self._stream = stream
        self._lines = lines
        self._line_cap = line_cap
        # bounded: a flood of short lines waits for the reader of the feed, never piles up
        self.feed: queue.Queue[bytes | None] = queue.Queue(maxsize=FEED_LINES)
        self._unfed = threading.Event()
        self._lock = threading.Lock()
        self._kept = bytearray()  # one buffer: a flood of short lines costs no object each
        # bytes kept and dropped; with lines, a line that does not fit ends the keeping
        self._tally = Tally(Cap(UNCOUNTED, cap))
        self._line = bytearray()
        self._cut = False  # the line being read is longer than line_cap
        self._thread = threading.Thread(target=self._run, name="capture", daemon=True)
        self._thread.start()

    @property
    def done(self) -> bool:
        """The stream ended (every writer closed it)."""
        return not self._thread.is_alive()

    def join(self, timeout: float) -> None:
        self._thread.join(max(0.0, timeout))

    def stop_feeding(self) -> None:
        """No one reads ``feed`` any more: lines are kept, no longer fed."""
        self._unfed.set()

    def result(self) -> tuple[bytes, int]:
        """What was kept, and how many bytes were dropped, so far."""
        with self._lock:
            return bytes(self._kept), self._tally.more_bytes

    def _run(self) -> None:
        # the stream is read here alone and closed here: its descriptor is never reused
        # while this thread still reads it
        try:
            fd = self._stream.fileno()
            while chunk := os.read(fd, _CHUNK):
                with self._lock:
                    fed = self._take_lines(chunk) if self._lines else self._take(chunk)
                for line in fed:
                    self._put(line)
            with self._lock:
                last = self._end_line(b"") if self._line or self._cut else None
            if last is not None:
                self._put(last)
        except (OSError, ValueError):  # the stream broke or was closed: what came is kept
            pass
        finally:
            if self._lines:
                self._put(None)
            self._stream.close()

    def _put(self, item: bytes | None) -> None:
        while not self._unfed.is_set():
            try:
                self.feed.put(item, timeout=_WAKE)
                return
            except queue.Full:
                continue

    def _take(self, chunk: bytes) -> list[bytes]:
        self._kept += chunk[:self._tally.take(len(chunk))]
        return []

    def _take_lines(self, chunk: bytes) -> list[bytes]:
        """The whole lines ``chunk`` ends, to feed."""
        fed: list[bytes] = []
        start = 0
        while start < len(chunk):
            if self._tally.full:
                self._tally.take(len(chunk) - start)  # counted, not kept
                break
            end = chunk.find(b"\n", start)
            self._add(chunk[start:len(chunk) if end < 0 else end])
            if end < 0:
                break
            if (line := self._end_line(b"\n")) is not None:
                fed.append(line)
            start = end + 1
        return fed

    def _add(self, piece: bytes) -> None:
        room = max(0, self._line_cap - len(self._line))
        if len(piece) > room:
            self._cut = True
            self._tally.cut(len(piece) - room)
            piece = piece[:room]
        self._line += piece

    def _end_line(self, ending: bytes) -> bytes | None:
        """Keep the line read so far; it, if it is to be fed."""
        line, whole = bytes(self._line) + ending, not self._cut
        self._line, self._cut = bytearray(), False
        if not self._tally.admit(len(line)):
            return None
        self._kept += line
        return line if whole else None


class StdinWriter:
    """Writes what the caller queues to the client's stdin, from a thread: ``write`` never
    waits on the client. At most ``cap`` bytes wait; a write beyond them is refused
    (BlockingIOError), as is one after ``close`` or a broken pipe (BrokenPipeError). A
    queued write that could not be made is reported by ``failures``: (its index among all
    ``write`` calls, why), in the caller's thread."""

    def __init__(self, stream: IO[bytes], cap: int = STDIN_QUEUE_CAP):
        self._stream = stream
        self._fd = stream.fileno()
        os.set_blocking(self._fd, False)  # so that ``stop`` is heard while the pipe is full
        self._cap = cap
        self._changed = threading.Condition()
        self._queue: deque[tuple[int, bytes] | None] = deque()  # None: close after the rest
        self._queued = 0
        self._writes = 0
        self._ended: str | None = None  # why nothing more can be written
        self._stop: str | None = None
        self._failed: list[tuple[int, str]] = []
        self._thread = threading.Thread(target=self._run, name="stdin-writer", daemon=True)
        self._thread.start()

    def write(self, text: str) -> None:
        data = text.encode()
        with self._changed:
            self._writes += 1
            if self._ended is not None:
                raise BrokenPipeError(f"not written: {self._ended}")
            if self._queued + len(data) > self._cap:
                raise BlockingIOError(
                    f"not written: the client had not yet read {self._queued} bytes written "
                    f"before ({self._cap} may wait; this line is {len(data)})")
            self._queue.append((self._writes - 1, data))
            self._queued += len(data)
            self._changed.notify()

    def close(self) -> None:
        """Close stdin once what is queued is written."""
        with self._changed:
            if self._ended is None:
                self._ended = "stdin was closed before"
                self._queue.append(None)
                self._changed.notify()

    def stop(self, why: str, timeout: float) -> None:
        """End now: what still waits is not written (``why``), and stdin is closed."""
        with self._changed:
            self._stop = why
            self._changed.notify()
        self._thread.join(timeout)

    def failures(self) -> list[tuple[int, str]]:
        """The writes that could not be made since the last call."""
        with self._changed:
            failed, self._failed = self._failed, []
        return failed

    def _run(self) -> None:
        try:
            while (item := self._next()) is not None:
                index, data = item
                error = self._send(data)
                with self._changed:
                    self._queued -= len(data)
                    if error is not None:
                        self._failed.append((index, error))
                        self._ended = "stdin broke before: " + error
                        return
        finally:
            with self._changed:
                why = self._stop or self._ended or "stdin was closed"
                self._failed += [(item[0], f"not written: {why}") for item in self._queue
                                 if item is not None]
                self._queue.clear()
                self._ended = self._ended or why
            try:
                self._stream.close()
            except OSError:
                pass

    def _next(self) -> tuple[int, bytes] | None:
        with self._changed:
            while not self._queue and self._stop is None:
                self._changed.wait()
            if self._stop is not None:
                return None
            return self._queue.popleft()

    def _send(self, data: bytes) -> str | None:
        """Why ``data`` was not (wholly) written, or None."""
        view, sent = memoryview(data), 0
        while sent < len(data):
            if self._stop is not None:
                return _unsent(sent, len(data), self._stop)
            try:
                sent += os.write(self._fd, view[sent:])
            except BlockingIOError:
                select.select([], [self._fd], [], _WAKE)
            except OSError as error:
                return _unsent(sent, len(data), f"{type(error).__name__}: {error}")
        return None


def _unsent(sent: int, size: int, why: str) -> str:
    return f"not written: {why}" if not sent else f"cut short after {sent} of {size} bytes: {why}"
