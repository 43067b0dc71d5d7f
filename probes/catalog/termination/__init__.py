"""Termination: the Stop-hook block cap, what --max-turns counts, the budget, the terminal
reasons hooks can cause, and the ends the loop chooses itself; one module per concern
(``limits``, ``hooks``, ``exhausted``), their names here."""

from __future__ import annotations

from probes.catalog.termination.exhausted import (
    BLOCKING,
    BLOCKING_PROBE,
    STRUCTURED,
    STRUCTURED_PROBE,
    STRUCTURED_SCHEMA,
    check_blocking,
    check_structured,
)
from probes.catalog.termination.hooks import (
    DEFERRED,
    DEFERRED_PROBE,
    HOOK_STOPPED,
    HOOK_STOPPED_PROBE,
    STOP_PREVENTED,
    STOP_PREVENTED_PROBE,
)
from probes.catalog.termination.limits import (
    BUDGET,
    BUDGET_PROBE,
    CAP,
    CAP_PROBE,
    CAP_WARNING,
    TURN_RUNS,
    TURNS,
    TURNS_PROBE,
    check_budget,
    check_cap,
    check_turns,
)

__all__ = ["BLOCKING", "BLOCKING_PROBE", "BUDGET", "BUDGET_PROBE", "CAP", "CAP_PROBE",
           "CAP_WARNING", "DEFERRED", "DEFERRED_PROBE", "HOOK_STOPPED", "HOOK_STOPPED_PROBE",
           "PROBES", "STOP_PREVENTED", "STOP_PREVENTED_PROBE", "STRUCTURED", "STRUCTURED_PROBE",
           "STRUCTURED_SCHEMA", "TURNS", "TURNS_PROBE", "TURN_RUNS", "check_blocking",
           "check_budget", "check_cap", "check_structured", "check_turns"]

PROBES = (CAP_PROBE, TURNS_PROBE, BUDGET_PROBE, HOOK_STOPPED_PROBE, STOP_PREVENTED_PROBE,
          DEFERRED_PROBE, BLOCKING_PROBE, STRUCTURED_PROBE)
