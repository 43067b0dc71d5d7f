"""What a request is: its kind (main loop, compaction, subagent…), and whether a rule matches it.

Kinds follow what Claude Code 2.0.77–2.1.332 were observed to send (see the
project notes); the order of the tests matters. ``Match.differences`` explains
a miss field by field, so an unmatched request can name its nearest rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = [
    "CLASSIFIERS",
    "COMPACTION_PROMPT",
    "COMPACTION_SYSTEM_2_0",
    "KINDS",
    "SUBAGENT_BILLING_FLAG",
    "SUBAGENT_HEADER",
    "SUBAGENT_NOTES",
    "SUBAGENT_SYSTEM",
    "Match",
    "Miss",
    "RequestFacts",
    "classify_claude_code",
    "classify_plain",
    "facts_from_body",
]

KINDS = ("main", "compaction", "subagent", "warmup", "side")

COMPACTION_PROMPT = "Your task is to create a detailed summary of the conversation"
COMPACTION_SYSTEM_2_0 = "tasked with summarizing conversations"
SUBAGENT_SYSTEM = "You are an agent for Claude Code"
# the notes every agent thread's system prompt carries (2.0.77 sends no other subagent sign)
SUBAGENT_NOTES = "Agent threads always have their cwd reset"
SUBAGENT_BILLING_FLAG = "cc_is_subagent=true"
SUBAGENT_HEADER = "x-claude-code-agent-id"


@dataclass(frozen=True, slots=True)
class RequestFacts:
    """The parts of a request that rules look at, extracted once per request."""

    path: str
    model: str | None
    stream: bool
    tool_names: tuple[str, ...]
    # each declared tool's input_schema property names, as "Tool.property"
    tool_inputs: frozenset[str]
    first_user_text: str
    last_user_text: str
    last_user_tool_result_ids: frozenset[str]
    system_text: str
    system_first: str
    has_temperature: bool
    thinking_type: str | None
    headers: Mapping[str, str]


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            b["text"] for b in content
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
        )
    return ""


def _tool_result_ids(content: Any) -> frozenset[str]:
    if not isinstance(content, list):
        return frozenset()
    return frozenset(
        b["tool_use_id"] for b in content
        if isinstance(b, dict) and b.get("type") == "tool_result"
        and isinstance(b.get("tool_use_id"), str)
    )


def facts_from_body(path: str, body: Mapping[str, Any], headers: Mapping[str, str]) -> RequestFacts:
    messages = body.get("messages")
    messages = messages if isinstance(messages, list) else []
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    first_user = users[0].get("content") if users else None
    last_user = users[-1].get("content") if users else None
    system = body.get("system")
    if isinstance(system, list):
        system_parts = [b.get("text", "") for b in system if isinstance(b, dict)]
        system_parts = [p for p in system_parts if isinstance(p, str)]
    elif isinstance(system, str):
        system_parts = [system]
    else:
        system_parts = []
    tools = body.get("tools")
    tool_names = tuple(
        t["name"] for t in tools if isinstance(t, dict) and isinstance(t.get("name"), str)
    ) if isinstance(tools, list) else ()
    tool_inputs = frozenset(
        f"{t['name']}.{prop}" for t in tools if isinstance(t, dict) and isinstance(t.get("name"), str)
        and isinstance(t.get("input_schema"), dict)
        and isinstance(t["input_schema"].get("properties"), dict)
        for prop in t["input_schema"]["properties"]
    ) if isinstance(tools, list) else frozenset()
    thinking = body.get("thinking")
    model = body.get("model")
    return RequestFacts(
        path=path,
        model=model if isinstance(model, str) else None,
        stream=body.get("stream") is True,
        tool_names=tool_names,
        tool_inputs=tool_inputs,
        first_user_text=_text_of(first_user),
        last_user_text=_text_of(last_user),
        last_user_tool_result_ids=_tool_result_ids(last_user),
        system_text="\n".join(system_parts),
        system_first=system_parts[0] if system_parts else "",
        has_temperature="temperature" in body,
        thinking_type=thinking.get("type") if isinstance(thinking, dict) else None,
        headers=headers,
    )


def classify_claude_code(facts: RequestFacts) -> str:
    if COMPACTION_PROMPT in facts.last_user_text or COMPACTION_SYSTEM_2_0 in facts.system_text:
        return "compaction"
    if facts.first_user_text.strip() == "Warmup":
        return "warmup"
    if (SUBAGENT_BILLING_FLAG in facts.system_first or SUBAGENT_HEADER in facts.headers
            or SUBAGENT_SYSTEM in facts.system_text or SUBAGENT_NOTES in facts.system_text):
        return "subagent"
    # a side request (title, topic, summary) offers no tools, and from 2.1.x on disables
    # thinking. A temperature says nothing: 2.1.31 to 2.1.45 send temperature 1
    # with every main request (read as side, the whole loop got the built-in "OK" and no
    # rule of the script), and side requests carry one with or without tools.
    if not facts.tool_names or facts.thinking_type == "disabled":
        return "side"
    return "main"


def classify_plain(facts: RequestFacts) -> str:
    return "main"


CLASSIFIERS = {"claude-code": classify_claude_code, "plain": classify_plain}


@dataclass(frozen=True, slots=True)
class Miss:
    field: str
    expected: Any
    actual: Any

    def __str__(self) -> str:
        return f"{self.field}: expected {self.expected!r}, got {self.actual!r}"


def _as_list(value: str | list[str] | None) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


class Match(BaseModel):
    """Conditions on a request; every given condition must hold."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str | list[str] = Field(
        default="main", description=f"one of {', '.join(KINDS)}, a list of them, or 'any'")
    turn: int | None = Field(default=None, ge=1, description="Nth distinct request of this kind")
    attempt: int | None = Field(default=None, ge=1, description="Nth sending of the same turn")
    last_user_text_contains: str | list[str] | None = None
    tool_result_for: str | None = Field(
        default=None, description="a tool_result with this tool_use_id is in the last user turn")
    declares_tool: str | None = None
    declares_tool_input: str | None = Field(
        default=None, description="a declared tool's input schema has this property, as "
                                  "Tool.property (e.g. ScheduleWakeup.noop)")
    system_contains: str | None = None
    model: str | None = None
    stream: bool | None = None
    path: str = "/v1/messages"

    @field_validator("kind")
    @classmethod
    def _known_kinds(cls, value: str | list[str]) -> str | list[str]:
        unknown = [k for k in _as_list(value) if k not in (*KINDS, "any")]
        if unknown:
            raise ValueError(f"unknown kind {unknown[0]!r}; expected one of "
                             f"{', '.join(KINDS)} or 'any'")
        return value

    def differences(self, facts: RequestFacts, kind: str, turn: int, attempt: int) -> list[Miss]:
        misses: list[Miss] = []
        if facts.path != self.path:
            misses.append(Miss("path", self.path, facts.path))
        kinds = _as_list(self.kind)
        if "any" not in kinds and kind not in kinds:
            misses.append(Miss("kind", self.kind, kind))
        if self.turn is not None and turn != self.turn:
            misses.append(Miss("turn", self.turn, turn))
        if self.attempt is not None and attempt != self.attempt:
            misses.append(Miss("attempt", self.attempt, attempt))
        for needle in _as_list(self.last_user_text_contains):
            if needle not in facts.last_user_text:
                misses.append(Miss("last_user_text_contains", needle,
                                   _excerpt(facts.last_user_text)))
        if self.tool_result_for is not None and \
                self.tool_result_for not in facts.last_user_tool_result_ids:
            misses.append(Miss("tool_result_for", self.tool_result_for,
                               sorted(facts.last_user_tool_result_ids)))
        if self.declares_tool is not None and self.declares_tool not in facts.tool_names:
            misses.append(Miss("declares_tool", self.declares_tool, list(facts.tool_names)))
        if self.declares_tool_input is not None and \
                self.declares_tool_input not in facts.tool_inputs:
            tool = self.declares_tool_input.split(".", 1)[0]
            misses.append(Miss("declares_tool_input", self.declares_tool_input,
                               sorted(i for i in facts.tool_inputs if i.startswith(f"{tool}."))))
        if self.system_contains is not None and self.system_contains not in facts.system_text:
            misses.append(Miss("system_contains", self.system_contains,
                               _excerpt(facts.system_text)))
        if self.model is not None and facts.model != self.model:
            misses.append(Miss("model", self.model, facts.model))
        if self.stream is not None and facts.stream != self.stream:
            misses.append(Miss("stream", self.stream, facts.stream))
        return misses


def _excerpt(value: str, limit: int = 120) -> str:
    return value if len(value) <= limit else value[:limit] + f"… ({len(value)} chars)"

