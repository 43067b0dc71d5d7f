"""What the harness needs from an agent-loop client, whatever the client is.

A client kind knows how to install one exact version (``ClientBinary``), what that
version can do (``Capabilities``), how to make a sandbox its own, how to turn an
``Invocation`` into a command, how to read what it printed, and where it keeps
its sessions. The runner asks these questions and knows nothing else of any client.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from probes.core.evidence import Output
from probes.core.invocation import Invocation
from probes.sandbox.folders import Sandbox

__all__ = ["Capabilities", "Client", "ClientBinary", "ClientKey", "Command", "HookCommand",
           "RunContext", "read_manifest", "scan_installs"]


@dataclass(frozen=True, order=True)
class ClientKey:
    """A client kind and one of its versions: what results are keyed by."""

    kind: str
    version: str

    @property
    def label(self) -> str:
        return f"{self.kind}@{self.version}"


@dataclass(frozen=True)
class ClientBinary:
    name: str  # the client kind
    version: str
    platform: str
    package: str
    root: Path
    entry: Path
    launcher: tuple[str, ...]
    sha256: str
    plugin: str | None = None  # a plugin kind's module:Class ($LOOPPROBE_CLIENTS)

    @property
    def key(self) -> ClientKey:
        return ClientKey(self.name, self.version)

    def identity(self) -> dict[str, Any]:
        """What reports record of the binary; ``plugin`` only for a plugin kind's."""
        return {"name": self.name, "version": self.version, "platform": self.platform,
                "package": self.package, "entry": str(self.entry.relative_to(self.root)),
                "binary_sha256": self.sha256,
                **({"plugin": self.plugin} if self.plugin is not None else {})}


@dataclass(frozen=True)
class Capabilities:
    """What one client version can do (names from ``probes.core.invocation.CAPABILITIES``).

    ``missing`` explains each capability it lacks, e.g. "no --fork-session in its --help".
    ``version_lacks`` names those of them that the client kind has in other versions (a
    flag this version's ``--help`` does not list): the probe's claims are then *absent* on
    this version, not *not applicable* to the kind.
    ``tool_names``: how the client names a scripted tool where not by the script's name (a
    CLI client reaches the loop tools through MCP: ``add`` is ``mcp__loop__add``); the
    harness renames the scripted calls before serving them.
    ``classifier``: how the client's requests are told apart (``mockapi`` classifiers), for a
    scenario that tells none apart (``plain``, the generic catalog's): Claude Code's warmups
    and side requests are then answered by the mock's built-in replies, not by the script.
    """

    supported: frozenset[str]
    missing: Mapping[str, str] = field(default_factory=dict)
    version_lacks: frozenset[str] = frozenset()
    tool_names: Mapping[str, str] = field(default_factory=dict)
    classifier: str | None = None

    def lacking(self, needed: Iterable[str]) -> list[str]:
        return [name for name in needed if name not in self.supported]

    def only_this_version_lacks(self, needed: Iterable[str]) -> bool:
        """True when every capability lacking is one the kind has in other versions."""
        lacking = self.lacking(needed)
        return bool(lacking) and all(name in self.version_lacks for name in lacking)

    def explain(self, needed: Iterable[str]) -> str:
        return ", ".join(f"{name} ({self.missing.get(name, 'not supported')})"
                         for name in self.lacking(needed))


@dataclass(frozen=True)
class HookCommand:
    """The harness's hook recorder: a shell command to run for each of ``events``."""

    command: str
    events: tuple[str, ...]


@dataclass(frozen=True)
class RunContext:
    """Everything of one run that the client turns into its command."""

    box: Sandbox
    base_url: str
    session_ids: Mapping[str, str]  # invocation name -> session id, for new and resumed ones
    extra_env: Mapping[str, str] = field(default_factory=dict)  # the egress guard's proxy
    hooks: HookCommand | None = None
    mcp_python: str | None = None  # the harness's MCP runtime, for runs given an MCP server
    record_socket: str = ""  # the harness's collector (probes.run.collector), on the host
    # the user's plugin folders, as the client sees them (probes.sandbox.user_setup)
    plugin_dirs: tuple[str, ...] = ()

    def resumed_session(self, invocation: Invocation) -> str | None:
        if invocation.session != "resume":
            return None
        resumed = self.session_ids.get(invocation.resume_from or "")
        if resumed is None:
            raise ValueError(f"invocation {invocation.name!r} resumes "
                             f"{invocation.resume_from!r}, which has no session yet")
        return resumed


@dataclass(frozen=True)
class Command:
    argv: list[str]
    env: dict[str, str]
    cwd: Path
    files: dict[str, str] = field(default_factory=dict)  # written before the run (settings)
    # the client's own command when ``argv`` launches it in a sandbox (what reports show)
    shown_argv: list[str] | None = None

    @property
    def client_argv(self) -> list[str]:
        return self.shown_argv if self.shown_argv is not None else self.argv


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
    name: str  # the kind, as users name it: claude-code@2.1.235
    package: str

    def install(self, version: str) -> ClientBinary: ...

    def installed(self) -> list[ClientBinary]: ...

    def published(self) -> list[str]:
        """Every version the client's registry (npm, PyPI) publishes, in any order."""
        ...

    def capabilities(self, binary: ClientBinary) -> Capabilities: ...

    def prepare(self, box: Sandbox, seen: Callable[[Path], str] = str) -> dict[str, str]:
        """Make the sandbox the client's own (config dirs); return how reports show the
        client's own paths in it (the path as the client sees it, ``seen(path)`` -> ``$NAME``)."""
        ...

    def command(self, binary: ClientBinary, invocation: Invocation,
                context: RunContext) -> Command: ...

    def read_output(self, stdout: str) -> Output: ...

    def session_folder(self, box: Sandbox) -> Path | None:
        """The folder in which the client keeps its sessions (transcripts), read by the
        harness without following links (``Sandbox.files``); None: it keeps none."""
        ...
