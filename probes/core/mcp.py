"""A probe's MCP server: its scripted tools, how the client is told of it, what it served.

Declarations only (a leaf but for the name check and its ``CatalogError``: the probe model
imports it). The server
itself is ``probes/inside/mcp_server.py``, run in the client's sandbox on the harness's MCP runtime
(``probes.run.mcp_runtime``); it reports one JSON line per event to the harness's collector
(``probes.run.collector``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from probes.core.names import CatalogError, described, simple_name_problem

__all__ = ["COMPUTED", "SERVER_SCRIPT", "McpReply", "McpServer", "McpTool", "mcp_config"]

# run on the MCP runtime, never imported here (it needs the ``mcp`` package)
# the server runs inside the sandbox (probes/inside/): a path, never imported here
SERVER_SCRIPT = Path(__file__).parents[1] / "inside" / "mcp_server.py"
# the answers the server works out from a call's arguments (``McpReply.compute``): the loop
# drivers' three tools (probes.core.loop_tools): a + b, an error of the reason, a file's text
COMPUTED = ("add", "fail", "read_file")


@dataclass(frozen=True)
class McpReply:
    """One answer of a tool: ``text`` (a result), ``error`` (a result with isError), ``crash``
    (the server process exits mid-call, answering nothing), ``hang`` (the call is never
    answered) or ``compute`` (the answer worked out from the call's arguments, as a loop
    driver's own tool does: one of ``COMPUTED``); after ``delay`` seconds. ``then_tools``:
    the server's tool list becomes these and the client is notified (tools/list_changed)
    before the answer, which waits until the client has listed the tools again (at most
    5 s), so the client's next request does not race its own re-listing."""

    text: str | None = None
    error: str | None = None
    crash: bool = False
    hang: bool = False
    delay: float = 0.0
    then_tools: tuple[McpTool, ...] | None = None
    compute: str | None = None

    def __post_init__(self) -> None:
        given = [name for name, on in (("text", self.text is not None),
                                       ("error", self.error is not None),
                                       ("crash", self.crash), ("hang", self.hang),
                                       ("compute", self.compute is not None)) if on]
        if len(given) != 1:
            raise CatalogError(f"an MCP reply is exactly one of text, error, crash, hang or "
                               f"compute; got {', '.join(given) or 'none'}")
        if self.compute is not None and self.compute not in COMPUTED:
            raise CatalogError(f"an MCP reply computes one of {', '.join(COMPUTED)}; got "
                               f"{described(self.compute)}")
        if self.delay < 0:
            raise CatalogError(f"an MCP reply's delay is seconds >= 0, got {self.delay}")
        if self.then_tools is not None and (self.crash or self.hang):
            raise CatalogError("then_tools needs an answered call (text or error), not a "
                             f"{'crash' if self.crash else 'hang'}")

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        for key in ("text", "error", "compute"):
            if getattr(self, key) is not None:
                data[key] = getattr(self, key)
        if self.crash:
            data["crash"] = True
        if self.hang:
            data["hang"] = True
        if self.delay:
            data["delay"] = self.delay
        if self.then_tools is not None:
            data["then_tools"] = [t.to_json() for t in self.then_tools]
        return data


@dataclass(frozen=True)
class McpTool:
    """A tool the server lists; each call takes the next of ``replies`` (the last repeats)."""

    name: str
    replies: tuple[McpReply, ...]
    description: str = "a tool of the loopprobe harness's MCP server"
    input_schema: Mapping[str, Any] = field(default_factory=lambda: {
        "type": "object", "properties": {"query": {"type": "string"}}})

    def __post_init__(self) -> None:
        if not self.name or not all(c.isalnum() or c in "_-" for c in self.name):
            raise CatalogError(f"an MCP tool name is letters, digits, _ and -; got {self.name!r}")
        if not self.replies:
            raise CatalogError(f"MCP tool {self.name!r} needs at least one reply")

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description,
                "input_schema": dict(self.input_schema),
                "replies": [r.to_json() for r in self.replies]}


@dataclass(frozen=True)
class McpServer:
    """The stdio MCP server a run is given (``--mcp-config``, ``--strict-mcp-config``).
    The client names its tools ``mcp__<name>__<tool>``."""

    tools: tuple[McpTool, ...]
    name: str = "probe"

    def __post_init__(self) -> None:
        problem = simple_name_problem("MCP server", self.name)
        if problem:
            raise CatalogError(problem)
        names = [t.name for t in self.tools]
        if len(set(names)) != len(names):
            raise CatalogError(f"MCP tool names repeat: {names}")

    def tool_name(self, tool: str) -> str:
        """How the client names one of this server's tools."""
        return f"mcp__{self.name}__{tool}"

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "tools": [t.to_json() for t in self.tools]}


def mcp_config(server: McpServer, *, python: str, script: str, spec_path: str,
               socket_path: str, run: str) -> dict[str, Any]:
    """The ``--mcp-config`` file: the server started by the client over stdio, reporting
    what it serves on the collector's socket as run ``run``."""
    return {"mcpServers": {server.name: {
        "type": "stdio", "command": python,
        "args": ["-I", script, spec_path, socket_path, run]}}}
