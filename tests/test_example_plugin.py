"""The example plugin (examples/plugin) works without a client: each hook script answers
sample hook input as Claude Code expects, the MCP server speaks newline-delimited
JSON-RPC, and the example cases name the plugin's parts as the client names them."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = ROOT / "examples/plugin"
CASES = ROOT / "examples/plugin-cases"


def _hook(script: str, event: dict[str, Any], cwd: Path,
          env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run a hook script as Claude Code does: the event as JSON on stdin, the script
    executed directly (its shebang), CLAUDE_PLUGIN_ROOT set."""
    environment = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                   "CLAUDE_PLUGIN_ROOT": str(PLUGIN), **(env or {})}
    return subprocess.run([str(PLUGIN / "scripts" / script)], input=json.dumps(event),
                          capture_output=True, text=True, timeout=10, cwd=cwd, env=environment)


def _hook_commands() -> list[str]:
    config = json.loads((PLUGIN / "hooks/hooks.json").read_text())
    return [hook["command"] for groups in config["hooks"].values()
            for group in groups for hook in group["hooks"]]


def test_the_manifest_names_the_plugin() -> None:
    manifest = json.loads((PLUGIN / ".claude-plugin/plugin.json").read_text())
    assert manifest["name"] == "guard-rails"
    assert re.fullmatch(r"[a-z0-9][a-z0-9-]*", manifest["name"])
    assert manifest["version"] and manifest["description"]


@pytest.mark.parametrize("command", _hook_commands())
def test_every_hook_command_is_an_executable_file_of_the_plugin(command: str) -> None:
    assert command.startswith("${CLAUDE_PLUGIN_ROOT}/"), command
    path = PLUGIN / command.removeprefix("${CLAUDE_PLUGIN_ROOT}/")
    assert path.is_file() and os.access(path, os.X_OK), f"{path} is not an executable file"


@pytest.mark.parametrize(("command", "blocked"), [
    ("rm -rf build", True),
    ("rm -fr build", True),
    ("rm -r -f build", True),
    ("rm --recursive --force build", True),
    ("cd /tmp && rm -Rf x", True),
    ("ls; rm -rf /", True),
    ("rm build/output.txt", False),
    ("rm -r build", False),
    ("echo rm -rf", False),
    ("ls -la", False),
])
def test_the_pretooluse_hook_blocks_rm_rf_only(command: str, blocked: bool, tmp_path: Path) -> None:
    done = _hook("block-rm-rf.py", {"hook_event_name": "PreToolUse", "tool_name": "Bash",
                                    "tool_input": {"command": command}}, tmp_path)
    assert done.returncode == (2 if blocked else 0), done.stderr
    assert done.stdout == ""
    assert ("guard-rails blocked" in done.stderr) is blocked


def test_the_posttooluse_hook_adds_context_for_the_next_request(tmp_path: Path) -> None:
    done = _hook("changelog-reminder.py", {
        "hook_event_name": "PostToolUse", "tool_name": "Write",
        "tool_input": {"file_path": str(tmp_path / "minutes.md"), "content": "x"},
        "tool_response": {"type": "create"}}, tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"hookSpecificOutput": {
        "hookEventName": "PostToolUse",
        "additionalContext": "guard-rails: minutes.md changed; add a line about it to "
                             "CHANGELOG.md before you finish."}}


def test_the_posttooluse_hook_says_nothing_about_the_changelog_itself(tmp_path: Path) -> None:
    done = _hook("changelog-reminder.py", {"hook_event_name": "PostToolUse", "tool_name": "Write",
                                           "tool_input": {"file_path": "CHANGELOG.md"}}, tmp_path)
    assert (done.returncode, done.stdout) == (0, "")


def _stop(project: Path, active: bool) -> subprocess.CompletedProcess[str]:
    return _hook("require-changelog.py", {"hook_event_name": "Stop", "stop_hook_active": active,
                                          "cwd": str(project)},
                 project, env={"CLAUDE_PROJECT_DIR": str(project)})


def test_the_stop_hook_blocks_while_the_changelog_is_missing(tmp_path: Path) -> None:
    done = _stop(tmp_path, active=False)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["decision"] == "block"
    assert answer["reason"].startswith("guard-rails: CHANGELOG.md is missing")


def test_the_stop_hook_lets_a_second_stop_through_so_it_cannot_loop(tmp_path: Path) -> None:
    done = _stop(tmp_path, active=True)
    assert (done.returncode, done.stdout) == (0, "")
    assert "still missing" in done.stderr


def test_the_stop_hook_lets_the_model_stop_once_the_changelog_exists(tmp_path: Path) -> None:
    (tmp_path / "CHANGELOG.md").write_text("# Changelog\n")
    done = _stop(tmp_path, active=False)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


# ---- the MCP server --------------------------------------------------------------------------


