"""OpenCode (npm ``opencode-ai``): ``opencode run --format json`` with the loop tools over MCP.

Each version is installed from npm into its own cache folder; what runs (and what the reports
cite, its SHA-256) is the native executable of the optional dependency
``opencode-linux-x64`` (``bin/opencode``). A run is ``opencode run --format json --title T
-m anthropic/MODEL PROMPT`` in the workspace, its config file (``OPENCODE_CONFIG``, written
into the run's inputs, and the same inline, ``OPENCODE_CONFIG_CONTENT``, which OpenCode merges
after a workspace's own ``opencode.json``, so a user's setup cannot outrank it) saying:

- the ``anthropic`` provider's ``baseURL`` is the mock's ``/v1`` and its ``apiKey`` a dummy;
  the model is declared there, so the catalog of models.dev is never fetched
  (``OPENCODE_DISABLE_MODELS_FETCH``);
- the loop tools are the harness's MCP server (``probes.core.loop_tools``) as a ``local``
  ``mcp`` entry named ``loop``: OpenCode names its tools ``loop_add``, ``loop_fail`` and
  ``loop_read_file`` (``Capabilities.tool_names``), and every other tool is turned off
  (``"tools": {"*": false, "loop_*": true}``);
- the step limit is the ``build`` agent's ``steps``, its system prompt the drivers' own.

``--title`` keeps OpenCode from asking its small model for a session title (a request the
script does not expect). OpenCode's retries are its own (five, backing off from 2 s, not
configurable): the invocation's retries are not passed. Its JSON lines (``step_start``,
``text``, ``reasoning``, ``tool_use``, ``step_finish``, ``error``) are read as the drivers'
protocol by ``read_opencode_events``: one ``assistant`` event per model reply and one
``result``; OpenCode's exit status is its own.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

from probes.clients.base import (
    Capabilities,
    ClientBinary,
    Command,
    RunContext,
    read_manifest,
    scan_installs,
)
from probes.clients.claude_cli import DUMMY_API_KEY, check_printed_version
from probes.clients.claude_code import ELF_MAGIC
from probes.clients.loop_driver import LOOP_CATALOG, SYSTEM
from probes.clients.npm import (
    InstallError,
    cache_root,
    cached_or_installed,
    published_versions,
    resolve_version,
)
from probes.clients.specs import check_version, install_folder
from probes.core.evidence import Output
from probes.core.invocation import CAPABILITIES, Invocation
from probes.core.loop_tools import LOOP_TOOL_NAMES, LOOP_TOOLS
from probes.core.mcp import SERVER_SCRIPT, mcp_config
from probes.sandbox.folders import Sandbox, base_environment

__all__ = ["NATIVE_PACKAGES", "OPENCODE_ENV", "OPENCODE_SUPPORTED", "OPENCODE_WHY_NOT", "PACKAGE",
           "PLUGIN_PACKAGE", "TITLE", "OpenCode", "opencode_config", "read_opencode_events"]

PACKAGE = "opencode-ai"
# the optional dependencies holding the linux-x64 executable, the first found runs
NATIVE_PACKAGES = ("opencode-linux-x64", "opencode-linux-x64-baseline")
TITLE = "loopprobe"
# what OpenCode installs into its config folders at start (OpenCode.prepare)
PLUGIN_PACKAGE = "@opencode-ai/plugin"
OPENCODE_SUPPORTED = frozenset({"run", "max_turns", "loop_tools"})
OPENCODE_WHY_NOT = {
    "tools": "the loop is given the loop tools (add, fail, read_file) over MCP, not Claude "
             "Code's",
    "resume": "sessions are not driven (its --session is not mapped)",
    "fork": "sessions are not driven (its --fork is not mapped)",
    "hooks": "OpenCode's plugins are not Claude Code's hooks",
    "fallback_model": "no fallback model option",
    "max_budget_usd": "no spending budget option",
    "streamed_input": "opencode run takes one message",
    "mcp": "the loop's MCP server is the loop tools' only",
    "tool_runner": "not the Python SDK's tool runner",
    "threads": "OpenCode sends no message threads",
    "plugin_dir": "Claude Code's plugins are not OpenCode's"}
# nothing fetched at start: no update check, no models.dev, no default plugins, no LSP
# servers; no CLAUDE.md or skills of Claude Code read from the folders above the workspace
OPENCODE_ENV = {"OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_MODELS_FETCH": "1",
                "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1", "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
                "OPENCODE_DISABLE_SHARE": "1", "OPENCODE_DISABLE_CLAUDE_CODE": "1",
                "OPENCODE_DISABLE_EXTERNAL_SKILLS": "1"}


def _locate_entry(prefix: Path) -> tuple[Path, list[str | Path]]:
    for name in NATIVE_PACKAGES:
        native = prefix / "node_modules" / name / "bin" / "opencode"
        if native.is_file():
            with native.open("rb") as handle:
                if handle.read(4) == ELF_MAGIC:
                    return native, [native]
    raise InstallError(f"{PACKAGE} installed without its native executable: none of "
                       f"{', '.join(NATIVE_PACKAGES)} has bin/opencode in {prefix}/node_modules "
                       "(an optional dependency may be missing for this machine)")


def opencode_config(invocation: Invocation, base_url: str,
                    mcp_command: list[str]) -> dict[str, Any]:
    """The run's ``opencode.json``: the mock as the anthropic provider, the loop tools as the
    ``loop`` MCP server and no other tool, the step limit as the build agent's ``steps``."""
    options = dict(invocation.settings or {})
    model: dict[str, Any] = {"name": invocation.model}
    if "max_tokens" in options:
        model["limit"] = {"context": 200000, "output": int(options.pop("max_tokens"))}
    thinking = options.pop("thinking", None)
    if isinstance(thinking, dict) and thinking.get("type") == "enabled":
        model["options"] = {"thinking": {"type": "enabled",
                                         "budgetTokens": int(thinking["budget_tokens"])}}
    if options:
        raise ValueError(f"invocation {invocation.name!r}: loop options OpenCode has no "
                         f"counterpart for: {sorted(options)}")
    build: dict[str, Any] = {"prompt": SYSTEM}
    if invocation.max_turns is not None:
        build["steps"] = invocation.max_turns
    return {"$schema": "https://opencode.ai/config.json", "autoupdate": False,
            "share": "disabled", "model": f"anthropic/{invocation.model}",
            "provider": {"anthropic": {
                "options": {"baseURL": f"{base_url.rstrip('/')}/v1", "apiKey": DUMMY_API_KEY},
                "models": {invocation.model: model}}},
            "tools": {"*": False, f"{LOOP_TOOLS.name}_*": True},
            "agent": {"build": build},
            "mcp": {LOOP_TOOLS.name: {"type": "local", "command": mcp_command,
                                      "enabled": True}}}


