"""When each tool ran, as every tool-scheduling check reads it: its window from the hook
calls, and where a reader finds the times compared."""

from __future__ import annotations

from typing import Any

from probes.core.checks import Unmeasured
from probes.core.evidence import Evidence

__all__ = ["TIMELINE", "tool_windows", "unpaired"]

# where a reader finds the times these checks compare (hook calls and response ends of each
# run, in ms from the run's start)
TIMELINE = "timeline in <report>.timing.json"


def tool_windows(ev: Evidence) -> dict[str, dict[str, Any]]:
    """tool_use_id -> {name, start (PreToolUse called), end (PostToolUse called)}."""
    windows: dict[str, dict[str, Any]] = {}
    for call in ev.hook_calls:
        payload = call.get("input") or {}
        tool_id = payload.get("tool_use_id")
        if not tool_id or "started" not in call:
            continue
        window = windows.setdefault(tool_id, {"name": payload.get("tool_name")})
        key = {"PreToolUse": "start", "PostToolUse": "end"}.get(str(call.get("event")))
        if key:
            window[key] = call["started"]
    return windows


def unpaired(ev: Evidence) -> Unmeasured | None:
    """Why no window can be measured, when hook calls were recorded but none names its tool
    call (before 2.0.43 the hook input had no tool_use_id): the windows are unmeasured, not
    missing. None when some call names its tool call, or no hook call was recorded at all."""
    calls = [c for c in ev.hook_calls if c.get("event") in ("PreToolUse", "PostToolUse")]
    if calls and not any((c.get("input") or {}).get("tool_use_id") for c in calls):
        return Unmeasured(f"none of the {len(calls)} PreToolUse/PostToolUse hook calls names "
                          "its tool call (no tool_use_id in the hook input)")
    return None
