"""Checking evidence and judging claims: the probe's checks and the harness's, then one verdict
per claim decided from them by one rule (``decide_claim``).

Light (no server, no client), so a test can alter saved evidence and check it again.
"""

from __future__ import annotations

import json
import re
import traceback
from collections.abc import Mapping, Sequence
from typing import Any

from probes.core.checks import CheckResult, Checks
from probes.core.evidence import (
    CLIENT_FAULT,
    FAULTS_NOT_KEPT,
    LOST_FAULT,
    OUTSIDER_FAULT,
    POSER_FAULT,
    PROTOCOL_FAULTS,
    SANDBOX_REFUSALS,
    Evidence,
)
from probes.core.premises import premise_checks
from probes.core.probe import Probe
from probes.core.tally import NotKept

__all__ = ["AGAINST", "CHANGES", "CLAIM_VERDICTS", "EGRESS_CHECK", "LABELS", "NOT_SHOWN",
           "UPHELD", "check_evidence", "claim_change", "decide_claim", "harness_checks",
           "is_harness_failure"]

# every verdict a claim can get, in the order decide_claim tries them after not_applicable
CLAIM_VERDICTS = ("confirmed", "contradicted", "differs_from_baseline", "absent",
                  "not_reached", "not_observable", "not_applicable", "error")
# the verdicts that do not count against a claim: a report of only these has passed
UPHELD = ("confirmed", "absent", "not_reached", "not_observable", "not_applicable")
# the verdicts that say the client behaved otherwise than the claim states
AGAINST = ("contradicted", "differs_from_baseline")
# the verdicts that say nothing of the behaviour: it was not there, or not triggered, or
# not shown, or not applicable to the client kind
NOT_SHOWN = ("absent", "not_reached", "not_observable", "not_applicable")
# how each verdict is written for a reader
LABELS = {"confirmed": "confirmed", "contradicted": "contradicted",
          "differs_from_baseline": "differs from baseline", "absent": "absent",
          "not_reached": "not reached", "not_observable": "not observable",
          "not_applicable": "not applicable", "error": "error"}
# what a claim's verdict did from one report to another (loopprobe diff), worst first
CHANGES = ("regressed", "error", "removed", "changed", "introduced", "newly applicable",
           "now reached", "fixed", "not run", "same")
EGRESS_CHECK = "harness.no-egress"
_HARNESS = re.compile(r"(^|\.)harness\.")
_SHOWN = 200


def is_harness_failure(check: Mapping[str, Any]) -> bool:
    """A failed check of the harness's own (a run that timed out or was stopped, a request no
    rule answered, evidence a run tampered with): the evidence of the probe is incomplete.
    An egress attempt is not one: it is what the client did, refused and reported."""
    return (check.get("claim") is None and not check.get("passed")
            and bool(_HARNESS.search(str(check.get("id"))))
            and not str(check.get("id")).endswith(EGRESS_CHECK))


def _shown(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False,
                                                            sort_keys=True)
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "…"


def _said(check: Mapping[str, Any]) -> str:
    return f"{check['id']} observed {_shown(check.get('observed'))}"


def _and_more(checks: Sequence[Mapping[str, Any]]) -> str:
    rest = [str(c["id"]) for c in checks[1:]]
    return f" (also {', '.join(rest)})" if rest else ""


def decide_claim(own: Sequence[Mapping[str, Any]], probe_checks: Sequence[Mapping[str, Any]], *,
                 not_applicable: str | None = None, error: str | None = None,
                 baseline: bool = False, absent: str | None = None) -> tuple[str, str]:
    """A claim's verdict and the one sentence that says which observation decided it.

    ``own`` are the claim's checks, ``probe_checks`` every check of its probe (the harness's
    among them), each as ``CheckResult.to_json()`` gives it. In order: not applicable (the
    client kind lacks a capability); absent (``absent``: the probe did not run because this
    version lacks a flag of other versions); error (the harness failed: its evidence is incomplete,
    so nothing it shows counts against the claim); absent, then not reached (a reach check
    failed: the behaviour checks say nothing; a premise missing: absent); not observable
    when a premise is not established (an instrument of the harness this version lacks);
    contradicted, or for a claim whose source is a recorded baseline differs from baseline
    (reach and every premise held, and a behaviour check failed with an observed value);
    not observable (what this version or mode cannot show was not seen); confirmed.
    What the client did that the harness refused (an egress attempt, a malformed control
    request) never decides a verdict by itself: it is reported with its run.
    """
    if not_applicable:
        return "not_applicable", not_applicable
    if absent:  # the probe did not run: this version lacks what it needs
        return "absent", absent
    if error:
        return "error", error
    harness = [c for c in probe_checks if is_harness_failure(c)]
    if harness:
        return "error", (f"the harness failed, so this run decides nothing about the claim: "
                         f"{_said(harness[0])}{_and_more(harness)}")
    if not own:
        return "error", "the probe produced no check for this claim"
    lacking = [c for c in own if c.get("status") == "absent"]
    if lacking:
        return "absent", (f"this version lacks the feature: {_said(lacking[0])} "
                          f"(expected {_shown(lacking[0].get('expected'))}){_and_more(lacking)}")
    unreached = [c for c in own if c.get("status") == "not_reached"]
    if unreached:
        return "not_reached", (f"the probe did not trigger the mechanism: {_said(unreached[0])} "
                               f"(expected {_shown(unreached[0].get('expected'))})"
                               f"{_and_more(unreached)}")
    # a premise not established (an instrument missing, or nothing decided it): no behaviour
    # check can contradict the claim on this version
    unestablished = [c for c in own if c.get("role") == "premise"
                     and c.get("status") == "not_observable"]
    if unestablished:
        return "not_observable", (f"a premise of the probe is not established on this version: "
                                  f"{_said(unestablished[0])}{_and_more(unestablished)}")
    failed = [c for c in own if c.get("status") == "failed"]
    if failed:
        verdict = "differs_from_baseline" if baseline else "contradicted"
        return verdict, (f"{failed[0]['id']} expected {_shown(failed[0].get('expected'))}, "
                         f"observed {_shown(failed[0].get('observed'))}{_and_more(failed)}")
    hidden = [c for c in own if c.get("status") == "not_observable"]
    if hidden:
        return "not_observable", (f"{len(own) - len(hidden)} of {len(own)} checks passed; "
                                  f"not observable here: {_said(hidden[0])}{_and_more(hidden)}")
    return "confirmed", f"all {len(own)} checks passed"


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
    premise_checks(probe.premises, [c.id for c in probe.claims], evidence, checks)
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
                                  for f in run.protocol_faults]
                        + [_left_out(n) for n in run.not_kept
                           if n["what"] == PROTOCOL_FAULTS],
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
    _collector_checks(evidence, checks)
    # the classifier read a request of the loop's own as a side request (2.1.31-2.1.45 sent
    # temperature 1, then read as side): answered with the mock's built-in "OK", the script
    # never reached the client, and every check would conclude on nothing
    misread = [r.get("seq") for r in evidence.all_requests()
               if r.get("builtin_reply") == "side-request" and _offers_tools(r)]
    checks.that("harness.side-replies-offered-no-tools", None,
                "the mock's built-in side answer went only to requests offering no tools (one "
                "offering tools is the loop's own, and the script never reached it)",
                passed=not misread, expected=[], observed=misread,
                evidence="journal: requests answered with builtin_reply side-request")
    unmatched = [r for r in evidence.all_requests()
                 if r.get("outcome") in ("no_rule", "mock_error")]
    checks.that("harness.script-covered", None,
                "every request the client made found a scripted reply",
                passed=not unmatched, expected="no request without a rule",
                observed=[r.get("error") for r in unmatched] or "all requests matched",
                evidence="journal outcome")


