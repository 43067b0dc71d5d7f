"""Run one client process: its own process group, a hard timeout, output kept whole."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["KILL_GRACE", "ProcessResult", "allow_starts", "run_process", "stop_all"]

KILL_GRACE = 3.0

# the client processes running now (probes may run in threads), and whether to start more
_running: set[subprocess.Popen[bytes]] = set()
_lock = threading.Lock()
_stopping = threading.Event()


def allow_starts() -> None:
    """Start clients again after ``stop_all`` (the next run of a long-lived process)."""
    _stopping.clear()


def stop_all() -> None:
    """Kill every running client's process group and refuse to start new ones (Ctrl-C):
    a probe whose client is killed this way ends as interrupted."""
    _stopping.set()
    with _lock:
        running = list(_running)
    for process in running:
        _kill_group(process)


@dataclass(frozen=True)
class ProcessResult:
    argv: list[str]
    exit_code: int | None  # None when killed at the timeout
    timed_out: bool
    duration: float
    stdout: str
    stderr: str
    pid: int


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_process(argv: list[str], *, env: dict[str, str], cwd: Path, timeout: float,
                stdin: str | None = None) -> ProcessResult:
    """Run ``argv`` in a new session; at ``timeout`` the whole process group is killed.

    The group is also killed after a normal exit, so nothing the client started
    in the background outlives its run.
    """
    started = time.monotonic()
    with _lock:
        if _stopping.is_set():
            raise KeyboardInterrupt("the run is being stopped")
        process = subprocess.Popen(
            argv, env=env, cwd=cwd, start_new_session=True,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        _running.add(process)
    timed_out = False
    try:
        out, err = process.communicate(
            input=stdin.encode() if stdin is not None else None, timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(process)
        try:
            out, err = process.communicate(timeout=KILL_GRACE)
        except subprocess.TimeoutExpired:  # a grandchild holds the pipes open
            out, err = b"", b""
            process.wait(KILL_GRACE)
    except BaseException:  # Ctrl-C: take the client down with us
        _kill_group(process)
        process.wait(KILL_GRACE)
        raise
    finally:
        with _lock:
            _running.discard(process)
    _kill_group(process)
    if _stopping.is_set():  # killed by stop_all: the probe is interrupted, not failed
        raise KeyboardInterrupt("the run was stopped")
    return ProcessResult(
        argv=list(argv), exit_code=None if timed_out else process.returncode,
        timed_out=timed_out, duration=round(time.monotonic() - started, 3),
        stdout=out.decode("utf-8", "replace"), stderr=err.decode("utf-8", "replace"),
        pid=process.pid,
    )
