"""What the collector keeps of what processes inside a run report, each kind under its own cap.

Records (hook calls, the user's hook runs, MCP events, egress attempts) and the faults the
collector finds are appended to files of the evidence folder as they arrive, and kept for
the run's evidence. Every kind is kept per run under its own ``Cap`` (``CAPS``, the one
mechanism of ``probes.core.tally``): the first records verbatim, the rest counted, said in
``not_kept()`` and ``not-kept.json``. Faults are four kinds, capped apart so that none pushes
another out: the client's (``CLIENT_FAULT``: a line of no known shape, a connection past the
limit), posers, outsiders, and the harness's own (a reporter cut off, a record it could not
write): a flood of the client's faults never hides one of the harness's. Each is tallied per
stream too (``client faults (mcp)``, ``client faults (connection)``...), under its kind's cap,
so that a flood on one stream leaves the first faults of every other in view.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from probes.core.evidence import (
    CLIENT_FAULT,
    FAULTS_NOT_KEPT,
    LOST_FAULT,
    OUTSIDER_FAULT,
    POSER_FAULT,
)
from probes.core.files import write_json
from probes.core.tally import Cap, NotKept, Tallies

__all__ = ["CAPS", "CLIENT_FAULTS", "EGRESS_ATTEMPTS", "FAULTS_FILE", "HARNESS_FAULTS",
           "HOOK_CALLS", "HOOK_RUNS", "MCP_EVENTS", "NOT_KEPT_FILE", "OUTSIDER_FAULTS",
           "POSER_FAULTS", "Cap", "Collected"]

HOOK_CALLS, HOOK_RUNS, MCP_EVENTS = "hook calls", "hook runs", "MCP events"
EGRESS_ATTEMPTS = "egress attempts"
CLIENT_FAULTS, POSER_FAULTS = FAULTS_NOT_KEPT[CLIENT_FAULT], FAULTS_NOT_KEPT[POSER_FAULT]
OUTSIDER_FAULTS, HARNESS_FAULTS = FAULTS_NOT_KEPT[OUTSIDER_FAULT], FAULTS_NOT_KEPT[LOST_FAULT]
_KiB, _MiB = 1 << 10, 1 << 20
# per run; the 565 probe runs of the committed reports/ had at most 33 hook calls, 6 MCP
# events and 18 egress attempts each, and no fault
CAPS = {
    HOOK_CALLS: Cap(10_000, 32 * _MiB),  # a start and an end per call, with the tool's input
    HOOK_RUNS: Cap(5_000, 16 * _MiB),
    MCP_EVENTS: Cap(10_000, 16 * _MiB),
    EGRESS_ATTEMPTS: Cap(10_000, 4 * _MiB),
    **{kind: Cap(128, 256 * _KiB)
       for kind in (CLIENT_FAULTS, POSER_FAULTS, OUTSIDER_FAULTS, HARNESS_FAULTS)},
}
FAULTS_FILE = "collector-faults.jsonl"
NOT_KEPT_FILE = "not-kept.json"


class Collected:
    """The records and faults of one collector, written to ``evidence`` as they are kept.
    Callers hold ``lock`` around ``keep`` and ``fault`` (a hook call is counted, decided and
    kept under one hold)."""

    def __init__(self, evidence: Path):
        self.evidence = evidence
        self.lock = threading.Lock()
        self.hook_calls: list[dict[str, Any]] = []
        # the user's own hook commands, as hook_wrapper.py ran them (probes.inside.hook_wrapper)
        self.hook_runs: list[dict[str, Any]] = []
        self.mcp: dict[str, list[dict[str, Any]]] = {}  # by the name its stream gave
        self.egress: list[dict[str, Any]] = []
        self.faults: list[dict[str, Any]] = []
        self._tallies = Tallies(CAPS)

    def keep(self, what: str, run: str | None, file_name: str, record: dict[str, Any],
             into: list[dict[str, Any]]) -> bool:
        """Keep ``record`` (of kind ``what``, in ``run``) if it fits: in ``into``, and
        appended to ``file_name``; whether it was kept."""
        line = json.dumps(record, sort_keys=True, ensure_ascii=False) + "\n"
        if not self._tallies.admit(what, run, len(line.encode())):
            return False
        into.append(record)
        self._append(file_name, line, run)
        return True

    def keep_mcp(self, name: str, run: str | None, event: dict[str, Any]) -> None:
        """An MCP event of the stream ``name``; every stream of a run shares its cap (a list
        is made for a stream's first event kept, not for its name alone)."""
        kept: list[dict[str, Any]] = []
        if self.keep(MCP_EVENTS, run, f"mcp-{name}.jsonl", event, kept):
            self.mcp.setdefault(name, []).extend(kept)

    def fault(self, stream: str, what: str, run: str | None, kind: str) -> None:
        """A fault the collector found, of ``kind`` (probes.core.evidence's fault kinds)."""
        fault = {"time": time.time(), "stream": stream, "run": run, "kind": kind,
                 "fault": what}
        line = json.dumps(fault, sort_keys=True) + "\n"
        cap = FAULTS_NOT_KEPT.get(kind, HARNESS_FAULTS)
        # the stream's kind: the collector's own words (an MCP stream's name left out)
        if self._tallies.admit(f"{cap} ({stream.split(':')[0]})", run, len(line.encode()), cap):
            self.faults.append(fault)
            self._append(FAULTS_FILE, line, run)

    def _append(self, file_name: str, line: str, run: str | None) -> None:
        try:
            with open(self.evidence / file_name, "a", encoding="utf-8") as out:
                out.write(line)
        except OSError as error:  # the host's disk, not the client: evidence lost
            if file_name != FAULTS_FILE:
                self.fault("collector", f"a record could not be written to {file_name}: "
                                        f"{type(error).__name__}: {error}", run, LOST_FAULT)

    def not_kept(self) -> list[NotKept]:
        """What each kind left out, per run."""
        with self.lock:
            return self._tallies.not_kept()

    def write_not_kept(self) -> None:
        """``not-kept.json`` beside the records, when something was left out."""
        if found := self.not_kept():
            write_json(self.evidence / NOT_KEPT_FILE, found)
