"""Run a suite's probes one after another or several at once (``loopprobe run -j N``).

Each probe already has its own sandbox, mock and (contained) network namespace, so probes
share nothing and run in threads; a probe's outcome does not depend on what ran beside it,
and outcomes come back in the suite's order, so reports are the same as a serial run's.
On Ctrl-C every running client is killed, no new one starts, and the probes that finished
are returned with ``interrupted`` set.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

from probes.core.outcome import ProbeOutcome
from probes.core.probe import Probe
from probes.run.process import allow_starts, stop_all

__all__ = ["STOP_TIMEOUT", "Scheduled", "default_jobs", "run_scheduled"]

STOP_TIMEOUT = 30.0


def default_jobs() -> int:
    """The machine's cores (those this process may use)."""
    return max(1, len(os.sched_getaffinity(0)))


@dataclass
class Scheduled:
    outcomes: list[ProbeOutcome | None]  # in the order given; None: not run (interrupted)
    interrupted: bool


def run_scheduled(probes: Sequence[Probe], run: Callable[[Probe], ProbeOutcome], jobs: int,
                  done: Callable[[ProbeOutcome], None] = lambda _: None) -> Scheduled:
    """Run ``run(probe)`` for each probe, at most ``jobs`` at once; ``done`` is told of each
    outcome as it comes (in completion order)."""
    results: list[ProbeOutcome | None] = [None] * len(probes)
    if jobs <= 1:
        for index, probe in enumerate(probes):
            try:
                results[index] = run(probe)
            except KeyboardInterrupt:
                return Scheduled(results, True)
            done(results[index])  # type: ignore[arg-type]
        return Scheduled(results, False)
    pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="probe")
    futures: dict[Future[ProbeOutcome], int] = {
        pool.submit(run, probe): index for index, probe in enumerate(probes)}
    pending = set(futures)
    try:
        while pending:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished:
                results[futures[future]] = future.result()
                done(future.result())
    except KeyboardInterrupt:
        for future in pending:
            future.cancel()
        stop_all()
        wait(pending, timeout=STOP_TIMEOUT)
        for future in pending:
            if future.done() and not future.cancelled() and future.exception() is None:
                results[futures[future]] = future.result()
        pool.shutdown(wait=False, cancel_futures=True)
        allow_starts()
        return Scheduled(results, True)
    pool.shutdown(wait=True)
    return Scheduled(results, False)
