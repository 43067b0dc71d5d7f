"""The shapes of a request's ``thinking``, ``tools`` and image and document sources, checked
as the real API checks them, and the wording every refusal of ``mockapi.check.validation`` shares.

Only what the API documents is checked, and nothing more: unknown fields pass, so do
``thinking.display`` values (Claude Code 2.1.306 and later send ``"updates"``, which only the
SDK's beta types know) and server tools of any versioned ``type``. Which rule comes from
where is listed in ``mockapi.check.validation``'s docstring.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final, NoReturn

from mockapi.check.requests import BadRequest
from mockapi.journal.records import OUTCOME_INVALID_REQUEST

__all__ = [
    "IMAGE_MEDIA_TYPES",
    "MIN_THINKING_BUDGET",
    "THINKING_TYPES",
    "TOOL_NAME",
    "check_source",
    "check_thinking",
    "check_tools",
    "got",
    "refuse",
    "show",
]

# The `type` tags of the SDK's ThinkingConfigParam union (anthropic 2.17.0, beta and not).
THINKING_TYPES: Final = frozenset({"adaptive", "between_tools", "disabled", "enabled"})
MIN_THINKING_BUDGET: Final = 1024
# A custom tool's name, as the API's refusal quotes it (64 characters before mid-2025).
TOOL_NAME: Final = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")
IMAGE_MEDIA_TYPES: Final = ("image/jpeg", "image/png", "image/gif", "image/webp")
# What interleaved thinking lets a budget do: exceed max_tokens (a budget for the whole turn).
_INTERLEAVED: Final = "interleaved-thinking-2025-05-14"
_BUDGET_OVER: Final = (
    "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our "
    "documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
    "#max-tokens-and-context-window-size")
# block type -> source type -> (required string fields, media_type's allowed values)
_SOURCES: Final[dict[str, dict[str, tuple[tuple[str, ...], tuple[str, ...]]]]] = {
    "image": {"base64": (("data",), IMAGE_MEDIA_TYPES), "url": (("url",), ()),
              "file": (("file_id",), ())},
    "document": {"base64": (("data",), ("application/pdf",)),
                 "text": (("data",), ("text/plain",)), "content": ((), ()),
                 "url": (("url",), ()), "file": (("file_id",), ())},
}
_MISSING: Final = object()


def check_thinking(thinking: Any, max_tokens: Any, betas: str | None) -> None:
    """Refuse a ``thinking`` of no known ``type``, an ``enabled`` one without an integer
    ``budget_tokens`` of at least 1,024, or one not below ``max_tokens`` (unless interleaved
    thinking is on, where the budget covers the whole turn)."""
    if thinking is None:
        return
    if type(thinking) is not dict:
        refuse(f"thinking: Input should be a valid dictionary, got {got(thinking)}")
    kind = thinking.get("type", _MISSING)
    if kind is _MISSING:
        refuse("thinking: Unable to extract tag using discriminator 'type', got no `type`")
    if type(kind) is not str or kind not in THINKING_TYPES:
        refuse(f"thinking: Input tag {show(kind)} found using 'type' does not match any of the "
               f"expected tags: {_quoted(sorted(THINKING_TYPES))}")
    if kind != "enabled":
        return
    budget = thinking.get("budget_tokens", _MISSING)
    if budget is _MISSING:
        refuse("thinking.enabled.budget_tokens: Field required")
    if type(budget) is not int:
        refuse(f"thinking.enabled.budget_tokens: Input should be a valid integer, got {got(budget)}")
    if budget < MIN_THINKING_BUDGET:
        refuse(f"thinking.enabled.budget_tokens: Input should be greater than or equal to "
               f"{MIN_THINKING_BUDGET}, got {budget}")
    if type(max_tokens) is int and budget >= max_tokens and _INTERLEAVED not in (betas or ""):
        refuse(f"{_BUDGET_OVER} (got max_tokens {max_tokens}, thinking.budget_tokens {budget})")


def check_tools(tools: Any) -> None:
    """Refuse ``tools`` that is not a list of objects, a custom tool without a valid
    ``name`` or an object ``input_schema`` of ``type: "object"``, and two tools of one name.

    A tool with a ``type`` other than ``custom`` is a server or versioned tool
    (``web_search_20250305``, ``bash_20250124``, ``mcp_toolset``...): its fields are the
    API's to know, only its name takes part in the uniqueness check.
    """
    if tools is None:
        return
    if type(tools) is not list:
        refuse(f"tools: Input should be a valid list, got {got(tools)}")
    seen: dict[str, int] = {}
    for n, tool in enumerate(tools):
        if type(tool) is not dict:
            refuse(f"tools.{n}: Input should be a valid dictionary, got {got(tool)}")
        kind = tool.get("type")
        name = tool.get("name", _MISSING)
        if kind is None or kind == "custom":
            if type(name) is not str or not TOOL_NAME.fullmatch(name):
                _custom_name(n, name)
            schema = tool.get("input_schema", _MISSING)
            if type(schema) is not dict or schema.get("type") != "object":
                _custom_schema(n, schema)
        elif type(kind) is not str:
            refuse(f"tools.{n}.type: Input should be a valid string, got {got(kind)}")
        if type(name) is str:
            if name in seen:
                refuse(f"tools: Tool names must be unique. Got {show(name)} at tools.{seen[name]} "
                       f"and tools.{n}")
            seen[name] = n


def _custom_name(n: int, name: Any) -> NoReturn:
    where = f"tools.{n}.custom.name"
    if name is _MISSING:
        refuse(f"{where}: Field required")
    if type(name) is not str:
        refuse(f"{where}: Input should be a valid string, got {got(name)}")
    refuse(f"{where}: String should match pattern '{TOOL_NAME.pattern}', got {show(name)}")


def _custom_schema(n: int, schema: Any) -> NoReturn:
    where = f"tools.{n}.custom.input_schema"
    if schema is _MISSING:
        refuse(f"{where}: Field required")
    if type(schema) is not dict:
        refuse(f"{where}: Input should be a valid dictionary, got {got(schema)}")
    if "type" not in schema:
        refuse(f"{where}.type: Field required")
    refuse(f"{where}.type: Input should be 'object', got {show(schema['type'])}")


def check_source(block: dict[str, Any], kind: str, where: str) -> None:
    """Refuse an ``image`` or ``document`` block (``kind``) at ``where`` whose ``source`` is
    missing, of no known ``type``, or lacks what its type needs (a media type of the allowed
    ones, string ``data``, ``url`` or ``file_id``; a ``content`` source's string or list)."""
    at = f"{where}.{kind}.source"
    source = block.get("source", _MISSING)
    if type(source) is not dict:
        if source is _MISSING:
            refuse(f"{at}: Field required")
        refuse(f"{at}: Input should be a valid dictionary, got {got(source)}")
    shapes = _SOURCES[kind]
    source_type = source.get("type", _MISSING)
    if type(source_type) is not str or source_type not in shapes:
        if source_type is _MISSING:
            refuse(f"{at}: Unable to extract tag using discriminator 'type', got no `type`")
        refuse(f"{at}: Input tag {show(source_type)} found using 'type' does not match any of "
               f"the expected tags: {_quoted(sorted(shapes))}")
    fields, media_types = shapes[source_type]
    at = f"{at}.{source_type}"
    if media_types:
        media_type = source.get("media_type", _MISSING)
        if media_type is _MISSING:
            refuse(f"{at}.media_type: Field required")
        if type(media_type) is not str or media_type not in media_types:
            refuse(f"{at}.media_type: Input should be {_alternatives(media_types)}, "
                   f"got {show(media_type)}")
    for name in fields:
        value = source.get(name, _MISSING)
        if type(value) is not str:
            if value is _MISSING:
                refuse(f"{at}.{name}: Field required")
            refuse(f"{at}.{name}: Input should be a valid string, got {got(value)}")
    if source_type == "content":
        content = source.get("content", _MISSING)
        if content is _MISSING:
            refuse(f"{at}.content: Field required")
        if type(content) is not str and type(content) is not list:
            refuse(f"{at}.content: Input should be a valid string or a valid list of content "
                   f"blocks, got {got(content)}")


def _quoted(names: list[str]) -> str:
    return ", ".join(f"'{n}'" for n in names)


def _alternatives(names: tuple[str, ...]) -> str:
    """pydantic's "'a', 'b' or 'c'"."""
    quoted = [f"'{n}'" for n in names]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"


def _kind(value: Any) -> str:
    """A JSON value's type, as JSON names it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, dict) else type(value).__name__


def got(value: Any) -> str:
    """What arrived in place of a value of another type: its JSON type and the value."""
    return "null" if value is None else f"{_kind(value)} {show(value)}"


def show(value: Any) -> str:
    """A short JSON rendering of what arrived (strings in single quotes, as pydantic shows tags)."""
    if isinstance(value, str):
        shown = "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    else:
        try:
            shown = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        except (TypeError, ValueError):
            shown = repr(value)
    return shown if len(shown) <= 80 else shown[:77] + "..."


def refuse(message: str) -> NoReturn:
    """Raise the API's 400 ``invalid_request_error`` with ``message``."""
    raise BadRequest(400, "invalid_request_error", message, OUTCOME_INVALID_REQUEST)
