"""Scenarios: an ordered list of rules (match -> reply or replies), loaded and validated.

A scenario file is YAML or JSON with the same shape as the Python models:

    name: tool-then-text
    rules:
      - id: read
        match: {kind: main, turn: 1}
        reply:
          content:
            - {type: tool_use, id: toolu_1, name: Read, input: {file_path: "{workspace}/a.txt"}}
      - match: {tool_result_for: toolu_1}
        reply: {text: DONE}

``{name}`` in any string of a reply is a placeholder filled from the run's
context (``render``); ``{{name}}`` is a literal ``{name}``.

A scenario that cannot be used raises ``ScenarioError`` (``mockapi.script.scenario_errors``, which
words each problem; re-exported here) listing every problem found in one load.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from mockapi.script.events import prepare
from mockapi.script.matching import Match
from mockapi.script.replies import Reply
from mockapi.script.scenario_errors import ScenarioError, ScenarioRefused, close_keys, problems_of, show

__all__ = [
    "MAX_SCENARIO_BYTES",
    "SCHEMA_VERSION",
    "Rule",
    "Scenario",
    "ScenarioError",
    "ScenarioRefused",
    "decode_scenario_text",
    "load_scenario",
    "parse_scenario",
    "reply_adapter",
]

SCHEMA_VERSION = 1


class Rule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str | None = Field(default=None, description="default: rule-<position, from 1>")
    match: Match = Field(default_factory=Match)
    reply: Reply | None = None
    replies: list[Reply] | None = Field(default=None, min_length=1)
    repeat: Literal["once", "always"] = Field(
        default="once",
        description="once: each reply is served once, then the rule is spent; "
                    "always: the last reply keeps being served",
    )

    @model_validator(mode="after")
    def _one_reply_form(self) -> Rule:
        if (self.reply is None) == (self.replies is None):
            raise ValueError("give exactly one of `reply` or `replies`")
        return self

    def reply_list(self) -> list[Any]:
        return [self.reply] if self.reply is not None else list(self.replies or [])


class Scenario(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: Literal[1] = 1
    name: str = "unnamed"
    description: str = ""
    classifier: Literal["claude-code", "plain"] = Field(
        default="plain",
        description="how request kinds are told apart. plain (default): every request is the "
                    "caller's own, kind 'main'; claude-code: requests are told apart as Claude "
                    "Code sends them (compaction, subagent, warmup, side requests such as "
                    "titles and summaries), for scenarios that script Claude Code",
    )
    side_replies: Literal["auto", "none"] = Field(
        default="auto",
        description="with classifier claude-code, auto: warmup and side requests that no rule "
                    "matches get a built-in neutral answer (journaled with builtin_reply) and "
                    "never reach the script",
    )
    validation: Literal["strict", "lenient"] = Field(
        default="strict",
        description="strict: a request the real API refuses with 400 invalid_request_error "
                    "(empty messages, a role or block type it does not know, unpaired "
                    "tool_use/tool_result...; see mockapi.check.validation) gets that 400; lenient: "
                    "only the JSON, required-field, header and key checks are made",
    )
    thread_idle_seconds: float = Field(
        default=300, gt=0,
        description="a message thread expires this long after its last request (the API: 5 "
                    "minutes)")
    message_ids: Literal["unguessable", "sequential"] = Field(
        default="unguessable",
        description="the ids of the mock's replies, by which a message thread is continued. "
                    "unguessable (default): msg_loopprobe_<seq>_<24 random hex>; sequential: "
                    "msg_loopprobe_<seq>, the same run after run (the harness's choice). "
                    "Either way a thread answers only the API key that created it")
    models: list[str] = Field(
        default_factory=lambda: ["claude-sonnet-4-5", "claude-opus-4-1", "claude-haiku-4-5"])
    rules: list[Rule] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique_rule_ids(self) -> Scenario:
        seen: set[str] = set()
        for position, rule in enumerate(self.rules, start=1):
            rule_id = rule.id or f"rule-{position}"
            if rule_id in seen:
                raise ValueError(f"rule id {rule_id!r} is used twice")
            seen.add(rule_id)
        return self

    def rule_ids(self) -> list[str]:
        return [r.id or f"rule-{i}" for i, r in enumerate(self.rules, start=1)]

    def placeholders(self) -> set[str]:
        found: set[str] = set()
        for rule in self.rules:
            for reply in rule.reply_list():
                _walk_strings(reply.model_dump(mode="json"), lambda s: _collect(s, found))
        return found

    def render(self, context: Mapping[str, str]) -> Scenario:
        """Fill ``{name}`` placeholders in every reply; a name without a value is an error."""
        missing = sorted(self.placeholders() - set(context))
        if missing:
            raise ScenarioError(self.name, [
                f"placeholder {{{name}}} has no value; the run provides: "
                f"{', '.join(sorted(context)) or 'nothing'}" for name in missing
            ])
        data = self.model_dump(mode="json", exclude_unset=True)
        for rule in data.get("rules", []):
            for key in ("reply", "replies"):
                if key in rule:
                    rule[key] = _map_strings(rule[key], lambda s: _fill(s, context))
        return Scenario.model_validate(data)


_PLACEHOLDER = re.compile(r"\{\{([A-Za-z_][A-Za-z0-9_]*)\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _collect(value: str, found: set[str]) -> None:
    for m in _PLACEHOLDER.finditer(value):
        if m.group(2):
            found.add(m.group(2))


def _fill(value: str, context: Mapping[str, str]) -> str:
    def sub(m: re.Match[str]) -> str:
        if m.group(1):
            return "{" + m.group(1) + "}"
        return str(context[m.group(2)])
    return _PLACEHOLDER.sub(sub, value)


def _walk_strings(value: Any, visit: Any) -> None:
    _map_strings(value, lambda s: (visit(s), s)[1])


def _map_strings(value: Any, fn: Any) -> Any:
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, list):
        return [_map_strings(v, fn) for v in value]
    if isinstance(value, dict):
        return {k: _map_strings(v, fn) for k, v in value.items()}
    return value


def _duplicate_ids(data: dict[str, Any]) -> list[str]:
    """Every reused rule id, at the place it is reused."""
    rules = data.get("rules")
    if not isinstance(rules, list):
        return []
    first: dict[str, int] = {}
    problems = []
    for position, rule in enumerate(rules):
        if not isinstance(rule, dict):
            continue
        rule_id = rule.get("id") or f"rule-{position + 1}"
        if not isinstance(rule_id, str):
            continue
        if rule_id in first:
            problems.append(f"rules[{position}].id: rule id {rule_id!r} is used twice, first by "
                            f"rules[{first[rule_id]}] (found {json.dumps(rule_id)})")
        else:
            first[rule_id] = position
    return problems


def parse_scenario(data: Any, source: str = "<scenario>") -> Scenario:
    """Validate already-decoded scenario data; raise ScenarioError listing every problem."""
    if not isinstance(data, dict):
        raise ScenarioError(source, [
            f"(top level): expected a mapping with `rules`, found {type(data).__name__}"])
    # an editor's pointer to the scenario schema (probes/report/json_schemas/scenario.schema.json)
    data = {k: v for k, v in data.items() if k != "$schema"}
    duplicates = _duplicate_ids(data)
    forms = _form_problems(data)
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as error:
        problems = problems_of(error, Scenario, skip_top_level=bool(duplicates))
        problems += [p for p in forms if p not in problems]
        raise ScenarioError(source, problems + duplicates) from None
    unservable = _unservable(scenario, data)
    if unservable:
        raise ScenarioError(source, unservable)
    return scenario


def _one_of(where: str, value: Any, first: str, second: str, problems: list[str]) -> None:
    if isinstance(value, dict) and (value.get(first) is None) == (value.get(second) is None):
        problems.append(f"{where}: Value error, give exactly one of `{first}` or `{second}` "
                        f"(found {show(value)})")


def _form_problems(data: dict[str, Any]) -> list[str]:
    """Fields that must not come together (or apart), found even beside field errors.

    pydantic runs a model's own checks only once all its fields are valid; these are
    looked for in the raw data so that one load lists every problem.
    """
    problems: list[str] = []
    rules = data.get("rules")
    for i, rule in enumerate(rules if isinstance(rules, list) else []):
        if not isinstance(rule, dict):
            continue
        misspelled = [k for k in rule if isinstance(k, str) and k not in Rule.model_fields
                      and close_keys(k, ["reply", "replies"])]
        if not misspelled or "reply" in rule or "replies" in rule:
            # else the misspelled key's own problem says what is missing
            _one_of(f"rules[{i}]", rule, "reply", "replies", problems)
        replies = [(f"rules[{i}].reply", rule.get("reply"))]
        if isinstance(rule.get("replies"), list):
            replies += [(f"rules[{i}].replies[{j}]", r) for j, r in enumerate(rule["replies"])]
        for where, reply in replies:
            if not isinstance(reply, dict):
                continue
            if "error" in reply:
                continue
            if "raw" in reply:
                raw = reply["raw"]
                chunks = raw.get("chunks") if isinstance(raw, dict) else None
                for k, chunk in enumerate(chunks if isinstance(chunks, list) else []):
                    _one_of(f"{where}.raw.chunks[{k}]", chunk, "data", "data_base64", problems)
                continue
            if reply.get("text") is not None and reply.get("content"):
                problems.append(f"{where}: Value error, give either `text` or `content`, not "
                                f"both (found {show(reply)})")
            if "stall" in reply:
                _one_of(f"{where}.stall", reply["stall"], "after_events", "before_event",
                        problems)
    return problems


def _unservable(scenario: Scenario, data: dict[str, Any]) -> list[str]:
    """Replies the models accept but the mock cannot encode: invalid base64, integers
    beyond 64 bits, JSON nested deeper than orjson writes."""
    problems = []
    for i, rule in enumerate(scenario.rules):
        places = ([(f"rules[{i}].reply", rule.reply)] if rule.reply is not None else
                  [(f"rules[{i}].replies[{j}]", r) for j, r in enumerate(rule.replies or [])])
        for where, reply in places:
            try:
                prepare(reply, "check")
            except (TypeError, ValueError) as error:  # orjson's errors, binascii.Error
                problems.append(f"{where}: cannot be served: {error} "
                                f"(found {show(_raw_at(data, where, reply))})")
    return problems


def _raw_at(data: Any, where: str, default: Any) -> Any:
    """The value at ``where`` (rules[0].replies[1]) in the data as given, else ``default``."""
    node = data
    for index, key in re.findall(r"\[(\d+)\]|(\w+)", where):
        try:
            node = node[int(index)] if index else node[key]
        except (LookupError, TypeError):
            return default
    return node


class _AliasRefused(yaml.composer.ComposerError):
    pass


class _NoAliasLoader(yaml.SafeLoader):
    """YAML without aliases: a scenario is data, and aliases let a few hundred bytes expand
    into gigabytes (a "billion laughs")."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise _AliasRefused(
                None, None, f"expected plain data, found the alias *{event.anchor}: aliases "
                "are refused in scenarios (repeat the value instead)", event.start_mark)
        return super().compose_node(parent, index)


