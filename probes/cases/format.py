"""The case file: a user's own setup, what the scripted model does, and what they expect.

YAML (``loopprobe: cases/1``), read like a scenario (bounded, no aliases) and validated here;
``case.schema.json`` is generated from these models (``loopprobe schemas``). The scripted
model is the mock's own scenario language: each ``model`` item is one mock reply
(``mockapi.script.replies.Reply``), ``rules`` are mock rules; nothing of it is re-invented here.
The expectations are a closed set (``EXPECTATION_KINDS``), each checked by
``probes.cases.expectations``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from mockapi.script.replies import Message, Reply
from mockapi.script.scenario import Rule
from mockapi.script.scenario_errors import ScenarioError
from probes.core.safe_read import read_yaml

__all__ = ["CASES_FORMAT", "DEFAULT_REPLY", "DEFAULT_RULE", "EXPECTATION_KINDS", "Case",
           "CaseFile", "CaseFileError", "Expectation", "FileText", "HookResultSpec",
           "HookSpec", "RequestSpec", "ResultSpec", "Setup", "ToolResultSpec", "ToolSpec",
           "expectation_ids", "load_case_file"]

CASES_FORMAT = "cases/1"
# the rule answering what no case scripted (startup requests, turns beyond the script)
DEFAULT_RULE = "loopprobe-default"
DEFAULT_REPLY = Message(text="OK")
_NAME = r"^[a-z0-9][a-z0-9-]{0,62}$"
_SENTENCE = r"\S"  # a title holds more than spaces


class CaseFileError(ValueError):
    """A case file that is not what the format says: the file, where, expected and found."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


_PATH = "a path relative to the case file's folder, inside its repository"


class Setup(_Strict):
    workspace: str | None = Field(default=None, min_length=1, description="a folder copied "
                                  "into the sandbox's workspace (modes, binary files, links "
                                  f"kept): {_PATH}")
    home_config: str | None = Field(default=None, min_length=1, description="a folder copied "
                                    f"as ~/.claude: {_PATH}")
    plugin_dirs: list[Annotated[str, Field(min_length=1)]] = Field(
        default_factory=list, description="plugin folders, each copied read-only and passed "
        f"as --plugin-dir: {_PATH}")


class ToolSpec(_Strict):
    name: str = Field(min_length=1)
    input: dict[str, Any] | None = Field(default=None, description="these keys, with these "
                                         "values (a subset of the tool's input)")


class ToolResultSpec(ToolSpec):
    contains: str | None = None
    is_error: bool | None = None


class RequestSpec(_Strict):
    request: int | None = Field(default=None, ge=1, description="the Nth main request (from "
                                "1); default: any")
    text: str = Field(min_length=1)


class HookSpec(_Strict):
    event: str = Field(min_length=1)
    input: dict[str, Any] | None = None


class HookResultSpec(_Strict):
    event: str = Field(min_length=1)
    command_contains: str | None = None
    exit_code: int | None = None
    stdout_contains: str | None = None
    stderr_contains: str | None = None


class FileText(_Strict):
    path: str = Field(min_length=1)
    text: str


class ResultSpec(_Strict):
    model_config = ConfigDict(extra="forbid", frozen=True, json_schema_extra={"anyOf": [
        {"required": [name]} for name in ("subtype", "is_error", "terminal_reason", "exit_code")]})

    subtype: str | None = None
    is_error: bool | None = None
    terminal_reason: str | None = None
    exit_code: int | None = None

    @model_validator(mode="after")
    def _something(self) -> ResultSpec:
        if all(v is None for v in (self.subtype, self.is_error, self.terminal_reason,
                                   self.exit_code)):
            raise ValueError("expected at least one of subtype, is_error, terminal_reason, "
                             "exit_code")
        return self


EXPECTATION_KINDS: dict[str, str] = {
    "tool_called": "the client ran a matching tool call: its result came back, not an error",
    "tool_not_called": "no matching tool call got a result that is not an error",
    "tool_order": "the tools that ran, in order, hold these names in this order",
    "tool_result": "a matching tool call's result contains the text / has that is_error",
    "request_contains": "the request (the Nth main one, or any) holds the text",
    "hook_ran": "a hook command ran for the event, with matching input",
    "hook_not_ran": "no hook command ran for the event with matching input",
    "hook_result": "a hook command for the event exited, printed and said as given",
    "file_exists": "the workspace holds the file after the runs",
    "file_absent": "the workspace does not hold the file after the runs",
    "file_contains": "the workspace file holds the text",
    "result": "the run's result event and exit code are as given",
    "max_requests": "the client made at most this many main requests",
}


class Expectation(_Strict):
    """One of ``EXPECTATION_KINDS``, with an optional ``id`` and ``why``."""

    # the schema says "exactly one kind" as the validator does (an editor shows it too)
    model_config = ConfigDict(extra="forbid", frozen=True, json_schema_extra={"oneOf": [
        {"required": [kind]} for kind in EXPECTATION_KINDS]})

    id: str | None = Field(default=None, pattern=_NAME)
    why: str | None = Field(default=None, description="why you expect it (shown as the "
                            "claim's source)")
    tool_called: ToolSpec | None = None
    tool_not_called: ToolSpec | None = None
    tool_order: list[str] | None = Field(default=None, min_length=1)
    tool_result: ToolResultSpec | None = None
    request_contains: RequestSpec | None = None
    hook_ran: HookSpec | None = None
    hook_not_ran: HookSpec | None = None
    hook_result: HookResultSpec | None = None
    file_exists: str | None = None
    file_absent: str | None = None
    file_contains: FileText | None = None
    result: ResultSpec | None = None
    max_requests: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _exactly_one(self) -> Expectation:
        given = [k for k in EXPECTATION_KINDS if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"expected exactly one of {', '.join(EXPECTATION_KINDS)}; got "
                             f"{', '.join(given) if given else 'none'}")
        return self

    @property
    def kind(self) -> str:
        return next(k for k in EXPECTATION_KINDS if getattr(self, k) is not None)

    @property
    def value(self) -> Any:
        return getattr(self, self.kind)


