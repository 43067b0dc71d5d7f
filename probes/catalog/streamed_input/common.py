"""What a streamed run shows, read the same way by every streamed-input probe: its output
events, what the caller wrote on stdin, the control requests and their answers, the command
lifecycle; the underscored helpers are this package's own.
"""

from __future__ import annotations

from typing import Any

from probes.core.checks import Checks
from probes.core.evidence import Evidence

__all__ = ["ASSISTANT", "PERMISSION_DOCS", "RESULT", "SDK_DOCS", "check_cancelled",
           "check_lifecycle_emitted"]


SDK_DOCS = "https://docs.claude.com/en/docs/agent-sdk/streaming-vs-single-mode"
PERMISSION_DOCS = "https://docs.claude.com/en/docs/agent-sdk/permissions"
ASSISTANT: dict[str, Any] = {"type": "assistant"}
RESULT: dict[str, Any] = {"type": "result"}


def _events(ev: Evidence, run: str, kind: str) -> list[dict[str, Any]]:
    record = ev.run(run)
    return [e for e in (record.output.events if record else []) if e.get("type") == kind]


def _stdin(ev: Evidence, run: str) -> list[dict[str, Any]]:
    record = ev.run(run)
    return record.stdin if record else []


def _control_requests(ev: Evidence, run: str, subtype: str) -> list[dict[str, Any]]:
    # the client's output is input: a request that is not an object is no such request
    return [e["request"] for e in _events(ev, run, "control_request")
            if isinstance(e.get("request"), dict) and e["request"].get("subtype") == subtype]


def _control_response(ev: Evidence, run: str, request_id: str) -> str | None:
    """The subtype (success, error) of the client's answer to one of our control requests."""
    for event in _events(ev, run, "control_response"):
        response = event.get("response") or {}
        if response.get("request_id") == request_id:
            return str(response.get("subtype"))
    return None


def _lifecycle(ev: Evidence, run: str) -> dict[str, list[str]]:
    """command_lifecycle states by command uuid, in the order printed."""
    states: dict[str, list[str]] = {}
    for event in _events(ev, run, "command_lifecycle"):
        states.setdefault(str(event.get("command_uuid")), []).append(str(event.get("state")))
    return states


def _written_uuid(ev: Evidence, run: str, needle: str) -> str | None:
    """The uuid of the user line the harness wrote that holds ``needle``."""
    for entry in _stdin(ev, run):
        line = entry.get("line") or {}
        if line.get("type") == "user" and needle in str(line.get("message")):
            return str(line.get("uuid"))
    return None


def _timeline(ev: Evidence, run: str, uuid: str | None, tool_use_id: str) -> list[str]:
    """The printed order of one command's states and of the tool's result."""
    record = ev.run(run)
    order = []
    for event in record.output.events if record else []:
        if event.get("type") == "command_lifecycle" and event.get("command_uuid") == uuid:
            order.append(str(event.get("state")))
        elif event.get("type") == "user" and any(
                isinstance(b, dict) and b.get("tool_use_id") == tool_use_id
                for b in (event.get("message") or {}).get("content") or []):
            order.append("tool_result")
    return order


def check_lifecycle_emitted(ev: Evidence, c: Checks, run: str, claim: str,
                            prefix: str = "") -> bool:
    """That this version prints command_lifecycle events at all: one that never does in the
    run lacks them (the claim is absent); printed but not as stated, the behaviour checks
    decide."""
    record = ev.run(run)
    printed = [str(e.get("type")) for e in (record.output.events if record else [])]
    emitted = "command_lifecycle" in printed
    return c.reach(f"{prefix}{run}.lifecycle-emitted", claim,
                   "this version prints command_lifecycle events in a streamed run",
                   held=emitted, absent=True,
                   expected="command_lifecycle among the run's printed event types",
                   observed="command_lifecycle printed" if emitted else
                   f"no command_lifecycle event; the run printed {sorted(set(printed))}",
                   evidence=f"run {run}: the types of the printed events")


def check_cancelled(ev: Evidence, c: Checks, run: str, prompt: str, claim: str) -> None:
    check_lifecycle_emitted(ev, c, run, claim)
    uuid = _written_uuid(ev, run, prompt)
    c.equal(f"{run}.prompt-cancelled", claim,
            "the interrupted turn's command (the prompt) ends cancelled",
            expected=["queued", "started", "cancelled"],
            observed=_lifecycle(ev, run).get(str(uuid), []),
            evidence=f"run {run}: command_lifecycle events of the prompt's uuid {uuid}")


def _tool_results_printed(ev: Evidence, run: str) -> list[dict[str, Any]]:
    record = ev.run(run)
    return record.output.tool_results() if record else []
