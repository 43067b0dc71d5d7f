"""Run one client process: its own process group, a hard timeout or a stop, output kept up to a
cap (``probes.run.pipes``)."""

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
from typing import IO, Any, Protocol

from probes.run.pipes import OUTPUT_CAP, STDIN_QUEUE_CAP, Capture, StdinWriter

__all__ = ["KILL_GRACE", "POLL_INTERVAL", "STOP_POLL", "Dialogue", "ProcessResult", "allow_starts",
           "run_conversation", "run_process", "stop_all"]

KILL_GRACE = 3.0
POLL_INTERVAL = 0.02
STOP_POLL = 0.25  # how often ``should_stop`` is asked

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
    exit_code: int | None  # None when killed: at the timeout, or stopped
    timed_out: bool
    duration: float
    stdout: str
    stderr: str
    pid: int
    stdout_dropped: int = 0  # bytes printed beyond what was kept (the output cap)
    stderr_dropped: int = 0
    stopped: str | None = None  # why ``should_stop`` had the run killed


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


class _Stop:
    """``should_stop``, asked at most every STOP_POLL seconds; its first reason stays."""

    def __init__(self, should_stop: Callable[[], str | None] | None):
        self._ask = should_stop
        self._next = 0.0
        self.reason: str | None = None

    def __call__(self) -> str | None:
        if self._ask is not None and self.reason is None and time.monotonic() >= self._next:
            self._next = time.monotonic() + STOP_POLL
            self.reason = self._ask() or None
        return self.reason


def _ended(process: subprocess.Popen[bytes], captures: tuple[Capture, ...]) -> None:
    """Reap the killed client and wait for its output to end, KILL_GRACE at most: a
    grandchild outside its group may hold the pipes open (what was read is kept)."""
    until = time.monotonic() + KILL_GRACE
    try:
        process.wait(KILL_GRACE)
    except subprocess.TimeoutExpired:
        pass
    for capture in captures:
        capture.join(until - time.monotonic())


def _result(argv: list[str], process: subprocess.Popen[bytes], started: float,
            out: Capture, err: Capture, timed_out: bool, stopped: str | None) -> ProcessResult:
    if _stopping.is_set():  # killed by stop_all: the probe is interrupted, not failed
        raise KeyboardInterrupt("the run was stopped")
    stdout, stdout_dropped = out.result()
    stderr, stderr_dropped = err.result()
    killed = timed_out or stopped is not None
    return ProcessResult(
        argv=list(argv), exit_code=None if killed else process.returncode,
        timed_out=timed_out, duration=round(time.monotonic() - started, 3),
        stdout=stdout.decode("utf-8", "replace"), stderr=stderr.decode("utf-8", "replace"),
        pid=process.pid, stdout_dropped=stdout_dropped, stderr_dropped=stderr_dropped,
        stopped=stopped)


def _pipes(process: subprocess.Popen[bytes]) -> tuple[IO[bytes], IO[bytes]]:
    assert process.stdout is not None and process.stderr is not None
    return process.stdout, process.stderr


def _wait(done: Callable[[], bool], deadline: float,
          stop: Callable[[], str | None]) -> tuple[bool, str | None]:
    """Poll until ``done()``: (whether the deadline came first, the stop reason that did)."""
    while not done():
        if time.monotonic() >= deadline:
            return True, None
        if (reason := stop()) is not None:
            return False, reason
        time.sleep(POLL_INTERVAL)
    return False, None


def run_process(argv: list[str], *, env: dict[str, str], cwd: Path, timeout: float,
                stdin: str | None = None, output_cap: int = OUTPUT_CAP,
                should_stop: Callable[[], str | None] | None = None,
                on_start: Callable[[int], None] | None = None) -> ProcessResult:
    """Run ``argv`` in a new session; at ``timeout``, or once ``should_stop`` (asked every
    STOP_POLL seconds) gives a reason, the whole process group is killed. The first
    ``output_cap`` bytes of stdout and of stderr are kept, the rest counted.

    The group is also killed after a normal exit, so nothing the client started
    in the background outlives its run. ``on_start`` is told the started process's PID.
    """
    started = time.monotonic()
    process = _start(argv, env, cwd, piped_stdin=stdin is not None)
    if on_start is not None:
        on_start(process.pid)
    stdout, stderr = _pipes(process)
    out, err = Capture(stdout, output_cap), Capture(stderr, output_cap)
    writer = None
    if stdin is not None and process.stdin is not None:
        data = stdin.encode()
        writer = StdinWriter(process.stdin, cap=max(STDIN_QUEUE_CAP, len(data)))
        writer.write(stdin)
        writer.close()
    stop = _Stop(should_stop)
    try:
        # the run lasts until the client exited and its output ended (a background
        # process of its group may still print), as communicate() waited before
        timed_out, stopped = _wait(
            lambda: process.poll() is not None and out.done and err.done,
            started + timeout, stop)
    except BaseException:  # Ctrl-C: take the client down with us
        _kill_group(process)
        process.wait(KILL_GRACE)
        raise
    finally:
        with _lock:
            _running.discard(process)
        _kill_group(process)
        if writer is not None:
            writer.stop("the run ended", KILL_GRACE)
    _ended(process, (out, err))
    return _result(argv, process, started, out, err, timed_out, stopped)


