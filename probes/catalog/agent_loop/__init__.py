"""The generic agent-loop catalog: what every loop that calls the Messages API owes it.

Any client kind that runs its loop with the driver's three tools (``add``, ``fail``,
``read_file``; capability ``loop_tools``, which every invocation here asks for) runs these
probes: the Anthropic SDK's tool runner (Python and TypeScript), pydantic-ai, the Vercel AI
SDK, LangGraph, and the clients built on the Claude Code CLI (Claude Code, the Agent SDKs),
which are given the tools as an MCP server (``probes.core.loop_tools``) under their own
names for them; a fake loop in the tests. Each claim
cites the Messages API documentation (its page title, its address and a short quote) or,
for the step limit, the client's own documented option; nothing here is tuned to what one
client did. Every check compares with fixed ids and texts of the script, and each probe
has a counterfactual in which the behaviour cannot happen, so each check can fail on a
conforming loop; ``tests/fakeloop/toolloop.py`` plants each violation for the fast tests.

What a loop's driver prints is the tool runner driver's protocol (``assistant`` events, one
``result`` event with ``subtype``, ``is_error``, ``result``): the checks read the wire first
(the journal) and the result event only for how the run ended.

One module per concern (``tool_results``, ``step_limit``, ``failed_replies``, ``sent_back``;
the report, the claim ids and what every probe reads are in ``common``), their names here.
"""

from __future__ import annotations

from probes.catalog.agent_loop.common import (
    CLAIMS,
    CUT,
    DOCS,
    ERROR,
    PAIRING,
    PARALLEL,
    PAUSE,
    REPORT,
    RETRY,
    RUN,
    STEP_LIMIT,
    THINKING,
    docs,
)
from probes.catalog.agent_loop.failed_replies import (
    PARTIAL,
    RETRY_AFTER_S,
    RETRY_ID,
    RETRY_PROBE,
    STREAM_PROBE,
    WHOLE_JSON,
    check_cut,
    check_retry,
)
from probes.catalog.agent_loop.sent_back import (
    PAUSE_PROBE,
    PAUSED,
    THINKING_PROBE,
    THINKING_SETTINGS,
    check_pause,
    check_thinking,
)
from probes.catalog.agent_loop.step_limit import LIMIT, STEP_PROBE, STILL_CALLING, check_steps
from probes.catalog.agent_loop.tool_results import (
    CALLS,
    ERROR_PROBE,
    FAIL_ID,
    PARALLEL_PROBE,
    check_error,
    check_parallel,
)
from probes.core.probe import ReportSpec

__all__ = [
    "CALLS",
    "CLAIMS",
    "CUT",
    "DOCS",
    "ERROR",
    "ERROR_PROBE",
    "FAIL_ID",
    "LIMIT",
    "PAIRING",
    "PARALLEL",
    "PARALLEL_PROBE",
    "PARTIAL",
    "PAUSE",
    "PAUSED",
    "PAUSE_PROBE",
    "PROBES",
    "REPORT",
    "REPORTS",
    "RETRY",
    "RETRY_AFTER_S",
    "RETRY_ID",
    "RETRY_PROBE",
    "RUN",
    "STEP_LIMIT",
    "STEP_PROBE",
    "STILL_CALLING",
    "STREAM_PROBE",
    "THINKING",
    "THINKING_PROBE",
    "THINKING_SETTINGS",
    "WHOLE_JSON",
    "check_cut",
    "check_error",
    "check_parallel",
    "check_pause",
    "check_retry",
    "check_steps",
    "check_thinking",
    "docs",
]

PROBES = (PARALLEL_PROBE, ERROR_PROBE, STEP_PROBE, RETRY_PROBE, STREAM_PROBE, THINKING_PROBE,
          PAUSE_PROBE)

REPORTS: tuple[ReportSpec, ...] = (
    ReportSpec(
        name=REPORT,
        title="Agent-loop conformance: what every loop owes the Messages API",
        probes=PROBES,
        summary="The obligations every agent loop has towards the Messages API, each cited "
                "from its documentation: tool results by id in one message, failing tools as "
                "is_error, the step limit, retries, cut replies, thinking blocks, pause_turn.",
    ),
)
