"""The three servers under test, each a subprocess on a free 127.0.0.1 port.

- ``ours``: ``python -m mockapi`` with the ``classifier: plain`` scenario
  ``bench.SCENARIO``, whose one ``repeat: always`` rule answers every request
  with ``FIXED_TEXT``.
- ``aimock``: ``@copilotkit/aimock`` (its ``llmock`` CLI, ``dist/cli.js``), pinned,
  installed with npm into ``<cache>/peers/aimock-<version>``, with one catch-all
  fixture (``"match": {}``) answering the same text.
- ``floor``: ``python -m bench.floor``, a bare ASGI app on our mock's uvicorn
  configuration that reads and discards the body and sends the bytes our mock
  sends for the bench's first body (captured once at its start-up): what the
  same server stack costs with nothing of a mock on top.

All reply with the same seven stream events (message_start, content_block_start,
two text deltas of 32 characters, content_block_stop, message_delta,
message_stop): our mock's ``ping`` is switched off and aimock's chunk size set to
ours; the floor's bytes are ours. Each process gets its own session (process
group) and is stopped by it.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import FIXED_TEXT, SCENARIO
from probes.clients.npm import InstallError, cache_root, install_package

__all__ = ["AIMOCK_PACKAGE", "AIMOCK_VERSION", "InstallError", "Server", "ServerError",
           "install_aimock", "start_aimock", "start_floor", "start_ours"]

AIMOCK_PACKAGE = "@copilotkit/aimock"
AIMOCK_VERSION = "1.43.0"
CHUNK_SIZE = 32  # characters per text delta: our mock's default, set on aimock too
READY_TIMEOUT = 20.0
STOP_TIMEOUT = 5.0
PR_SET_PDEATHSIG = 1
ROOT = Path(__file__).resolve().parent.parent
LISTENING = re.compile(r"listening on http://127\.0\.0\.1:(\d+)")


class ServerError(RuntimeError):
    pass


@dataclass
class Server:
    name: str
    version: str
    argv: list[str]
    process: subprocess.Popen[bytes]
    log: Path
    port: int = 0
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def cpu_seconds(self) -> float | None:
        """User + system CPU time of the server process (all its threads) so far."""
        try:
            stat = Path(f"/proc/{self.process.pid}/stat").read_text()
        except OSError:
            return None
        fields = stat.rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        """SIGTERM the process group, then SIGKILL it if it is still there."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if self.process.poll() is not None:
                break
            try:
                os.killpg(self.process.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                continue
        try:  # children left in the group after the leader exited
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def describe(self) -> dict[str, Any]:
        return {"version": self.version, "command": self.argv, "url": self.url,
                "pid": self.process.pid, **self.config}


def _launch(name: str, version: str, argv: list[str], workdir: Path,
            cpus: set[int] | None, config: dict[str, Any],
            env: dict[str, str] | None = None) -> Server:
    log = workdir / f"{name}.log"

    def in_child() -> None:
        _die_with_parent()
        if cpus:
            os.sched_setaffinity(0, cpus)

    with log.open("wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, cwd=workdir, env=env,
                                   start_new_session=True, preexec_fn=in_child)
    server = Server(name, version, argv, process, log, config=config)
    try:
        server.port = _wait_listening(server)
    except BaseException:
        server.stop()
        raise
    return server


def _die_with_parent() -> None:
    """Linux: SIGTERM the server if the bench is killed before it can stop it."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


def _wait_listening(server: Server) -> int:
    """The port from the server's "listening on" line, once a TCP connect succeeds there."""
    deadline = time.monotonic() + READY_TIMEOUT
    port = 0
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise ServerError(f"{server.name} exited with {server.process.returncode} before "
                              f"listening: {server.log.read_text(errors='replace')[-2000:]}")
        if not port and (found := LISTENING.search(server.log.read_text(errors="replace"))):
            port = int(found.group(1))
        if port:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1.0):
                    return port
            except OSError:
                pass
        time.sleep(0.05)
    raise ServerError(f"{server.name} did not listen within {READY_TIMEOUT}s: "
                      f"{server.log.read_text(errors='replace')[-2000:]}")


def start_ours(workdir: Path, cpus: set[int] | None) -> Server:
    path = workdir / "bench-scenario.json"
    path.write_text(json.dumps(SCENARIO, indent=2))
    journal = workdir / "ours.journal.jsonl"
    argv = [sys.executable, "-m", "mockapi", "--scenario", str(path), "--port", "0",
            "--journal", str(journal)]
    return _launch("ours", _versions("loopprobe", "starlette", "sse-starlette", "uvicorn",
                                     "uvloop", "httptools"), argv, workdir, cpus,
                   {"scenario": SCENARIO, "journal": "JSONL file in a temporary directory"})


def start_floor(workdir: Path, cpus: set[int] | None, body: bytes) -> Server:
    """The raw ASGI floor (``bench.floor``) replaying our mock's replies to ``body``."""
    path = workdir / "floor-body.json"
    path.write_bytes(body)
    argv = [sys.executable, "-m", "bench.floor", "--port", "0", "--body", str(path)]
    pythonpath = os.environ.get("PYTHONPATH")
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep + pythonpath if pythonpath else ''}"}
    return _launch("floor", _versions("uvicorn", "uvloop", "httptools"), argv, workdir, cpus,
                   {"app": "raw ASGI: reads and discards the body, sends our mock's reply "
                    "messages captured once per mode (stream when the body has "
                    "\"stream\":true); uvicorn configured and run as python -m mockapi",
                    "body": "the first streaming bench body", "journal": None}, env)


def _versions(*dists: str) -> str:
    from importlib.metadata import PackageNotFoundError, version
    parts = []
    for dist in dists:
        try:
            parts.append(f"{dist} {version(dist)}")
        except PackageNotFoundError:
            pass
    return ", ".join(parts)


def install_aimock(version: str = AIMOCK_VERSION) -> Path:
    """The installed package directory (npm install into the cache on first use)."""
    target = cache_root() / "peers" / f"aimock-{version}"
    package = target / "node_modules" / "@copilotkit" / "aimock"
    if not (target / "install.json").is_file() or not (package / "dist" / "cli.js").is_file():
        def locate(prefix: Path) -> tuple[Path, list[Any]]:
            entry = prefix / "node_modules" / "@copilotkit" / "aimock" / "dist" / "cli.js"
            if not entry.is_file():
                raise InstallError(f"{AIMOCK_PACKAGE}@{version} has no dist/cli.js")
            return entry, ["node", entry]
        install_package(AIMOCK_PACKAGE, version, target, locate)
    return package


def start_aimock(workdir: Path, cpus: set[int] | None, version: str = AIMOCK_VERSION) -> Server:
    package = install_aimock(version)
    node = shutil.which("node")
    if node is None:
        raise ServerError("node is not on PATH")
    fixtures = {"fixtures": [{"match": {}, "response": {"content": FIXED_TEXT}}]}
    path = workdir / "aimock-fixtures.json"
    path.write_text(json.dumps(fixtures, indent=2))
    argv = [node, str(package / "dist" / "cli.js"), "--host", "127.0.0.1", "--port", "0",
            "--fixtures", str(path), "--chunk-size", str(CHUNK_SIZE), "--log-level", "info"]
    return _launch("aimock", version, argv, workdir, cpus,
                   {"fixtures": fixtures, "journal": "in memory, last 1000 requests (default)"})
