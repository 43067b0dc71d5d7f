"""Faults as data: a response body as a plan of steps, which one loop in the app executes.

A plan sends bytes, sleeps, and ends with exactly one ``End`` (the body finishes
normally) or ``Abort`` (the connection drops), each carrying the journal's end
reason. Plans are computed once per prepared reply; a streamed message's plan
leaves a gap for ``message_start``, the one event built per request, and when it
only sends, then ends complete, it goes out in one write (``StreamPlan.whole``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mockapi.records import (
    END_COMPLETE,
    END_DISCONNECTED_BY_SCRIPT,
    END_STREAM_ERROR_BY_SCRIPT,
    END_TRUNCATED_BY_SCRIPT,
    EndReason,
)
from mockapi.replies import Message, Raw
from mockapi.sse import encode_event

__all__ = [
    "Abort",
    "End",
    "Plan",
    "Send",
    "Sleep",
    "Step",
    "StreamPlan",
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


@dataclass(frozen=True, slots=True)
class StreamPlan:
    """A streamed message's plan, less ``message_start``."""

    before: Plan  # the steps before message_start
    after: Plan | None  # the steps after it; None when ``before`` ends the body
    whole: tuple[bytes, int] | None  # ``after`` as one write, and its number of sends

    def steps(self, start: bytes) -> Plan:
        """The plan of one response whose ``message_start`` event is ``start``."""
        if self.after is None:
            return self.before
        return (*self.before, Send(start), *self.after)


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


def plan_stream(reply: Message, tail: Sequence[bytes]) -> StreamPlan:
    """The plan of streaming ``reply``, whose events after ``message_start`` are ``tail``.

    A fault at position N acts after N events, message_start counted; a stall comes
    before any other fault at its position.
    """
    count = len(tail) + 1
    stall_at = _stall_position(reply, tail)
    before: list[Step] = []
    after: list[Step] = []
    steps = before
    for position in range(count + 1):
        if reply.stall is not None and position == stall_at:
            steps.append(Sleep(reply.stall.seconds))
        if ending := _scripted_end(reply, position):
            steps.extend(ending)
            break
        if position == count:
            steps.append(End(END_COMPLETE))
        elif position == 0:
            steps = after
        else:
            steps.append(Send(tail[position - 1]))
    if steps is before:
        return StreamPlan(tuple(before), None, None)
    return StreamPlan(tuple(before), tuple(after), None if before else one_write(tuple(after)))


def plan_raw(reply: Raw, chunks: Sequence[tuple[float, bytes]]) -> Plan:
    """The plan of a raw ``reply`` whose chunks, encoded, are ``(delay, data)``."""
    steps: list[Step] = []
    for delay, data in chunks:
        if delay:
            steps.append(Sleep(delay))
        steps.append(Send(data))
    steps.append(Abort(END_DISCONNECTED_BY_SCRIPT) if reply.raw.disconnect else End(END_COMPLETE))
    return tuple(steps)


def _stall_position(reply: Message, tail: Sequence[bytes]) -> int | None:
    """How many events precede the stall; None without one, or when its event never comes."""
    stall = reply.stall
    if stall is None or stall.before_event is None:
        return None if stall is None else stall.after_events
    if stall.before_event == "message_start":
        return 0
    name = b"event: " + stall.before_event.encode() + b"\n"
    return next((i + 1 for i, event in enumerate(tail) if event.startswith(name)), None)


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
