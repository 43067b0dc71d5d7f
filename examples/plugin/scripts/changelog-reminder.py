#!/usr/bin/env python3
"""PostToolUse hook (Write|Edit): remind the model to note the change in CHANGELOG.md.

Prints hookSpecificOutput.additionalContext as JSON on stdout (exit 0); Claude
Code adds that text to what the model sees next. Edits of CHANGELOG.md itself
get no reminder.
"""
import json
import os
import sys


def main() -> int:
    event = json.load(sys.stdin)
    path = (event.get("tool_input") or {}).get("file_path") or ""
    if os.path.basename(path) == "CHANGELOG.md":
        return 0
    reminder = (f"guard-rails: {os.path.basename(path) or 'a file'} changed; "
                "add a line about it to CHANGELOG.md before you finish.")
    json.dump({"hookSpecificOutput": {"hookEventName": "PostToolUse",
                                      "additionalContext": reminder}}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
