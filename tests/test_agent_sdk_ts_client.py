"""The TypeScript Claude Agent SDK as a client kind: its installs, its command, its driver.

Fast: what is refused at install (a version whose query() lacks an option the driver passes, an
install without the Claude Code the SDK would run, an SDK without query()), the spec the
command gives the driver (the Python SDK driver's, plus the CLI and the plugin folders), the
capabilities read from the CLI's --help, and the driver itself against a stand-in SDK module
(node, no client). client tier: one installed version runs a published probe.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from probes.catalog.tool_result_resume import PROBE
from probes.clients import agent_sdk_ts
from probes.clients.agent_sdk import ClaudeAgentSdk, sdk_spec
from probes.clients.agent_sdk_ts import (
    DRIVER,
    FIRST_DRIVEN,
    PACKAGE,
    ClaudeAgentSdkTs,
    native_packages,
    refuse_undriven,
)
from probes.clients.base import ClientBinary, HookCommand, RunContext
from probes.clients.claude_cli import CAPABILITY_FLAGS, NOT_CLAUDE_CODE
from probes.clients.npm import InstallError, sha256_file
from probes.clients.registry import client_for, parse_client_spec
from probes.core.invocation import CAPABILITIES, Invocation
from probes.core.streamed import PermissionAnswer, StreamedInput
from probes.run.runner import run_probe
from probes.sandbox.folders import Sandbox
from tests.conftest import installed_client

NODE = shutil.which("node")
needs_node = pytest.mark.skipif(NODE is None, reason="node is not installed")


def _binary(root: Path, entry: str = "node_modules/x/claude") -> ClientBinary:
    return ClientBinary("claude-agent-sdk-ts", "0.3.337", "linux-x86_64", PACKAGE, root,
                        root / entry, ("/usr/bin/node", str(DRIVER)), "0" * 64)


# ---- installs ------------------------------------------------------------------------------

def test_the_kind_is_registered_with_npm_versions() -> None:
    client = client_for("claude-agent-sdk-ts")
    assert isinstance(client, ClaudeAgentSdkTs) and client.package == PACKAGE
    assert parse_client_spec("claude-agent-sdk-ts@latest")[1] == "latest"
    with pytest.raises(InstallError, match="semver"):
        parse_client_spec("claude-agent-sdk-ts@0.2")


@pytest.mark.parametrize("version", ["0.0.4", "0.1.77", "0.2.33", "0.2.68"])
def test_a_version_whose_query_lacks_an_option_the_driver_passes_is_refused(
        version: str, tmp_path: Path) -> None:
    with pytest.raises(InstallError) as refused:
        ClaudeAgentSdkTs(tmp_path).install(version)  # refused before npm is asked
    assert str(refused.value) == (
        f"@anthropic-ai/claude-agent-sdk@{version}: the driver passes query() the options "
        "sessionId (0.2.33 and later) and settings (0.2.69 and later); expected 0.2.69 or "
        f"later, found {version}")
    assert not (tmp_path / "clients").exists()


@pytest.mark.parametrize("version", [FIRST_DRIVEN, "0.2.90", "0.2.113", "0.3.337", "1.0.0"])
def test_later_versions_are_driven(version: str) -> None:
    refuse_undriven(version)


def test_the_native_binary_is_looked_for_as_the_sdk_looks_for_it() -> None:
    assert native_packages("linux", "x64", False) == [
        f"{PACKAGE}-linux-x64", f"{PACKAGE}-linux-x64-musl"]
    assert native_packages("linux", "arm64", True) == [
        f"{PACKAGE}-linux-arm64-musl", f"{PACKAGE}-linux-arm64"]
    assert native_packages("darwin", "arm64", False) == [f"{PACKAGE}-darwin-arm64"]


def _package(prefix: Path, files: dict[str, str], **declared: Any) -> Path:
    """A stand-in install: the SDK's package folder with ``files`` and a package.json."""
    folder = prefix / "node_modules" / PACKAGE
    folder.mkdir(parents=True)
    (folder / "package.json").write_text(json.dumps({"name": PACKAGE, "type": "module",
                                                     "main": "sdk.mjs", **declared}))
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


