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
    scan_installs,
)
from probes.clients.claude_cli import DUMMY_API_KEY
from probes.clients.npm import InstallError, cache_root
from probes.clients.pypi import install_venv, newest, published_versions, venv_binary
from probes.clients.specs import LATEST, check_version, install_folder
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


class AnthropicToolRunner:
    name = "anthropic-tool-runner"
    package = PACKAGE
    registry = "pypi"  # the grammar of its versions (probes.clients.specs)
    catalog = CATALOG

    def __init__(self, cache: Path | None = None):
        self.cache = (cache or cache_root()) / "clients" / self.name

    def _binary(self, directory: Path) -> ClientBinary | None:
        return venv_binary(self.name, PACKAGE, directory, DRIVER)

    def installed(self) -> list[ClientBinary]:
        return scan_installs(self.cache, self._binary)

    def published(self) -> list[str]:
        return published_versions(PACKAGE)

    def resolve(self, version: str) -> str:
        """``latest`` as the newest version published; any other version as it is."""
        check_version(self, version)
        return newest(self.published()) if version == LATEST else version

    def install(self, version: str) -> ClientBinary:
        version = self.resolve(version)
        check_version(self, version, exact=True)  # the index's answer is input too
        existing = self._binary(install_folder(self.cache, version))
        if existing is not None:
            return existing

        def runner_module(venv: Path) -> tuple[Path, dict[str, Any]]:
            found = sorted(venv.glob(f"lib/python*/site-packages/{ENTRY}"))
            if not found:
                raise InstallError(f"{PACKAGE}=={version} has no tool runner ({ENTRY})")
            return found[0], {"threads": (found[0].parent.parent / "threads").is_dir()}

        directory = install_venv(self.cache, PACKAGE, version, runner_module)
        binary = self._binary(directory)
        if binary is None:
            raise InstallError(f"{PACKAGE}=={version} installed into {directory} but is unusable")
        return binary

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