def decode_scenario_text(content: str | bytes, source: str) -> Any:
    suffix = Path(source).suffix.lower()
    try:
        if suffix == ".json":
            return json.loads(content)
        return yaml.load(content, Loader=_NoAliasLoader)
    except _AliasRefused as error:
        mark = error.problem_mark
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        raise ScenarioRefused(source, [f"not valid YAML: {error.problem}{where}"]) from None
    except (ValueError, yaml.YAMLError) as error:
        kind = "JSON" if suffix == ".json" else "YAML"
        raise ScenarioError(source, [f"not valid {kind}: {error}"]) from None
    except RecursionError:
        kind = "JSON" if suffix == ".json" else "YAML"
        raise ScenarioRefused(source, [f"not valid {kind}: nested too deeply to be read"]) from None


MAX_SCENARIO_BYTES = 8 * 1024 * 1024  # the largest committed scenario is a few KB


def load_scenario(path: str | Path) -> Scenario:
    """Load a scenario from a .yaml/.yml/.json file (at most MAX_SCENARIO_BYTES)."""
    source = str(path)
    try:
        # O_NONBLOCK: a named pipe opens at once instead of waiting for a writer, and is
        # then refused as not a regular file, unread
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as handle:
            mode = os.fstat(fd).st_mode
            if stat.S_ISDIR(mode):
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
            if not stat.S_ISREG(mode):
                raise ScenarioRefused(source, ["(top level): expected a regular file, found a "
                                               "named pipe, socket or device"])
            content = handle.read(MAX_SCENARIO_BYTES + 1)
    except OSError as error:
        raise ScenarioError(source, [f"cannot read the file: {error.strerror}"]) from None
    if len(content) > MAX_SCENARIO_BYTES:
        raise ScenarioRefused(source, [f"(top level): expected a file of at most "
                                     f"{MAX_SCENARIO_BYTES} bytes, found a larger one"])
    return parse_scenario(decode_scenario_text(content, source), source)


reply_adapter: TypeAdapter[Any] = TypeAdapter(Reply)
