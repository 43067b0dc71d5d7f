"""The TypeScript Claude Agent SDK (npm ``@anthropic-ai/claude-agent-sdk``) as a client kind.

Each version is installed from npm into its own cache folder with its peer dependencies (npm 7
and later install them: ``zod``, then ``@anthropic-ai/sdk`` and ``@modelcontextprotocol/sdk``
from 0.3.143). The file the reports cite (its SHA-256) is the Claude Code the SDK runs on this
machine: from 0.2.113 the native binary of the optional dependency
``@anthropic-ai/claude-agent-sdk-<platform>-<arch>[-musl]`` (the SDK takes the first of these
that is installed, the one of node's libc first), before it the ``cli.js`` the package ships
(run with node). A run is ``node agent_sdk_ts_driver.mjs SPEC`` with the install's
``node_modules`` on ``NODE_PATH``: ``query()`` told to run that file
(``pathToClaudeCodeExecutable``), in the sandbox and allow-listed environment of the CLI client.
A fresh install's checks (the driver importing the SDK, the CLI's ``--version``) are contained
too (``probes.clients.info_run``).

Versions before 0.2.69 are refused: the driver passes ``query()`` the options ``sessionId``
(0.2.33 and later) and ``settings`` (0.2.69 and later; the hooks are in that file), which
older versions do not have.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from probes.clients.agent_sdk import sdk_spec
from probes.clients.base import ClientBinary, Command, RunContext, read_manifest, scan_installs
from probes.clients.claude_cli import ClaudeCliBase, check_printed_version
from probes.clients.claude_code import ELF_MAGIC
from probes.clients.info_run import informational_run
from probes.clients.npm import (
    VERSION_PATTERN,
    InstallError,
    cache_root,
    cached_or_installed,
    published_versions,
    resolve_version,
)
from probes.clients.specs import check_version, install_folder
from probes.core.invocation import Invocation

__all__ = ["DRIVER", "FIRST_DRIVEN", "PACKAGE", "PEERS", "ClaudeAgentSdkTs", "native_packages",
           "refuse_undriven"]

PACKAGE = "@anthropic-ai/claude-agent-sdk"
DRIVER = Path(__file__).with_name("agent_sdk_ts_driver.mjs")
FIRST_DRIVEN = "0.2.69"
# what the manifest records the installed version of, when installed (peers, dependencies)
PEERS = ("zod", "@anthropic-ai/sdk", "@modelcontextprotocol/sdk")
_CHECK_TIMEOUT = 120
# node's process.platform, process.arch and libc, as the SDK reads them to pick its binary
_NODE_PLATFORM = ("const r = process.report && process.report.getReport ? "
                  "process.report.getReport() : null; console.log(JSON.stringify([process.platform, "
                  "process.arch, r != null && r.header && r.header.glibcVersionRuntime === undefined]))")


def _numbers(version: str) -> tuple[int, int, int]:
    major, minor, patch = version.split("-", 1)[0].split("+", 1)[0].split(".")
    return int(major), int(minor), int(patch)


def native_packages(platform: str, arch: str, musl: bool) -> list[str]:
    """The optional dependencies whose ``claude`` the SDK runs on this platform, in the order
    it tries them (its own libc first on Linux)."""
    if platform != "linux":
        return [f"{PACKAGE}-{platform}-{arch}"]
    glibc, other = f"{PACKAGE}-linux-{arch}", f"{PACKAGE}-linux-{arch}-musl"
    return [other, glibc] if musl else [glibc, other]


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        raise InstallError("node is not on PATH; the Agent SDK's driver runs with node (20+)")
    return node


def _node_platform(node: str) -> tuple[str, str, bool]:
    done = subprocess.run([node, "-e", _NODE_PLATFORM], capture_output=True, text=True,
                          timeout=_CHECK_TIMEOUT, stdin=subprocess.DEVNULL)
    platform, arch, musl = json.loads(done.stdout)
    return str(platform), str(arch), bool(musl)


def _package_json(folder: Path) -> dict[str, Any]:
    found: dict[str, Any] = json.loads((folder / "package.json").read_text())
    return found


class ClaudeAgentSdkTs(ClaudeCliBase):
    # what the driver has no way to pass, whatever the bundled CLI's --help says: none
    not_passed: ClassVar[Mapping[str, str]] = {}
    name = "claude-agent-sdk-ts"
    package = PACKAGE
    registry = "npm"  # the grammar of its versions (probes.clients.specs)

    def __init__(self, cache: Path | None = None):
        self.cache = (cache or cache_root()) / "clients" / self.name

    def help_argv(self, binary: ClientBinary) -> list[str]:
        # the SDK passes its options to the CLI it runs: that CLI's flags are what it can do
        if binary.entry.suffix == ".js":
            return [binary.launcher[0], str(binary.entry), "--help"]
        return [str(binary.entry), "--help"]

    # ---- installs ------------------------------------------------------------

    def _binary(self, directory: Path) -> ClientBinary | None:
        manifest = read_manifest(directory)
        if manifest is None:
            return None
        return ClientBinary(self.name, manifest["version"], manifest["platform"], PACKAGE,
                            directory, directory / manifest["entry"],
                            (manifest["launcher"][0], str(DRIVER)), manifest["sha256"])

    def installed(self) -> list[ClientBinary]:
        return scan_installs(self.cache, self._binary)

    def published(self) -> list[str]:
        return published_versions(PACKAGE)

    def install(self, version: str) -> ClientBinary:
        """The cached install of ``version`` (``latest`` allowed), installing it if needed."""
        check_version(self, version)
        exact = resolve_version(PACKAGE, version)
        check_version(self, exact, exact=True)  # the registry's answer is input too
        refuse_undriven(exact)
        binary, _ = cached_or_installed(PACKAGE, exact, install_folder(self.cache, exact),
                                        self._binary,
                                        lambda prefix: _locate_entry(prefix, _node()), _describe)
        return binary

    # ---- runs ----------------------------------------------------------------

    def command(self, binary: ClientBinary, invocation: Invocation,
                context: RunContext) -> Command:
        invocation = self.cli_invocation(invocation)
        box = context.box
        spec = {**sdk_spec(self, invocation, context), "cli": str(binary.entry),
                "plugin_dirs": list(context.plugin_dirs)}
        env = self.run_environment(box, context.base_url, invocation, dict(context.extra_env))
        env["NODE_PATH"] = str(binary.root / "node_modules")  # how the driver finds the SDK
        return Command([*binary.launcher, json.dumps(spec)], env, box.workspace,
                       {**self.settings_files(box, invocation, context.hooks),
                        **self.mcp_files(invocation, context)})


def refuse_undriven(version: str) -> None:
    """Refuse a version whose ``query()`` lacks an option the driver passes."""
    if VERSION_PATTERN.fullmatch(version) and _numbers(version) < _numbers(FIRST_DRIVEN):
        raise InstallError(
            f"{PACKAGE}@{version}: the driver passes query() the options sessionId (0.2.33 and "
            f"later) and settings (0.2.69 and later); expected {FIRST_DRIVEN} or later, "
            f"found {version}")


def _locate_entry(prefix: Path, node: str) -> tuple[Path, list[str]]:
    """The Claude Code this install's SDK runs, refused unless it is there and the driver
    finds ``query()`` in the SDK."""
    modules = prefix / "node_modules"
    package_dir = modules / PACKAGE
    declared = _package_json(package_dir)
    version = declared.get("version")
    natives = [name for name in declared.get("optionalDependencies") or {}
               if name.startswith(f"{PACKAGE}-")]
    if natives:
        platform, arch, musl = _node_platform(node)
        candidates = native_packages(platform, arch, musl)
        entry = next((modules / name / "claude" for name in candidates
                      if (modules / name / "claude").is_file()), None)
        if entry is None:
            present = sorted(p.name for p in (modules / "@anthropic-ai").iterdir()
                             if p.name.startswith("claude-agent-sdk-"))
            raise InstallError(
                f"{PACKAGE}@{version} runs the native Claude Code binary of its optional "
                f"dependency for {platform}-{arch}: expected the file claude in one of "
                f"{', '.join(candidates)}, found {', '.join(present) or 'none of its platform packages'} "
                "in node_modules/@anthropic-ai (npm installs only the one matching this "
                "machine's os, cpu and libc, and none with --omit=optional)")
        with entry.open("rb") as handle:
            if platform == "linux" and handle.read(4) != ELF_MAGIC:
                raise InstallError(f"{entry}: expected a native executable (ELF), found a file "
                                   "of another kind")
    else:
        entry = package_dir / "cli.js"
        if not entry.is_file():
            shipped = sorted(p.name for p in package_dir.iterdir())
            raise InstallError(
                f"{PACKAGE}@{version} declares no native platform package, so its SDK runs the "
                f"cli.js it ships: expected {entry}, found only {', '.join(shipped)}")
    _check_driver(prefix, node, version)
    _check_cli(entry, node, declared.get("claudeCodeVersion"), prefix)
    return entry, [node, str(DRIVER)]


def _check_driver(prefix: Path, node: str, version: Any) -> None:
    # importing the SDK runs its code: contained, as every run of the client
    env = {"NODE_PATH": str(prefix / "node_modules")}
    try:
        done = informational_run([node, str(DRIVER), "--check"], [prefix, DRIVER], env,
                                 timeout=_CHECK_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise InstallError(f"{PACKAGE}@{version}: the driver's import check took over "
                           f"{_CHECK_TIMEOUT} s") from None
    lines = done.stdout.strip().splitlines()
    found = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else {}
    if done.returncode != 0 or found.get("query") != "function":
        raise InstallError(
            f"{PACKAGE}@{version}: expected the SDK to export a query() function, found "
            f"{found.get('query') or found.get('result') or done.stderr.strip()[-300:]!s} "
            "(a peer dependency missing? npm 7 or later installs them)")


def _check_cli(entry: Path, node: str, expected: Any, prefix: Path) -> None:
    argv = [node, str(entry)] if entry.suffix == ".js" else [str(entry)]
    check_printed_version(argv, str(expected) if expected else None, root=prefix)


def _describe(prefix: Path) -> dict[str, Any]:
    """What the manifest adds: the Claude Code version the SDK declares it bundles, and the
    versions of its peers and of its platform package, as installed."""
    modules = prefix / "node_modules"
    platform = sorted(p for p in (modules / "@anthropic-ai").iterdir()
                      if p.name.startswith("claude-agent-sdk-"))
    companions = {name: _package_json(modules / name)["version"] for name in PEERS
                  if (modules / name / "package.json").is_file()}
    companions.update({f"@anthropic-ai/{p.name}": _package_json(p)["version"] for p in platform})
    return {"claude_code_version": _package_json(modules / PACKAGE).get("claudeCodeVersion"),
            "companions": companions}