def _block(part: dict[str, Any]) -> dict[str, Any] | None:
    kind = part.get("type")
    if kind == "text":
        return {"type": "text", "text": part.get("text", "")}
    if kind == "reasoning":
        return {"type": "thinking", "thinking": part.get("text", "")}
    if kind == "tool":
        state = part.get("state") or {}
        return {"type": "tool_use", "id": part.get("callID"), "name": part.get("tool"),
                "input": state.get("input"), "status": state.get("status")}
    return None


def read_opencode_events(stdout: str) -> Output:
    """OpenCode's JSON lines as the drivers' protocol: OpenCode's own events, then an
    ``assistant`` event per model reply (its parts by ``messageID``, in order: text,
    reasoning, tool calls; ``stop_reason``: its step's finish reason, e.g. ``tool-calls``,
    ``stop``), then one ``result``: an ``error`` event makes it an error with the error's name
    and message, else a success whose text is the last reply's and ``stop_reason`` its
    finish reason."""
    raw = Output.from_json_lines(stdout)
    replies: dict[str, dict[str, Any]] = {}
    error: dict[str, Any] | None = None
    for event in raw.events:
        kind, part = event.get("type"), event.get("part") or {}
        if kind == "error":
            error = event.get("error") or {}
            continue
        message = part.get("messageID")
        if not isinstance(message, str):
            continue
        reply = replies.setdefault(message, {"content": [], "stop_reason": None,
                                             "session_id": event.get("sessionID")})
        if kind == "step_finish":
            reply["stop_reason"] = part.get("reason")
        elif kind in ("text", "reasoning", "tool_use") and (block := _block(part)) is not None:
            reply["content"].append(block)
    events = list(raw.events)
    for reply in replies.values():
        events.append({"type": "assistant", "session_id": reply["session_id"],
                       "message": {"role": "assistant", "stop_reason": reply["stop_reason"],
                                   "content": reply["content"]}})
    session = next((e.get("sessionID") for e in raw.events if e.get("sessionID")), None)
    last = list(replies.values())[-1] if replies else {"content": [], "stop_reason": None}
    if error is not None:
        data = error.get("data") or {}
        events.append({"type": "result", "subtype": "error", "is_error": True,
                       "num_turns": len(replies), "session_id": session,
                       "result": f"{error.get('name')}: {data.get('message', data)}"})
    elif raw.events:
        events.append({"type": "result", "subtype": "success", "is_error": False,
                       "num_turns": len(replies), "session_id": session,
                       "result": "".join(b["text"] for b in last["content"]
                                         if b["type"] == "text"),
                       "stop_reason": last["stop_reason"]})
    return Output(events, raw.unparsed)