NATIVE = {"version": "0.3.337", "claudeCodeVersion": "2.1.337",
          "optionalDependencies": {f"{PACKAGE}-linux-x64": "0.3.337",
                                   f"{PACKAGE}-darwin-arm64": "0.3.337"}}


def test_an_install_without_the_native_binary_of_this_platform_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(agent_sdk_ts, "_node_platform", lambda node: ("linux", "x64", False))
    _package(tmp_path, {"sdk.mjs": ""}, **NATIVE)
    (tmp_path / "node_modules" / "@anthropic-ai" / "claude-agent-sdk-darwin-arm64").mkdir()
    with pytest.raises(InstallError) as refused:
        agent_sdk_ts._locate_entry(tmp_path, "node")
    assert str(refused.value) == (
        "@anthropic-ai/claude-agent-sdk@0.3.337 runs the native Claude Code binary of its "
        "optional dependency for linux-x64: expected the file claude in one of "
        "@anthropic-ai/claude-agent-sdk-linux-x64, @anthropic-ai/claude-agent-sdk-linux-x64-musl, "
        "found claude-agent-sdk-darwin-arm64 in node_modules/@anthropic-ai (npm installs only "
        "the one matching this machine's os, cpu and libc, and none with --omit=optional)")


def test_a_native_binary_that_is_no_executable_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(agent_sdk_ts, "_node_platform", lambda node: ("linux", "x64", False))
    _package(tmp_path, {"sdk.mjs": ""}, **NATIVE)
    native = tmp_path / "node_modules" / f"{PACKAGE}-linux-x64"
    native.mkdir()
    (native / "claude").write_text("#!/bin/sh\n")
    with pytest.raises(InstallError, match=r"claude: expected a native executable \(ELF\), "
                                           "found a file of another kind"):
        agent_sdk_ts._locate_entry(tmp_path, "node")


