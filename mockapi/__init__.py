"""mockapi: a controlled, scripted, recording mock of the Anthropic Messages API."""

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
