"""An MCP server that dies or hangs mid-call (the harness's own server, ``probes.catalog.mcp_tools``'s
``SERVER``): the call gets an error tool_result and the loop goes on."""

from __future__ import annotations

from typing import Any

from mockapi import Match, Rule, Scenario, text, tool_use
from probes.catalog.common import check_ended
from probes.catalog.mcp_tools import MCP_DOCS, SERVER, TIMEOUT_MS, server_calls, with_server_reply
from probes.core.checks import Checks
from probes.core.evidence import Evidence, blocks_of_type
from probes.core.mcp import McpReply
from probes.core.premises import Premise
from probes.core.probe import Claim, Counterfactual, Invocation, Probe
from probes.core.provenance import project_expectation

__all__ = ["CRASH_CLAIM", "FAILURE_PROBE", "TIMEOUT_CLAIM", "check_failures"]

CRASH_CLAIM = "probe.mcp-server-crash-error-result"
TIMEOUT_CLAIM = "probe.mcp-tool-timeout"


def check_failures(ev: Evidence, c: Checks) -> None:
    crashed = _tool_result_block(ev, "crash", "toolu_mcp_crash")
    c.equal("crash.server-died", CRASH_CLAIM, "the server took the call and exited mid-call",
            expected=["crasher"], observed=[e.get("tool") for e in server_calls(ev, "crash", "crash")],
            evidence="MCP server log of run crash")
    c.equal("crash.error-result", CRASH_CLAIM,
            "the call gets a tool_result marked as an error",
            expected=True, observed=crashed.get("is_error") if crashed else "no tool_result",
            evidence="run crash: request 2 tool_result")
    check_ended(c, CRASH_CLAIM, ev, "crash", final_text="AFTER_CRASH", prefix="crash")
    hung = _tool_result_block(ev, "hang", "toolu_mcp_hang")
    c.equal("hang.never-answered", TIMEOUT_CLAIM, "the server took the call and never answered",
            expected={"called": 1, "answered": 0},
            observed={"called": len(server_calls(ev, "hang", "tools/call")),
                      "answered": len(server_calls(ev, "hang", "answered"))},
            evidence="MCP server log of run hang")
    c.that("hang.error-result", TIMEOUT_CLAIM,
           "the call gets a tool_result marked as an error naming the timeout",
           passed=bool(hung and hung.get("is_error") and "timed out" in str(hung.get("content"))),
           expected="is_error true, 'timed out' in the content",
           observed={"is_error": hung.get("is_error"), "content": hung.get("content")}
           if hung else "no tool_result", evidence="run hang: request 2 tool_result")
    called = server_calls(ev, "hang", "tools/call")
    requests = ev.requests("hang")
    waited = (round(requests[1]["time"] - called[0]["time"], 2)
              if called and len(requests) > 1 else None)
    c.that("hang.after-the-timeout", TIMEOUT_CLAIM,
           f"the loop goes on no sooner than MCP_TOOL_TIMEOUT ({TIMEOUT_MS} ms) after the call",
           passed=waited is not None and waited >= TIMEOUT_MS / 1000,
           expected=f">= {TIMEOUT_MS / 1000} s from the call to the next request",
           # the measured time only when it is too short: a report is the same on every run
           observed=("no call or no second request" if waited is None else
                     f">= {TIMEOUT_MS / 1000} s" if waited >= TIMEOUT_MS / 1000 else f"{waited} s"),
           evidence="MCP server log time of the call vs the journal time of request 2")
    check_ended(c, TIMEOUT_CLAIM, ev, "hang", final_text="AFTER_HANG", prefix="hang")


def _tool_result_block(ev: Evidence, run: str, tool_use_id: str) -> dict[str, Any]:
    for _, block in blocks_of_type(ev.request(run, 1), "tool_result"):
        if block.get("tool_use_id") == tool_use_id:
            return dict(block)
    return {}


FAILURE_PROBE = Probe(
    name="mcp-server-failures",
    premises=(
        Premise("env", "MCP_TOOL_TIMEOUT", "feature", "sets the MCP tool call's timeout",
                claims=(TIMEOUT_CLAIM,)),
    ),
    revision=2,  # the final text where the result event's is empty
    title="An MCP server that dies or hangs mid-call: an error result, the loop goes on",
    claims=(
        Claim(CRASH_CLAIM,
              "When the MCP server process exits during a call, the call gets an error "
              "tool_result and the loop goes on to the next model request.",
              source=project_expectation(
                  "a failed tool becomes an error tool_result and the loop continues (the "
                  "analysis's tool exception path, probe.failed-tool-no-rollback); an MCP "
                  "server is a tool provider like any other", MCP_DOCS)),
        Claim(TIMEOUT_CLAIM,
              "With MCP_TOOL_TIMEOUT set, a call the server never answers ends after that "
              "time with an error tool_result naming the timeout, and the loop goes on.",
              source=project_expectation(
                  "MCP_TOOL_TIMEOUT is the documented timeout for MCP tool execution",
                  "https://docs.claude.com/en/docs/claude-code/settings (environment "
                  "variables: MCP_TOOL_TIMEOUT)")),
    ),
    scenario=Scenario(name="mcp-server-failures", rules=[
        Rule(id="after-crash", match=Match(tool_result_for="toolu_mcp_crash"),
             reply=text("AFTER_CRASH")),
        Rule(id="crash", match=Match(last_user_text_contains="MCP_CRASH_PROMPT"),
             reply=tool_use(SERVER.tool_name("crasher"), {"query": "x"}, id="toolu_mcp_crash")),
        Rule(id="after-hang", match=Match(tool_result_for="toolu_mcp_hang"),
             reply=text("AFTER_HANG")),
        Rule(id="hang", match=Match(last_user_text_contains="MCP_HANG_PROMPT"),
             reply=tool_use(SERVER.tool_name("hanger"), {"query": "x"}, id="toolu_mcp_hang")),
    ]),
    invocations=(Invocation("crash", "MCP_CRASH_PROMPT", mcp=SERVER),
                 Invocation("hang", "MCP_HANG_PROMPT", mcp=SERVER,
                            env={"MCP_TOOL_TIMEOUT": str(TIMEOUT_MS)})),
    check=check_failures,
    fingerprinted=False,
    boundaries=(f"The hang is bounded by MCP_TOOL_TIMEOUT={TIMEOUT_MS} ms, the behaviour "
                "under test; the client's default MCP timeout is not probed.",),
    counterfactuals=(
        Counterfactual(
            "crasher-answers",
            "The server answers the call instead of exiting: there is no failure to report.",
            (CRASH_CLAIM,),
            lambda p: with_server_reply(p, "crasher", McpReply(text="CRASHER_ANSWERED"))),
        Counterfactual(
            "hanger-answers",
            "The server answers the call at once: nothing can time out.",
            (TIMEOUT_CLAIM,),
            lambda p: with_server_reply(p, "hanger", McpReply(text="HANGER_ANSWERED"))),
    ),
)
