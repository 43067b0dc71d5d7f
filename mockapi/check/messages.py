"""A request's messages checked as the real API checks them: each message's role and
content, each block's shape, empty content, and each ``tool_use`` paired with its
``tool_result``.

``mockapi.check.validation`` calls it once the top-level fields pass, and its docstring is
the ledger of what is refused and accepted here too, where each rule and wording comes from,
and what it costs: one pass over the messages and their blocks noting what a second pass,
over the notes only, needs (emptiness, pairing). The sets of roles and block ``type`` tags
are the SDK's (``anthropic`` 2.16.0 and 0.125.0, beta and non-beta message params);
tests/test_validation.py fails when the installed SDK declares one they lack.
"""

from __future__ import annotations

from typing import Any, Final, NoReturn

from mockapi.check.request_shapes import check_source
from mockapi.check.request_shapes import got as _got
from mockapi.check.request_shapes import refuse as _refuse
from mockapi.check.request_shapes import show as _show

__all__ = ["BLOCK_TYPES", "MESSAGE_ROLES", "TOOL_RESULT_CONTENT_TYPES", "check_messages"]

# The `role` tags of the SDK's MessageParam unions (anthropic 2.16.0 and 0.125.0, beta and
# not); tests/test_validation.py checks that the installed SDK declares no other.
MESSAGE_ROLES: Final = frozenset({"user", "assistant", "system"})
# The `type` tags of the blocks a message's content may hold: the union of the SDK's
# user, assistant and system message content blocks (params, and the response blocks
# the API takes back), beta and not, in anthropic 2.16.0 and 0.125.0.
BLOCK_TYPES: Final = frozenset({
    "advisor_tool_result", "bash_code_execution_tool_result", "code_execution_tool_result",
    "compaction", "container_upload", "document", "fallback", "image", "mcp_tool_listing",
    "mcp_tool_result", "mcp_tool_use", "redacted_thinking", "search_result",
    "server_tool_use", "text", "text_editor_code_execution_tool_result", "thinking",
    "tool_addition", "tool_removal", "tool_result", "tool_search_tool_result", "tool_use",
    "web_fetch_tool_result", "web_search_tool_result",
})
# The `type` tags of the blocks a tool_result's content may hold (ToolResultBlockParam).
TOOL_RESULT_CONTENT_TYPES: Final = frozenset({
    "browser_state", "document", "image", "search_result", "text", "tool_reference"})
_EXPECTED_ROLES: Final = "'user', 'assistant' or 'system'"
_EXPECTED_TAGS: Final = ", ".join(f"'{t}'" for t in sorted(BLOCK_TYPES))
_EXPECTED_RESULT_TAGS: Final = ", ".join(f"'{t}'" for t in sorted(TOOL_RESULT_CONTENT_TYPES))
_NON_EMPTY: Final = "all messages must have non-empty content except for the optional final assistant message"
_MISSING: Final = object()


def check_messages(messages: list[Any]) -> None:
    """Refuse (``BadRequest``) the first problem of ``messages``, a list of 1 to
    ``validation.MAX_MESSAGES``, in the API's wording.

    Pass 1: each message's shape, noting what pass 2 (emptiness, pairing) needs.

    A turn is a run of consecutive messages of one role, ``system`` messages skipped; a
    user turn's tool_results answer the tool_uses of the assistant turn just before it.
    Only messages with something to check later leave a note, so a long conversation
    costs one walk over its blocks.
    """
    last = len(messages) - 1
    turn, turn_role = -1, ""
    empties: list[tuple[int, int]] = []  # (message, -1: empty content | empty text block)
    uses: list[tuple[int, int, Any]] = []  # (message, turn, tool_use id), assistant only
    results: list[tuple[int, int, int, Any]] = []  # (message, block, turn, tool_use_id), user
    for i, message in enumerate(messages):
        if type(message) is not dict:
            _refuse(f"messages.{i}: Input should be a valid dictionary, got {_got(message)}")
        role = message.get("role")
        if type(role) is not str or role not in MESSAGE_ROLES:
            if "role" not in message:
                _refuse(f"messages.{i}.role: Field required")
            _refuse(f"messages.{i}.role: Input should be {_EXPECTED_ROLES}, got {_show(role)}")
        if role != turn_role and role != "system":
            turn, turn_role = turn + 1, role
        content = message.get("content", _MISSING)
        counted = role != "system" and (i != last or role != "assistant")  # prefill: may be empty
        if type(content) is str:
            if not content and counted:
                empties.append((i, -1))
            continue
        if type(content) is not list:
            if content is _MISSING:
                if role == "system":
                    continue
                _refuse(f"messages.{i}.content: Field required")
            _refuse(f"messages.{i}.content: Input should be a valid string or a valid list of "
                    f"content blocks, got {_got(content)}")
        if not content and counted:
            empties.append((i, -1))
        empty_text = False
        for j, block in enumerate(content):
            if type(block) is not dict:
                _refuse(f"messages.{i}.content.{j}: Input should be a valid dictionary, "
                        f"got {_got(block)}")
            kind = block.get("type")
            if kind == "text":
                text = block.get("text")
                if type(text) is not str:
                    _field_error(block, "text", f"messages.{i}.content.{j}.text", "string")
                if not text and counted and not empty_text:
                    empties.append((i, j))
                    empty_text = True
            elif kind == "tool_use":
                use_id, name, tool_input = block.get("id"), block.get("name"), block.get("input")
                if type(use_id) is not str or type(name) is not str or type(tool_input) is not dict:
                    where = f"messages.{i}.content.{j}.tool_use"
                    _field_error(block, "id", where, "string")
                    _field_error(block, "name", where, "string")
                    _field_error(block, "input", where, "dictionary")
                if role == "assistant":
                    uses.append((i, turn, use_id))
            elif kind == "tool_result":
                use_id = block.get("tool_use_id")
                if type(use_id) is not str:
                    _field_error(block, "tool_use_id", f"messages.{i}.content.{j}.tool_result",
                                 "string")
                inner = block.get("content")
                if inner is not None and type(inner) is not str:
                    _check_result_content(inner, f"messages.{i}.content.{j}.tool_result")
                if role == "user":
                    results.append((i, j, turn, use_id))
            elif kind == "image" or kind == "document":
                check_source(block, kind, f"messages.{i}.content.{j}")
            elif type(kind) is not str or kind not in BLOCK_TYPES:
                _bad_tag(block, f"messages.{i}.content.{j}", _EXPECTED_TAGS)
    if empties or uses or results:
        _check_turns(messages, empties, uses, results, turn)


