"""The Claude Agent SDK for Python (PyPI ``claude-agent-sdk``) as a second loop client.

Each version is installed into a venv of its own in the cache; the executed file is the
Claude Code binary the wheel bundles (its SHA-256 is what the reports cite). A run is the
SDK's ``query()`` driven by ``agent_sdk_driver.py`` in that venv, printing stream-json
shaped lines, in the same sandbox and allow-listed environment as the CLI client (the SDK
hands its own environment to the CLI it starts).
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

from probes.clients import agent_sdk_driver_path
from probes.clients.base import ClientBinary, Command, Output, read_manifest, scan_installs
from probes.clients.claude_code import ClaudeCode
from probes.clients.npm import InstallError, cache_root, sha256_file
from probes.model import Invocation
from probes.sandbox import Sandbox

__all__ = ["ClaudeAgentSdk"]

PACKAGE = "claude-agent-sdk"
PIP_TIMEOUT = 900


class ClaudeAgentSdk:
    name = "claude-agent-sdk"
    package = PACKAGE
    base_flags: tuple[str, ...] = ()  # the SDK builds the CLI's command line itself

    def __init__(self, cache: Path | None = None):
        self.cache = (cache or cache_root()) / "clients" / self.name
        self._cli = ClaudeCode(cache)

    def _binary(self, directory: Path) -> ClientBinary | None:
        manifest = read_manifest(directory)
        python = directory / "venv" / "bin" / "python"
        if manifest is None or not python.is_file():
            return None
        entry = directory / manifest["entry"]
        return ClientBinary(self.name, manifest["version"], manifest["platform"], PACKAGE,
                            directory, entry, (str(python), str(agent_sdk_driver_path())),
                            manifest["sha256"])

    def installed(self) -> list[ClientBinary]:
        return scan_installs(self.cache, self._binary)

    def install(self, version: str) -> ClientBinary:
        directory = self.cache / version
        existing = self._binary(directory)
        if existing is not None:
            return existing
        self.cache.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{version}.", dir=self.cache))
        try:
            subprocess.run(["python3", "-m", "venv", str(staging / "venv")], check=True,
                           capture_output=True, timeout=300)
            done = subprocess.run(
                [str(staging / "venv" / "bin" / "python"), "-m", "pip", "install", "--quiet",
                 "--disable-pip-version-check", f"{PACKAGE}=={version}"],
                capture_output=True, text=True, timeout=PIP_TIMEOUT)
            if done.returncode != 0:
                lines = [ln for ln in done.stderr.splitlines() if "WARNING" not in ln]
                raise InstallError(f"pip install {PACKAGE}=={version} failed: "
                                   f"{' '.join(lines)[-400:]}")
            bundled = sorted((staging / "venv").glob(
                "lib/python*/site-packages/claude_agent_sdk/_bundled/claude"))
            if not bundled:
                raise InstallError(f"{PACKAGE}=={version} bundles no Claude Code binary")
            manifest = {
                "package": PACKAGE, "version": version,
                "platform": f"{platform.system().lower()}-{platform.machine()}",
                "entry": str(bundled[0].relative_to(staging)),
                "sha256": sha256_file(bundled[0]),
                "installed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            }
            (staging / "install.json").write_text(json.dumps(manifest, indent=2, sort_keys=True))
            if directory.exists():
                shutil.rmtree(directory)
            os.replace(staging, directory)
        except subprocess.TimeoutExpired:
            raise InstallError(f"installing {PACKAGE}=={version} took over {PIP_TIMEOUT}s") \
                from None
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
        binary = self._binary(directory)
        if binary is None:
            raise InstallError(f"{PACKAGE}=={version} installed into {directory} but is unusable")
        return binary

    def command(self, binary: ClientBinary, invocation: Invocation, box: Sandbox,
                base_url: str, session_ids: dict[str, str],
                extra_env: dict[str, str] | None = None) -> Command:
        resume = None
        if invocation.session == "resume":
            if invocation.resume_from not in session_ids:
                raise ValueError(f"invocation {invocation.name!r} resumes "
                                 f"{invocation.resume_from!r}, which has no session yet")
            resume = session_ids[invocation.resume_from]
        settings_path = box.config_dir / "settings.json"
        spec = {
            "prompt": invocation.prompt, "model": invocation.model,
            "tools": list(invocation.tools) if invocation.tools is not None else None,
            "max_turns": invocation.max_turns, "resume": resume, "fork": invocation.fork,
            "session_id": session_ids.get(invocation.name) if invocation.session == "new"
            else None,
            "settings": str(settings_path) if invocation.settings is not None else None,
            "extra_args": list(invocation.extra_args),
        }
        merged = {**self._cli.environment(box, base_url), **(extra_env or {}), **invocation.env}
        env = {k: v for k, v in merged.items() if v is not None}
        files = {}
        if invocation.settings is not None:
            files[str(settings_path)] = json.dumps(invocation.settings, indent=2, sort_keys=True)
        return Command([*binary.launcher, json.dumps(spec)], env, box.workspace, files)

    def read_output(self, stdout: str) -> Output:
        return Output.from_json_lines(stdout)

    def session_files(self, box: Sandbox) -> list[Path]:
        return self._cli.session_files(box)
