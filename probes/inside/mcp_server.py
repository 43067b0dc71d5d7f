"""The harness's MCP server: scripted tools over stdio, every request it serves logged.

Runs inside the client's sandbox as the client's child, on the harness's MCP runtime (a
venv with the official ``mcp`` SDK, mounted read-only), so it imports nothing of loopprobe:
``python mcp_server.py SPEC_JSON SOCKET RUN``. The spec (``probes.core.mcp.McpServer.to_json``)
names the tools and, per tool, the replies used in order (the last repeats): a text, an
error result, a crash of the whole server mid-call, a call never answered, an answer
computed from the call's arguments (``compute``: the loop drivers' ``add``, ``fail`` and
``read_file``, so a CLI client runs the generic agent-loop catalog with the same tools), an
optional delay, and ``then_tools``: the tool list becomes these and the client is told
(``notifications/tools/list_changed``) before the answer, which waits until the client has
listed the tools again (at most ``RELIST_WAIT`` seconds), so the client holds the new list
before it reads the call's result, whatever the timing of its next request. The log is one
JSON line per event, sent as it happens to the harness's collector (``probes.run.collector``)
on the Unix socket, which keeps it where the client cannot reach; a crash or a hang loses
nothing already served.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.stdio import stdio_server

# how long an answer whose then_tools changed the list waits for the client to list it again;
# a client that never lists again (it ignores list_changed) gets the answer after this
RELIST_WAIT = 5.0
# after the client's new list was answered, so that answer is written before the call's
RELIST_SETTLE = 0.2


def computed(kind: str, arguments: dict[str, Any]) -> tuple[str, bool]:
    """The answer of a computed reply and whether it is an error: what the loop drivers'
    own tools answer (``add``: the sum; ``fail``: an error of its reason; ``read_file``: a
    file's text, relative to the working directory, the client's workspace)."""
    try:
        if kind == "add":
            return str(int(arguments["a"]) + int(arguments["b"])), False
        if kind == "fail":
            return str(arguments.get("reason", "")), True
        if kind == "read_file":
            return (Path.cwd() / str(arguments["path"])).read_text(), False
    except (KeyError, TypeError, ValueError, OSError) as error:
        return f"{type(error).__name__}: {error}", True
    return f"unknown computed reply {kind}", True


class Script:
    def __init__(self, spec: dict[str, Any], socket_path: str, run: str):
        self.name = spec["name"]
        self.tools: list[dict[str, Any]] = list(spec["tools"])
        self.used: dict[str, int] = {}
        self.listed_again: anyio.Event | None = None  # set when a changed list is listed
        self.channel = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.channel.connect(socket_path)
        self.channel.sendall((json.dumps({"stream": "mcp", "run": run}) + "\n").encode())

    def log(self, event: str, **fields: Any) -> None:
        self.channel.sendall((json.dumps({"event": event, "time": time.time(), **fields},
                                         sort_keys=True) + "\n").encode())

    def tool(self, name: str) -> dict[str, Any] | None:
        return next((t for t in self.tools if t["name"] == name), None)

    def listed(self) -> list[types.Tool]:
        return [types.Tool(name=t["name"], description=t.get("description", ""),
                           input_schema=t.get("input_schema") or {"type": "object"})
                for t in self.tools]

    def next_reply(self, name: str) -> tuple[int, dict[str, Any]]:
        tool = self.tool(name)
        assert tool is not None
        replies = tool["replies"]
        index = min(self.used.get(name, 0), len(replies) - 1)
        self.used[name] = self.used.get(name, 0) + 1
        return index, replies[index]


def build(script: Script) -> Server[Any]:
    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        script.log("tools/list", tools=[t["name"] for t in script.tools])
        if script.listed_again is not None:
            script.listed_again.set()
        return types.ListToolsResult(tools=script.listed())

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        name, arguments = params.name, dict(params.arguments or {})
        if script.tool(name) is None:
            script.log("tools/call", tool=name, arguments=arguments, reply=None,
                       outcome="unknown tool")
            return types.CallToolResult(content=[types.TextContent(
                type="text", text=f"unknown tool {name}")], is_error=True)
        index, reply = script.next_reply(name)
        script.log("tools/call", tool=name, arguments=arguments, reply=index,
                   outcome=next(k for k in ("crash", "hang", "error", "text", "compute")
                                if k in reply))
        if reply.get("delay"):
            await anyio.sleep(float(reply["delay"]))
        if reply.get("crash"):
            script.log("crash", tool=name)
            os._exit(17)
        if reply.get("hang"):
            await anyio.sleep_forever()
        if "compute" in reply:
            answer, error = computed(str(reply["compute"]), arguments)
        else:
            error = "error" in reply
            answer = str(reply["error"] if error else reply["text"])
        result = types.CallToolResult(content=[types.TextContent(type="text", text=answer)],
                                      is_error=error)
        if reply.get("then_tools") is not None:
            script.tools = list(reply["then_tools"])
            script.listed_again = anyio.Event()
            await ctx.session.send_tool_list_changed()
            script.log("notifications/tools/list_changed",
                       tools=[t["name"] for t in script.tools])
            with anyio.move_on_after(RELIST_WAIT):
                await script.listed_again.wait()
                await anyio.sleep(RELIST_SETTLE)
            script.listed_again = None
        script.log("answered", tool=name, reply=index, is_error=error)
        return result

    return Server(script.name, version="1", on_list_tools=list_tools, on_call_tool=call_tool)


async def serve(script: Script) -> None:
    server = build(script)
    options = server.create_initialization_options(NotificationOptions(tools_changed=True))
    async with stdio_server() as (read, write):
        await server.run(read, write, options)


def main(argv: list[str]) -> int:
    spec = json.loads(open(argv[1], encoding="utf-8").read())
    script = Script(spec, argv[2], argv[3])
    script.log("start", pid=os.getpid(), tools=[t["name"] for t in script.tools])
    try:
        anyio.run(serve, script)
    finally:
        script.log("exit")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
