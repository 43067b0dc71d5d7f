"""One probe's place in bubblewrap: the view its runs are shown and each run's bwrap argv.

The view (``CONTAINED_ROOT``, ``CLIENT_DIR``, ``TOOLS_DIR``, ``INPUTS_DIR``, ``RUN_DIR``,
the system's directories and the few files of /etc shown) is built from nothing by
``SandboxPlace``'s mounts; ``translate`` rewrites the host's sandbox paths to the view's,
``placeholders`` says how reports show them, and ``wrap`` gives the command that starts
the client in its namespaces, without capabilities, behind ``sandbox_init.py``.
``probes.run.containment`` says what the sandbox promises, finds bwrap and makes the place.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from mockapi.script.scenario import Scenario
from mockapi.serve.server import MockServer
from probes.clients.base import ClientBinary, Command
from probes.core.mcp import SERVER_SCRIPT
from probes.inside import egress, hook_recorder, hook_wrapper, sandbox_init
from probes.inside.egress import proxy_environment
from probes.run.bounds import Bounds, Limiter, RunConfinement, find_limiter
from probes.run.sandbox_fs import SandboxFs
from probes.sandbox.folders import Sandbox
from probes.sandbox.view import (
    ETC_SHOWN,
    NO_CAPABILITIES,
    SYSTEM_DIRS,
    fresh_mounts,
    system_mounts,
)

__all__ = ["CAPABILITIES", "CLIENT_DIR", "CONTAINED_ROOT", "DNS_PORT", "ETC_SHOWN",
           "INPUTS_DIR", "MOCK_PORT", "PROXY_PORT", "RECORD_SOCKET", "RUN_DIR", "SYSTEM_DIRS",
           "TOOLS", "TOOLS_DIR", "SandboxPlace", "other_dir"]

CONTAINED_ROOT = "/sandbox"
CLIENT_DIR = "/opt/loopprobe/client"
TOOLS_DIR = "/opt/loopprobe/tools"
INPUTS_DIR = "/opt/loopprobe/inputs"
RUN_DIR = "/run/loopprobe"
RECORD_SOCKET = "record.sock"
MOCK_PORT = 8080
PROXY_PORT = 3128
DNS_PORT = 53
# Run by root, bwrap leaves the sandbox root of its user namespace with every capability in
# it: enough to remount a read-only bind read-write and write the host's file (the client's
# install, the harness's tools, the interpreter). Every capability is dropped, the bounding
# set too (an exec cannot regain one), but binding a port below 1024 in the run's own
# network namespace (the refusing resolver on 53).
CAPABILITIES = (*NO_CAPABILITIES, "--cap-add", "CAP_NET_BIND_SERVICE")
TOOLS = (Path(sandbox_init.__file__), Path(egress.__file__), Path(hook_recorder.__file__),
         Path(hook_wrapper.__file__), SERVER_SCRIPT)



def other_dir(binary: ClientBinary) -> str:
    """Where another version of the client is shown, read-only, beside the probe's own."""
    return f"{CLIENT_DIR}-{binary.version}"