class Dialogue(Protocol):
    """What ``run_conversation`` feeds while the client runs (``probes.core.streamed.Conversation``)."""

    closed: bool

    def on_event(self, event: Mapping[str, Any]) -> None: ...

    def on_request(self, record: Mapping[str, Any]) -> None: ...

    def on_tick(self) -> None: ...

    def end(self, why: str) -> None: ...

    def not_written(self, index: int, why: str) -> None:
        """The ``index``-th call of ``write`` (from 0) was queued but never reached the
        client whole."""


def _event(line: bytes) -> dict[str, Any] | None:
    try:
        event = json.loads(line)
    except (ValueError, RecursionError):  # not JSON, or nested deeper than Python parses
        return None
    return event if isinstance(event, dict) else None


def run_conversation(argv: list[str], *, env: dict[str, str], cwd: Path, timeout: float,
                     start: Callable[[Callable[[str], None], Callable[[], None]], Dialogue],
                     new_requests: Callable[[], list[Mapping[str, Any]]],
                     output_cap: int = OUTPUT_CAP,
                     should_stop: Callable[[], str | None] | None = None,
                     on_start: Callable[[int], None] | None = None) -> ProcessResult:
    """Run ``argv`` with a caller that talks to it: ``start(write, close)`` gives the dialogue
    that is fed every stdout line (parsed; others are kept but not fed) and every request
    record ``new_requests`` returns (polled). The same guarantees as ``run_process``: a new
    process group, killed at ``timeout``, when ``should_stop`` gives a reason and after the
    exit; output kept up to ``output_cap`` (stdout in whole lines, each fed line at most
    LINE_CAP). ``write`` never blocks: it queues (StdinWriter), so a client that never reads
    its stdin cannot hold the run past its timeout."""
    started = time.monotonic()
    process = _start(argv, env, cwd, piped_stdin=True)
    if on_start is not None:
        on_start(process.pid)
    assert process.stdin is not None
    stdout, stderr = _pipes(process)
    out, err = Capture(stdout, output_cap, lines=True), Capture(stderr, output_cap)
    lines = out.feed
    writer = StdinWriter(process.stdin)
    stop = _Stop(should_stop)
    timed_out, stopped, dialogue = False, None, None
    try:
        dialogue = start(writer.write, writer.close)
        deadline = started + timeout
        eof = False
        while not eof:
            for index, why in writer.failures():
                dialogue.not_written(index, why)
            for record in new_requests():
                dialogue.on_request(record)
            dialogue.on_tick()
            # checked before every line: a client printing without pause must not hold it off
            if time.monotonic() > deadline:
                timed_out = True
                break
            if (stopped := stop()) is not None:
                break
            try:
                line = lines.get(timeout=POLL_INTERVAL)
            except queue.Empty:
                continue
            if line is None:
                eof = True
            elif (event := _event(line)) is not None:
                dialogue.on_event(event)
        if not dialogue.closed:
            dialogue.end("stdin closed: the client ended its output" if eof else
                         "stdin closed: the run's timeout" if timed_out else
                         f"stdin closed: the run was stopped: {stopped}")
        if eof:
            timed_out, stopped = _wait(lambda: process.poll() is not None, deadline, stop)
    except BaseException:
        _kill_group(process)
        process.wait(KILL_GRACE)
        raise
    finally:
        with _lock:
            _running.discard(process)
        _kill_group(process)
        out.stop_feeding()
        writer.stop("the run's timeout came first" if timed_out else
                    f"the run was stopped: {stopped}" if stopped is not None else
                    "the client exited first", KILL_GRACE)
    if dialogue is not None:
        for index, why in writer.failures():
            dialogue.not_written(index, why)
    _ended(process, (out, err))
    return _result(argv, process, started, out, err, timed_out, stopped)
