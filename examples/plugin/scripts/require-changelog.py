#!/usr/bin/env python3
"""Stop hook: do not let the model stop while the project has no CHANGELOG.md.

Prints {"decision": "block", "reason": ...} on stdout (exit 0); Claude Code
gives the reason to the model and continues. Once the hook has blocked a stop
in this turn (stop_hook_active), it lets the next one through so that a model
unable to comply does not loop forever.
"""
import json
import os
import sys


def main() -> int:
    event = json.load(sys.stdin)
    project = os.environ.get("CLAUDE_PROJECT_DIR") or event.get("cwd") or os.getcwd()
    if os.path.exists(os.path.join(project, "CHANGELOG.md")):
        return 0
    if event.get("stop_hook_active"):
        print("guard-rails: CHANGELOG.md is still missing; letting the session stop",
              file=sys.stderr)
        return 0
    json.dump({"decision": "block",
               "reason": "guard-rails: CHANGELOG.md is missing. Create it with one line "
                         "per change you made, then finish."}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
