"""The Anthropic SDK's tool runner (PyPI ``anthropic``) as a loop client of its own.

Each version is installed into a venv of its own in the cache; the file the reports cite
(its SHA-256) is the SDK's tool runner module, ``anthropic/lib/tools/_beta_runner.py``.
A run is ``tool_runner_driver.py`` in that venv: the runner with the driver's tools, in
the probe's sandbox with an allow-listed environment. It has no sessions, hooks or
Claude Code tools: the Claude Code probes are not applicable to it, and its own probes
(``probes.catalog.tool_runner``, its default catalog) are not applicable to Claude Code.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from probes.clients.base import (
    Capabilities,
    ClientBinary,
    Command,
    RunContext,
    read_manifest,
)
from probes.clients.claude_cli import DUMMY_API_KEY
from probes.clients.npm import InstallError, cache_root
from probes.clients.pypi import VenvInstalls
from probes.core.evidence import Output
from probes.core.invocation import CAPABILITIES, Invocation
from probes.sandbox.folders import Sandbox, base_environment

__all__ = ["CATALOG", "DRIVER", "ENTRY", "PACKAGE", "SUPPORTED", "SYSTEM", "WHY_NOT",
           "AnthropicToolRunner"]

PACKAGE = "anthropic"
ENTRY = "anthropic/lib/tools/_beta_runner.py"
CATALOG = "probes.catalog.tool_runner"
DRIVER = Path(__file__).with_name("tool_runner_driver.py")
SYSTEM = "You are a calculator agent. Use the tools you are given."
# what the runner does, and the capabilities of Claude Code it has no counterpart for
SUPPORTED = frozenset({"run", "max_turns", "tool_runner", "loop_tools"})
WHY_NOT = {"tools": "the runner offers the driver's own tools (add, fail, read_file), not "
                    "Claude Code's", "resume": "a tool runner keeps no sessions",
           "fork": "a tool runner keeps no sessions", "hooks": "a tool runner has no hooks",
           "fallback_model": "no fallback model option",
           "max_budget_usd": "no spending budget option",
           "streamed_input": "a tool runner takes no input while it runs",
           "mcp": "the probe's tool runner has the driver's tools only"}


class AnthropicToolRunner(VenvInstalls):
    name = "anthropic-tool-runner"
    package = PACKAGE
    driver = DRIVER
    registry = "pypi"  # the grammar of its versions (probes.clients.specs)
    catalog = CATALOG

    def __init__(self, cache: Path | None = None):
        self.cache = (cache or cache_root()) / "clients" / self.name

    def install(self, version: str) -> ClientBinary:
        version = self.resolve(version)
        def runner_module(venv: Path) -> tuple[Path, dict[str, Any]]:
            found = sorted(venv.glob(f"lib/python*/site-packages/{ENTRY}"))
            if not found:
                raise InstallError(f"{PACKAGE}=={version} has no tool runner ({ENTRY})")
            return found[0], {"threads": (found[0].parent.parent / "threads").is_dir()}

        return self.cached_or_installed(version, runner_module)

    def capabilities(self, binary: ClientBinary) -> Capabilities:
        manifest: dict[str, Any] = read_manifest(binary.root) or {}
        supported = set(SUPPORTED)
        missing = dict(WHY_NOT)
        if manifest.get("threads"):
            supported.add("threads")
        else:
            missing["threads"] = f"{PACKAGE} {binary.version} has no message threads (lib/threads)"
        for name in CAPABILITIES:
            if name not in supported:
                missing.setdefault(name, "not supported by a tool runner")
        # message threads came with later SDK versions: their absence is this version's
        lacks = frozenset({"threads"}) - supported
        return Capabilities(frozenset(supported), missing, lacks)

    def prepare(self, box: Sandbox, seen: Any = str) -> dict[str, str]:
        return {}

    def command(self, binary: ClientBinary, invocation: Invocation,
                context: RunContext) -> Command:
        spec = {"prompt": invocation.prompt, "model": invocation.model, "system": SYSTEM,
                "max_iterations": invocation.max_turns,
                "max_retries": int(invocation.env.get("ANTHROPIC_MAX_RETRIES") or 0),
                "options": invocation.settings or {}}
        env = {**base_environment(context.box), "ANTHROPIC_BASE_URL": context.base_url,
               "ANTHROPIC_API_KEY": DUMMY_API_KEY, **context.extra_env}
        return Command([*binary.launcher, json.dumps(spec)], env, context.box.workspace)

    def read_output(self, stdout: str) -> Output:
        return Output.from_json_lines(stdout)

    def session_folder(self, box: Sandbox) -> Path | None:
        return None
