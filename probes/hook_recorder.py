"""A hook command for probes: records each hook call with a timestamp, then applies a policy.

Run by the client as ``python -I -S hook_recorder.py POLICY.json LOG.jsonl``; stdlib
only, so it starts fast and needs nothing from the caller's environment. The
policy maps a hook event name to a rule or a list of rules (the first that applies wins):

    {"Stop": {"action": "block", "reason": "...", "times": 1},
     "PreToolUse": [{"action": "deny", "tools": ["Edit"], "reason": "..."},
                    {"action": "update_input", "tools": ["Read"], "input": {...}}],
     "PostToolUse": {"action": "record", "sleep": 0.5}}

A rule applies to the calls its ``tools`` (tool names) and ``input_contains`` (a
substring of the JSON tool input) select; ``sleep`` holds the call that long
(to widen a tool's time window); ``times`` limits how many calls of that event
the action applies to (default: all); ``unless_active`` skips Stop blocks on a
re-entry (``stop_hook_active``).
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from typing import Any


def _count_previous(log_path: str, event: str) -> int:
    try:
        with open(log_path, encoding="utf-8") as handle:
            return sum(1 for line in handle
                       if (entry := json.loads(line)).get("event") == event and "input" in entry)
    except FileNotFoundError:
        return 0


def _applies(payload: dict[str, Any], rule: dict[str, Any]) -> bool:
    tools = rule.get("tools")
    if tools is not None and payload.get("tool_name") not in tools:
        return False
    needle = rule.get("input_contains")
    return needle is None or needle in json.dumps(payload.get("tool_input"))


def _decide(event: str, payload: dict[str, Any], rule: dict[str, Any],
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
        output: dict[str, Any] = rule["output"]
        return output
    return None


def main(argv: list[str]) -> int:
    policy_path, log_path = argv[1], argv[2]
    started = time.time()
    raw = sys.stdin.read()
    try:
        payload = json.loads(raw)
    except ValueError:
        payload = {"unparsed_stdin": raw}
    event = payload.get("hook_event_name", "unknown")
    with open(policy_path, encoding="utf-8") as handle:
        rules = json.load(handle).get(event, [])
    rules = [rules] if isinstance(rules, dict) else rules
    with open(log_path, "a+", encoding="utf-8") as log:
        fcntl.flock(log, fcntl.LOCK_EX)
        seen = _count_previous(log_path, event)
        applicable = [r for r in rules if _applies(payload, r)]
        decision = None
        for rule in applicable:
            decision = _decide(event, payload, rule, seen)
            if decision is not None:
                break
        sleep = max([float(r.get("sleep", 0)) for r in applicable] or [0])
        entry = {"event": event, "started": started, "pid": os.getpid(), "index": seen,
                 "input": payload, "decision": decision}
        log.write(json.dumps(entry, sort_keys=True) + "\n")
        log.flush()
        fcntl.flock(log, fcntl.LOCK_UN)
    if sleep:
        time.sleep(sleep)
    with open(log_path, "a", encoding="utf-8") as log:
        fcntl.flock(log, fcntl.LOCK_EX)
        log.write(json.dumps({"event": event, "finished": time.time(), "pid": os.getpid(),
                              "index": seen, "tool_use_id": payload.get("tool_use_id")}) + "\n")
        fcntl.flock(log, fcntl.LOCK_UN)
    if decision is not None:
        print(json.dumps(decision))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