@dataclass
class SandboxPlace:
    box: Sandbox
    binary: ClientBinary
    run_dir: Path
    bwrap: str
    egress_guard: bool
    runtimes: list[Path] = field(default_factory=list)
    readonly: list[Path] = field(default_factory=list)
    others: list[ClientBinary] = field(default_factory=list)
    limiter: Limiter = field(default_factory=lambda: find_limiter(Bounds()))
    sandbox_fs: SandboxFs | None = None  # the client's part's own filesystem, when mounted
    first_process_reports = True

    @property
    def socket(self) -> Path:
        return self.run_dir / "mock.sock"

    def serve(self, scenario: Scenario, journal_path: Path, *,
              context: Mapping[str, str]) -> MockServer:
        return MockServer(scenario, journal_path, context=context, fsync=True, **self.listen())

    def listen(self) -> dict[str, Any]:
        return {"uds": self.socket, "public_url": f"http://127.0.0.1:{MOCK_PORT}"}

    def translations(self) -> list[tuple[str, str]]:
        """Host path -> path in the view, longest first (so nested paths map correctly)."""
        pairs = {str(self.box.client_root): CONTAINED_ROOT, str(self.box.inputs): INPUTS_DIR,
                 str(self.run_dir): RUN_DIR, str(self.binary.root): CLIENT_DIR,
                 **{str(b.root): other_dir(b) for b in self.others},
                 # the harness's interpreter runs its tools: the base one, not a venv's
                 sys.executable: os.path.realpath(sys.executable)}
        pairs.update({str(tool): f"{TOOLS_DIR}/{tool.name}" for tool in self._tools()})
        return sorted(pairs.items(), key=lambda kv: -len(kv[0]))

    def _tools(self) -> list[Path]:
        outside = [Path(part) for part in self.binary.launcher[1:]
                   if Path(part).is_file() and not Path(part).is_relative_to(self.binary.root)]
        return sorted(set(TOOLS) | set(outside))

    def translate(self, text: str) -> str:
        for host, inside in self.translations():
            text = text.replace(host, inside)
        return text

    def seen(self, path: Path) -> str:
        return self.translate(str(path))

    def record_socket(self) -> Path:
        return self.run_dir / RECORD_SOCKET

    def proxy_environment(self) -> dict[str, str]:
        return proxy_environment(f"http://127.0.0.1:{PROXY_PORT}") if self.egress_guard else {}

    def placeholders(self) -> dict[str, str]:
        return {self.translate(host): name for host, name in self.box.placeholders().items()} | {
            CLIENT_DIR: "$CLIENT_DIR", f"http://127.0.0.1:{PROXY_PORT}": "$EGRESS_PROXY",
            **{other_dir(b): f"$CLIENT_DIR[{b.version}]" for b in self.others},
            **{str(r): "$RUNTIME" for r in self.runtimes},
            **{str(r): "$HARNESS_RUNTIME" for r in self.readonly}}

    def _mounts(self) -> list[str]:
        args = system_mounts()
        for name in ("hosts", "resolv.conf", "hostname"):
            args += ["--ro-bind", str(self.run_dir / "etc" / name), f"/etc/{name}"]
        args += fresh_mounts(self.limiter.bwrap_args_for_tmp())  # before what is bound under them
        for runtime in [*self.runtimes, *self.readonly]:
            args += ["--ro-bind", str(runtime), str(runtime)]
        args += ["--ro-bind", str(self.binary.root), CLIENT_DIR]
        for other in self.others:
            args += ["--ro-bind", str(other.root), other_dir(other)]
        for tool in self._tools():
            args += ["--ro-bind", str(tool), f"{TOOLS_DIR}/{tool.name}"]
        args += ["--bind", str(self.box.client_root), CONTAINED_ROOT,
                 "--ro-bind", str(self.box.inputs), INPUTS_DIR,
                 "--ro-bind", str(self.run_dir), RUN_DIR]
        return args

    def wrap(self, command: Command) -> Command:
        argv = [self.translate(a) for a in command.argv]
        spec = {"forward": [{"port": MOCK_PORT, "socket": f"{RUN_DIR}/mock.sock"}],
                "proxy_port": PROXY_PORT if self.egress_guard else None,
                "dns_port": DNS_PORT, "record_socket": f"{RUN_DIR}/{RECORD_SOCKET}",
                "argv": argv, "rlimits": self.limiter.rlimits()}
        python = os.path.realpath(sys.executable)
        host_argv = [
            self.bwrap, "--unshare-all", "--die-with-parent", "--new-session", *CAPABILITIES,
            "--hostname", "loopprobe", *self._mounts(),
            "--chdir", self.translate(str(command.cwd)), "--",
            python, "-I", "-S", f"{TOOLS_DIR}/{Path(sandbox_init.__file__).name}",
            json.dumps(spec)]
        # bwrap starts in a folder of the harness's: the client's cannot be a link out
        return replace(command, argv=host_argv, cwd=self.run_dir,
                       env={k: self.translate(v) for k, v in command.env.items()},
                       files={path: self.translate(text) for path, text in command.files.items()},
                       shown_argv=argv)

    def confine(self) -> AbstractContextManager[RunConfinement]:
        """One client run's bounds: enter it around the run, start it with its ``wrap``."""
        return self.limiter.confine(self.box.client_root, self.sandbox_fs)

    def egress_attempts(self) -> list[dict[str, Any]]:
        return []  # reported from inside, to the collector
