"""What a probe's caller writes while a turn runs: stream-json on the client's stdin.

Claude Code's print mode reads ``--input-format stream-json``: user messages and control
requests (``interrupt``, ``set_model``, ``set_permission_mode``, ...) one JSON object per line,
and with ``--permission-prompt-tool stdio`` it asks the caller ``can_use_tool`` by a control
request on stdout. The Claude Agent SDK drives the CLI exactly this way. A probe scripts what
the caller writes and when (``StreamedInput``); ``probes.run.conversation`` carries the
script out while the client runs. These declarations are leaf data (but for
``probes.core.names``, whose ``CatalogError`` they raise): the probe model imports them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from probes.core.names import CatalogError

__all__ = ["PermissionAnswer", "Step", "StreamedInput", "control_request", "user_message"]

_RESULT_EVENT: Mapping[str, Any] = {"type": "result"}


def user_message(text: str) -> dict[str, Any]:
    """A user message as the SDK writes it to the CLI's stdin (its ``uuid`` is given when
    it is written, unless set here)."""
    return {"type": "user", "message": {"role": "user", "content": text},
            "parent_tool_use_id": None, "session_id": ""}


def control_request(subtype: str, **fields: Any) -> dict[str, Any]:
    """A control request (its ``request_id`` is given when it is written)."""
    return {"type": "control_request", "request": {"subtype": subtype, **fields}}


@dataclass(frozen=True)
class Step:
    """One line the caller writes to the client's stdin, and the moment it is written.

    The moment comes after the previous step was written: once a model request that the
    scenario rule ``after_rule`` answers reached the mock, or once the client printed an
    event including the fields of ``after_event`` (e.g. ``{"type": "assistant"}``), or at
    once when neither is given.
    """

    line: Mapping[str, Any]
    after_rule: str | None = None
    after_event: Mapping[str, Any] | None = None
    after_file: str | None = None  # once this file exists in the workspace (a tool made it)

    def __post_init__(self) -> None:
        given = [name for name in ("after_rule", "after_event", "after_file")
                 if getattr(self, name) is not None]
        if len(given) > 1:
            raise CatalogError(f"a step waits for one moment; got {', '.join(given)}")
        if self.line.get("type") not in ("user", "control_request"):
            raise CatalogError(f"a step writes a user message or a control request; got a line "
                             f"of type {self.line.get('type')!r}")

    def moment(self) -> str:
        if self.after_rule is not None:
            return f"after a request answered by rule {self.after_rule!r} reached the mock"
        if self.after_event is not None:
            return f"after the client printed an event including {dict(self.after_event)}"
        if self.after_file is not None:
            return f"after {self.after_file} appeared in the workspace"
        return "at once"

    @property
    def waits(self) -> bool:
        return any(m is not None for m in (self.after_rule, self.after_event, self.after_file))

    def shown(self) -> dict[str, Any]:
        return {"line": dict(self.line), "when": self.moment()}


@dataclass(frozen=True)
class PermissionAnswer:
    """How the caller answers the client's ``can_use_tool`` request for ``tool`` (``*``: any).
    ``allow`` runs the tool with ``updated_input`` (None: the input as asked); ``deny``
    refuses it with ``message``."""

    tool: str = "*"
    behavior: Literal["allow", "deny"] = "allow"
    message: str = ""
    updated_input: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.behavior not in ("allow", "deny"):
            raise CatalogError(f"a permission answer is 'allow' or 'deny', got {self.behavior!r}")
        if self.behavior == "deny" and self.updated_input is not None:
            raise CatalogError("a denial carries no updated_input")

    def response(self, asked: Mapping[str, Any]) -> dict[str, Any]:
        if self.behavior == "deny":
            return {"behavior": "deny", "message": self.message}
        return {"behavior": "allow",
                "updatedInput": dict(self.updated_input if self.updated_input is not None
                                     else asked)}


@dataclass(frozen=True)
class StreamedInput:
    """What the caller writes while the run goes on. The invocation's prompt is the first
    user message; then ``steps`` in order. stdin is closed at the first event including
    ``close_on`` printed after the last step was written (the client then finishes and
    exits), or ``close_after`` seconds after it. ``permissions``: None bypasses
    permissions as every other run does; otherwise the client asks the caller
    (``--permission-prompt-tool stdio``) and the first answer whose tool matches replies
    (no match: deny)."""

    steps: tuple[Step, ...] = ()
    permissions: tuple[PermissionAnswer, ...] | None = None
    close_on: Mapping[str, Any] = field(default_factory=lambda: dict(_RESULT_EVENT))
    # a claim's horizon: stdin is closed this many seconds after the last step even if no
    # event including ``close_on`` came (None: only the run's timeout ends the wait)
    close_after: float | None = None

    def answer(self, tool: str) -> PermissionAnswer:
        for answer in self.permissions or ():
            if answer.tool in ("*", tool):
                return answer
        return PermissionAnswer(tool, "deny", f"no scripted permission answer for {tool}")

    def shown(self) -> dict[str, Any]:
        return {"steps": [s.shown() for s in self.steps],
                "permissions": None if self.permissions is None else [
                    {"tool": a.tool, "behavior": a.behavior, "message": a.message,
                     "updated_input": a.updated_input} for a in self.permissions],
                "close_on": dict(self.close_on), "close_after": self.close_after}
