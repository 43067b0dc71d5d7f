"""The first process inside a contained run: it wires the run's network, then runs the client.

Executed by the sandbox's own interpreter (``python -I -S sandbox_init.py SPEC_JSON``) in a
network namespace that has nothing but loopback. It

- forwards ``127.0.0.1:<port>`` to the mock's Unix socket (bound in from the host), the only
  way out of the namespace;
- runs the refusing proxy and a refusing DNS resolver (``egress.py``), reporting every
  attempt as it happens to the harness's collector on a Unix socket (bound in read-only
  from the host), so nothing the client writes can erase one and a run killed at its
  timeout keeps them. It connects before the client starts and starts it only once the
  collector has claimed the stream for the run under way (one egress reporter per run; a
  late claim under load would otherwise land in the next run); it makes itself
  non-dumpable, so the client, the same user in the same namespaces, cannot read or write
  its memory or descriptors; killing it ends the run (the sandbox's PID namespace ends with
  it);
- sets the run's resource limits on itself (``rlimits``), which the client inherits;
- starts the client with the environment and directory it was given, waits for it and exits
  with its status (128 + N for a signal), saying on stderr when it finds /tmp full. The
  sandbox's PID namespace ends with this process: whatever the client left running is
  killed by the kernel.

Standard library only; it imports ``egress.py`` from its own directory.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import socket
import socketserver
import subprocess
import sys
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from probes.inside.egress import DnsSink, EgressAttempt, EgressSink
else:  # run as a script in the sandbox, beside egress.py
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from egress import DnsSink, EgressAttempt, EgressSink

CHUNK = 65536
# how long the collector may take to claim the egress stream (a machine under load)
CLAIM_TIMEOUT = 60.0
# the exit status when it did not: the client never started (a harness error, not a finding)
NOT_CLAIMED = 125
TMP_FULL_MARGIN = 1 << 20


def _pump(source: socket.socket, target: socket.socket) -> None:
    try:
        while chunk := source.recv(CHUNK):
            target.sendall(chunk)
    except OSError:
        pass
    finally:
        for sock, how in ((target, socket.SHUT_WR), (source, socket.SHUT_RD)):
            try:
                sock.shutdown(how)
            except OSError:
                pass


class _Forward(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            upstream.connect(self.server.unix_path)  # type: ignore[attr-defined]
        except OSError:
            upstream.close()
            return
        back = threading.Thread(target=_pump, args=(upstream, self.request), daemon=True)
        back.start()
        _pump(self.request, upstream)
        back.join()
        upstream.close()


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


def _forward(port: int, unix_path: str) -> None:
    server = _Server(("127.0.0.1", port), _Forward)
    server.unix_path = unix_path  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True, name="forward").start()


PR_SET_DUMPABLE = 4


def _not_dumpable() -> None:
    """Only a process with CAP_SYS_PTRACE (none inside) may now read or write this one's
    memory or open its descriptors through /proc."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


class _Reporter:
    """The egress stream to the harness's collector: one JSON line per attempt."""

    def __init__(self, path: str):
        self._channel = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._channel.connect(path)
        self._lock = threading.Lock()
        self._send({"stream": "egress"})

    def claimed(self, timeout: float = CLAIM_TIMEOUT) -> str | None:
        """The run the collector claimed this stream for (None: refused, or no answer in
        ``timeout`` seconds)."""
        self._channel.settimeout(timeout)
        try:
            answer = self._channel.makefile("rb").readline(4096)
        except OSError:
            return None
        finally:
            self._channel.settimeout(None)
        try:
            run = json.loads(answer).get("claimed")
        except (ValueError, AttributeError):
            return None
        return run if isinstance(run, str) else None

    def _send(self, value: dict[str, Any]) -> None:
        with self._lock:
            self._channel.sendall((json.dumps(value, sort_keys=True) + "\n").encode())

    def attempt(self, attempt: EgressAttempt) -> None:
        try:
            self._send(attempt.to_json())
        except OSError as error:
            print(f"loopprobe sandbox: an egress attempt went unreported: {error}",
                  file=sys.stderr)

    def end(self, status: int, tmp_full: str | None) -> None:
        try:
            self._send({"end": status, "tmp_full": tmp_full})
            self._channel.close()
        except OSError:
            pass


def apply_rlimits(spec: dict[str, Any]) -> None:
    """Set the run's limits (``{"RLIMIT_FSIZE": N}``) on this process, soft and hard, never
    above a hard limit already set."""
    for name, value in spec.get("rlimits", {}).items():
        which = getattr(resource, name)
        hard = resource.getrlimit(which)[1]
        limit = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(which, (limit, limit))


def report_tmp_usage() -> str | None:
    """The first of /tmp and /dev/shm (the run's sized tmpfs mounts) found full."""
    for path in ("/tmp", "/dev/shm"):
        if (line := _tmp_full(path)) is not None:
            return line
    return None


def _tmp_full(path: str) -> str | None:
    """When /tmp, a tmpfs of bounded size, is (nearly) full: a line saying so, printed on
    stderr for people and returned for the harness's collector, which counts it as the tmp
    bound reached (``probes.run.bounds.tmp_hit_from_stderr``; the client's own stderr could
    print the same words, so the harness reads it from the collector only)."""
    try:
        found = os.statvfs(path)
    except OSError:
        return None
    size, free = found.f_blocks * found.f_frsize, found.f_bavail * found.f_frsize
    # a write cut at the bound leaves less than a chunk free, not always zero
    if size and (free < min(TMP_FULL_MARGIN, size // 16) or found.f_favail == 0):
        line = (f"loopprobe sandbox: bound tmp reached: {path} full ({size - free} of "
                f"{size} bytes used, {found.f_favail} files free)")
        print(line, file=sys.stderr, flush=True)
        return line
    return None


def main(spec: dict[str, Any]) -> int:
    _not_dumpable()
    apply_rlimits(spec)
    for forward in spec["forward"]:
        _forward(forward["port"], forward["socket"])
    reporter = _Reporter(spec["record_socket"])
    if reporter.claimed() is None:
        print("loopprobe sandbox: the harness's collector did not claim the egress stream "
              f"within {CLAIM_TIMEOUT:.0f}s (or refused it): the client is not started",
              file=sys.stderr, flush=True)
        return NOT_CLAIMED
    record = reporter.attempt
    if spec.get("proxy_port"):
        EgressSink(spec["proxy_port"], on_attempt=record).start()
    if spec.get("dns_port"):
        try:
            DnsSink(spec["dns_port"], on_attempt=record).start()
        except OSError as error:  # port 53 needs root inside the namespace
            print(f"loopprobe sandbox: lookups go unrecorded: {error}", file=sys.stderr)
    # the client gets the terminal-less stdio of this process, and its exit status
    client = subprocess.Popen(spec["argv"])
    signal.signal(signal.SIGTERM, lambda *_: client.terminate())
    status = client.wait()
    tmp_full = report_tmp_usage()
    status = 128 - status if status < 0 else status
    reporter.end(status, tmp_full)
    return status


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
