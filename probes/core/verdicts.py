"""Checking evidence: the probe's own checks and the harness's, on gathered or altered evidence.

Light (no server, no client), so a test can alter saved evidence and check it again.
"""

from __future__ import annotations

import traceback

from probes.core.checks import CheckResult, Checks
from probes.core.evidence import Evidence
from probes.core.probe import Probe

__all__ = ["check_evidence", "harness_checks"]


def check_evidence(probe: Probe, evidence: Evidence) -> tuple[list[CheckResult], str | None]:
    """Every check of ``probe`` on ``evidence``, then the harness's; and the error of a check
    that raised instead of failing (the checks it made before are kept)."""
    evidence.take_reads()  # only what the checks look up from here on
    checks = Checks(probe.name, reads=evidence.take_reads)
    error = None
    try:
        probe.check(evidence, checks)
    except Exception:
        error = "a check raised instead of failing: " + traceback.format_exc(limit=4)
    harness_checks(evidence, checks)
    return checks.results, error


def harness_checks(evidence: Evidence, checks: Checks) -> None:
    for name, run in evidence.runs.items():
        hits = "; ".join(f"the {h.get('bound')} bound ({h.get('limit')}): {h.get('observed')}"
                         for h in run.bounds_hit)
        checks.that(f"harness.{name}.finished", None,
                    f"the {name!r} run ended by itself within its timeout",
                    passed=not run.timed_out and run.stopped is None and not run.bounds_hit,
                    expected="exited before the timeout",
                    observed=(f"killed at the {run.invocation.timeout}s timeout; last events: "
                              f"{run.last_events()}") if run.timed_out
                    else f"stopped by the harness: {run.stopped}" + (
                        f"; having reached {hits}" if hits else "") if run.stopped is not None
                    else f"exited with {run.exit_code}, having reached {hits}" if hits
                    else f"exited with {run.exit_code}",
                    evidence=f"run {name}")
        if run.invocation.streamed is not None:  # control requests are read in these alone
            # a client's fault, not the harness's: the id says so
            checks.that(f"client.{name}.protocol", None,
                        f"the {name!r} run printed control requests of the protocol's shape",
                        passed=not run.protocol_faults, expected=[],
                        observed=[{"fault": f["fault"], "line": f["line"]}
                                  for f in run.protocol_faults],
                        evidence=f"run {name}: control requests on stdout")
    for name, why in evidence.runs_not_started.items():
        checks.that(f"harness.{name}.finished", None,
                    f"the {name!r} run ended by itself within its timeout",
                    passed=False, expected="exited before the timeout",
                    observed=f"not started: {why}", evidence=f"run {name}")
    hosts = sorted({attempt["host"] for attempt in evidence.egress})
    if evidence.egress_guarded:
        checks.that("harness.no-egress", None,
                    "the client connected to nothing but the mock (the proxy refused the rest)",
                    passed=not hosts, expected=[], observed=hosts,
                    evidence="egress guard: connections made through the refusing proxy")
    checks.that("harness.evidence-intact", None,
                "nothing inside the runs posed as a reporter of the harness's evidence or "
                "sent what the collector refused",
                passed=not evidence.evidence_faults, expected=[],
                observed=[f"{f.get('stream')}: {f.get('fault')}"
                          for f in evidence.evidence_faults],
                evidence="the collector's refusals (hook, MCP and egress reports)")
    unmatched = [r for r in evidence.all_requests()
                 if r.get("outcome") in ("no_rule", "mock_error")]
    checks.that("harness.script-covered", None,
                "every request the client made found a scripted reply",
                passed=not unmatched, expected="no request without a rule",
                observed=[r.get("error") for r in unmatched] or "all requests matched",
                evidence="journal outcome")


