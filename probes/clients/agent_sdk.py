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
import sys
import tempfile
import time
from pathlib import Path

from probes.clients.base import ClientBinary, Command, RunContext, read_manifest, scan_installs
from probes.clients.claude_cli import ClaudeCliBase
from probes.clients.npm import InstallError, cache_root, sha256_file
from probes.invocation import Invocation

__all__ = ["DRIVER", "PACKAGE", "PIP_TIMEOUT", "ClaudeAgentSdk"]

PACKAGE = "claude-agent-sdk"
PIP_TIMEOUT = 900
DRIVER = Path(__file__).with_name("agent_sdk_driver.py")


class ClaudeAgentSdk(ClaudeCliBase):
    name = "claude-agent-sdk"
    package = PACKAGE

    def __init__(self, cache: Path | None = None):
        self.cache = (cache or cache_root()) / "clients" / self.name

    def help_argv(self, binary: ClientBinary) -> list[str]:
        # the SDK passes its options to the CLI it bundles: that CLI's flags are what it can do
        return [str(binary.entry), "--help"]

    def _binary(self, directory: Path) -> ClientBinary | None:
        manifest = read_manifest(directory)
        python = directory / "venv" / "bin" / "python"
        if manifest is None or not python.is_file():
            return None
        entry = directory / manifest["entry"]
        return ClientBinary(self.name, manifest["version"], manifest["platform"], PACKAGE,
                            directory, entry, (str(python), str(DRIVER)),
                            manifest["sha256"])

    def installed(self) -> list[ClientBinary]:
        return scan_installs(self.cache, self._binary)

    def published(self) -> list[str]:
        """From the package index pip is configured with (``pip index versions``)."""
        try:
            done = subprocess.run([sys.executable, "-m", "pip", "index", "versions", PACKAGE],
                                  capture_output=True, text=True, timeout=120)
        except subprocess.TimeoutExpired:
            raise InstallError(f"pip index versions {PACKAGE} took over 120 s") from None
        for line in done.stdout.splitlines():
            if line.strip().startswith("Available versions:"):
                return [v.strip() for v in line.split(":", 1)[1].split(",") if v.strip()]
        raise InstallError(f"cannot list the versions of {PACKAGE}: "
                           f"{(done.stderr.strip().splitlines() or ['pip found none'])[-1]}")

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

    def command(self, binary: ClientBinary, invocation: Invocation,
                context: RunContext) -> Command:
        box = context.box
        settings = self.settings(invocation, context.hooks)
        spec = {
            "prompt": invocation.prompt, "model": invocation.model,
            "tools": list(invocation.tools) if invocation.tools is not None else None,
            "max_turns": invocation.max_turns, "resume": context.resumed_session(invocation),
            "fork": invocation.fork,
            "session_id": context.session_ids.get(invocation.name)
            if invocation.session == "new" else None,
            "settings": str(self.settings_path(box)) if settings is not None else None,
            "extra_args": list(invocation.extra_args),
        }
        env = self.run_environment(box, context.base_url, invocation, dict(context.extra_env))
        return Command([*binary.launcher, json.dumps(spec)], env, box.workspace,
                       self.settings_files(box, invocation, context.hooks))
