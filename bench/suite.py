"""``scripts/bench --suite``: the probe suite on a real client, one probe at a time and then
``-j N`` at once, in the same run.

Reported: serial wall time, parallel wall time, the sum of the client processes' own run
times (what the probes cost, however they are scheduled) and the speedup (serial / parallel).
Ratios from one run on one machine, never thresholds.
"""

from __future__ import annotations

import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

from probes.catalog import REPORTS
from probes.clients import parse_client_spec
from probes.clients.base import Client, ClientBinary
from probes.core.outcome import ProbeOutcome
from probes.core.probe import Probe
from probes.run.containment import Containment, find_containment
from probes.run.runner import run_probe
from probes.scale.schedule import default_jobs, run_scheduled

__all__ = ["bench_suite", "render_suite"]


def _run_in(probe: Probe, *, folder: Path, client: Client, binary: ClientBinary,
            containment: Containment) -> ProbeOutcome:
    return run_probe(probe, client, binary, folder, keep=False, containment=containment)


def _client_seconds(outcomes: list[ProbeOutcome | None]) -> float:
    return sum(run.duration for o in outcomes if o is not None and o.evidence is not None
               for run in o.evidence.runs.values())


def bench_suite(client_spec: str, jobs: int | None = None) -> dict[str, Any]:
    client, version = parse_client_spec(client_spec)
    binary = client.install(version)
    containment = find_containment(no_sandbox=False)
    probes = [probe for spec in REPORTS for probe in spec.probes]
    jobs = jobs or default_jobs()
    result: dict[str, Any] = {"client": f"{client.name}@{version}", "probes": len(probes),
                              "jobs": jobs}
    with tempfile.TemporaryDirectory(prefix="loopprobe-bench-") as work:
        for label, count in (("serial", 1), ("parallel", jobs)):
            started = time.monotonic()
            folder = Path(work) / label
            scheduled = run_scheduled(probes, partial(
                _run_in, folder=folder, client=client, binary=binary,
                containment=containment), count)
            result[f"{label}_wall_s"] = round(time.monotonic() - started, 2)
            result[f"{label}_client_s"] = round(_client_seconds(scheduled.outcomes), 2)
            result[f"{label}_errors"] = sum(1 for o in scheduled.outcomes
                                            if o is None or o.error)
    result["speedup"] = round(result["serial_wall_s"] / result["parallel_wall_s"], 2)
    return result


def render_suite(result: dict[str, Any]) -> str:
    return "\n".join([
        f"suite: {result['probes']} probes on {result['client']}, -j {result['jobs']}",
        "| serial wall | parallel wall | Σ client time (serial) | speedup |",
        "|---|---|---|---|",
        f"| {result['serial_wall_s']} s | {result['parallel_wall_s']} s | "
        f"{result['serial_client_s']} s | {result['speedup']}× |",
    ])
