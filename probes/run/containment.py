"""How a client run is contained: in a bubblewrap sandbox (the default), or not at all.

Contained (``Bubblewrap``), every client process runs in its own namespaces:

- network: loopback only. The mock listens on a Unix socket in the probe's run directory;
  inside, ``sandbox_init.py`` forwards ``127.0.0.1:MOCK_PORT`` to it and runs the refusing
  proxy and DNS resolver, so egress is impossible and every attempt is still recorded;
- PID: the namespace ends with the run, so nothing the client started outlives it;
- filesystem: a view built from nothing. The system's programs and libraries (read-only),
  the client's install at ``/opt/loopprobe/client`` (read-only), the runtimes the client and
  the harness's tools run on at their own paths (read-only), the tools at
  ``/opt/loopprobe/tools``, the run's inputs at ``/opt/loopprobe/inputs`` (read-only), the
  sockets of the mock and the collector at ``/run/loopprobe`` (read-only), and the client's
  part of the probe's sandbox at ``/sandbox`` (home, workspace, tmp), the only place it can
  write beside its private ``/tmp``. The evidence (journal, outputs, hook, MCP and egress
  records) is kept in a folder that is never shown. Nothing of the caller exists above the
  workspace or in the home, and the client sees the same paths on every machine;
- bounds (``probes.run.bounds``): memory and processes of the run, the size of /tmp and of
  /sandbox, the largest file; ``Place.confine`` gives each run its own.

Uncontained (``NoContainment``, only with an explicit ``--no-sandbox``): the client runs on
the host with an allow-listed environment, a fresh home and the refusing proxy on the host's
loopback, as a convention it could break.

The client builds its command with the host's sandbox paths; ``Place.wrap`` rewrites them to
the paths of the view, and reports show both as the same placeholders. The view and each
run's bwrap argv are ``probes.run.sandbox_place``'s; here are the promises, finding bwrap
and making a probe's place.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from mockapi.script.scenario import Scenario
from mockapi.serve.server import MockServer
from probes.clients.base import ClientBinary, Command
from probes.clients.info_run import allow_uncontained
from probes.inside.egress import EgressSink
from probes.run.bounds import Bounds, Limiter, RunConfinement, find_limiter, unbounded
from probes.run.cgroups import Cgroup
from probes.run.leftovers import sweep
from probes.run.owner import temp_folder_prefix
from probes.run.sandbox_place import (
    CAPABILITIES,
    CLIENT_DIR,
    CONTAINED_ROOT,
    DNS_PORT,
    ETC_SHOWN,
    INPUTS_DIR,
    MOCK_PORT,
    PROXY_PORT,
    RECORD_SOCKET,
    RUN_DIR,
    SYSTEM_DIRS,
    TOOLS,
    TOOLS_DIR,
    SandboxPlace,
)
from probes.sandbox.folders import Sandbox
from probes.sandbox.view import runtime_prefix

__all__ = ["CAPABILITIES", "CLIENT_DIR", "CONTAINED_ROOT", "DNS_PORT", "ETC_SHOWN",
           "EVIDENCE_SOURCES", "INPUTS_DIR", "MOCK_PORT", "PROXY_PORT", "RECORD_SOCKET",
           "RUN_DIR", "SYSTEM_DIRS", "TOOLS", "TOOLS_DIR", "Bubblewrap", "Containment",
           "ContainmentUnavailable", "NoContainment", "Place", "find_containment",
           "sweep_leftovers"]

# the view's paths and the sandbox's place lived here (probes.run.sandbox_place now): the
# paths are re-exported above, the place under its old name
_SandboxPlace = SandboxPlace


class ContainmentUnavailable(RuntimeError):
    """The sandbox cannot start here; the message names the cause and the way out."""


class Place(Protocol):
    """One probe's contained place: its mock, how its runs are launched, what they tried."""

    # whether each run's first process claims the run's egress stream before the client
    # starts (the sandbox's ``sandbox_init``): a run it did not claim never ran the client
    first_process_reports: bool

    def serve(self, scenario: Scenario, journal_path: Path, *,
              context: Mapping[str, str]) -> MockServer: ...

    def listen(self) -> dict[str, Any]:
        """Where a server the runs reach must listen, as ``MockServer``'s keyword arguments
        (a Unix socket and the URL the runs use; none: any free loopback port)."""
        ...

    def seen(self, path: Path) -> str:
        """The path as the client sees it."""
        ...

    def record_socket(self) -> Path:
        """Where the harness's collector listens (on the host), reachable by the runs."""
        ...

    def proxy_environment(self) -> dict[str, str]: ...

    def wrap(self, command: Command) -> Command:
        """The command to run on the host for the client's ``command``."""
        ...

    def confine(self) -> AbstractContextManager[RunConfinement]:
        """One run's bounds: entered around the run, whose argv goes through its ``wrap``,
        polled with ``should_stop`` and asked for ``hits`` after."""
        ...

    def egress_attempts(self) -> list[dict[str, Any]]: ...

    def placeholders(self) -> dict[str, str]:
        """How reports show the paths of the view (path as seen -> ``$NAME``)."""
        ...


