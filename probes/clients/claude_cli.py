"""What every client built on the Claude Code CLI shares: its sandbox layout, environment,
settings file (hooks go there), sessions, stream-json output and --help-declared flags.

Claude Code itself and the Claude Agent SDK (which drives its bundled CLI) both build
on this; each adds how it is installed and how a run is launched.

Every execution of the CLI is contained, its ``--version`` at install and its ``--help``
(kept beside the install as ``help.txt``) included: they run in bubblewrap, shown only the
install and the system (``probes.clients.info_run``), never on the host unless the user
chose to run the client uncontained where bubblewrap cannot start (``--no-sandbox``).
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

from probes.clients.base import Capabilities, ClientBinary, HookCommand, RunContext
from probes.clients.info_run import informational_run
from probes.clients.mentions import look_up
from probes.clients.npm import InstallError
from probes.core.evidence import Output
from probes.core.files import write_text
from probes.core.invocation import CAPABILITIES, Invocation
from probes.core.loop_tools import LOOP_TOOL_NAMES, LOOP_TOOLS
from probes.core.mcp import SERVER_SCRIPT, mcp_config
from probes.core.probe import HARNESS_CLASSIFIER
from probes.sandbox.folders import Sandbox, base_environment

__all__ = ["CAPABILITY_FLAGS", "DUMMY_API_KEY", "INFO_ENV", "LOOP_RETRIES_ENV", "NOT_CLAUDE_CODE",
           "ClaudeCliBase", "check_printed_version", "path_slug"]

DUMMY_API_KEY = "sk-ant-loopprobe-dummy-key"
# the flags of the CLI each capability needs; --max-turns and the settings file (hooks) work
# in every version we run but --help lists neither (2.0.77 to 2.1.332)
CAPABILITY_FLAGS: dict[str, tuple[str, ...]] = {
    "run": ("--print", "--output-format", "--verbose", "--model", "--permission-mode",
            "--dangerously-skip-permissions", "--session-id"),
    "tools": (),  # --tools, or --allowedTools before it existed
    "max_turns": (),
    "hooks": (),
    "resume": ("--resume",),
    "fork": ("--fork-session",),
    "fallback_model": ("--fallback-model",),
    "max_budget_usd": ("--max-budget-usd",),
    # --permission-prompt-tool is not in --help before 2.1.3xx but works with stream input
    "streamed_input": ("--input-format", "--replay-user-messages"),
    "mcp": ("--mcp-config", "--strict-mcp-config"),
    "plugin_dir": ("--plugin-dir",),
    # the generic agent-loop catalog's tools, given as an MCP server (probes.core.loop_tools)
    "loop_tools": ("--mcp-config", "--strict-mcp-config"),
}
# capabilities of other client kinds that the CLI has no counterpart for
NOT_CLAUDE_CODE = {"tool_runner": "Claude Code is not the SDK's tool runner",
                   "threads": "Claude Code does not send message threads"}
# a loop invocation's retries, as the drivers read them (probes.clients.loop_driver.loop_spec)
LOOP_RETRIES_ENV = "ANTHROPIC_MAX_RETRIES"


# what an informational run (--help, --version) adds to the allow-listed environment; its
# config folder is the default, in the run's fresh home
INFO_ENV = {"DISABLE_AUTOUPDATER": "1"}


def check_printed_version(argv: list[str], expected: str | None, exact: bool = False, *,
                          root: Path) -> None:
    """Refuse a fresh install whose CLI (``argv``, of the install in ``root``) does not exit 0
    from ``--version`` printing ``expected`` (in its output, or as all of it when ``exact``;
    any version when None). The run is contained, shown ``root`` read-only."""
    try:
        done = informational_run([*argv, "--version"], [root], INFO_ENV)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise InstallError(f"{argv[-1]} --version failed: {error}") from None
    printed = done.stdout.strip()
    if done.returncode != 0 or (expected is not None
                                and (printed != expected if exact else expected not in printed)):
        raise InstallError(
            f"{argv[-1]} --version: expected {expected or 'a version'} and exit 0, found "
            f"{printed[:200]!r} and exit {done.returncode} (stderr: {done.stderr.strip()[:200]})")


def path_slug(path: Path | str) -> str:
    """How Claude Code names a project directory: every non-alphanumeric character becomes '-'."""
    return re.sub(r"[^A-Za-z0-9]", "-", str(path))


class ClaudeCliBase:
    """The Claude Code CLI's side of the ``Client`` protocol; subclasses install and launch."""

    name: str
    package: str

    def help_argv(self, binary: ClientBinary) -> list[str]:
        """The command printing the CLI's --help (the CLI the client runs)."""
        return [*binary.launcher, "--help"]

    def help_text(self, binary: ClientBinary) -> str:
        """The CLI's ``--help`` output, read once (contained) and kept beside the install. A
        run that fails or prints nothing is a harness error (raised, never kept): read as a
        help listing no flag, it would make every flag's probe absent on this version."""
        cached = binary.root / "help.txt"
        if not cached.is_file():
            done = informational_run(self.help_argv(binary), [binary.root], INFO_ENV)
            if done.returncode != 0 or not done.stdout.strip():
                raise RuntimeError(
                    f"{binary.name} {binary.version}: --help exited {done.returncode} printing "
                    f"{len(done.stdout)} bytes (expected exit 0 and its options; stderr: "
                    f"{done.stderr.strip()[-300:]!r})")
            write_text(cached, done.stdout + done.stderr)
        return cached.read_text()

    # capabilities this kind of client has no way to pass, whatever its CLI's --help says
    not_passed: ClassVar[Mapping[str, str]] = {}

    def capabilities(self, binary: ClientBinary) -> Capabilities:
        text = self.help_text(binary)
        unlisted = sorted({flag for flags in CAPABILITY_FLAGS.values() for flag in flags
                           if flag not in text})
        # a flag can work unlisted: one --help leaves out counts as missing only when the
        # client's own files never mention it either (the run's premise checks decide the rest)
        mentioned = (look_up(binary, unlisted).get("found") or {}) if unlisted else {}
        supported, missing, version_lacks = set(), {}, set()
        for name in CAPABILITIES:
            if name in NOT_CLAUDE_CODE or name in self.not_passed:
                missing[name] = NOT_CLAUDE_CODE.get(name) or self.not_passed[name]
                continue
            absent = [flag for flag in CAPABILITY_FLAGS.get(name, ())
                      if flag not in text and not mentioned.get(flag)]
            if absent:
                missing[name] = f"no {', '.join(absent)} in its --help nor in its files"
                version_lacks.add(name)  # a flag of other versions, not of this one
            else:
                supported.add(name)
        names = {tool: LOOP_TOOLS.tool_name(tool) for tool in LOOP_TOOL_NAMES} \
            if "loop_tools" in supported else {}
        return Capabilities(frozenset(supported), missing, frozenset(version_lacks), names,
                            HARNESS_CLASSIFIER)

    def cli_invocation(self, invocation: Invocation) -> Invocation:
        """The invocation in the CLI's terms. A generic agent-loop run (``loop_tools``) states
        its loop as the drivers read it; the CLI gets the same: the tools as an MCP server
        (``probes.core.loop_tools``), the retries as ``CLAUDE_CODE_MAX_RETRIES``, extended
        thinking's budget as ``MAX_THINKING_TOKENS`` (the CLI chooses its own max_tokens,
        above the budget). Any other invocation is the CLI's already."""
        if not invocation.loop_tools:
            return invocation
        if invocation.mcp is not None:
            raise ValueError(f"invocation {invocation.name!r} asks for the loop tools and its "
                             "own MCP server; the CLI is given one")
        env = dict(invocation.env)
        retries = env.pop(LOOP_RETRIES_ENV, None)
        if retries is not None:
            env["CLAUDE_CODE_MAX_RETRIES"] = retries
        options = dict(invocation.settings or {})
        thinking = options.pop("thinking", None)
        options.pop("max_tokens", None)
        if isinstance(thinking, dict) and thinking.get("type") == "enabled":
            env["MAX_THINKING_TOKENS"] = str(thinking["budget_tokens"])
        if options:
            raise ValueError(f"invocation {invocation.name!r}: loop options the CLI has no "
                             f"counterpart for: {sorted(options)}")
        return replace(invocation, mcp=LOOP_TOOLS, env=env, settings=None)

    # ---- the sandbox -----------------------------------------------------------

    def config_dir(self, box: Sandbox) -> Path:
        return box.home / ".claude"

    def prepare(self, box: Sandbox, seen: Callable[[Path], str] = str) -> dict[str, str]:
        box.files.make_dirs(box.inside(self.config_dir(box)))
        return {seen(self.config_dir(box)): "$CLAUDE_CONFIG_DIR",
                path_slug(seen(box.workspace)): "$WORKSPACE_SLUG"}

    def environment(self, box: Sandbox, base_url: str) -> dict[str, str]:
        env = base_environment(box)
        env.update({
            "CLAUDE_CONFIG_DIR": str(self.config_dir(box)),
            "CLAUDE_CODE_TMPDIR": str(box.tmp),
            "ANTHROPIC_BASE_URL": base_url,
            "ANTHROPIC_API_KEY": DUMMY_API_KEY,
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            # the bypass flags refuse to run as root without it
            "IS_SANDBOX": "1",
            # probes script their faults; retries are opted into where a probe tests them
            "CLAUDE_CODE_MAX_RETRIES": "0",
        })
        return env

    def run_environment(self, box: Sandbox, base_url: str, invocation: Invocation,
                        extra: dict[str, str]) -> dict[str, str]:
        merged: dict[str, str | None] = {**self.environment(box, base_url), **extra,
                                         **invocation.env}
        return {k: v for k, v in merged.items() if v is not None}

    def settings_path(self, box: Sandbox) -> Path:
        return self.config_dir(box) / "settings.json"

    def settings(self, invocation: Invocation, hooks: HookCommand | None) -> dict[str, Any] | None:
        """The user settings of a run: the invocation's own, with the recorder's hooks added
        (a hook the invocation sets for an event wins over the recorder's)."""
        if hooks is None:
            return invocation.settings
        settings = dict(invocation.settings or {})
        recorder = {event: [{"matcher": "*", "hooks": [{"type": "command",
                                                        "command": hooks.command}]}]
                    for event in hooks.events}
        settings["hooks"] = {**recorder, **settings.get("hooks", {})}
        return settings

    def settings_files(self, box: Sandbox, invocation: Invocation,
                       hooks: HookCommand | None) -> dict[str, str]:
        settings = self.settings(invocation, hooks)
        if settings is None:
            return {}
        return {str(self.settings_path(box)): json.dumps(settings, indent=2, sort_keys=True)}

    # ---- the command line --------------------------------------------------------

    def input_args(self, invocation: Invocation) -> list[str]:
        """The prompt as an argument, or stream-json on stdin (the prompt is its first line)."""
        if invocation.streamed is None:
            return [invocation.prompt]
        return ["--input-format", "stream-json"]

    def permission_args(self, invocation: Invocation) -> list[str]:
        """Bypassed, unless a streamed run scripts the answers: the client then asks its
        caller (can_use_tool control requests)."""
        if invocation.streamed is not None and invocation.streamed.permissions is not None:
            return ["--permission-prompt-tool", "stdio", "--permission-mode", "default"]
        return ["--permission-mode", "bypassPermissions", "--dangerously-skip-permissions"]

    def mcp_files(self, invocation: Invocation, context: RunContext) -> dict[str, str]:
        """The MCP server's spec and the ``--mcp-config`` file of a run given one."""
        if invocation.mcp is None:
            return {}
        if context.mcp_python is None:
            raise ValueError(f"invocation {invocation.name!r} has an MCP server but the run "
                             "was given no MCP runtime")
        spec = context.box.inputs / "mcp" / f"{invocation.name}.spec.json"
        config = mcp_config(invocation.mcp, python=context.mcp_python,
                            script=str(SERVER_SCRIPT), spec_path=str(spec),
                            socket_path=context.record_socket, run=invocation.name)
        return {str(spec): json.dumps(invocation.mcp.to_json(), indent=2),
                str(self.mcp_config_path(context.box, invocation)): json.dumps(config, indent=2)}

    def mcp_config_path(self, box: Sandbox, invocation: Invocation) -> Path:
        return box.inputs / "mcp" / f"{invocation.name}.config.json"

    def mcp_args(self, invocation: Invocation, context: RunContext) -> list[str]:
        if invocation.mcp is None:
            return []
        return ["--mcp-config", str(self.mcp_config_path(context.box, invocation)),
                "--strict-mcp-config"]

    # ---- what it leaves behind ---------------------------------------------------

    def read_output(self, stdout: str) -> Output:
        return Output.from_json_lines(stdout)

    def session_folder(self, box: Sandbox) -> Path | None:
        return self.config_dir(box) / "projects"