def _collector_checks(evidence: Evidence, checks: Checks) -> None:
    """The collector's faults, and what its caps left out, by whose act they are: the
    harness's own fail ``harness.evidence-intact``; the client's (a line of no known shape,
    a flood, a poser) are its account, deciding no verdict."""
    said: dict[str, list[Any]] = {kind: [] for kind in FAULTS_NOT_KEPT}
    for fault in evidence.evidence_faults:
        kind = fault.get("kind")
        said[kind if kind in said else LOST_FAULT].append(
            f"{fault.get('stream')}: {fault.get('fault')}")
    faults_of = {what: kind for kind, what in FAULTS_NOT_KEPT.items()}
    for left_out in evidence.not_kept:  # records past their caps: the client's flood
        if left_out["what"] != SANDBOX_REFUSALS:  # the sandbox's: in the report alone
            kind = faults_of.get(left_out["what"].split(" (")[0], CLIENT_FAULT)
            said[kind].append(_left_out(left_out))
    checks.that("harness.evidence-intact", None,
                "the collector lost nothing of the harness's own reporting (no reporter cut "
                "off, no record it could not write)",
                passed=not said[LOST_FAULT], expected=[], observed=said[LOST_FAULT],
                evidence="the collector's faults of the harness's own")
    if said[CLIENT_FAULT]:  # the client's act, refused or counted: reported, deciding nothing
        checks.that("client.reporter-faults", None,
                    "the runs' processes reported to the collector in its protocol and within "
                    "its bounds",
                    passed=False, expected=[], observed=said[CLIENT_FAULT],
                    evidence="the collector's refusals (lines of no known shape, connections "
                             "past the limit) and what its caps left out")
    if said[POSER_FAULT]:  # the client's act, refused: reported, costing no evidence
        checks.that("client.reporter-posers", None,
                    "no process inside the runs posed as a reporter of the harness's evidence",
                    passed=False, expected=[], observed=said[POSER_FAULT],
                    evidence="the collector's refusals (a second or stray reporter)")
    if said[OUTSIDER_FAULT]:  # neither the client's act nor evidence lost: deciding nothing
        checks.that("host.outside-reporters", None,
                    "no process outside the runs (elsewhere on this machine) reached the "
                    "collector of their evidence",
                    passed=False, expected=[], observed=said[OUTSIDER_FAULT],
                    evidence="the collector's refusals (a reporter no run's launch started)")


def _left_out(left_out: NotKept) -> str:
    run = f"run {left_out['run']}" if left_out["run"] else "between runs"
    return f"{left_out['what']} ({run}): {left_out['said']}"


def _offers_tools(request: Mapping[str, Any]) -> bool:
    body = request.get("body")
    return isinstance(body, dict) and isinstance(body.get("tools"), list) and bool(body["tools"])


def claim_change(before: str | None, after: str | None) -> str:
    """What a claim's verdict did between two reports, one of ``CHANGES``: ``regressed`` only
    when a behaviour once upheld is now observed otherwise; a feature that appears is
    ``introduced`` (like a compatibility table's version_added), one that goes ``removed``;
    a harness failure on either side is ``error``, never a regression or a fix."""
    if before == after:
        return "same"
    if before is None or after is None:
        return "not run"
    if "error" in (before, after):
        return "error"
    if after in AGAINST:
        return "regressed" if before in ("confirmed", "not_observable") else "changed"
    if after == "absent":
        return "removed"
    if before in AGAINST and after in ("confirmed", "not_observable"):
        return "fixed"
    if before == "absent":
        return "introduced"
    if before == "not_applicable":
        return "newly applicable"
    if before == "not_reached" and after in ("confirmed", "not_observable"):
        return "now reached"
    return "changed"