class Containment(Protocol):
    @property
    def name(self) -> str: ...

    def describe(self) -> dict[str, Any]:
        """What the containment promises, for the report's ``trust.containment``."""
        ...

    def enter(self, box: Sandbox, binary: ClientBinary, egress_guard: bool,
              readonly: Sequence[Path] = (),
              others: Sequence[ClientBinary] = ()) -> Any:  # a context manager: a Place
        """``readonly``: more of the host the runs need (a runtime), shown read-only at
        their own paths; ``others``: more versions of the client some runs use."""
        ...


# whose word each part of the evidence is: what the harness observed, or what the client
# (or a process it started) wrote or said -- a report's reader weighs them differently
EVIDENCE_SOURCES = {
    "journal": "the harness's: recorded by the mock as each request arrived",
    "runs (exit code, stdout, stderr, argv)": "the harness's: the client's output as it "
                                              "reached the harness, kept up to a cap",
    "egress_attempts": "the harness's: reported as they happened by the sandbox's first "
                       "process, one reporter per run",
    "hook_calls": "the client's account: reported by the hook relay, a process the client "
                  "starts (a hostile client could add calls, not remove one)",
    "mcp_calls": "the client's account: reported by the MCP server, a process the client "
                 "starts",
    "session_files (transcripts)": "the client's account: files it wrote",
    "workspace_files": "the client's doing: files its tools wrote",
}


# ---- uncontained ---------------------------------------------------------------------


@dataclass
class _HostPlace:
    sink: EgressSink | None
    run_dir: Path
    first_process_reports = False

    def serve(self, scenario: Scenario, journal_path: Path, *,
              context: Mapping[str, str]) -> MockServer:
        return MockServer(scenario, journal_path, context=context, fsync=True, **self.listen())

    def listen(self) -> dict[str, Any]:
        return {}

    def seen(self, path: Path) -> str:
        return str(path)

    def record_socket(self) -> Path:
        return self.run_dir / RECORD_SOCKET

    def proxy_environment(self) -> dict[str, str]:
        return self.sink.environment() if self.sink else {}

    def wrap(self, command: Command) -> Command:
        return command

    def confine(self) -> AbstractContextManager[RunConfinement]:
        return nullcontext(RunConfinement(None, Path(os.devnull), []))

    def egress_attempts(self) -> list[dict[str, Any]]:
        return [a.to_json() for a in self.sink.attempts] if self.sink else []

    def placeholders(self) -> dict[str, str]:
        return {str(self.run_dir): "$RUN_DIR",
                **({self.sink.url: "$EGRESS_PROXY"} if self.sink else {})}


@dataclass(frozen=True)
class NoContainment:
    """The client on the host, contained by convention only (``--no-sandbox``)."""

    name: str = "none"
    reason: str = "--no-sandbox"

    def describe(self) -> dict[str, Any]:
        return {"mode": self.name, "reason": self.reason, "evidence": EVIDENCE_SOURCES,
                "promises": [
            "an allow-listed environment, a fresh home and workspace",
            "a refusing proxy on the host's loopback for clients that honour proxy variables",
            "the client's process group is killed after each run"],
                "does_not_promise": [
            "no egress: a process opening its own sockets reaches the host's network",
            "no instructions of the caller: the client reads CLAUDE.md files of every "
            "directory above the workspace",
            "nothing outlives a run: a process in a new session survives it"],
                "bounds": unbounded("uncontained: memory, processes, /tmp and disk are the "
                                    "host's")}

    @contextmanager
    def enter(self, box: Sandbox, binary: ClientBinary, egress_guard: bool,
              readonly: Sequence[Path] = (),
              others: Sequence[ClientBinary] = ()) -> Iterator[_HostPlace]:
        run_dir = Path(tempfile.mkdtemp(prefix=temp_folder_prefix()))
        try:
            if not egress_guard:
                yield _HostPlace(None, run_dir)
                return
            with EgressSink() as sink:
                yield _HostPlace(sink, run_dir)
        finally:
            shutil.rmtree(run_dir, ignore_errors=True)


# ---- bubblewrap ------------------------------------------------------------------------


