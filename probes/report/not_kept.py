"""What a report says its probes' records left out past their caps (``probes.core.tally``).

Each probe's section lists the collector's (``not_kept``) and each run its own (protocol
faults, unscripted requests, stdin lines); the report gathers them all in one list, each
naming its probe, so that a reader, and the report's schema, find every count in one place:
"and 399,872 more, 47 MiB, not kept".
"""

from __future__ import annotations

from collections.abc import Iterable

from probes.core.outcome import ProbeOutcome
from probes.core.tally import NotKept

__all__ = ["ReportNotKept", "report_not_kept"]


class ReportNotKept(NotKept):
    """One kind of record of one run of a probe, past its cap."""

    probe: str


def report_not_kept(outcomes: Iterable[ProbeOutcome]) -> list[ReportNotKept]:
    """What every probe's collector and runs left out, probe by probe."""
    found: list[ReportNotKept] = []
    for outcome in outcomes:
        evidence = outcome.evidence
        if evidence is None:
            continue
        left_out = [*evidence.not_kept, *(n for run in evidence.runs.values()
                                          for n in run.not_kept)]
        found += [{"probe": outcome.probe.name, **n} for n in left_out]
    return found
