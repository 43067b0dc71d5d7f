#!/usr/bin/env python3
"""PreToolUse hook (Bash): refuse recursive forced deletion.

Exit 2 blocks the tool call; Claude Code gives what this prints on stderr to
the model as the reason. Any other command passes (exit 0, no output).
"""
import json
import re
import sys

# rm as a command (at the start, or after ; & | ( or `, sudo allowed) given both -r/-R
# (or --recursive) and -f (or --force), in any order or spelling.
_RM = re.compile(r"(?:^|[;&|(`])\s*(?:sudo\s+)?rm\s+(?P<args>[^;&|)`]*)")


def is_rm_rf(command: str) -> bool:
    for match in _RM.finditer(command):
        args = match.group("args").split()
        flags = "".join(a[1:] for a in args if a.startswith("-") and not a.startswith("--"))
        recursive = "r" in flags.lower() or "--recursive" in args
        force = "f" in flags or "--force" in args
        if recursive and force:
            return True
    return False


def main() -> int:
    event = json.load(sys.stdin)
    command = (event.get("tool_input") or {}).get("command") or ""
    if is_rm_rf(command):
        print(f"guard-rails blocked: `{command}` deletes recursively without asking. "
              "Remove the files you mean by name instead.", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
