"""Faults as data: a response body as a plan of steps, which one loop in the app executes.

A plan sends bytes, sleeps, and ends with exactly one ``End`` (the body finishes
normally) or ``Abort`` (the connection drops), each carrying the journal's end
reason. A raw reply's plan is computed once, when it is prepared. A streamed message's plan is
made step by step as it plays (``StreamPlan.steps``), its events read from a tail that
encodes them as they are read: a reply of millions of one-character deltas is never held
whole. ``message_start`` is the one event built per request; a plan that only sends, then
ends complete, goes out as one write (``StreamPlan.whole``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from mockapi.journal.records import (
    END_COMPLETE,
    END_DISCONNECTED_BY_SCRIPT,
    END_STREAM_ERROR_BY_SCRIPT,
    END_TRUNCATED_BY_SCRIPT,
    EndReason,
)
from mockapi.script.replies import Message, Raw
from mockapi.script.sse import encode_event

__all__ = [
    "Abort",
    "End",
    "Plan",
    "Send",
    "Sleep",
    "Step",
    "StreamPlan",
    "Tail",
    "one_write",
    "plan_raw",
    "plan_stream",
]


@dataclass(frozen=True, slots=True)
class Send:
    data: bytes


@dataclass(frozen=True, slots=True)
class Sleep:
    seconds: float


@dataclass(frozen=True, slots=True)
class Abort:
    """Drop the connection: the client sees the body break off."""

    reason: EndReason


@dataclass(frozen=True, slots=True)
class End:
    """Finish the body normally."""

    reason: EndReason


Step = Send | Sleep | Abort | End
Plan = tuple[Step, ...]


class Tail(Protocol):
    """A stream's events after ``message_start``, encoded as they are read."""

    def __len__(self) -> int: ...

    def __iter__(self) -> Iterator[bytes]: ...

    def position_of(self, event: str) -> int | None:
        """How many events precede the first one named ``event``; None if none is."""


@dataclass(frozen=True, slots=True)
class StreamPlan:
    """A streamed message's plan: its tail, where it stalls, and where and how it ends."""

    tail: Tail
    stall_at: int | None  # how many events precede the stall; None without one
    stall_seconds: float
    end_at: int  # how many events are sent, message_start counted, before ``ending``
    ending: Plan

    @property
    def whole(self) -> bool:
        """Whether the plan only sends, then ends complete: one write, ``message_start``
        and ``tail``."""
        return ((self.stall_at is None or self.stall_at > self.end_at)
                and self.ending == (End(END_COMPLETE),))

    def steps(self, start: bytes) -> Iterator[Step]:
        """The plan of one response whose ``message_start`` event is ``start``, step by step."""
        events = iter(self.tail)
        for position in range(self.end_at + 1):
            if position == self.stall_at:
                yield Sleep(self.stall_seconds)
            if position == self.end_at:
                yield from self.ending
                return
            yield Send(start if position == 0 else next(events))


def one_write(plan: Plan) -> tuple[bytes, int] | None:
    """The bytes of a plan that only sends, then ends complete, and how many sends; else None."""
    if not plan:
        return None
    *sends, last = plan
    data: list[bytes] = []
    for step in sends:
        if not isinstance(step, Send):
            return None
        data.append(step.data)
    return (b"".join(data), len(data)) if last == End(END_COMPLETE) else None


def plan_stream(reply: Message, tail: Tail) -> StreamPlan:
    """The plan of streaming ``reply``, whose events after ``message_start`` are ``tail``.

    A fault at position N acts after N events, message_start counted; a stall comes
    before any other fault at its position. Nothing of ``tail`` is encoded here.
    """
    count = len(tail) + 1
    faults = [f.after_events for f in (reply.disconnect, reply.truncate, reply.stream_error)
              if f is not None and f.after_events <= count]
    end_at = min(faults, default=count)
    ending = _scripted_end(reply, end_at) or (End(END_COMPLETE),)
    stall = reply.stall
    return StreamPlan(tail, _stall_position(reply, tail), stall.seconds if stall else 0.0,
                      end_at, ending)


def plan_raw(reply: Raw, chunks: Sequence[tuple[float, bytes]]) -> Plan:
    """The plan of a raw ``reply`` whose chunks, encoded, are ``(delay, data)``."""
    steps: list[Step] = []
    for delay, data in chunks:
        if delay:
            steps.append(Sleep(delay))
        steps.append(Send(data))
    steps.append(Abort(END_DISCONNECTED_BY_SCRIPT) if reply.raw.disconnect else End(END_COMPLETE))
    return tuple(steps)


def _stall_position(reply: Message, tail: Tail) -> int | None:
    """How many events precede the stall; None without one, or when its event never comes."""
    stall = reply.stall
    if stall is None or stall.before_event is None:
        return None if stall is None else stall.after_events
    if stall.before_event == "message_start":
        return 0
    position = tail.position_of(stall.before_event)
    return None if position is None else position + 1


def _scripted_end(reply: Message, position: int) -> Plan:
    """The steps ending the body after ``position`` events, if the script ends it there."""
    if reply.disconnect is not None and reply.disconnect.after_events == position:
        return (Abort(END_DISCONNECTED_BY_SCRIPT),)
    if reply.truncate is not None and reply.truncate.after_events == position:
        return (End(END_TRUNCATED_BY_SCRIPT),)
    error = reply.stream_error
    if error is not None and error.after_events == position:
        event = encode_event({"type": "error",
                              "error": {"type": error.type, "message": error.message}})
        return (Send(event), End(END_STREAM_ERROR_BY_SCRIPT))
    return ()
