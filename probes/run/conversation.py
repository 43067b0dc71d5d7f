"""Carrying out a probe's streamed input (``probes.core.streamed``) against a running client.

``Conversation`` writes the scripted lines when they fall due, answers the client's control
requests (``can_use_tool`` by the script's permission answers), and keeps what it wrote and
why; ``probes.run.process.run_conversation`` feeds it the client's events. What it keeps is
bounded as every record the client can cause is (``probes.core.tally``): the first lines
written, protocol faults and unscripted requests, the rest counted (``not_kept``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any

from probes.core.evidence import PROTOCOL_FAULTS
from probes.core.streamed import Step, StreamedInput, user_message
from probes.core.tally import Cap, NotKept, Tally, size_text

__all__ = ["FAULT_LINE_CHARS", "KEPT_FAULTS", "KEPT_LINES", "STDIN_LINES", "UNSCRIPTED",
           "Conversation", "streamed_record"]

# a client printing control requests without end makes the harness answer each: what it
# keeps of them is bounded (the writes themselves are bounded by probes.run.pipes)
KEPT_LINES = 10_000  # transcript entries
KEPT_FAULTS = 100  # protocol faults, and unscripted requests
FAULT_LINE_CHARS = 4096  # of the line a protocol fault shows
STDIN_LINES, UNSCRIPTED = "stdin lines", "unscripted requests"  # what the other caps keep
_CAPS = {STDIN_LINES: Cap(KEPT_LINES, 16 << 20), PROTOCOL_FAULTS: Cap(KEPT_FAULTS, 1 << 20),
         UNSCRIPTED: Cap(KEPT_FAULTS, 1 << 20)}


def _includes(event: Mapping[str, Any], pattern: Mapping[str, Any]) -> bool:
    """Every field of ``pattern`` is in ``event`` with an equal value (nested mappings
    compare the same way)."""
    for key, wanted in pattern.items():
        value = event.get(key)
        if isinstance(wanted, Mapping):
            if not isinstance(value, Mapping) or not _includes(value, wanted):
                return False
        elif value != wanted:
            return False
    return True


class Conversation:
    """Carries out a ``StreamedInput`` against a running client.

    Fed every event the client prints (``on_event``), every request record the mock
    writes during the run (``on_request``) and a tick between them (``on_tick``); writes
    through ``write`` and ends input with ``close``. ``transcript`` is what was written,
    in order, each with why.
    """

    def __init__(self, prompt: str, script: StreamedInput, write: Callable[[str], None],
                 close: Callable[[], None], clock: Callable[[], float],
                 exists: Callable[[str], bool], context: Mapping[str, str] | None = None):
        self.script = script
        self._context = dict(context or {})
        self._exists = exists
        self._write_line = write
        self._close = close
        self._clock = clock
        self._next = 0
        self._control_ids = 0
        self._user_lines = 0
        self._last_written = 0.0
        self._writes = 0
        self._queued: dict[int, dict[str, Any]] = {}  # write index -> its transcript entry
        self.closed = False
        self.transcript: list[dict[str, Any]] = []
        self.unanswered: list[dict[str, Any]] = []
        # control requests of a shape the protocol does not have: the client's fault
        self.protocol_faults: list[dict[str, Any]] = []
        self._tallies = {what: Tally(cap) for what, cap in _CAPS.items()}
        # the entry saying later lines are not kept; it counts those never written whole
        self._cut: dict[str, Any] | None = None
        self._send(user_message(prompt), "the prompt, at start")
        self._advance()

    @property
    def omitted(self) -> int:
        """Transcript entries not kept (past the transcript's cap)."""
        return self._tallies[STDIN_LINES].more

    def not_kept(self, run: str | None = None) -> list[NotKept]:
        """What the caps left out of the transcript, the protocol faults and the unscripted
        requests of ``run``."""
        found = [tally.not_kept(what, run) for what, tally in self._tallies.items()]
        return [n for n in found if n is not None]

    @property
    def pending(self) -> list[dict[str, Any]]:
        """The steps never written (their moment did not come)."""
        return [s.shown() for s in self.script.steps[self._next:]]

    def _send(self, line: Mapping[str, Any], why: str) -> None:
        line = _render(dict(line), self._context)
        if line.get("type") == "control_request" and "request_id" not in line:
            self._control_ids += 1
            line = {"type": "control_request", "request_id": f"loopprobe-{self._control_ids}",
                    "request": line["request"]}
        if line.get("type") == "user" and "uuid" not in line:
            # commands with a uuid are reported by command_lifecycle events; fixed per run
            self._user_lines += 1
            line = {**line, "uuid": f"00000000-0000-4000-8000-{self._user_lines:012d}"}
        entry: dict[str, Any] = {"line": line, "why": why, "at": self._clock()}
        if line.get("type") != "control_response":
            self._last_written = entry["at"]
        index, self._writes = self._writes, self._writes + 1
        encoded = _encode(line)
        try:
            self._write_line(encoded)
        except OSError as error:  # the client closed its stdin (exited), or it reads no more
            entry["write_error"] = f"{type(error).__name__}: {error}"
        if self._keep(entry, len(encoded)) and "write_error" not in entry:
            self._queued[index] = entry

    def _keep(self, entry: dict[str, Any], size: int) -> bool:
        tally = self._tallies[STDIN_LINES]
        if tally.admit(size):
            self.transcript.append(entry)
            return True
        if self._cut is None:
            self._cut = {"line": None, "at": entry["at"],
                         "why": f"later lines written are not kept: the transcript keeps "
                                f"{KEPT_LINES} ({size_text(tally.cap.bytes)}) at most"}
            self.transcript.append(self._cut)
        return False

    def not_written(self, index: int, why: str) -> None:
        """The ``index``-th write (from 0), queued, never reached the client whole."""
        entry = self._queued.pop(index, None)
        if entry is not None:
            entry["write_error"] = why
        elif self._cut is not None and index >= self._tallies[STDIN_LINES].kept:  # left out
            self._cut["not_written"] = int(self._cut.get("not_written", 0)) + 1

    def _advance(self) -> None:
        """Write every step whose moment needs nothing more."""
        steps = self.script.steps
        while self._next < len(steps):
            step = steps[self._next]
            if step.waits:
                return
            self._next += 1
            self._send(step.line, step.moment())

    def _step_due(self, matches: Callable[[Step], bool]) -> None:
        steps = self.script.steps
        if self._next < len(steps) and matches(steps[self._next]):
            step = steps[self._next]
            self._next += 1
            self._send(step.line, step.moment())
            self._advance()

    def on_tick(self) -> None:
        self._step_due(lambda s: s.after_file is not None and self._exists(s.after_file))
        horizon = self.script.close_after
        if (horizon is not None and not self.closed and self._next >= len(self.script.steps)
                and self._clock() - self._last_written >= horizon):
            self.end(f"stdin closed: no event including {dict(self.script.close_on)} within "
                     f"{horizon} s of the last step")

    def on_request(self, record: Mapping[str, Any]) -> None:
        self._step_due(lambda s: s.after_rule is not None and record.get("rule") == s.after_rule)

    def on_event(self, event: Mapping[str, Any]) -> None:
        if event.get("type") == "control_request":
            self._answer(event)
            return
        waiting_before = self._next
        self._step_due(lambda s: s.after_event is not None and _includes(event, s.after_event))
        written_now = self._next != waiting_before
        if (not self.closed and not written_now and self._next >= len(self.script.steps)
                and _includes(event, self.script.close_on)):
            self.end("stdin closed: " + f"the client printed an event including "
                     f"{dict(self.script.close_on)} after the last step")

    def end(self, why: str) -> None:
        if self.closed:
            return
        self.closed = True
        self.transcript.append({"close": True, "why": why, "at": self._clock()})
        try:
            self._close()
        except OSError:
            pass

    def _answer(self, event: Mapping[str, Any]) -> None:
        problems = _request_problems(event)
        request_id = event.get("request_id")
        if problems:
            fault = "; ".join(problems)
            shown = {"line": _json_text(event, FAULT_LINE_CHARS), "fault": fault}
            if self._tallies[PROTOCOL_FAULTS].admit(len(shown["line"]) + len(fault)):
                self.protocol_faults.append(shown)
            if _usable_id(request_id):  # else there is nothing to answer to
                self._send({"type": "control_response", "response": {
                    "subtype": "error", "request_id": request_id,
                    "error": f"malformed control request: {fault}"}},
                    f"control request malformed: {fault}")
            return
        request: Mapping[str, Any] = event["request"]
        subtype = request["subtype"]
        if subtype == "can_use_tool" and self.script.permissions is not None:
            answer = self.script.answer(request["tool_name"])
            response: dict[str, Any] = {"subtype": "success", "request_id": request_id,
                                        "response": answer.response(request.get("input", {}))}
            why = f"can_use_tool {request['tool_name']}: scripted {answer.behavior}"
        else:
            if self._tallies[UNSCRIPTED].admit(len(_json_text(event, 1 << 20))):
                self.unanswered.append(dict(event))
            response = {"subtype": "error", "request_id": request_id,
                        "error": f"the harness does not script {subtype!r}"}
            why = f"control request {subtype!r} not scripted"
        self._send({"type": "control_response", "response": response}, why)


def streamed_record(run: str, kept: list[Conversation]) -> dict[str, Any]:
    """The fields of a run's record its conversations give (none: a run not streamed)."""
    return {"stdin": [dict(entry) for c in kept for entry in c.transcript],
            "stdin_pending": [step for c in kept for step in c.pending],
            "protocol_faults": [f for c in kept for f in c.protocol_faults],
            "not_kept": [n for c in kept for n in c.not_kept(run)]}


def _usable_id(value: Any) -> bool:
    """A request_id the harness can answer to: a string, or a finite number."""
    if isinstance(value, bool):
        return False
    return isinstance(value, str | int) or (isinstance(value, float) and math.isfinite(value))


def _request_problems(event: Mapping[str, Any]) -> list[str]:
    """How a control request differs from the protocol's shape (none: it is well formed)."""
    problems = []
    if not _usable_id(event.get("request_id")):
        problems.append(f"request_id: expected a string or a number, got "
                        f"{_arrived(event, 'request_id')}")
    request = event.get("request")
    if not isinstance(request, Mapping):
        return [*problems, f"request: expected an object, got {_arrived(event, 'request')}"]
    if not isinstance(request.get("subtype"), str):
        problems.append(f"request.subtype: expected a string, got {_arrived(request, 'subtype')}")
    elif request["subtype"] == "can_use_tool":
        if not isinstance(request.get("tool_name"), str):
            problems.append(f"can_use_tool request.tool_name: expected a string, got "
                            f"{_arrived(request, 'tool_name')}")
        if not isinstance(request.get("input", {}), Mapping):
            problems.append(f"can_use_tool request.input: expected an object, got "
                            f"{_arrived(request, 'input')}")
    return problems


_KINDS = ((bool, "a boolean"), (int | float, "a number"), (str, "a string"),
          (list, "an array"), (Mapping, "an object"))


def _arrived(holder: Mapping[str, Any], key: str) -> str:
    if key not in holder:
        return "nothing (no such field)"
    value = holder[key]
    kind = next((name for types, name in _KINDS if isinstance(value, types)), "null")
    return f"{kind}: {_json_text(value, 200)}"


def _json_text(value: Any, limit: int) -> str:
    """``value`` as JSON, cut to ``limit`` characters (saying how many more there were)."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError) as error:  # too deep to encode again
        text = f"({type(value).__name__} not shown: {type(error).__name__})"
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit} more characters)"


def _render(value: Any, context: Mapping[str, str]) -> Any:
    """``{name}`` of the run's context (workspace, home) filled in, in every string."""
    if isinstance(value, str):
        for name, filled in context.items():
            value = value.replace("{" + name + "}", filled)
        return value
    if isinstance(value, Mapping):
        return {k: _render(v, context) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_render(v, context) for v in value]
    return value


def _encode(line: Mapping[str, Any]) -> str:
    return json.dumps(line, separators=(",", ":")) + "\n"
