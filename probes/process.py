"""Run one client process: its own process group, a hard timeout, output kept whole."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

__all__ = ["KILL_GRACE", "POLL_INTERVAL", "Dialogue", "ProcessResult", "allow_starts",
           "run_conversation", "run_process", "stop_all"]

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


def _start(argv: list[str], env: dict[str, str], cwd: Path, *,
           piped_stdin: bool) -> subprocess.Popen[bytes]:
    """Start a client in a new session, known to ``stop_all`` (refused while it stops)."""
    with _lock:
        if _stopping.is_set():
            raise KeyboardInterrupt("the run is being stopped")
        process = subprocess.Popen(
            argv, env=env, cwd=cwd, start_new_session=True,
            stdin=subprocess.PIPE if piped_stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        _running.add(process)
    return process


def run_process(argv: list[str], *, env: dict[str, str], cwd: Path, timeout: float,
                stdin: str | None = None) -> ProcessResult:
    """Run ``argv`` in a new session; at ``timeout`` the whole process group is killed.

    The group is also killed after a normal exit, so nothing the client started
    in the background outlives its run.
    """
    started = time.monotonic()
    process = _start(argv, env, cwd, piped_stdin=stdin is not None)
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


POLL_INTERVAL = 0.02


class Dialogue(Protocol):
    """What ``run_conversation`` feeds while the client runs (``probes.streamed.Conversation``)."""

    closed: bool

    def on_event(self, event: Mapping[str, Any]) -> None: ...

    def on_request(self, record: Mapping[str, Any]) -> None: ...

    def on_tick(self) -> None: ...

    def end(self, why: str) -> None: ...


def _pump(stream: Any, into: queue.Queue[bytes | None]) -> None:
    for line in iter(stream.readline, b""):
        into.put(line)
    into.put(None)


def run_conversation(argv: list[str], *, env: dict[str, str], cwd: Path, timeout: float,
                     start: Callable[[Callable[[str], None], Callable[[], None]], Dialogue],
                     new_requests: Callable[[], list[Mapping[str, Any]]]) -> ProcessResult:
    """Run ``argv`` with a caller that talks to it: ``start(write, close)`` gives the dialogue
    that is fed every stdout line (parsed; others are kept but not fed) and every request
    record ``new_requests`` returns (polled). The same guarantees as ``run_process``: a new
    process group, killed at ``timeout`` and after the exit."""
    started = time.monotonic()
    process = _start(argv, env, cwd, piped_stdin=True)
    assert process.stdin is not None and process.stdout is not None
    stdin = process.stdin
    lines: queue.Queue[bytes | None] = queue.Queue()
    errors: queue.Queue[bytes | None] = queue.Queue()
    readers = [threading.Thread(target=_pump, args=(process.stdout, lines), daemon=True),
               threading.Thread(target=_pump, args=(process.stderr, errors), daemon=True)]
    for reader in readers:
        reader.start()

    def write(text: str) -> None:
        stdin.write(text.encode())
        stdin.flush()

    out: list[bytes] = []
    timed_out = False
    try:
        dialogue = start(write, stdin.close)
        deadline = started + timeout
        eof = False
        while not eof:
            for record in new_requests():
                dialogue.on_request(record)
            dialogue.on_tick()
            try:
                line = lines.get(timeout=POLL_INTERVAL)
            except queue.Empty:
                if time.monotonic() > deadline:
                    timed_out = True
                    break
                continue
            if line is None:
                eof = True
                break
            out.append(line)
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict):
                dialogue.on_event(event)
        if not dialogue.closed:
            dialogue.end("stdin closed: the client ended its output" if eof else
                         "stdin closed: the run's timeout")
        remaining = max(0.0, deadline - time.monotonic())
        try:
            process.wait(remaining if not timed_out else 0)
        except subprocess.TimeoutExpired:
            timed_out = True
    except BaseException:
        _kill_group(process)
        process.wait(KILL_GRACE)
        raise
    finally:
        with _lock:
            _running.discard(process)
        _kill_group(process)
    for reader in readers:
        reader.join(KILL_GRACE)
    while not lines.empty():
        if (line := lines.get()) is not None:
            out.append(line)
    err = b"".join(iter(lambda: errors.get() if not errors.empty() else None, None))
    if _stopping.is_set():
        raise KeyboardInterrupt("the run was stopped")
    return ProcessResult(
        argv=list(argv), exit_code=None if timed_out else process.returncode,
        timed_out=timed_out, duration=round(time.monotonic() - started, 3),
        stdout=b"".join(out).decode("utf-8", "replace"),
        stderr=err.decode("utf-8", "replace"), pid=process.pid)
