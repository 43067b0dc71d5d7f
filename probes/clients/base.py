"""What the harness needs from an agent-loop client, whatever the client is.

A client knows how to install one exact version (``ClientBinary``), how to turn
an ``Invocation`` into a command in a sandbox, and how to read what it printed
and left behind. Claude Code is the first; the Agent SDK or the anthropic SDK's
tool runner fit the same protocol.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from probes.model import Invocation
from probes.sandbox import BASE_PATH, Sandbox

__all__ = ["Client", "ClientBinary", "Command", "Output", "read_manifest", "scan_installs"]


@dataclass(frozen=True)
class ClientBinary:
    name: str
    version: str
    platform: str
    package: str
    root: Path
    entry: Path
    launcher: tuple[str, ...]
    sha256: str

    def help_text(self) -> str:
        """The client's ``--help`` output, read once and kept beside the install."""
        cached = self.root / "help.txt"
        if not cached.is_file():
            with tempfile.TemporaryDirectory(prefix="loopprobe-help.") as home:
                env = {"PATH": BASE_PATH, "HOME": home, "TERM": "dumb",
                       "CLAUDE_CONFIG_DIR": f"{home}/.claude", "DISABLE_AUTOUPDATER": "1"}
                done = subprocess.run([*self.launcher, "--help"], capture_output=True, text=True,
                                      timeout=60, env=env, stdin=subprocess.DEVNULL)
            cached.write_text(done.stdout + done.stderr)
        return cached.read_text()

    def identity(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "platform": self.platform,
                "package": self.package, "entry": str(self.entry.relative_to(self.root)),
                "binary_sha256": self.sha256}


@dataclass(frozen=True)
class Command:
    argv: list[str]
    env: dict[str, str]
    cwd: Path
    files: dict[str, str] = field(default_factory=dict)  # written before the run (settings)


@dataclass
class Output:
    """What a run printed, read as the client's event protocol."""

    events: list[dict[str, Any]]
    unparsed: list[str]

    @property
    def result(self) -> dict[str, Any] | None:
        """The final result event; with several (background agents), the last one counts."""
        results = [e for e in self.events if e.get("type") == "result"]
        return results[-1] if results else None

    def tool_results(self) -> list[dict[str, Any]]:
        """The tool_result blocks the client printed (its own record of the tools it ran)."""
        return [b for e in self.of_type("user")
                for b in (e.get("message") or {}).get("content", []) or []
                if isinstance(b, dict) and b.get("type") == "tool_result"]

    def of_type(self, type_: str, subtype: str | None = None) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("type") == type_
                and (subtype is None or e.get("subtype") == subtype)]

    @classmethod
    def from_json_lines(cls, stdout: str) -> Output:
        events: list[dict[str, Any]] = []
        unparsed: list[str] = []
        for line in stdout.splitlines():
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except ValueError:
                unparsed.append(line)
                continue
            if isinstance(value, dict):
                events.append(value)
            else:
                unparsed.append(line)
        return cls(events, unparsed)


def read_manifest(directory: Path) -> dict[str, Any] | None:
    """An install's ``install.json``, if the install is complete (its entry file exists)."""
    path = directory / "install.json"
    if not path.is_file():
        return None
    manifest: dict[str, Any] = json.loads(path.read_text())
    return manifest if (directory / manifest["entry"]).is_file() else None


def scan_installs(cache: Path, read: Callable[[Path], ClientBinary | None]) -> list[ClientBinary]:
    """Every usable install under a client's cache folder (one folder per version)."""
    if not cache.is_dir():
        return []
    found = [read(d) for d in sorted(cache.iterdir()) if d.is_dir()]
    return [b for b in found if b is not None]


class Client(Protocol):
    name: str
    package: str
    base_flags: tuple[str, ...]  # what every run passes (as listed by --help)

    def install(self, version: str) -> ClientBinary: ...

    def installed(self) -> list[ClientBinary]: ...

    def command(self, binary: ClientBinary, invocation: Invocation, box: Sandbox,
                base_url: str, session_ids: dict[str, str],
                extra_env: dict[str, str] | None = None) -> Command: ...

    def read_output(self, stdout: str) -> Output: ...

    def session_files(self, box: Sandbox) -> list[Path]: ...