@dataclass(frozen=True)
class Bubblewrap:
    """Every run in its own bubblewrap sandbox (network, PID, IPC, UTS, user and mount
    namespaces)."""

    path: str
    version: str
    name: str = "bubblewrap"
    bounds: Bounds = field(default_factory=Bounds)

    @classmethod
    def find(cls) -> Bubblewrap:
        """The installed bwrap, proven to start a sandbox here."""
        path = shutil.which("bwrap")
        if path is None:
            raise ContainmentUnavailable(
                "bubblewrap (bwrap) is not installed: install it (Debian/Ubuntu: apt-get "
                "install bubblewrap; the set-up scripts do), or pass --no-sandbox to run the "
                "client uncontained")
        try:
            done = subprocess.run(
                [path, "--unshare-all", "--die-with-parent", *CAPABILITIES, "--ro-bind", "/",
                 "/", "--", "/bin/true"], capture_output=True, text=True, timeout=30)
            version = subprocess.run([path, "--version"], capture_output=True, text=True,
                                     timeout=30).stdout.strip()
        except (OSError, subprocess.TimeoutExpired) as error:
            raise ContainmentUnavailable(f"bubblewrap at {path} cannot run: {error}") from None
        if done.returncode != 0:
            raise ContainmentUnavailable(
                f"bubblewrap cannot create namespaces here ({done.stderr.strip()[:200]}); "
                "user namespaces may be disabled (sysctl kernel.unprivileged_userns_clone, "
                "a container without CAP_SYS_ADMIN): pass --no-sandbox to run the client "
                "uncontained")
        found = cls(path, version)
        sweep_leftovers(found.limiter())
        return found

    def describe(self) -> dict[str, Any]:
        # the tool's version is printed by the run, not reported: reports are the same on
        # every machine
        return {"mode": self.name,
                "namespaces": ["network (loopback only)", "pid", "ipc", "uts", "user", "mount"],
                "capabilities": "none but binding a low port in the run's own network "
                                "namespace, the bounding set emptied alike",
                "filesystem": {"/sandbox": "the probe's home, workspace and tmp, the client's "
                                           "to write",
                               CLIENT_DIR: "the client's install, read-only",
                               TOOLS_DIR: "the harness's tools, read-only",
                               INPUTS_DIR: "what the harness gives the runs (MCP specs and "
                                           "configs), read-only",
                               RUN_DIR: "the sockets of the mock and of the harness's "
                                        "collector, read-only",
                               "/usr, /etc (a few files)": "the system, read-only",
                               "$RUNTIME": "the interpreter the client or a tool runs on, "
                                           "read-only at its own path",
                               "$HARNESS_RUNTIME": "a runtime of the harness's own tools "
                                                   "(the MCP server's venv), read-only at its "
                                                   "own path, only for runs that use it",
                               "/tmp": "empty, private to the run"},
                "network": {f"127.0.0.1:{MOCK_PORT}": "the mock (forwarded to its socket)",
                            f"127.0.0.1:{PROXY_PORT}": "the refusing proxy",
                            f"127.0.0.1:{DNS_PORT}": "the refusing resolver"},
                "evidence": EVIDENCE_SOURCES,
                "promises": [
                    "no egress: nothing but loopback exists in the run's network namespace",
                    "no instructions of the caller: nothing above /sandbox/workspace but "
                    "the system's directories",
                    "nothing outlives a run: its PID namespace ends with it",
                    "evidence the client cannot touch: the journal, the outputs and the "
                    "hook, MCP and egress records are kept outside what the run is shown",
                    "no way out through the files the harness handles: every access to "
                    "/sandbox follows no link and reads at most a capped size"],
                "bounds": self.limiter().describe()}

    def limiter(self) -> Limiter:
        return find_limiter(self.bounds, self.path)

    @contextmanager
    def enter(self, box: Sandbox, binary: ClientBinary, egress_guard: bool,
              readonly: Sequence[Path] = (),
              others: Sequence[ClientBinary] = ()) -> Iterator[SandboxPlace]:
        # a short path: a Unix socket's path has room for about 100 bytes
        run_dir = Path(tempfile.mkdtemp(prefix=temp_folder_prefix()))
        try:
            etc = run_dir / "etc"
            etc.mkdir()
            for name, text in (("hosts", "127.0.0.1 localhost loopprobe\n::1 localhost\n"),
                               ("resolv.conf", "nameserver 127.0.0.1\n"),
                               ("hostname", "loopprobe\n")):
                (etc / name).write_text(text)
                (etc / name).chmod(0o644)  # read inside, whatever the umask
            executables = [sys.executable, *binary.launcher[:1],
                           *(b.launcher[0] for b in others)]
            runtimes = sorted({p for e in executables
                               if (p := runtime_prefix(e)) is not None
                               and not any(p.is_relative_to(b.root) for b in [binary, *others])})
            limiter = self.limiter()
            # the client's part on a filesystem of the sandbox bound's size, while the probe runs
            with limiter.sandbox_fs(box.client_root) as fs:
                yield SandboxPlace(box, binary, run_dir, self.path, egress_guard, runtimes,
                                   list(readonly), list(others), limiter, fs)
        finally:
            shutil.rmtree(run_dir, ignore_errors=True)


def sweep_leftovers(limiter: Limiter | None = None) -> list[str]:
    """What killed harnesses left here (``probes.run.leftovers``), removed: done whenever a
    containment is found, which every command that runs a client does first."""
    limiter = limiter or find_limiter(Bounds())
    return sweep(p.parent for p in (limiter.memory, limiter.pids) if isinstance(p, Cgroup))


def find_containment(no_sandbox: bool) -> Containment:
    """The sandbox, or ``NoContainment`` when the user asked for it explicitly (the client's
    ``--version`` and ``--help`` then run on the host too where bubblewrap cannot start)."""
    if no_sandbox:
        allow_uncontained()
        sweep_leftovers()
        return NoContainment()
    return Bubblewrap.find()