class OpenCode:
    name = "opencode"
    package = PACKAGE
    registry = "npm"  # the grammar of its versions (probes.clients.specs)
    catalog = LOOP_CATALOG

    def __init__(self, cache: Path | None = None):
        self.cache = (cache or cache_root()) / "clients" / self.name

    # ---- installs ------------------------------------------------------------

    def _binary(self, directory: Path) -> ClientBinary | None:
        manifest = read_manifest(directory)
        if manifest is None:
            return None
        entry = directory / manifest["entry"]
        return ClientBinary(self.name, manifest["version"], manifest["platform"], PACKAGE,
                            directory, entry, (str(entry),), manifest["sha256"])

    def installed(self) -> list[ClientBinary]:
        return scan_installs(self.cache, self._binary)

    def published(self) -> list[str]:
        return published_versions(PACKAGE)

    def install(self, version: str) -> ClientBinary:
        """The cached install of ``version`` (``latest`` allowed), installing it if needed."""
        check_version(self, version)
        exact = resolve_version(PACKAGE, version)
        check_version(self, exact, exact=True)  # the registry's answer is input too
        binary, fresh = cached_or_installed(PACKAGE, exact, install_folder(self.cache, exact),
                                            self._binary, _locate_entry)
        if fresh:
            check_printed_version(list(binary.launcher), exact, exact=True, root=binary.root)
        return binary

    # ---- runs ----------------------------------------------------------------

    def capabilities(self, binary: ClientBinary) -> Capabilities:
        missing = {n: OPENCODE_WHY_NOT.get(n, "not supported by OpenCode")
                   for n in CAPABILITIES if n not in OPENCODE_SUPPORTED}
        names = {tool: f"{LOOP_TOOLS.name}_{tool}" for tool in LOOP_TOOL_NAMES}
        return Capabilities(OPENCODE_SUPPORTED, missing, tool_names=names)

    def prepare(self, box: Sandbox, seen: Callable[[Path], str] = str) -> dict[str, str]:
        """OpenCode's global config folder, with its dependencies stated as installed: at
        start OpenCode installs ``@opencode-ai/plugin`` (for custom tools and plugins, none
        used here) from the npm registry into each config folder unless its
        ``package-lock.json`` lists it and ``node_modules`` exists."""
        folder = PurePosixPath(".config/opencode")
        files = box.files
        files.make_dirs(box.inside(box.home) / folder / "node_modules")
        needed = {PLUGIN_PACKAGE: "*"}
        files.write(box.inside(box.home) / folder / "package.json",
                    json.dumps({"dependencies": needed}, indent=2))
        files.write(box.inside(box.home) / folder / "package-lock.json",
                    json.dumps({"lockfileVersion": 3, "packages": {"": {"dependencies": needed}}},
                               indent=2))
        return {}

    def config_path(self, box: Sandbox, invocation: Invocation) -> Path:
        return box.inputs / "opencode" / f"{invocation.name}.json"

    def command(self, binary: ClientBinary, invocation: Invocation,
                context: RunContext) -> Command:
        if not invocation.loop_tools:
            raise ValueError(f"invocation {invocation.name!r}: OpenCode runs only the loop "
                             "catalog's invocations (loop_tools)")
        if context.mcp_python is None:
            raise ValueError(f"invocation {invocation.name!r} needs the loop tools' MCP "
                             "server but the run was given no MCP runtime")
        box = context.box
        spec = box.inputs / "mcp" / f"{invocation.name}.spec.json"
        server = mcp_config(LOOP_TOOLS, python=context.mcp_python, script=str(SERVER_SCRIPT),
                            spec_path=str(spec), socket_path=context.record_socket,
                            run=invocation.name)["mcpServers"][LOOP_TOOLS.name]
        config = opencode_config(invocation, context.base_url,
                                 [server["command"], *server["args"]])
        path = self.config_path(box, invocation)
        argv = [*binary.launcher, "run", "--format", "json", "--title", TITLE,
                "-m", f"anthropic/{invocation.model}", *invocation.extra_args,
                invocation.prompt]
        # the file is the run's record; the same config inline is what OpenCode merges last,
        # so a workspace's own opencode.json (a user's setup) cannot move the provider off
        # the mock or the model off the invocation's (a project config outranks OPENCODE_CONFIG)
        env: dict[str, str | None] = {**base_environment(box), **OPENCODE_ENV,
                                      "OPENCODE_CONFIG": str(path),
                                      "OPENCODE_CONFIG_CONTENT": json.dumps(config,
                                                                            sort_keys=True),
                                      **context.extra_env, **invocation.env}
        return Command(argv, {k: v for k, v in env.items() if v is not None}, box.workspace,
                       {str(spec): json.dumps(LOOP_TOOLS.to_json(), indent=2),
                        str(path): json.dumps(config, indent=2, sort_keys=True)})

    def read_output(self, stdout: str) -> Output:
        return read_opencode_events(stdout)

    def session_folder(self, box: Sandbox) -> Path | None:
        return None
