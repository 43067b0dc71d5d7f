"""What every probe of the agent-loop catalog shares: the report, the run and the claim ids,
a claim's documentation source, the invocation, and how the loop's requests and its start
and end are read; the underscored helpers are this package's own.
"""

from __future__ import annotations

from typing import Any

from probes.catalog.common import check_ended
from probes.core.checks import Checks
from probes.core.evidence import Evidence, messages
from probes.core.probe import Invocation
from probes.core.provenance import Source, project_expectation

__all__ = ["CLAIMS", "CUT", "DOCS", "ERROR", "PAIRING", "PARALLEL", "PAUSE", "REPORT", "RETRY",
           "RUN", "STEP_LIMIT", "THINKING", "docs"]

REPORT = "agent-loop-conformance"
RUN = "loop"
DOCS = "platform.claude.com/docs/en"

PAIRING = "loop.tool-result-pairing"
PARALLEL = "loop.parallel-results-one-message"
ERROR = "loop.tool-error-result"
STEP_LIMIT = "loop.step-limit"
RETRY = "loop.retry-overloaded"
CUT = "loop.stream-cut-not-truncated"
THINKING = "loop.thinking-passback"
PAUSE = "loop.pause-turn-continue"
CLAIMS = (PAIRING, PARALLEL, ERROR, STEP_LIMIT, RETRY, CUT, THINKING, PAUSE)


def docs(title: str, path: str, quote: str) -> Source:
    """A claim's source: a Messages API documentation page, by title, address and quote."""
    return project_expectation(f"“{quote}”", f"Messages API docs, “{title}” ({DOCS}/{path})")


def _invocation(prompt: str, **fields: Any) -> Invocation:
    return Invocation(name=RUN, prompt=prompt, session="none", tools=None, timeout=60,
                      loop_tools=True, **fields)


def _last_message(record: Any) -> dict[str, Any]:
    sent = messages(record) if record else []
    return sent[-1] if sent else {}


def _started(ev: Evidence, c: Checks) -> None:
    """The harness's own check: the loop sent its first request. A run that never did (the
    driver could not import the client, or the client could not build its first request
    with its dependencies of today) shows nothing about any claim: its verdicts are harness
    errors, never contradictions."""
    run = ev.run(RUN)
    result = (run.result if run else None) or {}
    sent = len(_requests(ev))
    c.that("harness.loop-started", None, "the loop sent its first request", passed=sent > 0,
           expected="at least one request",
           observed=f"{sent} requests" if sent else "no request; " + (
               f"the driver said: {str(result.get('result'))[:300]}" if result else
               f"stderr ends: {run.stderr[-300:] if run else ''}"),
           evidence=f"run {RUN}: the journal and the driver's output")


def _ended(c: Checks, claim: str, ev: Evidence, final_text: str) -> None:
    check_ended(c, claim, ev, RUN, final_text=final_text, prefix="result")


def _requests(ev: Evidence) -> list[Any]:
    # the loop's own requests: a client's side requests and warmups are told apart when it
    # names its classifier (Capabilities.classifier); for the others every request is main
    return ev.requests(RUN, kind="main")
