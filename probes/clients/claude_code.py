"""Claude Code (npm ``@anthropic-ai/claude-code``): install, launch in a sandbox, read output.

2.1.x ships a native executable (``bin/claude.exe``); 2.0.x ships a JavaScript
bundle (``cli.js``) run with node. Print mode with ``stream-json`` output is the
observable surface: every event on stdout, the final ``result`` last.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

from probes.clients.base import ClientBinary, Command, Output, read_manifest, scan_installs
from probes.clients.npm import InstallError, cache_root, install_package, resolve_version
from probes.model import Invocation
from probes.sandbox import BASE_PATH, Sandbox, base_environment

__all__ = ["DUMMY_API_KEY", "ClaudeCode"]

PACKAGE = "@anthropic-ai/claude-code"
DUMMY_API_KEY = "sk-ant-loopprobe-dummy-key"
ELF_MAGIC = b"\x7fELF"


def _locate_entry(prefix: Path) -> tuple[Path, list[str | Path]]:
    package_dir = prefix / "node_modules" / PACKAGE
    native = package_dir / "bin" / "claude.exe"
    if native.is_file():
        with native.open("rb") as handle:
            if handle.read(4) == ELF_MAGIC:
                return native, [native]
    bundle = package_dir / "cli.js"
    if bundle.is_file():
        node = shutil.which("node")
        if node is None:
            raise InstallError(f"{bundle} needs node, which is not on PATH")
        return bundle, [node, bundle]
    raise InstallError(
        f"{PACKAGE} installed without a runnable entry point: neither a native "
        f"bin/claude.exe (2.1.x) nor cli.js (2.0.x) in {package_dir} "
        "(a platform package may be missing for this machine)")


class ClaudeCode:
    name = "claude-code"
    package = PACKAGE
    # --max-turns works but is not listed by --help (2.0.77 to 2.1.332), so it is not here
    base_flags: tuple[str, ...] = ("--print", "--output-format", "--verbose", "--model", "--permission-mode",
                  "--dangerously-skip-permissions", "--session-id")

    def __init__(self, cache: Path | None = None):
        self.cache = (cache or cache_root()) / "clients" / self.name

    # ---- installs ------------------------------------------------------------

    def _binary(self, directory: Path) -> ClientBinary | None:
        manifest = read_manifest(directory)
        if manifest is None:
            return None
        entry = directory / manifest["entry"]
        launcher = tuple(a if Path(a).is_absolute() else str(directory / a)
                         for a in manifest["launcher"])
        return ClientBinary(self.name, manifest["version"], manifest["platform"], PACKAGE,
                            directory, entry, launcher, manifest["sha256"])

    def installed(self) -> list[ClientBinary]:
        return scan_installs(self.cache, self._binary)

    def install(self, version: str) -> ClientBinary:
        """The cached install of ``version`` (``latest`` allowed), installing it if needed."""
        exact = resolve_version(PACKAGE, version)
        directory = self.cache / exact
        existing = self._binary(directory)
        if existing is not None:
            return existing
        install_package(PACKAGE, exact, directory, _locate_entry)
        binary = self._binary(directory)
        if binary is None:
            raise InstallError(f"{PACKAGE}@{exact} installed into {directory} but is not usable")
        self._check_version(binary)
        return binary

    def _check_version(self, binary: ClientBinary) -> None:
        try:
            with tempfile.TemporaryDirectory(prefix="loopprobe-version.") as home:
                env = {"PATH": BASE_PATH, "HOME": home, "TERM": "dumb",
                       "CLAUDE_CONFIG_DIR": f"{home}/.claude", "DISABLE_AUTOUPDATER": "1"}
                done = subprocess.run([*binary.launcher, "--version"], capture_output=True,
                                      text=True, timeout=60, env=env, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as error:
            raise InstallError(f"{binary.entry} --version failed: {error}") from None
        if binary.version not in done.stdout:
            raise InstallError(f"{binary.entry} --version printed {done.stdout.strip()!r}, "
                               f"expected {binary.version} (stderr: {done.stderr.strip()[:200]})")

    # ---- runs ----------------------------------------------------------------

    def environment(self, box: Sandbox, base_url: str) -> dict[str, str]:
        env = base_environment(box)
        env.update({
            "CLAUDE_CONFIG_DIR": str(box.config_dir),
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

    def command(self, binary: ClientBinary, invocation: Invocation, box: Sandbox,
                base_url: str, session_ids: dict[str, str],
                extra_env: dict[str, str] | None = None) -> Command:
        argv = [*binary.launcher, "--print", invocation.prompt,
                "--output-format", "stream-json", "--verbose",
                "--model", invocation.model,
                "--permission-mode", "bypassPermissions", "--dangerously-skip-permissions"]
        if invocation.tools is not None:
            # before --tools existed (2.0.3x and older) the closest is --allowedTools, which
            # allows the tools without removing the others from the list the model sees
            flag = "--tools" if "--tools" in binary.help_text() else "--allowedTools"
            argv += [flag, ",".join(invocation.tools)]
        if invocation.max_turns is not None:
            argv += ["--max-turns", str(invocation.max_turns)]
        if invocation.session == "new":
            argv += ["--session-id", session_ids[invocation.name]]
        elif invocation.session == "resume":
            if invocation.resume_from not in session_ids:
                raise ValueError(f"invocation {invocation.name!r} resumes "
                                 f"{invocation.resume_from!r}, which has no session yet")
            argv += ["--resume", session_ids[invocation.resume_from]]
            if invocation.fork:
                argv.append("--fork-session")
        argv += list(invocation.extra_args)
        merged = {**self.environment(box, base_url), **(extra_env or {}), **invocation.env}
        env = {k: v for k, v in merged.items() if v is not None}
        files = {}
        if invocation.settings is not None:
            files[str(box.config_dir / "settings.json")] = json.dumps(
                invocation.settings, indent=2, sort_keys=True)
        return Command(argv, env, box.workspace, files)

    def read_output(self, stdout: str) -> Output:
        return Output.from_json_lines(stdout)

    def session_files(self, box: Sandbox) -> list[Path]:
        projects = box.config_dir / "projects"
        return sorted(p for p in projects.rglob("*") if p.is_file()) if projects.is_dir() else []

