"""What the agent-loop client kinds share: a driver gives the loop three tools and prints events.

A loop kind (the TypeScript SDK's tool runner, the Vercel AI SDK, pydantic-ai, LangGraph) is
installed at an exact version from its registry into its own cache folder, and run as
``LAUNCHER DRIVER
SPEC_JSON`` inside the probe's sandbox with an allow-listed environment. The driver (one per
kind, beside its module) gives the loop the tools ``add``, ``fail`` (always raises) and
``read_file``, runs the invocation's prompt with its step limit, retries and options, and
prints an ``assistant`` event per model reply and one ``result`` event, in the shapes of
Claude Code's stream-json (``tool_runner_driver.py`` is the first of them). Such a kind runs
the generic agent-loop catalog (``probes.catalog.agent_loop``) by default; Claude Code's
probes are not applicable to it.

``npm_install`` installs an npm package at an exact version with pinned companions (the
Vercel AI SDK's Anthropic provider); the report cites the SHA-256 of the package's main
module. A PyPI kind's import check at install runs contained (``probes.clients.info_run``).
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import tempfile
import time
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
from probes.clients.info_run import informational_run
from probes.clients.npm import (
    NPM_TIMEOUT,
    InstallError,
    cache_root,
    cached_or_made,
    published_versions,
    resolve_version,
    sha256_file,
)
from probes.clients.pypi import VenvInstalls
from probes.clients.specs import check_version, install_folder
from probes.core.evidence import Output
from probes.core.invocation import CAPABILITIES, Invocation
from probes.sandbox.folders import Sandbox, base_environment

__all__ = ["LOOP_CATALOG", "LOOP_SUPPORTED", "LOOP_WHY_NOT", "SYSTEM", "DriverLoop", "NpmLoop", "PypiLoop",
           "loop_spec", "npm_install"]

LOOP_CATALOG = "probes.catalog.agent_loop"
SYSTEM = "You are a calculator agent. Use the tools you are given."
LOOP_SUPPORTED = frozenset({"run", "max_turns", "loop_tools"})
LOOP_WHY_NOT = {"tools": "the loop offers the driver's own tools (add, fail, read_file), not "
                         "Claude Code's", "resume": "the driver keeps no sessions",
                "fork": "the driver keeps no sessions", "hooks": "the loop has no hooks",
                "fallback_model": "no fallback model option",
                "max_budget_usd": "no spending budget option",
                "streamed_input": "the driver takes no input while the loop runs",
                "mcp": "the driver's loop has the driver's tools only",
                "tool_runner": "not the Python SDK's tool runner",
                "threads": "the driver sends no message threads",
                "plugin_dir": "no plugins"}


def loop_spec(invocation: Invocation) -> dict[str, Any]:
    """What every driver reads (its argv[1], JSON): the prompt, the model, the system prompt,
    the step limit (None: the driver's default), the client's retries, the options."""
    return {"prompt": invocation.prompt, "model": invocation.model, "system": SYSTEM,
            "max_iterations": invocation.max_turns,
            "max_retries": int(invocation.env.get("ANTHROPIC_MAX_RETRIES") or 0),
            "options": invocation.settings or {}}


class DriverLoop:
    """The runs of a loop kind: everything but installing (``name``, ``package``,
    ``installed``, ``install``, ``published`` are the kind's)."""

    name: str
    package: str
    catalog = LOOP_CATALOG

    def capabilities(self, binary: ClientBinary) -> Capabilities:
        missing = {n: LOOP_WHY_NOT.get(n, "not supported by this loop")
                   for n in CAPABILITIES if n not in LOOP_SUPPORTED}
        return Capabilities(LOOP_SUPPORTED, missing)

    def prepare(self, box: Sandbox, seen: Any = str) -> dict[str, str]:
        return {}

    def environment(self, binary: ClientBinary) -> dict[str, str]:
        """What the kind's driver needs beyond the base environment (NODE_PATH)."""
        return {}

    def command(self, binary: ClientBinary, invocation: Invocation,
                context: RunContext) -> Command:
        env = {**base_environment(context.box), "ANTHROPIC_BASE_URL": context.base_url,
               "ANTHROPIC_API_KEY": DUMMY_API_KEY, **self.environment(binary),
               **context.extra_env}
        return Command([*binary.launcher, json.dumps(loop_spec(invocation), sort_keys=True)],
                       env, context.box.workspace)

    def read_output(self, stdout: str) -> Output:
        return Output.from_json_lines(stdout)

    def session_folder(self, box: Sandbox) -> Path | None:
        return None


def _npm(args: list[str]) -> subprocess.CompletedProcess[str]:
    npm = shutil.which("npm")
    if npm is None:
        raise InstallError("npm is not on PATH; install Node.js (20+) and npm to install clients")
    try:
        return subprocess.run([npm, *args], capture_output=True, text=True,
                              timeout=NPM_TIMEOUT, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise InstallError(f"npm {' '.join(args)} did not finish within {NPM_TIMEOUT}s") \
            from None


def _installed_version(prefix: Path, package: str) -> str:
    manifest = prefix / "node_modules" / package / "package.json"
    return str(json.loads(manifest.read_text())["version"])


def npm_install(cache: Path, package: str, version: str, companions: tuple[str, ...],
                entry: str, driver: Path) -> Path:
    """``package@version`` and its ``companions`` (npm specs such as ``@ai-sdk/anthropic@^2``)
    into ``cache/version``, staged then moved into place; the manifest cites ``entry`` (a
    path inside the package) and records each companion's installed version."""
    node = shutil.which("node")
    if node is None:
        raise InstallError("node is not on PATH; the loop's driver runs with node")
    directory = install_folder(cache, version)
    cache.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{version}.", dir=cache))
    try:
        done = _npm(["install", "--no-audit", "--no-fund", "--no-save", "--ignore-scripts",
                     "--prefix", str(staging), f"{package}@{version}", *companions])
        if done.returncode != 0:
            raise InstallError(f"npm install {package}@{version} {' '.join(companions)} "
                               f"failed: {done.stderr.strip()[-400:]}")
        if (found := _installed_version(staging, package)) != version:
            raise InstallError(f"asked npm for {package}@{version} but it installed {found}")
        cited = staging / "node_modules" / package / entry
        if not cited.is_file():
            raise InstallError(f"{package}@{version} has no {entry}")
        names = [c.rsplit("@", 1)[0] if c.rfind("@") > 0 else c for c in companions]
        manifest = {
            "package": package, "version": version,
            "platform": f"{platform.system().lower()}-{platform.machine()}",
            "entry": str(cited.relative_to(staging)), "sha256": sha256_file(cited),
            "launcher": [node, str(driver)],
            "companions": {n: _installed_version(staging, n) for n in names},
            "installed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        (staging / "install.json").write_text(json.dumps(manifest, indent=2, sort_keys=True))
        if directory.exists():
            shutil.rmtree(directory)
        os.replace(staging, directory)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return directory


class NpmLoop(DriverLoop):
    """A loop kind installed from npm and driven by a CommonJS driver under node."""

    registry = "npm"  # the grammar of its versions (probes.clients.specs)
    entry = "package.json"  # the file of the package the reports cite
    driver: Path

    def __init__(self, cache: Path | None = None):
        self.cache = (cache or cache_root()) / "clients" / self.name

    def companions(self, version: str) -> tuple[str, ...]:
        """The npm specs installed beside the package (a provider a version needs)."""
        return ()

    def _binary(self, directory: Path) -> ClientBinary | None:
        manifest = read_manifest(directory)
        if manifest is None:
            return None
        return ClientBinary(self.name, manifest["version"], manifest["platform"], self.package,
                            directory, directory / manifest["entry"],
                            (manifest["launcher"][0], str(self.driver)), manifest["sha256"])

    def installed(self) -> list[ClientBinary]:
        return scan_installs(self.cache, self._binary)

    def published(self) -> list[str]:
        return published_versions(self.package)

    def install(self, version: str) -> ClientBinary:
        check_version(self, version)
        exact = resolve_version(self.package, version)
        check_version(self, exact, exact=True)  # the registry's answer is input too
        binary, _ = cached_or_made(
            install_folder(self.cache, exact), self._binary,
            lambda: npm_install(self.cache, self.package, exact, self.companions(exact),
                                self.entry, self.driver),
            f"{self.package}@{exact}")
        return binary

    def environment(self, binary: ClientBinary) -> dict[str, str]:
        return {"NODE_PATH": str(binary.root / "node_modules")}


class PypiLoop(VenvInstalls, DriverLoop):
    """A loop from PyPI: each version in a venv of its own in the cache, with ``companions``
    (their newest of the day); the file the reports cite is ``entry`` in it. An install is
    refused unless ``imports`` (Python, run in the venv) succeeds: a version whose
    dependencies resolved to releases it cannot use never runs. What ``imports`` prints, if
    anything, is JSON kept in the install's manifest as ``companions``."""

    registry = "pypi"  # the grammar of its versions (probes.clients.specs)
    requirement = ""  # what pip installs, e.g. "pydantic-ai-slim[anthropic]"
    entry = ""  # the loop's module, relative to site-packages
    what = ""  # what ``entry`` is, for the error naming it missing
    driver: Path
    imports = ""
    companions: tuple[str, ...] = ()

    def __init__(self, cache: Path | None = None):
        self.cache = (cache or cache_root()) / "clients" / self.name

    def install(self, version: str) -> ClientBinary:
        version = self.resolve(version)
        package = self.package

        def loop_module(venv: Path) -> tuple[Path, dict[str, Any]]:
            found = sorted(venv.glob(f"lib/python*/site-packages/{self.entry}"))
            if not found:
                raise InstallError(f"{package}=={version} has no {self.what} ({self.entry})")
            # importing the loop runs its code: contained, as every run of the client
            done = informational_run([str(venv / "bin" / "python"), "-c", self.imports],
                                     [venv], timeout=120)
            if done.returncode != 0:
                raise InstallError(f"{package}=={version} installed but does not import: "
                                   f"{(done.stderr.strip().splitlines() or ['?'])[-1]}")
            printed = done.stdout.strip()
            return found[0], ({"companions": json.loads(printed)} if printed else {})

        return self.cached_or_installed(version, loop_module, self.requirement, self.companions)