def _server_config() -> dict[str, Any]:
    servers: dict[str, Any] = json.loads((PLUGIN / ".mcp.json").read_text())["mcpServers"]
    return servers


def _talk(*messages: dict[str, Any] | str) -> list[dict[str, Any]]:
    """Start the server as .mcp.json says, write the lines, read every answer."""
    (server,) = _server_config().values()
    argv = [server["command"], *(a.replace("${CLAUDE_PLUGIN_ROOT}", str(PLUGIN))
                                 for a in server["args"])]
    lines = "".join((m if isinstance(m, str) else json.dumps(m)) + "\n" for m in messages)
    done = subprocess.run(argv, input=lines, capture_output=True, text=True, timeout=10)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "test", "version": "0"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def test_the_mcp_server_initializes_lists_and_calls_its_tool() -> None:
    answers = _talk(INITIALIZE, INITIALIZED,
                    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                    {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                     "params": {"name": "word_count", "arguments": {"text": "one two\nthree"}}})
    assert [a["id"] for a in answers] == [1, 2, 3]  # the notification is not answered
    assert answers[0]["result"]["protocolVersion"] == "2025-06-18"
    assert answers[0]["result"]["capabilities"] == {"tools": {"listChanged": False}}
    (tool,) = answers[1]["result"]["tools"]
    assert tool["name"] == "word_count" and tool["inputSchema"]["required"] == ["text"]
    assert answers[2]["result"] == {
        "content": [{"type": "text", "text": "3 words, 2 lines, 13 characters"}], "isError": False}


def test_the_mcp_server_answers_an_unknown_protocol_version_with_its_own() -> None:
    asked = {**INITIALIZE, "params": {**INITIALIZE["params"], "protocolVersion": "1999-01-01"}}
    (answer,) = _talk(asked)
    assert answer["result"]["protocolVersion"] == "2025-06-18"


@pytest.mark.parametrize(("message", "code"), [
    ({"jsonrpc": "2.0", "id": 7, "method": "resources/list"}, -32601),
    ({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "nope"}}, -32602),
    ("{not json", -32700),
])
def test_the_mcp_server_answers_a_bad_request_with_an_error(message: dict[str, Any] | str,
                                                            code: int) -> None:
    (answer,) = _talk(message)
    assert answer["error"]["code"] == code


def test_a_call_without_text_is_a_tool_error_not_a_protocol_error() -> None:
    (answer,) = _talk({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                       "params": {"name": "word_count", "arguments": {}}})
    assert answer["result"]["isError"] is True


# ---- the example cases match the plugin -------------------------------------------------------


def _cases() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((CASES / "cases.yaml").read_text())
    return data


def test_the_case_file_points_at_the_plugin_and_the_workspace() -> None:
    data = _cases()
    assert data["loopprobe"] == "cases/1"
    assert [(CASES / d).resolve() for d in data["setup"]["plugin_dirs"]] == [PLUGIN.resolve()]
    assert (CASES / data["setup"]["workspace"] / "CLAUDE.md").is_file()
    names = [case["name"] for case in data["cases"]]
    assert len(names) == len(set(names))


def test_the_cases_name_the_mcp_tool_and_the_command_as_the_client_does() -> None:
    """A plugin's MCP server is `plugin:<plugin>:<server>`, its tools
    `mcp__<server name with [^A-Za-z0-9_-] made _>__<tool>`; its commands `/<plugin>:<file>`."""
    plugin = json.loads((PLUGIN / ".claude-plugin/plugin.json").read_text())["name"]
    (server,) = _server_config()
    tool = "mcp__" + re.sub(r"[^A-Za-z0-9_-]", "_", f"plugin:{plugin}:{server}") + "__word_count"
    cases = {case["name"]: case for case in _cases()["cases"]}
    assert cases["mcp-word-count"]["model"][0]["content"][0]["name"] == tool
    command = cases["greet-command"]["command"].split()[0]
    assert command == f"/{plugin}:greet" and (PLUGIN / "commands/greet.md").is_file()


def test_the_baseline_lists_cases_and_expectation_ids_that_exist() -> None:
    baseline = yaml.safe_load((CASES / "baseline.yaml").read_text())
    assert baseline["loopprobe"] == "baseline/1"
    cases = {case["name"]: case for case in _cases()["cases"]}
    for entry in baseline["expected_failures"]:
        assert entry["expectation"] in _expectation_ids(cases[entry["case"]]) | {"*"}
        assert entry["reason"]


def _expectation_ids(case: dict[str, Any]) -> set[str]:
    """An expectation's id: its `id:`, else `<key>-<n>` (n counts that key in the case)."""
    ids, counts = set(), dict[str, int]()
    for expectation in case["expect"]:
        (key,) = set(expectation) - {"id", "why"}
        counts[key] = counts.get(key, 0) + 1
        ids.add(expectation.get("id", f"{key}-{counts[key]}"))
    return ids
