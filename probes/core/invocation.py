"""What the harness asks of a client: one run in a probe's sandbox, and the capabilities it needs.

A leaf module: the probe model, the evidence and every client import it; of loopprobe it
imports only the streamed-input and MCP declarations and the name check (``probes.core.streamed``,
``probes.core.mcp``, ``probes.core.names``, leaves themselves).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from probes.core.mcp import McpServer
from probes.core.names import CatalogError, described, simple_name_problem
from probes.core.streamed import StreamedInput

__all__ = ["CAPABILITIES", "Hooks", "Invocation"]

# What a probe can require of a client; each client declares which of these it supports.
CAPABILITIES: Mapping[str, str] = {
    "run": "runs one prompt headless, printing the stream-json event protocol",
    "tools": "restricts the tools the model is offered",
    "max_turns": "stops after a given number of model turns",
    "resume": "resumes a stored session",
    "fork": "forks a resumed session into a new one",
    "hooks": "runs hook commands on loop events (PreToolUse, Stop, ...)",
    "fallback_model": "switches to a fallback model after repeated overload",
    "max_budget_usd": "stops when a spending budget is exhausted",
    "tool_runner": "is the Anthropic SDK's tool runner, with the driver's tools (add, fail, "
                   "read_file)",
    "loop_tools": "runs its agent loop with the driver's tools (add, fail, read_file) and "
                  "prints the driver's events (the generic agent-loop catalog)",
    "threads": "continues a conversation as a message thread",
    "streamed_input": "reads user messages and control requests (interrupt, set_model, ...) "
                      "on stdin while a turn runs, and asks the caller for permissions",
    "mcp": "attaches a given stdio MCP server and offers its tools to the model",
    "plugin_dir": "loads a plugin from a folder for one run (--plugin-dir)",
}


@dataclass(frozen=True)
class Hooks:
    """The harness's hook recorder, installed for every hook event the client offers.

    Every call is recorded; ``policy`` says what the recorder answers (see
    ``probes.run.hook_policy``); the empty policy records only.
    """

    policy: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Invocation:
    """One run of the client inside the probe's sandbox.

    ``session``: ``new`` starts a session with a fixed id (derived from the probe
    and this invocation's name); ``resume`` continues the session started by the
    invocation named in ``resume_from``; ``none`` passes no session flag.
    """

    name: str
    prompt: str
    session: Literal["new", "resume", "none"] = "new"
    resume_from: str | None = None
    fork: bool = False
    tools: tuple[str, ...] | None = ("Read",)
    max_turns: int | None = None
    settings: dict[str, Any] | None = None
    extra_args: tuple[str, ...] = ()
    env: dict[str, str | None] = field(default_factory=dict)  # None unsets a variable
    timeout: float = 90.0
    model: str = "claude-sonnet-4-5"
    # None: the prompt is the whole input; else the caller keeps writing (probes.core.streamed)
    streamed: StreamedInput | None = None
    mcp: McpServer | None = None  # the harness's MCP server, given to this run alone
    # the loop runs with the generic catalog's tools, add, fail and read_file: a driver's
    # own, or, for a CLI client, the server probes.core.loop_tools describes
    loop_tools: bool = False
    # another version of the probe's client kind runs this invocation (a session written by
    # one version, resumed by another); None: the probe's own version
    client_version: str | None = None

    def __post_init__(self) -> None:
        # its runs' artefacts are kept in a folder of this name (runs/<name>/, mcp/<name>.jsonl)
        problem = simple_name_problem("invocation", self.name)
        if problem:
            raise CatalogError(problem)
        owner = f"Invocation {self.name!r}"
        if not isinstance(self.prompt, str):
            raise CatalogError(f"{owner}: prompt must be a string, got {described(self.prompt)}")
        if self.session not in ("new", "resume", "none"):
            raise CatalogError(f"{owner}: session must be 'new', 'resume' or 'none', got "
                               f"{described(self.session)}")
        if (self.session == "resume") != (self.resume_from is not None):
            raise CatalogError(f"{owner}: resume_from names the invocation resumed, with "
                               f"session='resume' only; got session={self.session!r}, "
                               f"resume_from={self.resume_from!r}")
        if self.tools is not None and not (isinstance(self.tools, tuple | list)
                                           and all(isinstance(x, str) for x in self.tools)):
            raise CatalogError(f"{owner}: tools must be a tuple of tool names or None, got "
                               f"{described(self.tools)}")
        if not isinstance(self.streamed, StreamedInput | None):
            raise CatalogError(f"{owner}: streamed must be a StreamedInput(...) or None, got "
                               f"{described(self.streamed)}")
        if not isinstance(self.loop_tools, bool):
            raise CatalogError(f"{owner}: loop_tools must be True or False, got "
                               f"{described(self.loop_tools)}")
        if not isinstance(self.mcp, McpServer | None):
            raise CatalogError(f"{owner}: mcp must be an McpServer(...) or None, got "
                               f"{described(self.mcp)}")

    def capabilities(self) -> set[str]:
        """What a client must support to run this invocation."""
        needed = {"run"}
        if self.tools is not None:
            needed.add("tools")
        if self.max_turns is not None:
            needed.add("max_turns")
        if self.session == "resume":
            needed.add("resume")
        if self.fork:
            needed.add("fork")
        if self.streamed is not None:
            needed.add("streamed_input")
        if self.mcp is not None:
            needed.add("mcp")
        if self.loop_tools:
            needed.add("loop_tools")
        return needed