class Case(_Strict):
    model_config = ConfigDict(extra="forbid", frozen=True, json_schema_extra={"oneOf": [
        {"required": ["prompt"]}, {"required": ["command"]}]})

    name: str = Field(pattern=_NAME, description="the probe's name")
    title: str = Field(min_length=1, pattern=_SENTENCE)
    prompt: str | None = None
    command: str | None = Field(default=None, pattern=r"^/\S", description="a slash command "
                                "and its arguments, sent as the prompt")
    tools: list[str] | None = Field(default=None, description="the tools offered (default: "
                                    "the client's own set)")
    max_turns: int | None = Field(default=None, ge=1)
    timeout: float = Field(default=120, gt=0, le=1800, description="seconds per client run")
    model: list[Reply] | None = Field(default=None, description="the scripted model: the "
                                      "reply to each main request, in order")
    rules: list[Rule] | None = Field(default=None, description="mock rules, instead of model")
    expect: list[Expectation] = Field(min_length=1)

    @model_validator(mode="after")
    def _one_each(self) -> Case:
        if (self.prompt is None) == (self.command is None):
            raise ValueError("expected exactly one of prompt and command")
        if self.model is not None and self.rules is not None:
            raise ValueError("expected model (replies in order) or rules (mock rules), not both")
        ids = expectation_ids(self)
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        if repeated:
            raise ValueError(f"expectation ids must be unique in a case; repeated: {repeated}")
        return self

    def scenario_rules(self) -> list[Rule]:
        """The case's model as mock rules, then the default answer for everything else."""
        if self.rules is not None:
            rules = list(self.rules)
        else:
            rules = [Rule(id=f"turn-{turn}", match={"kind": "main", "turn": turn},  # type: ignore[arg-type]
                          reply=reply) for turn, reply in enumerate(self.model or [], start=1)]
        return [*rules, Rule(id=DEFAULT_RULE, match={"kind": "any"},  # type: ignore[arg-type]
                             reply=DEFAULT_REPLY, repeat="always")]


def expectation_ids(case: Case) -> list[str]:
    """Each expectation's id: its own, or ``<kind>-<n>`` (n counts that kind in the case)."""
    counts: dict[str, int] = {}
    ids = []
    for expectation in case.expect:
        counts[expectation.kind] = counts.get(expectation.kind, 0) + 1
        ids.append(expectation.id or f"{expectation.kind.replace('_', '-')}-"
                                     f"{counts[expectation.kind]}")
    return ids


class CaseFile(_Strict):
    loopprobe: Literal["cases/1"] = Field(description="the format's version")
    name: str = Field(pattern=_NAME, description="the report's name")
    title: str = Field(min_length=1, pattern=_SENTENCE)
    summary: str = ""
    setup: Setup = Field(default_factory=Setup)
    cases: list[Case] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_cases(self) -> CaseFile:
        names = [c.name for c in self.cases]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"case names must be unique; repeated: {repeated}")
        return self


def _where(error: dict[str, Any]) -> str:
    return ".".join(str(part) for part in error.get("loc", ())) or "the file"


def _read(path: Path) -> Any:
    """The YAML of ``path``; a file that cannot be read or is not YAML in one line."""
    try:
        return read_yaml(path)
    except FileNotFoundError:
        raise CaseFileError(f"{path}: expected a case file, but there is no such file"
                            ) from None
    except ScenarioError as error:  # not YAML (a refused file is a ReadRefused, said as is)
        said = " ".join("; ".join(error.problems).split())
        raise CaseFileError(f"{path}: expected a YAML case file, found {said}") from None
    except (OSError, ValueError) as error:  # a name too long or holding a NUL, an I/O error
        cause = error.strerror if isinstance(error, OSError) and error.strerror else error
        raise CaseFileError(f"{path!s:.300}: expected a readable case file, but {cause}"
                            ) from None


def load_case_file(path: Path) -> CaseFile:
    """``path`` read and validated; a ``CaseFileError`` naming the file, the place, what was
    expected and what arrived."""
    data = _read(path)
    if not isinstance(data, dict) or data.get("loopprobe") != CASES_FORMAT:
        found = data.get("loopprobe") if isinstance(data, dict) else type(data).__name__
        raise CaseFileError(f"{path}: expected a case file (a mapping with loopprobe: "
                            f"{CASES_FORMAT}), found {found!r}")
    try:
        return CaseFile.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        more = f" (and {error.error_count() - 1} more)" if error.error_count() > 1 else ""
        said = " ".join(str(first.get("msg")).split())
        raise CaseFileError(f"{path}: at {_where(dict(first))}: {said}; found "
                            f"{str(first.get('input'))[:120]!r}{more}") from None
