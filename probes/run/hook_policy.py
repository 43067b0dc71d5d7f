"""What the harness answers a hook call with: a probe's hook policy, applied on the host.

The policy maps a hook event name to a rule or a list of rules (the first that applies wins):

    {"Stop": {"action": "block", "reason": "...", "times": 1},
     "PreToolUse": [{"action": "deny", "tools": ["Edit"], "reason": "..."},
                    {"action": "update_input", "tools": ["Read"], "input": {...}}],
     "PostToolUse": {"action": "record", "sleep": 0.5}}

A rule applies to the calls its ``tools`` (tool names) and ``input_contains`` (a substring
of the JSON tool input) select; ``sleep`` holds the call that long (to widen a tool's time
window); ``times`` limits how many calls of that event the action applies to (default:
all); ``unless_active`` skips Stop blocks on a re-entry (``stop_hook_active``).

The client's hook command (``hook_recorder.py``, a relay) only carries the call here and the
answer back: the policy and the count of earlier calls never sit where the client can
change them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["decide", "rules_for"]


def rules_for(policy: Mapping[str, Any], event: str) -> list[Mapping[str, Any]]:
    rules = policy.get(event, [])
    listed = [rules] if isinstance(rules, Mapping) else list(rules)
    return [r for r in listed if isinstance(r, Mapping)]


def _applies(payload: Mapping[str, Any], rule: Mapping[str, Any]) -> bool:
    tools = rule.get("tools")
    if tools is not None and payload.get("tool_name") not in tools:
        return False
    needle = rule.get("input_contains")
    return needle is None or needle in json.dumps(payload.get("tool_input"))


def _decision(event: str, payload: Mapping[str, Any], rule: Mapping[str, Any],
              seen: int) -> dict[str, Any] | None:
    action = rule.get("action", "record")
    if "times" in rule and seen >= rule["times"]:
        return None
    if action == "block" and event in ("Stop", "SubagentStop"):
        if rule.get("unless_active") and payload.get("stop_hook_active"):
            return None
        return {"decision": "block", "reason": rule.get("reason", "blocked by loopprobe")}
    if action == "block":
        return {"decision": "block", "reason": rule.get("reason", "blocked by loopprobe")}
    if action == "deny":
        return {"hookSpecificOutput": {"hookEventName": event, "permissionDecision": "deny",
                                       "permissionDecisionReason": rule.get("reason", "denied")}}
    if action == "update_input":
        return {"hookSpecificOutput": {"hookEventName": event, "permissionDecision": "allow",
                                       "updatedInput": rule["input"]}}
    if action == "output":
        return dict(rule["output"])
    return None


def decide(policy: Mapping[str, Any], event: str, payload: Mapping[str, Any],
           seen: int) -> tuple[dict[str, Any] | None, float]:
    """The answer to the ``seen``-th earlier call of ``event`` (None: no output), and how
    long to hold the call first."""
    applicable = [r for r in rules_for(policy, event) if _applies(payload, r)]
    decision = None
    for rule in applicable:
        decision = _decision(event, payload, rule, seen)
        if decision is not None:
            break
    sleep = max([float(r.get("sleep", 0)) for r in applicable] or [0.0])
    return decision, sleep
