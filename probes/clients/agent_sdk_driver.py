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
    ClaudeSDKClient,
    PermissionResultAllow,
    PermissionResultDeny,
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


def _print(event: dict[str, Any]) -> None:
    print(json.dumps(event, default=str), flush=True)


async def _lines(*lines: dict[str, Any]) -> Any:
    for line in lines:
        yield line


class Relay:
    """A streamed run through ``ClaudeSDKClient``: the harness writes the CLI's stream-json
    input protocol to this driver's stdin, and each line becomes the SDK call that writes it
    (``query``, ``interrupt``, ``set_model``, ``set_permission_mode``); the SDK's
    ``can_use_tool`` callback is put to the harness as the CLI would put it (a control
    request on stdout, answered on stdin)."""

    def __init__(self) -> None:
        self.client: ClaudeSDKClient | None = None
        self.answers: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self.asked = 0

    async def can_use_tool(self, tool: str, tool_input: dict[str, Any], context: Any) -> Any:
        self.asked += 1
        request_id = f"driver-{self.asked}"
        answer: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.answers[request_id] = answer
        _print({"type": "control_request", "request_id": request_id,
                "request": {"subtype": "can_use_tool", "tool_name": tool, "input": tool_input,
                            "tool_use_id": getattr(context, "tool_use_id", None)}})
        decided = await answer
        if decided.get("behavior") == "allow":
            return PermissionResultAllow(updated_input=decided.get("updatedInput"))
        return PermissionResultDeny(message=str(decided.get("message", "")))

    async def act(self, line: dict[str, Any]) -> None:
        assert self.client is not None
        if line.get("type") == "user":
            await self.client.query(_lines(line))  # the line as written, uuid included
            return
        if line.get("type") == "control_response":
            response = line.get("response") or {}
            waiting = self.answers.pop(str(response.get("request_id")), None)
            if waiting is not None:
                waiting.set_result(response.get("response") or {})
            return
        request = line.get("request") or {}
        subtype = request.get("subtype")
        calls = {"interrupt": lambda: self.client.interrupt(),  # type: ignore[union-attr]
                 "set_model": lambda: self.client.set_model(  # type: ignore[union-attr]
                     request.get("model")),
                 "set_permission_mode": lambda: self.client.set_permission_mode(  # type: ignore[union-attr]
                     request.get("mode"))}
        reply: dict[str, Any] = {"subtype": "success", "request_id": line.get("request_id")}
        try:
            if subtype not in calls:
                raise ValueError(f"the driver has no SDK call for {subtype!r}")
            await calls[subtype]()
        except Exception as error:  # reported to the harness as the CLI reports a failure
            reply = {"subtype": "error", "request_id": line.get("request_id"),
                     "error": f"{type(error).__name__}: {error}"}
        _print({"type": "control_response", "response": reply})

    async def read_stdin(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            raw = await loop.run_in_executor(None, sys.stdin.readline)
            if not raw:
                return  # the harness closed our input: the run is over
            if raw.strip():
                await self.act(json.loads(raw))

    async def print_messages(self) -> None:
        assert self.client is not None
        async for message in self.client.receive_messages():
            _print(event(message))

    async def run(self, options: ClaudeAgentOptions) -> int:
        async with ClaudeSDKClient(options=options) as client:
            self.client = client
            printing = asyncio.create_task(self.print_messages())
            await self.read_stdin()
            printing.cancel()
        return 0


async def run(spec: dict[str, Any]) -> int:
    streamed = spec.get("streamed")
    relay = Relay() if streamed else None
    asks = relay is not None and streamed.get("permissions") is not None
    options = ClaudeAgentOptions(
        tools=spec["tools"], permission_mode="default" if asks else "bypassPermissions",
        can_use_tool=relay.can_use_tool if asks and relay is not None else None,
        model=spec["model"],
        max_turns=spec["max_turns"], resume=spec["resume"], fork_session=spec["fork"],
        session_id=spec["session_id"], settings=spec["settings"], cwd=os.getcwd(),
        cli_path=str(bundled_cli()),
        mcp_servers=spec["mcp_config"] or {},
        extra_args={**_extra_args(spec["extra_args"]),
                    **({"strict-mcp-config": None} if spec["mcp_config"] else {})},
        stderr=lambda line: print(line, file=sys.stderr, flush=True),
    )
    if relay is not None:
        return await relay.run(options)
    async for message in query(prompt=spec["prompt"], options=options):
        _print(event(message))
    return 0


def main(argv: list[str]) -> int:
    try:
        return asyncio.run(run(json.loads(argv[1])))
    except Exception as error:  # the SDK raises when the CLI exits with an error
        print(f"agent-sdk: {type(error).__name__}: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
