"""What the harness keeps of what a client can make it record: one bound for every kind.

A client decides how much it prints, how many reports it sends the collector and how many
faults it commits. Each kind of record is kept under a ``Cap``, a number of records and a
number of bytes, by a ``Tally``: the first records that fit both are kept verbatim; from the
first one that does not fit on, nothing more is kept, only counted (how many, how many
bytes). What is kept is always the first N, whole, and the harness's memory stays flat
whatever the client sends. ``NotKept`` is how evidence and reports say what was left out
("and 399,872 more, 54 MiB, not kept").

The same tally bounds the client's output (``probes.run.pipes``), what the collector receives
and refuses (``probes.run.collected``) and a streamed run's protocol faults and transcript
(``probes.run.conversation``). A tally is not thread-safe: its owner holds its own lock.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass

from typing_extensions import TypedDict

__all__ = ["UNCOUNTED", "Cap", "NotKept", "Tallies", "Tally", "size_text"]

UNCOUNTED = sys.maxsize  # a cap on bytes alone (an output stream: its records are not counted)


@dataclass(frozen=True)
class Cap:
    """How much of one kind of record is kept: at most ``records`` records of at most
    ``bytes`` bytes together."""

    records: int
    bytes: int


class NotKept(TypedDict):
    """What a tally left out, as evidence and reports show it."""

    what: str  # the kind of record: "collector faults", "MCP events", "protocol faults"...
    run: str | None  # the run it came in (None: between runs)
    kept: int  # records kept, the first ones
    kept_bytes: int
    more: int  # records after them, counted and not kept
    more_bytes: int  # their bytes (with the bytes cut from records kept shortened)
    said: str  # "128 kept (30 KiB); and 399,872 more, 54 MiB, not kept"


def size_text(size: int) -> str:
    """A byte count as a reader takes it in: 900 bytes, 812 KiB, 54 MiB, 2.1 GiB."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            value = size / scale
            return f"{value:.1f} {unit}" if value < 10 else f"{value:,.0f} {unit}"
    return f"{size} bytes"


class Tally:
    """One kind of record (of one run): what is kept, and what is only counted."""

    def __init__(self, cap: Cap):
        self.cap = cap
        self.kept = 0
        self.kept_bytes = 0
        self.more = 0
        self.more_bytes = 0
        self.full = False  # a record did not fit: none after it is kept

    def admit(self, size: int) -> bool:
        """Whether a record of ``size`` bytes is kept; counted either way."""
        if (not self.full and self.kept < self.cap.records
                and self.kept_bytes + size <= self.cap.bytes):
            self.kept += 1
            self.kept_bytes += size
            return True
        self.full = True
        self.more += 1
        self.more_bytes += size
        return False

    def take(self, size: int) -> int:
        """How many of the next ``size`` bytes of a stream are kept (a stream may be cut
        anywhere; its records are not counted)."""
        room = 0 if self.full else max(0, self.cap.bytes - self.kept_bytes)
        kept = min(size, room)
        self.kept_bytes += kept
        if kept < size:
            self.full = True
            self.more_bytes += size - kept
        return kept

    def cut(self, size: int) -> None:
        """``size`` bytes left out of a record kept shortened (a line over its own cap)."""
        self.more_bytes += size

    def not_kept(self, what: str, run: str | None = None) -> NotKept | None:
        """What was left out, or None when everything was kept."""
        if not self.more and not self.more_bytes:
            return None
        kept = (f"{self.kept:,} kept ({size_text(self.kept_bytes)})"
                if self.cap.records != UNCOUNTED else f"{size_text(self.kept_bytes)} kept")
        more = (f"{self.more:,} more, {size_text(self.more_bytes)}" if self.more
                else f"{size_text(self.more_bytes)} more")
        return {"what": what, "run": run, "kept": self.kept, "kept_bytes": self.kept_bytes,
                "more": self.more, "more_bytes": self.more_bytes,
                "said": f"{kept}; and {more}, not kept"}


class Tallies:
    """A tally per kind of record and run, each kind under its own cap (``caps``, by kind:
    the kinds are the owner's, so their number is bounded, and the runs are the probe's)."""

    def __init__(self, caps: Mapping[str, Cap]):
        self.caps = dict(caps)
        self._tallies: dict[tuple[str, str | None], Tally] = {}

    def tally(self, what: str, run: str | None, cap: str | None = None) -> Tally:
        """The tally of ``what`` in ``run``, made under the cap of ``cap`` (default: of
        ``what``) when it is the first of its kind."""
        key = (what, run)
        if key not in self._tallies:
            self._tallies[key] = Tally(self.caps[cap or what])
        return self._tallies[key]

    def admit(self, what: str, run: str | None, size: int, cap: str | None = None) -> bool:
        """Whether a record of kind ``what`` in ``run``, of ``size`` bytes, is kept."""
        return self.tally(what, run, cap).admit(size)

    def not_kept(self) -> list[NotKept]:
        """What each kind left out, per run, in a stable order."""
        found = [tally.not_kept(what, run) for (what, run), tally in self._tallies.items()]
        return sorted((n for n in found if n is not None),
                      key=lambda n: (n["run"] or "", n["what"]))
