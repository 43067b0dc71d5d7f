"""OpenCode (npm ``opencode-ai``) as a client kind.

Fast: it is registered, runs the generic agent-loop catalog and none of Claude Code's probes,
names the loop tools as OpenCode names MCP tools, turns an invocation into ``opencode run``
with its config file, states its config folder's dependencies as installed, and reads its
JSON lines as the drivers' protocol. client tier: one catalog probe on the real install.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from probes.catalog import REPORTS as CLAUDE_CODE_REPORTS
from probes.catalog.agent_loop import PARALLEL_PROBE, PROBES, REPORTS
from probes.cli import catalog_for
from probes.clients.base import ClientBinary, RunContext
from probes.clients.loop_driver import SYSTEM
from probes.clients.opencode import (
    OPENCODE_ENV,
    PLUGIN_PACKAGE,
    TITLE,
    OpenCode,
    opencode_config,
    read_opencode_events,
)
from probes.clients.registry import client_for
from probes.core.invocation import Invocation
from probes.run.runner import run_probe
from probes.sandbox.folders import Sandbox
from tests.conftest import installed_client

VERSION = "1.18.33"


def _binary(root: Path) -> ClientBinary:
    entry = root / "node_modules/opencode-linux-x64/bin/opencode"
    return ClientBinary("opencode", "9.9.9", "linux-x86_64", "opencode-ai", root, entry,
                        (str(entry),), "0" * 64)


def test_it_runs_the_generic_catalog_under_its_own_tool_names(tmp_path: Path) -> None:
    client = client_for("opencode")
    assert isinstance(client, OpenCode)
    assert catalog_for("opencode@1.18.33", None) == REPORTS
    capabilities = client.capabilities(_binary(tmp_path))
    assert all(not capabilities.lacking(p.capabilities()) for p in PROBES)
    assert capabilities.tool_names == {"add": "loop_add", "fail": "loop_fail",
                                       "read_file": "loop_read_file"}
    assert capabilities.classifier is None
    for spec in CLAUDE_CODE_REPORTS:
        for probe in spec.probes:
            assert capabilities.lacking(probe.capabilities()), probe.name


def test_the_config_makes_the_mock_its_provider_and_the_loop_server_its_only_tools() -> None:
    invocation = Invocation(name="loop", prompt="Add.", model="claude-sonnet-4-5",
                            max_turns=3, loop_tools=True,
                            settings={"max_tokens": 512,
                                      "thinking": {"type": "enabled", "budget_tokens": 2000}})
    config = opencode_config(invocation, "http://127.0.0.1:9/", ["py", "server"])
    anthropic = config["provider"]["anthropic"]
    assert anthropic["options"]["baseURL"] == "http://127.0.0.1:9/v1"
    assert anthropic["models"]["claude-sonnet-4-5"] == {
        "name": "claude-sonnet-4-5", "limit": {"context": 200000, "output": 512},
        "options": {"thinking": {"type": "enabled", "budgetTokens": 2000}}}
    assert config["model"] == "anthropic/claude-sonnet-4-5"
    assert config["tools"] == {"*": False, "loop_*": True}
    assert config["agent"] == {"build": {"prompt": SYSTEM, "steps": 3}}
    assert config["mcp"] == {"loop": {"type": "local", "command": ["py", "server"],
                                      "enabled": True}}
    with pytest.raises(ValueError, match="no counterpart"):
        opencode_config(Invocation(name="x", prompt="p", loop_tools=True,
                                   settings={"top_k": 3}), "http://m", [])


def test_a_run_is_opencode_run_with_its_config_file(tmp_path: Path) -> None:
    box = Sandbox.create(tmp_path, "probe")
    invocation = Invocation(name="loop", prompt="Add 2+3.", model="claude-sonnet-4-5",
                            loop_tools=True, env={"ANTHROPIC_MAX_RETRIES": "0"})
    context = RunContext(box, "http://127.0.0.1:9", {}, mcp_python="/mcp/python",
                         record_socket="/sock")
    command = OpenCode(tmp_path / "cache").command(_binary(tmp_path), invocation, context)
    assert command.argv[1:] == ["run", "--format", "json", "--title", TITLE,
                                "-m", "anthropic/claude-sonnet-4-5", "Add 2+3."]
    config_path = str(box.inputs / "opencode" / "loop.json")
    assert command.env["OPENCODE_CONFIG"] == config_path
    # inline too: merged after a workspace's own opencode.json, so the harness's keys win
    assert json.loads(command.env["OPENCODE_CONFIG_CONTENT"]) == \
        json.loads(command.files[config_path])
    assert OPENCODE_ENV.items() <= command.env.items()
    assert command.env["HOME"] == str(box.home) and command.cwd == box.workspace
    config = json.loads(command.files[config_path])
    server = config["mcp"]["loop"]["command"]
    assert server[0] == "/mcp/python" and server[-2:] == ["/sock", "loop"]
    spec = str(box.inputs / "mcp" / "loop.spec.json")
    assert server[3] == spec and json.loads(command.files[spec])["name"] == "loop"
    with pytest.raises(ValueError, match="loop_tools"):
        OpenCode(tmp_path / "cache").command(
            _binary(tmp_path), Invocation(name="x", prompt="p"), context)


def test_its_config_folder_is_prepared_so_nothing_is_installed_at_start(
        tmp_path: Path) -> None:
    box = Sandbox.create(tmp_path, "probe")
    OpenCode(tmp_path / "cache").prepare(box)
    folder = box.home / ".config" / "opencode"
    assert (folder / "node_modules").is_dir()
    lock = json.loads((folder / "package-lock.json").read_text())
    assert PLUGIN_PACKAGE in lock["packages"][""]["dependencies"]
    assert PLUGIN_PACKAGE in json.loads((folder / "package.json").read_text())["dependencies"]


def _line(kind: str, message: str, **part: object) -> str:
    return json.dumps({"type": kind, "sessionID": "ses_1",
                       "part": {"messageID": message, **part}})


def test_its_json_lines_are_read_as_one_assistant_event_per_reply_and_a_result() -> None:
    stdout = "\n".join([
        _line("step_start", "m1", type="step-start"),
        _line("text", "m1", type="text", text="calling"),
        _line("tool_use", "m1", type="tool", tool="loop_add", callID="toolu_1",
              state={"status": "completed", "input": {"a": 2, "b": 3}}),
        _line("step_finish", "m1", type="step-finish", reason="tool-calls"),
        _line("step_start", "m2", type="step-start"),
        _line("step_finish", "m2", type="step-finish", reason="unknown"),
        _line("text", "m2", type="text", text="late text"),  # after its step_finish
    ])
    output = read_opencode_events(stdout)
    assistants = output.of_type("assistant")
    assert [a["message"]["stop_reason"] for a in assistants] == ["tool-calls", "unknown"]
    assert assistants[0]["message"]["content"] == [
        {"type": "text", "text": "calling"},
        {"type": "tool_use", "id": "toolu_1", "name": "loop_add", "input": {"a": 2, "b": 3},
         "status": "completed"}]
    assert output.result == {"type": "result", "subtype": "success", "is_error": False,
                             "num_turns": 2, "session_id": "ses_1", "result": "late text",
                             "stop_reason": "unknown"}


def test_an_error_event_makes_the_result_an_error() -> None:
    stdout = "\n".join([
        _line("step_start", "m1", type="step-start"),
        json.dumps({"type": "error", "sessionID": "ses_1",
                    "error": {"name": "APIError", "data": {"message": "Overloaded"}}})])
    result = read_opencode_events(stdout).result
    assert result is not None and result["is_error"] is True
    assert result["subtype"] == "error" and result["result"] == "APIError: Overloaded"
    assert read_opencode_events("").result is None


@pytest.mark.client
def test_the_parallel_calls_probe_passes_on_the_real_install(tmp_path: Path) -> None:
    client, binary = installed_client(f"opencode@{VERSION}")
    outcome = run_probe(PARALLEL_PROBE, client, binary, tmp_path)
    assert outcome.error is None
    failed = [c for c in outcome.checks if not c.passed]
    assert failed == [], failed


# a workspace's own config that would send the run elsewhere: another provider address and
# another model (a project config outranks the file OPENCODE_CONFIG names)
_ELSEWHERE = {"model": "anthropic/claude-elsewhere",
              "provider": {"anthropic": {"options": {"baseURL": "http://127.0.0.1:9/v1"}}}}


@pytest.mark.client
def test_a_workspace_opencode_json_cannot_move_the_run_off_the_mock(tmp_path: Path) -> None:
    client, binary = installed_client(f"opencode@{VERSION}")
    probe = replace(PARALLEL_PROBE, fixtures={**PARALLEL_PROBE.fixtures,
                                              "opencode.json": json.dumps(_ELSEWHERE)})
    outcome = run_probe(probe, client, binary, tmp_path)
    assert outcome.error is None and outcome.evidence is not None
    assert "opencode.json" in outcome.evidence.workspace_files
    failed = [c for c in outcome.checks if not c.passed]
    assert failed == [], failed
    assert {r["body"]["model"] for r in outcome.evidence.requests()} == {"claude-sonnet-4-5"}
