"""Run one invocation through the Claude Agent SDK and print its messages as stream-json lines.

Executed with the SDK's own venv python (``python agent_sdk_driver.py SPEC_JSON``), so it
imports nothing of loopprobe: the spec carries everything. The printed events use the
shapes of Claude Code's stream-json (``type``/``subtype``, ``message.content``, the final
``result``), so the same checks read both clients.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import Any

import claude_agent_sdk
from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    ResultMessage,
    SystemMessage,
    UserMessage,
    query,
)

BLOCK_TYPES = {"TextBlock": "text", "ToolUseBlock": "tool_use", "ToolResultBlock": "tool_result",
               "ThinkingBlock": "thinking", "RedactedThinkingBlock": "redacted_thinking"}


def bundled_cli() -> Path:
    return Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude"


def _block(block: Any) -> Any:
    if not dataclasses.is_dataclass(block):
        return block
    data = dataclasses.asdict(block)  # type: ignore[arg-type]
    return {"type": BLOCK_TYPES.get(type(block).__name__, type(block).__name__), **data}


def _content(content: Any) -> Any:
    return [_block(b) for b in content] if isinstance(content, list) else content


def event(message: Any) -> dict[str, Any]:
    if isinstance(message, SystemMessage):
        return {"type": "system", "subtype": message.subtype, **message.data}
    if isinstance(message, AssistantMessage):
        return {"type": "assistant", "session_id": message.session_id,
                "message": {"role": "assistant", "model": message.model,
                            "content": _content(message.content),
                            "stop_reason": message.stop_reason, "usage": message.usage}}
    if isinstance(message, UserMessage):
        return {"type": "user", "message": {"role": "user", "content": _content(message.content)},
                "parent_tool_use_id": message.parent_tool_use_id}
    if isinstance(message, ResultMessage):
        return {"type": "result", **dataclasses.asdict(message)}
    data = dataclasses.asdict(message) if dataclasses.is_dataclass(message) else {}
    return {"type": type(message).__name__, **data}  # type: ignore[arg-type]


def _extra_args(args: list[str]) -> dict[str, str | None]:
    """``["--fallback-model", "x", "--flag"]`` -> ``{"fallback-model": "x", "flag": None}``."""
    extra: dict[str, str | None] = {}
    for position, arg in enumerate(args):
        if arg.startswith("--"):
            following = args[position + 1] if position + 1 < len(args) else None
            extra[arg[2:]] = following if following and not following.startswith("--") else None
    return extra


async def run(spec: dict[str, Any]) -> int:
    options = ClaudeAgentOptions(
        tools=spec["tools"], permission_mode="bypassPermissions", model=spec["model"],
        max_turns=spec["max_turns"], resume=spec["resume"], fork_session=spec["fork"],
        session_id=spec["session_id"], settings=spec["settings"], cwd=os.getcwd(),
        cli_path=str(bundled_cli()), extra_args=_extra_args(spec["extra_args"]),
        stderr=lambda line: print(line, file=sys.stderr, flush=True),
    )
    async for message in query(prompt=spec["prompt"], options=options):
        print(json.dumps(event(message), default=str), flush=True)
    return 0


def main(argv: list[str]) -> int:
    try:
        return asyncio.run(run(json.loads(argv[1])))
    except Exception as error:  # the SDK raises when the CLI exits with an error
        print(f"agent-sdk: {type(error).__name__}: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
