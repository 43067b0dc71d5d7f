"""The generic agent-loop catalog's three tools, as an MCP server a CLI client can be given.

A loop driver (``probes.clients.loop_driver``) defines ``add``, ``fail`` (always raises) and
``read_file`` in its own language. A client built on the Claude Code CLI has no such place:
it reaches tools through MCP, so it is given this server, whose replies are worked out from
each call's arguments exactly as the drivers' tools work them out (``McpReply.compute``),
and it names them ``mcp__loop__<tool>`` (``Capabilities.tool_names``: the harness renames
the scripted calls before serving them).
"""

from __future__ import annotations

from probes.core.mcp import McpReply, McpServer, McpTool

__all__ = ["LOOP_TOOLS", "LOOP_TOOL_NAMES"]

LOOP_TOOL_NAMES = ("add", "fail", "read_file")

LOOP_TOOLS = McpServer(name="loop", tools=(
    McpTool("add", (McpReply(compute="add"),), "Add two integers.",
            {"type": "object", "properties": {"a": {"type": "integer"},
                                              "b": {"type": "integer"}},
             "required": ["a", "b"]}),
    McpTool("fail", (McpReply(compute="fail"),),
            "A tool that always fails with the given reason.",
            {"type": "object", "properties": {"reason": {"type": "string"}},
             "required": ["reason"]}),
    McpTool("read_file", (McpReply(compute="read_file"),),
            "Read a text file of the workspace.",
            {"type": "object", "properties": {"path": {"type": "string"}},
             "required": ["path"]}),
))
