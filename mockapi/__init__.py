"""mockapi: a controlled, scripted, recording mock of the Anthropic Messages API.

Packages, from the ground up (a package imports only those above it in this list; ``check``
and ``script`` stand side by side and import neither the other):

- ``journal``  every request written before its reply starts, and read back
- ``check``    a request read and checked as the real API checks it, before any rule sees it
- ``script``   the scenario language: what the model says, and which rule answers a request
- ``serve``    the HTTP face: the Messages API app, its transport and gate, server and CLI
- ``record``   record, then replay: a proxy in front of a real endpoint

Here: the public names (``__all__``); ``testing`` is the pytest plugin (``mock_api``).
``tests/test_architecture.py`` keeps the order.
"""

from __future__ import annotations

import importlib.metadata
from typing import TYPE_CHECKING, Any

from mockapi.journal.read import JournalContents, read_journal
from mockapi.journal.write import Journal
from mockapi.script.matching import KINDS, Match
from mockapi.script.replies import (
    ApiError,
    Message,
    Raw,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
    api_error,
    message,
    prompt_too_long,
    raw,
    text,
    thinking,
    tool_use,
)
from mockapi.script.scenario import Rule, Scenario, ScenarioError, load_scenario, parse_scenario

if TYPE_CHECKING:
    from mockapi.serve.server import MockServer

__all__ = [
    "KINDS",
    "ApiError",
    "Journal",
    "JournalContents",
    "Match",
    "Message",
    "MockServer",
    "Raw",
    "RedactedThinkingBlock",
    "Rule",
    "Scenario",
    "ScenarioError",
    "TextBlock",
    "ThinkingBlock",
    "ToolUseBlock",
    "__version__",
    "api_error",
    "load_scenario",
    "message",
    "parse_scenario",
    "prompt_too_long",
    "raw",
    "read_journal",
    "text",
    "thinking",
    "tool_use",
]

try:  # the one version: the installed distribution's (pyproject.toml's [project] version)
    __version__ = importlib.metadata.version("loopprobe")
except importlib.metadata.PackageNotFoundError:  # imported from a checkout that was never installed
    __version__ = "0+unknown"


if not TYPE_CHECKING:  # hidden from type checkers, which would take any name as Any

    def __getattr__(name: str) -> Any:
        # Loaded on first use: the server brings uvicorn, starlette and httpx, which readers
        # of scenarios and journals (the harness) do not need.
        if name == "MockServer":
            from mockapi.serve.server import MockServer

            globals()["MockServer"] = MockServer
            return MockServer
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})