def _check_result_content(content: Any, where: str) -> None:
    if type(content) is not list:
        _refuse(f"{where}.content: Input should be a valid string or a valid list of content "
                f"blocks, got {_got(content)}")
    for k, item in enumerate(content):
        if type(item) is not dict:
            _refuse(f"{where}.content.{k}: Input should be a valid dictionary, got {_got(item)}")
        kind = item.get("type")
        if kind == "image" or kind == "document":
            check_source(item, kind, f"{where}.content.{k}")
        elif not _is_str_in(kind, TOOL_RESULT_CONTENT_TYPES):
            _bad_tag(item, f"{where}.content.{k}", _EXPECTED_RESULT_TAGS)


def _check_turns(messages: list[Any], empties: list[tuple[int, int]],
                 uses: list[tuple[int, int, Any]], results: list[tuple[int, int, int, Any]],
                 last_turn: int) -> None:
    """Pass 2, over the notes only: of the problems found, the one in the first message."""
    problems: list[tuple[int, int, str]] = []  # (message, rank within it, reply)
    if empties:
        i, j = empties[0]
        if j < 0:
            problems.append((i, 0, f"messages.{i}: {_NON_EMPTY}, got {_show(messages[i]['content'])}"))
        else:
            problems.append((i, 1, f"messages: text content blocks must be non-empty, got an "
                                   f"empty text at messages.{i}.content.{j}"))
    uses_in: dict[int, set[str]] = {}
    for _, turn, use_id in uses:
        uses_in.setdefault(turn, set()).add(use_id)
    unexpected: dict[int, list[tuple[int, str]]] = {}
    for i, j, turn, use_id in results:
        if use_id not in uses_in.get(turn - 1, ()):
            unexpected.setdefault(i, []).append((j, use_id))
    if unexpected:
        i = min(unexpected)
        blocks = unexpected[i]
        problems.append((i, 2, f"messages.{i}.content.{blocks[0][0]}: unexpected `tool_use_id` "
                               f"found in `tool_result` blocks: {', '.join(r for _, r in blocks)}. "
                               f"Each `tool_result` block must have a corresponding `tool_use` "
                               f"block in the previous message."))
    answered: dict[int, set[str]] = {}
    for _, _, turn, use_id in results:
        answered.setdefault(turn, set()).add(use_id)
    missing: dict[int, list[str]] = {}
    for i, turn, use_id in uses:
        if turn < last_turn and use_id not in answered.get(turn + 1, ()):
            missing.setdefault(i, []).append(use_id)
    if missing:
        i = min(missing)
        problems.append((i, 3, f"messages.{i}: `tool_use` ids were found without `tool_result` "
                               f"blocks immediately after: {', '.join(missing[i])}. Each "
                               f"`tool_use` block must have a corresponding `tool_result` block "
                               f"in the next message."))
    if problems:
        _refuse(min(problems)[2])


def _field_error(block: dict[str, Any], name: str, where: str, expected: str) -> None:
    """Refuse ``block[name]`` unless it is of the ``expected`` JSON type."""
    value = block.get(name, _MISSING)
    if type(value) is (str if expected == "string" else dict):
        return
    if value is _MISSING:
        _refuse(f"{where}.{name}: Field required")
    _refuse(f"{where}.{name}: Input should be a valid {expected}, got {_got(value)}")


def _bad_tag(block: dict[str, Any], where: str, expected: str) -> NoReturn:
    if "type" not in block:
        _refuse(f"{where}: Unable to extract tag using discriminator 'type', got no `type`")
    _refuse(f"{where}: Input tag {_show(block['type'])} found using 'type' does not match any of "
            f"the expected tags: {expected}")


def _is_str_in(value: Any, names: frozenset[str]) -> bool:
    return type(value) is str and value in names  # a list or dict is not hashable
