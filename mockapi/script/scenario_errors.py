"""What a scenario that cannot be used is told: ``ScenarioError`` and its problem lines.

Each line says where the problem is as the user wrote it (``rules[0].reply.text``, not
pydantic's location with its union tags), what was wrong or expected (for an unknown key,
the keys that place accepts and the close match), and what was found, shown short.
``mockapi.script.scenario`` finds the problems; this module words them.
"""

from __future__ import annotations

import difflib
import json
import reprlib
import types
import typing
from typing import Any

from pydantic import BaseModel, ValidationError

__all__ = ["ScenarioError", "ScenarioRefused", "close_keys", "problems_of", "show"]


class ScenarioError(ValueError):
    """A scenario that cannot be used; ``problems`` lists every one found."""

    def __init__(self, source: str, problems: list[str]):
        self.source = source
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"invalid scenario {source}: {len(problems)} problem(s)\n{lines}")


class ScenarioRefused(ScenarioError):
    """A scenario file refused before its data is read: too large, holding YAML aliases, or
    nested past what the parser takes. Not a mistake in a scenario but a file that must not
    be expanded; readers other than the mock (``loopprobe validate``) refuse it as the mock
    does."""



_BLOCK_TYPES = ("text", "tool_use", "thinking", "redacted_thinking")


def _location(loc: tuple[Any, ...]) -> str:
    """A loc from pydantic as the user wrote it: rules[0].reply.text, without union tags."""
    path = ""
    previous: list[Any] = []
    for part in loc:
        after_reply = previous[-1:] == ["reply"] or (
            len(previous) >= 2 and previous[-2] == "replies" and isinstance(previous[-1], int))
        after_block = (len(previous) >= 2 and previous[-2] == "content"
                       and isinstance(previous[-1], int))
        after_union = previous[-1:] in (["kind"], ["last_user_text_contains"])
        is_tag = (after_reply and part in ("message", "error", "raw")) or (
            after_block and part in _BLOCK_TYPES) or (isinstance(part, str) and "[" in part) or (
            after_union and part == "str")  # the member of `str | list[str]` that failed
        previous.append(part)
        if is_tag:
            previous[-1] = None
            continue
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path or "(top level)"


def show(found: Any) -> str:
    try:
        shown = json.dumps(found, default=str)
    except (TypeError, ValueError, RecursionError):  # non-string keys (YAML dates), cycles, depth
        shown = reprlib.repr(found)
    return shown if len(shown) <= 80 else shown[:77] + "..."


def _members(annotation: Any) -> list[tuple[str | None, Any]]:
    """The types a field's annotation may hold, each with its union tag (pydantic's ``Tag``)."""
    found: list[tuple[str | None, Any]] = []
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        base, *metadata = typing.get_args(annotation)
        tags = [m.tag for m in metadata if hasattr(m, "tag")]
        inner = _members(base)
        if tags and len(inner) == 1:
            return [(tags[0], inner[0][1])]
        return inner
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            found += _members(arg)
        return found
    return [] if annotation is type(None) else [(None, annotation)]


def _step(annotation: Any, part: Any) -> Any:
    """The annotation one part of a pydantic error location further in; None if unknown."""
    if isinstance(part, str) and "[" in part:  # a validator's or union member's name
        return annotation
    members = _members(annotation)
    for tag, member in members:
        if tag is not None and tag == part:
            return member
    for _, member in members:
        origin, args = typing.get_origin(member), typing.get_args(member)
        if isinstance(part, int) and origin is list and args:
            return args[0]
        if isinstance(part, str) and origin is dict and len(args) == 2:
            return args[1]
        if isinstance(part, str) and isinstance(member, type) and issubclass(member, BaseModel) \
                and part in member.model_fields:
            return member.model_fields[part].annotation
    return None


def _keys_at(root: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The keys the model at ``loc`` (a location inside a ``root``) accepts."""
    annotation: Any = root
    for part in loc:
        annotation = _step(annotation, part)
        if annotation is None:
            return []
    for _, member in _members(annotation):
        if isinstance(member, type) and issubclass(member, BaseModel):
            return list(member.model_fields)
    return []


def close_keys(key: str, keys: list[str]) -> list[str]:
    return difflib.get_close_matches(key, keys, n=2, cutoff=0.6)


def _unknown_key(root: type[BaseModel], loc: tuple[Any, ...], where: str, value: Any) -> str:
    """One line for a key the scenario does not know: where, what is expected, the close
    match."""
    key, parent = str(loc[-1]), loc[:-1]
    keys = _keys_at(root, parent)
    inside = _location(parent) if parent else "the scenario"
    line = f"{where}: unknown key {json.dumps(key)} in {inside}"
    if keys:
        line += f"; expected one of {', '.join(keys)}"
    if close := close_keys(key, keys):
        line += f"; did you mean {' or '.join(json.dumps(c) for c in close)}?"
    return f"{line} (found {show({key: value})})"


def problems_of(error: ValidationError, root: type[BaseModel], *,
                skip_top_level: bool = False) -> list[str]:
    """Every problem pydantic found in data for ``root``, one line each: where (as the user
    wrote it), what was wrong, what was found; an unknown key with the keys expected."""
    problems = []
    for e in error.errors(include_url=False):
        if skip_top_level and not e["loc"]:
            continue  # the model-level duplicate-id check; _duplicate_ids locates it
        where = _location(tuple(e["loc"]))
        if e["type"] == "extra_forbidden" and e["loc"]:
            problems.append(_unknown_key(root, tuple(e["loc"]), where, e.get("input")))
            continue
        problems.append(f"{where}: {e['msg']} (found {show(e.get('input'))})")
    return problems
