"""Premises several probes share (``probes.core.premises``): what the harness measures with
and the knobs many probes turn. A probe's own premises are declared beside it."""

from __future__ import annotations

from probes.core.premises import Premise

__all__ = ["HOOK_TOOL_IDS", "MCP_CONFIG", "RETRIES_ENV", "STREAMED_INPUT", "hook_tool_ids",
           "max_retries"]


def hook_tool_ids(event: str = "PreToolUse", *claims: str) -> Premise:
    """Each hook call names its tool call: how the harness pairs hook windows and hook
    calls with calls (the hook input's tool_use_id, added to it in 2.0.43)."""
    return Premise("hook_input", "tool_use_id", "instrument",
                   f"pairs each {event} hook call with its tool call", claims=claims,
                   event=event, static=False)


HOOK_TOOL_IDS = hook_tool_ids()


def max_retries(*claims: str) -> Premise:
    """The retries bounded, so that a run of overloaded answers ends within its timeout."""
    return Premise("env", "CLAUDE_CODE_MAX_RETRIES", "instrument",
                   "bounds the client's retries so the run ends within its timeout",
                   claims=claims)


RETRIES_ENV = max_retries()


# the stream-json input the streamed probes write user messages and control requests on
STREAMED_INPUT = Premise("flag", "--input-format", "feature",
                         "reads user messages and control requests as stream-json on stdin")
# the harness's MCP server, given to the run
MCP_CONFIG = Premise("flag", "--mcp-config", "instrument", "gives the run the harness's MCP server")
