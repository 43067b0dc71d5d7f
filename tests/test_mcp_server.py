"""The harness's MCP server, driven by the official MCP client (sdk tier) and its declarations.

The client script runs on the MCP runtime (the same venv the sandbox gets), speaking to
``probes/inside/mcp_server.py`` over stdio exactly as Claude Code does; every wait has a timeout.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import pytest

from probes.core.loop_tools import LOOP_TOOLS
from probes.core.mcp import SERVER_SCRIPT, McpReply, McpServer, McpTool, mcp_config
from probes.core.names import CatalogError
from probes.run.collector import Collector
from tests.conftest import missing_install

CLIENT = textwrap.dedent('''
    import json, sys
    import anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    script, spec, log = sys.argv[1:4]  # log: the collector's socket
    plan, relist_on_change = json.loads(sys.argv[4]), sys.argv[5] == "relist"
    out = []
    async def main():
        params = StdioServerParameters(command=sys.executable,
                                       args=["-I", script, spec, log, "run1"])
        changed, relisted, held = [], [], {}
        async def relist():  # as Claude Code does on list_changed (relist: a plan flag)
            relisted.append([t.name for t in (await held["session"].list_tools()).tools])
        async def on_message(message):
            if "ToolListChanged" in type(getattr(message, "root", message)).__name__ or \\
                    "list_changed" in repr(message):
                changed.append(True)
                if relist_on_change:
                    held["tasks"].start_soon(relist)
        async with stdio_client(params) as (r, w), anyio.create_task_group() as tasks:
            async with ClientSession(r, w, message_handler=on_message) as session:
                held.update(session=session, tasks=tasks)
                await session.initialize()
                out.append({"listed": [t.name for t in (await session.list_tools()).tools]})
                for item in plan:  # a tool's name, or [name, arguments]
                    tool, arguments = (item, {"query": "q"}) if isinstance(item, str) else item
                    try:
                        with anyio.fail_after(8):
                            result = await session.call_tool(tool, arguments)
                        out.append({"tool": tool, "is_error": result.is_error,
                                    "text": result.content[0].text})
                    except TimeoutError:
                        out.append({"tool": tool, "timeout": True})
                    except Exception as error:
                        out.append({"tool": tool, "failed": type(error).__name__})
                        return
                await anyio.sleep(0.2)
                out.append({"changed": len(changed), "relisted": relisted,
                            "listed": [t.name for t in (await session.list_tools()).tools]})
    try:
        anyio.run(main)
    except BaseException as error:
        out.append({"ended": type(error).__name__})
    print(json.dumps(out))
''')


@pytest.fixture(scope="module")
def runtime() -> Any:
    from probes.clients.npm import cache_root
    from probes.run.mcp_runtime import MCP_VERSION, McpRuntime, install_mcp_runtime
    found = McpRuntime(cache_root() / "tools" / "mcp-server" / MCP_VERSION)
    if not found.python.is_file():
        missing_install("the MCP runtime", "python -c 'from probes.run.mcp_runtime import "
                                           "install_mcp_runtime; install_mcp_runtime()'")
    return install_mcp_runtime()


def _serve(runtime: Any, tmp_path: Path, server: McpServer, plan: list[Any], *,
           relist: bool = True) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    spec, client = tmp_path / "spec.json", tmp_path / "client.py"
    spec.write_text(json.dumps(server.to_json()))
    client.write_text(CLIENT)
    with tempfile.TemporaryDirectory(prefix="lp-") as short:  # a socket path is short
        with Collector(Path(short) / "record.sock", tmp_path) as collector:
            done = subprocess.run([str(runtime.python), "-I", str(client), str(SERVER_SCRIPT),
                                   str(spec), str(Path(short) / "record.sock"),
                                   json.dumps(plan), "relist" if relist else "no"],
                                  capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert collector.faults == []
    return json.loads(done.stdout.strip().splitlines()[-1]), collector.mcp["run1"]


@pytest.mark.sdk
def test_replies_in_order_the_last_repeating_errors_and_a_changed_list(
        runtime: Any, tmp_path: Path) -> None:
    server = McpServer((
        McpTool("a", (McpReply(text="ONE"), McpReply(error="TWO", then_tools=(
            McpTool("b", (McpReply(text="B"),)),)))),
        McpTool("slow", (McpReply(text="LATE", delay=0.3),)),
    ))
    out, log = _serve(runtime, tmp_path, server, ["slow", "a", "a"])
    assert out[0] == {"listed": ["a", "slow"]}
    assert out[1:4] == [{"tool": "slow", "is_error": False, "text": "LATE"},
                        {"tool": "a", "is_error": False, "text": "ONE"},
                        {"tool": "a", "is_error": True, "text": "TWO"}]
    assert out[4] == {"changed": 1, "relisted": [["b"]], "listed": ["b"]}
    calls = [(e["event"], e.get("tool"), e.get("reply")) for e in log]
    # the changed list is listed again before the call that changed it is answered
    assert calls == [("start", None, None), ("tools/list", None, None),
                     ("tools/call", "slow", 0), ("answered", "slow", 0),
                     ("tools/call", "a", 0), ("answered", "a", 0),
                     ("tools/call", "a", 1),
                     ("notifications/tools/list_changed", None, None),
                     ("tools/list", None, None), ("answered", "a", 1),
                     ("tools/list", None, None), ("exit", None, None)]
    answered = next(e for e in log if e["event"] == "answered" and e["tool"] == "slow")
    called = next(e for e in log if e["event"] == "tools/call" and e["tool"] == "slow")
    assert answered["time"] - called["time"] >= 0.3


@pytest.mark.sdk
def test_the_loop_tools_answer_as_the_drivers_tools_do(runtime: Any, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("LP_NOTES")
    out, log = _serve(runtime, tmp_path, LOOP_TOOLS, [
        ["add", {"a": 2, "b": 3}], ["fail", {"reason": "LP_BOOM"}],
        ["read_file", {"path": "notes.txt"}], ["read_file", {"path": "absent.txt"}],
        ["add", {"a": "two", "b": 3}]])
    assert out[0] == {"listed": ["add", "fail", "read_file"]}
    assert out[1:4] == [{"tool": "add", "is_error": False, "text": "5"},
                        {"tool": "fail", "is_error": True, "text": "LP_BOOM"},
                        {"tool": "read_file", "is_error": False, "text": "LP_NOTES"}]
    # a call the tool cannot answer is an error result naming why, as a raising tool's is
    assert out[4]["is_error"] and out[4]["text"].startswith("FileNotFoundError")
    assert out[5]["is_error"] and out[5]["text"].startswith("ValueError")
    assert [e["outcome"] for e in log if e["event"] == "tools/call"] == ["compute"] * 5


def test_a_computed_reply_is_one_the_server_knows() -> None:
    assert McpReply(compute="add").to_json() == {"compute": "add"}
    with pytest.raises(CatalogError, match="computes one of add, fail, read_file; got str 'mul'"):
        McpReply(compute="mul")
    with pytest.raises(CatalogError, match=r"exactly one of .*; got text, compute"):
        McpReply(text="x", compute="add")


@pytest.mark.sdk
def test_a_changed_list_is_answered_after_the_wait_when_never_listed_again(
        runtime: Any, tmp_path: Path) -> None:
    server = McpServer((McpTool("a", (McpReply(text="ONE", then_tools=(
        McpTool("b", (McpReply(text="B"),)),)),)),))
    out, log = _serve(runtime, tmp_path, server, ["a"], relist=False)
    assert out[1] == {"tool": "a", "is_error": False, "text": "ONE"}
    notified = next(e for e in log if e["event"] == "notifications/tools/list_changed")
    answered = next(e for e in log if e["event"] == "answered")
    assert answered["time"] - notified["time"] >= 5.0  # RELIST_WAIT


@pytest.mark.sdk
def test_a_hang_is_never_answered_and_a_crash_ends_the_server(runtime: Any,
                                                              tmp_path: Path) -> None:
    server = McpServer((McpTool("h", (McpReply(hang=True),)),
                        McpTool("c", (McpReply(crash=True),))))
    out, log = _serve(runtime, tmp_path, server, ["h", "c"])
    assert out[1] == {"tool": "h", "timeout": True}
    assert out[2]["tool"] == "c" and ("failed" in out[2] or "ended" in out[-1])
    events = [(e["event"], e.get("tool")) for e in log]
    assert ("tools/call", "h") in events and ("answered", "h") not in events
    assert events[-2:] == [("tools/call", "c"), ("crash", "c")]


@pytest.mark.sdk
def test_a_repeated_call_uses_the_last_reply(runtime: Any, tmp_path: Path) -> None:
    server = McpServer((McpTool("r", (McpReply(text="FIRST"), McpReply(text="LAST"))),))
    out, _ = _serve(runtime, tmp_path, server, ["r", "r", "r"])
    assert [o.get("text") for o in out[1:4]] == ["FIRST", "LAST", "LAST"]


@pytest.mark.parametrize(("make", "message"), [
    (lambda: McpReply(), "an MCP reply is exactly one of text, error, crash, hang or compute; got none"),
    (lambda: McpReply(text="a", error="b"),
     "an MCP reply is exactly one of text, error, crash, hang or compute; got text, error"),
    (lambda: McpReply(text="a", delay=-1), "an MCP reply's delay is seconds >= 0, got -1"),
    (lambda: McpReply(hang=True, then_tools=()),
     "then_tools needs an answered call (text or error), not a hang"),
    (lambda: McpTool("a b", (McpReply(text="x"),)),
     "an MCP tool name is letters, digits, _ and -; got 'a b'"),
    (lambda: McpTool("a", ()), "MCP tool 'a' needs at least one reply"),
    (lambda: McpServer((McpTool("a", (McpReply(text="x"),)),) * 2),
     "MCP tool names repeat: ['a', 'a']"),
])
def test_bad_declarations_say_what_was_expected(make: Any, message: str) -> None:
    with pytest.raises(ValueError) as raised:
        make()
    assert str(raised.value) == message


def test_the_config_starts_the_server_isolated_with_its_spec_and_collector() -> None:
    server = McpServer((McpTool("a", (McpReply(text="x"),)),), name="srv")
    assert server.tool_name("a") == "mcp__srv__a"
    assert mcp_config(server, python="/py", script="/s.py", spec_path="/spec",
                      socket_path="/run/record.sock", run="r") == {"mcpServers": {"srv": {
                          "type": "stdio", "command": "/py",
                          "args": ["-I", "/s.py", "/spec", "/run/record.sock", "r"]}}}