def test_the_native_binary_found_is_the_entry(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(agent_sdk_ts, "_node_platform", lambda node: ("linux", "x64", True))
    checked: list[Any] = []
    monkeypatch.setattr(agent_sdk_ts, "_check_driver", lambda *a: checked.append(a))
    monkeypatch.setattr(agent_sdk_ts, "_check_cli", lambda *a: checked.append(a))
    _package(tmp_path, {"sdk.mjs": ""}, **NATIVE)
    for name in (f"{PACKAGE}-linux-x64", f"{PACKAGE}-linux-x64-musl"):
        (tmp_path / "node_modules" / name).mkdir()
        (tmp_path / "node_modules" / name / "claude").write_bytes(b"\x7fELF" + name.encode())
    entry, launcher = agent_sdk_ts._locate_entry(tmp_path, "/usr/bin/node")
    # this machine's libc is musl here: its package is tried first, as the SDK does
    assert entry == tmp_path / "node_modules" / f"{PACKAGE}-linux-x64-musl" / "claude"
    assert launcher == ["/usr/bin/node", str(DRIVER)]
    assert checked[-1] == (entry, "/usr/bin/node", "2.1.337", tmp_path)


def test_an_old_install_without_cli_js_is_refused(tmp_path: Path) -> None:
    _package(tmp_path, {"sdk.mjs": "", "README.md": ""}, version="0.2.90",
             optionalDependencies={"@img/sharp-linux-x64": "^0.33.5"})
    with pytest.raises(InstallError) as refused:
        agent_sdk_ts._locate_entry(tmp_path, "node")
    folder = tmp_path / "node_modules" / PACKAGE
    assert str(refused.value) == (
        "@anthropic-ai/claude-agent-sdk@0.2.90 declares no native platform package, so its "
        f"SDK runs the cli.js it ships: expected {folder / 'cli.js'}, found only README.md, "
        "package.json, sdk.mjs")


CLI_JS = "console.log(process.argv.includes('--version') ? '2.1.90 (Claude Code)' : 'help');\n"


@needs_node
def test_an_old_install_runs_its_cli_js_once_the_driver_finds_query(tmp_path: Path) -> None:
    assert NODE is not None
    _package(tmp_path, {"sdk.mjs": "export function query() {}\n", "cli.js": CLI_JS},
             version="0.2.90", claudeCodeVersion="2.1.90")
    entry, launcher = agent_sdk_ts._locate_entry(tmp_path, NODE)
    assert entry == tmp_path / "node_modules" / PACKAGE / "cli.js"
    assert launcher == [NODE, str(DRIVER)]


@needs_node
def test_an_sdk_without_query_is_refused(tmp_path: Path) -> None:
    assert NODE is not None
    _package(tmp_path, {"sdk.mjs": "export const other = 1;\n", "cli.js": CLI_JS},
             version="0.2.90", claudeCodeVersion="2.1.90")
    with pytest.raises(InstallError, match=r"0.2.90: expected the SDK to export a query\(\) "
                                           r"function, found undefined \(a peer dependency"):
        agent_sdk_ts._locate_entry(tmp_path, NODE)


@needs_node
def test_a_cli_of_another_version_than_the_sdk_declares_is_refused(tmp_path: Path) -> None:
    assert NODE is not None
    _package(tmp_path, {"sdk.mjs": "export function query() {}\n", "cli.js": CLI_JS},
             version="0.2.91", claudeCodeVersion="2.1.91")
    with pytest.raises(InstallError, match=r"cli.js --version: expected 2.1.91 and exit 0, "
                                           r"found '2.1.90 \(Claude Code\)' and exit 0"):
        agent_sdk_ts._locate_entry(tmp_path, NODE)


# ---- the command ---------------------------------------------------------------------------

def _context(box: Sandbox, **more: Any) -> RunContext:
    return RunContext(box, "http://127.0.0.1:9", {"run": "11111111-2222-4333-8444-555555555555",
                                                  "first": "aaaaaaaa-2222-4333-8444-555555555555"},
                      **more)


def test_the_driver_gets_the_python_drivers_spec_the_cli_and_the_plugin_folders(
        tmp_path: Path) -> None:
    box = Sandbox.create(tmp_path, "box")
    client = ClaudeAgentSdkTs(tmp_path)
    binary = _binary(tmp_path)
    invocation = Invocation("run", "GO", tools=("Read", "Bash"), max_turns=2,
                            settings={"env": {"X": "1"}},
                            extra_args=("--fallback-model", "claude-haiku-4-5"),
                            env={"CLAUDE_CODE_MAX_RETRIES": "3", "DISABLE_TELEMETRY": None})
    context = _context(box, hooks=HookCommand("record", ("Stop",)), plugin_dirs=("/p/one",))
    command = client.command(binary, invocation, context)
    spec = json.loads(command.argv[2])
    assert command.argv[:2] == ["/usr/bin/node", str(DRIVER)]
    assert spec == {**sdk_spec(ClaudeAgentSdk(tmp_path), invocation, context),
                    "cli": str(binary.entry), "plugin_dirs": ["/p/one"]}
    assert spec == {
        "prompt": "GO", "model": "claude-sonnet-4-5", "tools": ["Read", "Bash"], "max_turns": 2,
        "resume": None, "fork": False, "session_id": "11111111-2222-4333-8444-555555555555",
        "settings": str(box.home / ".claude" / "settings.json"),
        "extra_args": ["--fallback-model", "claude-haiku-4-5"], "mcp_config": None,
        "streamed": None, "cli": str(binary.entry), "plugin_dirs": ["/p/one"]}
    # the hooks and the invocation's own settings are in the settings file the spec names
    settings = json.loads(command.files[spec["settings"]])
    assert settings["env"] == {"X": "1"} and "Stop" in settings["hooks"]
    env = command.env
    assert env["NODE_PATH"] == str(tmp_path / "node_modules")
    assert (env["ANTHROPIC_BASE_URL"], env["CLAUDE_CODE_MAX_RETRIES"]) == (
        "http://127.0.0.1:9", "3")
    assert "DISABLE_TELEMETRY" not in env and env["HOME"] == str(box.home)
    assert command.cwd == box.workspace


def test_a_resumed_forked_streamed_run_says_so(tmp_path: Path) -> None:
    box = Sandbox.create(tmp_path, "box")
    invocation = Invocation("again", "MORE", session="resume", resume_from="first", fork=True,
                            tools=None, streamed=StreamedInput(
                                permissions=(PermissionAnswer("Bash", "deny", "no"),)))
    spec = json.loads(ClaudeAgentSdkTs(tmp_path).command(
        _binary(tmp_path), invocation, _context(box)).argv[2])
    assert {k: spec[k] for k in ("tools", "resume", "fork", "session_id", "settings",
                                 "streamed")} == {
        "tools": None, "resume": "aaaaaaaa-2222-4333-8444-555555555555", "fork": True,
        "session_id": None, "settings": None, "streamed": {"permissions": True}}


def test_a_generic_loop_run_is_put_in_the_clis_terms_first(tmp_path: Path) -> None:
    box = Sandbox.create(tmp_path, "box")
    invocation = Invocation("loop", "Add 2+3.", session="none", tools=None, loop_tools=True,
                            env={"ANTHROPIC_MAX_RETRIES": "2"})
    command = ClaudeAgentSdkTs(tmp_path).command(_binary(tmp_path), invocation,
                                                 _context(box, mcp_python="/usr/bin/python3"))
    spec = json.loads(command.argv[2])
    # the loop's tools as the MCP server the driver hands query(), its retries the CLI's
    config = json.loads(command.files[spec["mcp_config"]])
    assert list(config["mcpServers"]) == ["loop"]
    assert command.env["CLAUDE_CODE_MAX_RETRIES"] == "2"
    assert "ANTHROPIC_MAX_RETRIES" not in command.env


# ---- capabilities --------------------------------------------------------------------------

HELP = " ".join(flag for flags in CAPABILITY_FLAGS.values() for flag in flags)


@pytest.mark.parametrize(("help_text", "lacking"), [
    (HELP, {}),
    (HELP.replace("--fork-session", ""), {"fork": "no --fork-session in its --help nor in its files"}),
    (HELP.replace("--plugin-dir", ""), {"plugin_dir": "no --plugin-dir in its --help nor in its files"}),
])
def test_capabilities_are_the_bundled_clis_flags(help_text: str, lacking: dict[str, str],
                                                 tmp_path: Path) -> None:
    (tmp_path / "help.txt").write_text(help_text)
    capabilities = ClaudeAgentSdkTs(tmp_path).capabilities(_binary(tmp_path))
    # the driver passes every capability the CLI has (plugin folders as query()'s plugins,
    # streamed input relayed): what is missing is what the CLI lacks or Claude Code is not
    assert dict(capabilities.missing) == {**NOT_CLAUDE_CODE, **lacking}
    assert capabilities.version_lacks == frozenset(lacking)
    assert capabilities.supported == frozenset(CAPABILITIES) - set(NOT_CLAUDE_CODE) - set(lacking)
    # the generic loop's tools reach it as an MCP server, named as the CLI names those
    assert capabilities.tool_names == {name: f"mcp__loop__{name}"
                                       for name in ("add", "fail", "read_file")}


def test_help_is_asked_of_the_cli_the_sdk_runs(tmp_path: Path) -> None:
    client = ClaudeAgentSdkTs(tmp_path)
    native = _binary(tmp_path)
    assert client.help_argv(native) == [str(native.entry), "--help"]
    script = _binary(tmp_path, f"node_modules/{PACKAGE}/cli.js")
    assert client.help_argv(script) == ["/usr/bin/node", str(script.entry), "--help"]


# ---- the driver, against a stand-in SDK ----------------------------------------------------

FAKE_SDK = """
export function query({ prompt, options }) {
  const mode = process.env.FAKE_MODE || "echo";
  async function* run() {
    yield { type: "system", subtype: "init", options: { ...JSON.parse(JSON.stringify(options)),
            canUseTool: typeof options.canUseTool, stderr: typeof options.stderr },
            prompt: typeof prompt === "string" ? prompt : "streamed" };
    if (mode === "throw") throw new Error("boom");
    if (typeof prompt !== "string") {
      for await (const line of prompt) {
        yield { type: "user", echoed: line };
        const decided = await options.canUseTool("Bash", { command: "ls" },
                                                 { toolUseID: "toolu_1" });
        yield { type: "system", subtype: "decided", decided };
      }
    }
    yield { type: "result", subtype: "success", is_error: false, result: "done" };
    if (mode === "throw-after-result") throw new Error("Claude Code process exited with code 1");
  }
  const messages = run();
  messages.setModel = async (model) => { process.stderr.write(`setModel ${model}\\n`); };
  messages.interrupt = async () => { throw new Error("not now"); };
  return messages;
}
"""


def _fake_sdk(tmp_path: Path) -> Path:
    _package(tmp_path, {"sdk.mjs": FAKE_SDK})
    mcp = tmp_path / "mcp.json"
    mcp.write_text(json.dumps({"mcpServers": {"probe": {"command": "python3", "args": ["s"]}}}))
    return mcp


def _spec(**changed: Any) -> str:
    spec = {"prompt": "GO", "model": "m", "tools": ["Read"], "max_turns": 3, "resume": None,
            "fork": False, "session_id": "s-1", "settings": "/h/settings.json",
            "extra_args": ["--fallback-model", "f", "--flag"], "mcp_config": None,
            "streamed": None, "cli": "/c/claude", "plugin_dirs": []}
    return json.dumps({**spec, **changed})


def _drive(tmp_path: Path, spec: str, mode: str = "echo") -> tuple[int, list[dict[str, Any]], str]:
    assert NODE is not None
    done = subprocess.run([NODE, str(DRIVER), spec], capture_output=True, text=True, timeout=60,
                          cwd=tmp_path, env={"NODE_PATH": str(tmp_path / "node_modules"),
                                             "FAKE_MODE": mode, "PATH": "/usr/bin:/bin"})
    return done.returncode, [json.loads(line) for line in done.stdout.splitlines()], done.stderr


@needs_node
def test_the_driver_gives_query_the_spec_as_its_options(tmp_path: Path) -> None:
    mcp = _fake_sdk(tmp_path)
    code, events, _ = _drive(tmp_path, _spec(mcp_config=str(mcp), plugin_dirs=["/p/one"],
                                             resume="r-0", fork=True))
    assert code == 0 and [e["type"] for e in events] == ["system", "result"]
    assert events[0]["prompt"] == "GO"
    assert events[0]["options"] == {
        "cwd": str(tmp_path), "env": {"FAKE_MODE": "echo", "PATH": "/usr/bin:/bin"},
        "pathToClaudeCodeExecutable": "/c/claude", "model": "m",
        "permissionMode": "bypassPermissions", "allowDangerouslySkipPermissions": True,
        "extraArgs": {"fallback-model": "f", "flag": None, "strict-mcp-config": None},
        "tools": ["Read"], "maxTurns": 3, "resume": "r-0", "forkSession": True,
        "sessionId": "s-1", "settings": "/h/settings.json",
        "mcpServers": {"probe": {"command": "python3", "args": ["s"]}},
        "plugins": [{"type": "local", "path": "/p/one"}],
        "canUseTool": "undefined", "stderr": "function"}


@needs_node
def test_a_cli_js_runs_on_the_drivers_node_and_unset_options_stay_unset(tmp_path: Path) -> None:
    _fake_sdk(tmp_path)
    code, events, _ = _drive(tmp_path, _spec(cli="/c/cli.js", tools=None, max_turns=None,
                                             session_id=None, settings=None, extra_args=[]))
    options = events[0]["options"]
    assert code == 0 and options["executable"] == NODE and options["extraArgs"] == {}
    assert not {"tools", "maxTurns", "sessionId", "settings", "mcpServers", "plugins", "resume",
                "forkSession"} & set(options)


@needs_node
def test_an_sdk_error_is_a_result_event_and_exit_1(tmp_path: Path) -> None:
    _fake_sdk(tmp_path)
    code, events, stderr = _drive(tmp_path, _spec(), mode="throw")
    assert code == 1 and events[-1] == {"type": "result", "subtype": "error", "is_error": True,
                                        "result": "Error: boom"}
    assert "agent-sdk-ts: Error: boom" in stderr


@needs_node
def test_an_error_after_the_clis_own_result_leaves_that_result_last(tmp_path: Path) -> None:
    _fake_sdk(tmp_path)
    code, events, stderr = _drive(tmp_path, _spec(), mode="throw-after-result")
    assert code == 1 and [e["type"] for e in events] == ["system", "result"]
    assert events[-1]["subtype"] == "success"
    assert "Claude Code process exited with code 1" in stderr


@needs_node
def test_a_streamed_run_relays_the_input_protocol(tmp_path: Path) -> None:
    assert NODE is not None
    _fake_sdk(tmp_path)
    process = subprocess.Popen(
        [NODE, str(DRIVER), _spec(streamed={"permissions": True})], cwd=tmp_path,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={"NODE_PATH": str(tmp_path / "node_modules"), "PATH": "/usr/bin:/bin"})
    assert process.stdin is not None and process.stdout is not None
    timer = threading.Timer(60, process.kill)
    timer.start()
    try:
        user = {"type": "user", "message": {"role": "user", "content": "hi"}, "uuid": "u-1"}
        process.stdin.write(json.dumps(user) + "\n")
        process.stdin.flush()
        seen = []
        while not seen or seen[-1]["type"] != "control_request":
            seen.append(json.loads(process.stdout.readline()))
        assert seen[-1] == {"type": "control_request", "request_id": "driver-1", "request": {
            "subtype": "can_use_tool", "tool_name": "Bash", "input": {"command": "ls"},
            "tool_use_id": "toolu_1"}}
        for line in [
                {"type": "control_response", "response": {
                    "subtype": "success", "request_id": "driver-1",
                    "response": {"behavior": "deny", "message": "not that"}}},
                {"type": "control_request", "request_id": "r1",
                 "request": {"subtype": "set_model", "model": "m2"}},
                {"type": "control_request", "request_id": "r2", "request": {"subtype": "interrupt"}},
                {"type": "control_request", "request_id": "r3", "request": {"subtype": "rewind"}}]:
            process.stdin.write(json.dumps(line) + "\n")
        # closing stdin (communicate does) says the harness is done: the driver ends the prompt
        rest, stderr = process.communicate(timeout=60)
    finally:
        timer.cancel()
    events = seen + [json.loads(line) for line in rest.splitlines()]
    options = events[0]["options"]
    assert (options["permissionMode"], options["allowDangerouslySkipPermissions"],
            options["canUseTool"], events[0]["prompt"]) == ("default", False, "function", "streamed")
    assert events[1] == {"type": "user", "echoed": user}  # the line as written
    assert {"type": "system", "subtype": "decided",
            "decided": {"behavior": "deny", "message": "not that"}} in events
    responses = [e["response"] for e in events if e["type"] == "control_response"]
    assert responses == [
        {"subtype": "success", "request_id": "r1"},
        {"subtype": "error", "request_id": "r2", "error": "Error: not now"},
        {"subtype": "error", "request_id": "r3",
         "error": 'Error: the driver has no SDK call for "rewind"'}]
    assert "setModel m2" in stderr
    assert events[-1]["type"] == "result" and process.returncode == 0


# ---- the real client (client tier: installed by ./scripts/test) -----------------------------

SDK_VERSION = "0.3.337"


@pytest.fixture(scope="module")
def sdk():  # type: ignore[no-untyped-def]
    return installed_client(f"claude-agent-sdk-ts@{SDK_VERSION}")


@pytest.mark.client
def test_the_install_names_the_native_binary_the_sdk_runs(sdk) -> None:  # type: ignore[no-untyped-def]
    client, binary = sdk
    assert binary.name == "claude-agent-sdk-ts" and binary.version == SDK_VERSION
    assert binary.entry.name == "claude"
    assert binary.entry.parent.name.startswith("claude-agent-sdk-linux-")
    assert binary.sha256 == sha256_file(binary.entry)
    assert {"run", "resume", "fork", "hooks", "streamed_input", "mcp", "plugin_dir"} <= \
        client.capabilities(binary).supported


@pytest.mark.client
def test_the_published_probe_runs_through_the_ts_sdk(sdk, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    client, binary = sdk
    outcome = run_probe(PROBE, client, binary, tmp_path)
    assert outcome.error is None
    assert [(c.id, c.observed) for c in outcome.checks if not c.passed] == []
    evidence = outcome.evidence
    assert evidence is not None
    # query() drove the bundled CLI: its requests say so, and which SDK started it
    agents = {r["headers"].get("user-agent") for r in evidence.requests()}
    assert all(agent and "claude-cli/" in agent and "sdk-ts" in agent for agent in agents), agents
