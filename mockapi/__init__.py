"""mockapi: a controlled, scripted, recording mock of the Anthropic Messages API."""

from __future__ import annotations

import importlib.metadata
from typing import TYPE_CHECKING, Any

from mockapi.journal import Journal, JournalContents, read_journal
from mockapi.matching import KINDS, Match
from mockapi.replies import (
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
from mockapi.scenario import Rule, Scenario, ScenarioError, load_scenario, parse_scenario

if TYPE_CHECKING:
    from mockapi.server import MockServer

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
            from mockapi.server import MockServer

            globals()["MockServer"] = MockServer
            return MockServer
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})
