"""A client's short informational runs (``--version`` at install, ``--help`` for its flags),
contained as its probe runs are: a client binary is trusted for nothing, so no execution of
it is left on the host, not even these.

Each run is one bubblewrap sandbox:

- namespaces of its own: network (loopback only, of its own: nothing of the host's is
  reachable), PID (the sandbox ends with its first process), IPC, UTS, user and mount;
  no capability (bwrap run by root leaves every capability of the user namespace
  otherwise, enough to remount the install read-write);
- a filesystem built from nothing: the system's directories and a few /etc files as a
  probe run's (``probes.sandbox.view``), the folders the caller shows (the client's
  install) and the interpreter it runs on, read-only at their own paths; a fresh home on a
  tmpfs and a private /tmp; nothing else of the host, nothing of the caller's environment;
- a timeout that kills the sandbox; each output stream kept up to a cap, the rest read and
  dropped.

Where bubblewrap cannot start, the run is refused unless the user chose to run the client
uncontained (``--no-sandbox``, which calls ``allow_uncontained``): it then runs on the
host, as the probe runs do, in a throwaway home with an allow-listed environment.
"""

from __future__ import annotations

import os
import selectors
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from probes.clients.npm import InstallError
from probes.sandbox.folders import BASE_PATH
from probes.sandbox.view import NO_CAPABILITIES, fresh_mounts, runtime_prefix, system_mounts

__all__ = ["HOME", "INFO_TIMEOUT", "OUTPUT_CAP", "InfoRun", "allow_uncontained",
           "informational_run", "sandbox_problem"]

INFO_TIMEOUT = 60.0
OUTPUT_CAP = 1 << 20  # bytes kept of each stream (a --help is about 10 KiB)
HOME = "/sandbox/home"  # inside; a tmpfs
_CHUNK = 1 << 16
_uncontained_allowed = False  # the user passed --no-sandbox (allow_uncontained)


@dataclass(frozen=True)
class InfoRun:
    """What one informational run printed (decoded, newlines as ``text=True`` gives them)."""

    returncode: int
    stdout: str
    stderr: str
    contained: bool


def allow_uncontained() -> None:
    """The user chose to run the client uncontained (``--no-sandbox``): where bubblewrap
    cannot start, informational runs go on the host too, as the probe runs do."""
    global _uncontained_allowed
    _uncontained_allowed = True


def sandbox_problem() -> tuple[str | None, str]:
    """bwrap's path and ``""`` when it starts a sandbox here; else None and why not."""
    path = shutil.which("bwrap")
    if path is None:
        return None, "bubblewrap (bwrap) is not installed"
    try:
        done = subprocess.run([path, "--unshare-all", "--die-with-parent", *NO_CAPABILITIES,
                               "--ro-bind", "/", "/", "--", "/bin/true"],
                              capture_output=True, text=True, timeout=30,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as error:
        return None, f"bubblewrap at {path} cannot run: {error}"
    if done.returncode != 0:
        return None, f"bubblewrap cannot create namespaces here ({done.stderr.strip()[:200]})"
    return path, ""


def informational_run(argv: Sequence[str], shown: Sequence[Path],
                      env: Mapping[str, str] | None = None, *,
                      timeout: float = INFO_TIMEOUT, cap: int = OUTPUT_CAP) -> InfoRun:
    """Run ``argv`` (a client's, with paths of the host) contained, showing it ``shown``
    (files or folders) read-only at their own paths; ``env`` adds to the allow-listed
    environment. Raises ``subprocess.TimeoutExpired`` after killing it at ``timeout``, and
    ``InstallError`` where bubblewrap cannot start and the user did not choose to run the
    client uncontained."""
    bwrap, problem = sandbox_problem()
    if bwrap is not None:
        base = {"PATH": BASE_PATH, "HOME": HOME, "TERM": "dumb", "TMPDIR": "/tmp"}
        return _bounded(_contained_argv(bwrap, argv, shown), {**base, **(env or {})}, "/",
                        timeout, cap, contained=True)
    if not _uncontained_allowed:
        raise InstallError(f"cannot run {Path(argv[0]).name} {' '.join(argv[1:])[-60:]} "
                           f"contained: {problem}; install bubblewrap (Debian/Ubuntu: apt-get "
                           "install bubblewrap), or pass --no-sandbox to run the client "
                           "uncontained")
    with tempfile.TemporaryDirectory(prefix="loopprobe-cli.") as home:
        base = {"PATH": BASE_PATH, "HOME": home, "TERM": "dumb"}
        return _bounded(list(argv), {**base, **(env or {})}, home, timeout, cap,
                        contained=False)


def _contained_argv(bwrap: str, argv: Sequence[str], shown: Sequence[Path]) -> list[str]:
    # the interpreter it runs on (node), when it is neither the system's nor shown already
    real = Path(os.path.realpath(argv[0]))
    inside = any(real.is_relative_to(os.path.realpath(s)) for s in shown)
    runtime = None if inside or not os.path.isabs(argv[0]) else runtime_prefix(argv[0])
    folders = [*shown, *([runtime] if runtime is not None else [])]
    # /dev read-only but for its nodes and /dev/shm, as in a probe run; what is shown last,
    # so an install under /tmp is not hidden by the private one
    mounts = [*system_mounts(), *fresh_mounts(), "--tmpfs", "/sandbox", "--dir", HOME]
    for folder in folders:
        mounts += ["--ro-bind", str(folder), str(folder)]
    return [bwrap, "--unshare-all", "--die-with-parent", "--new-session", *NO_CAPABILITIES,
            "--hostname", "loopprobe", *mounts, "--chdir", HOME, "--", *argv]


def _bounded(argv: list[str], env: dict[str, str], cwd: str, timeout: float, cap: int, *,
             contained: bool) -> InfoRun:
    """Run ``argv``, keeping the first ``cap`` bytes of each stream and reading on past them
    (so it never blocks on a full pipe); its process group killed at ``timeout``."""
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, env=env, cwd=cwd, start_new_session=True)
    assert process.stdout is not None and process.stderr is not None
    out_fd, err_fd = process.stdout.fileno(), process.stderr.fileno()
    kept = {out_fd: bytearray(), err_fd: bytearray()}
    deadline = time.monotonic() + timeout
    try:
        with selectors.DefaultSelector() as selector:
            for fd in kept:
                selector.register(fd, selectors.EVENT_READ)
            while selector.get_map():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise subprocess.TimeoutExpired(argv, timeout)
                for key, _ in selector.select(left):
                    chunk = os.read(key.fd, _CHUNK)
                    if not chunk:
                        selector.unregister(key.fd)
                    kept[key.fd] += chunk[:max(cap - len(kept[key.fd]), 0)]
        returncode = process.wait(max(deadline - time.monotonic(), 0.01))
    except BaseException:
        _kill(process)
        raise
    finally:
        process.stdout.close()
        process.stderr.close()
    return InfoRun(returncode, _text(kept[out_fd]), _text(kept[err_fd]), contained)


def _kill(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


def _text(data: bytes | bytearray) -> str:
    # what text=True gave: universal newlines
    return data.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")
