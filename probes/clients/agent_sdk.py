"""The Claude Agent SDK for Python (PyPI ``claude-agent-sdk``) as a second loop client.

Each version is installed into a venv of its own in the cache; the executed file is the
Claude Code binary the wheel bundles (its SHA-256 is what the reports cite). A run is the
SDK's ``query()`` driven by ``agent_sdk_driver.py`` in that venv, printing stream-json
shaped lines, in the same sandbox and allow-listed environment as the CLI client (the SDK
hands its own environment to the CLI it starts).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from probes.clients.base import ClientBinary, Command, RunContext
from probes.clients.claude_cli import ClaudeCliBase
from probes.clients.npm import InstallError, cache_root
from probes.clients.pypi import VenvInstalls
from probes.core.invocation import Invocation

__all__ = ["DRIVER", "PACKAGE", "ClaudeAgentSdk", "sdk_spec"]

PACKAGE = "claude-agent-sdk"
DRIVER = Path(__file__).with_name("agent_sdk_driver.py")


class ClaudeAgentSdk(VenvInstalls, ClaudeCliBase):
    # its driver gives the CLI one value per flag (the SDK's extra_args is a mapping)
    not_passed: ClassVar[Mapping[str, str]] = {
        "plugin_dir": "the Agent SDK driver does not pass plugin folders (its extra_args hold "
                      "one value per flag)"}
    name = "claude-agent-sdk"
    package = PACKAGE
    driver = DRIVER
    registry = "pypi"  # the grammar of its versions (probes.clients.specs)

    def __init__(self, cache: Path | None = None):
        self.cache = (cache or cache_root()) / "clients" / self.name

    def help_argv(self, binary: ClientBinary) -> list[str]:
        # the SDK passes its options to the CLI it bundles: that CLI's flags are what it can do
        return [str(binary.entry), "--help"]

    def install(self, version: str) -> ClientBinary:
        version = self.resolve(version)

        def bundled_cli(venv: Path) -> tuple[Path, dict[str, Any]]:
            bundled = sorted(venv.glob("lib/python*/site-packages/claude_agent_sdk/_bundled/claude"))
            if not bundled:
                raise InstallError(f"{PACKAGE}=={version} bundles no Claude Code binary")
            return bundled[0], {}

        return self.cached_or_installed(version, bundled_cli)

    def command(self, binary: ClientBinary, invocation: Invocation,
                context: RunContext) -> Command:
        invocation = self.cli_invocation(invocation)
        box = context.box
        spec = sdk_spec(self, invocation, context)
        env = self.run_environment(box, context.base_url, invocation, dict(context.extra_env))
        return Command([*binary.launcher, json.dumps(spec)], env, box.workspace,
                       {**self.settings_files(box, invocation, context.hooks),
                        **self.mcp_files(invocation, context)})


def sdk_spec(client: ClaudeCliBase, invocation: Invocation, context: RunContext) -> dict[str, Any]:
    """What an Agent SDK driver reads (its argv[1], JSON): the run as the SDK's options, the
    settings and MCP config files by their paths in the sandbox (``client`` writes them)."""
    box = context.box
    settings = client.settings(invocation, context.hooks)
    return {
        "prompt": invocation.prompt, "model": invocation.model,
        "tools": list(invocation.tools) if invocation.tools is not None else None,
        "max_turns": invocation.max_turns, "resume": context.resumed_session(invocation),
        "fork": invocation.fork,
        "session_id": context.session_ids.get(invocation.name)
        if invocation.session == "new" else None,
        "settings": str(client.settings_path(box)) if settings is not None else None,
        "extra_args": list(invocation.extra_args),
        "mcp_config": str(client.mcp_config_path(box, invocation))
        if invocation.mcp is not None else None,
        # the harness writes the CLI's input protocol to the driver, which relays it
        "streamed": None if invocation.streamed is None else {
            "permissions": None if invocation.streamed.permissions is None else True},
    }
