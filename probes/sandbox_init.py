"""The first process inside a contained run: it wires the run's network, then runs the client.

Executed by the sandbox's own interpreter (``python -I -S sandbox_init.py SPEC_JSON``) in a
network namespace that has nothing but loopback. It

- forwards ``127.0.0.1:<port>`` to the mock's Unix socket (bound in from the host), the only
  way out of the namespace;
- runs the refusing proxy and a refusing DNS resolver (``egress.py``), appending every
  attempt to the egress log as it happens, so a run killed at its timeout keeps them;
- sets the run's resource limits on itself (``rlimits``), which the client inherits;
- starts the client with the environment and directory it was given, waits for it and exits
  with its status (128 + N for a signal), saying on stderr when it finds /tmp full. The
  sandbox's PID namespace ends with this process: whatever the client left running is
  killed by the kernel.

Standard library only; it imports ``egress.py`` from its own directory.
"""

from __future__ import annotations

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
    from probes.egress import DnsSink, EgressAttempt, EgressSink
else:  # run as a script in the sandbox, beside egress.py
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from egress import DnsSink, EgressAttempt, EgressSink

CHUNK = 65536
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


def _logger(path: str) -> Any:
    log = open(path, "a", buffering=1)  # open for the life of the process

    def write(attempt: EgressAttempt) -> None:
        log.write(json.dumps(attempt.to_json(), sort_keys=True) + "\n")
    return write


def apply_rlimits(spec: dict[str, Any]) -> None:
    """Set the run's limits (``{"RLIMIT_FSIZE": N}``) on this process, soft and hard, never
    above a hard limit already set."""
    for name, value in spec.get("rlimits", {}).items():
        which = getattr(resource, name)
        hard = resource.getrlimit(which)[1]
        limit = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(which, (limit, limit))


def report_tmp_usage(path: str = "/tmp") -> None:
    """Say on stderr when /tmp, a tmpfs of bounded size, is (nearly) full: the harness counts
    it as the tmp bound reached (``probes.bounds.tmp_hit_from_stderr``)."""
    try:
        found = os.statvfs(path)
    except OSError:
        return
    size, free = found.f_blocks * found.f_frsize, found.f_bavail * found.f_frsize
    # a write cut at the bound leaves less than a chunk free, not always zero
    if size and (free < min(TMP_FULL_MARGIN, size // 16) or found.f_favail == 0):
        print(f"loopprobe sandbox: bound tmp reached: /tmp full ({size - free} of {size} "
              f"bytes used, {found.f_favail} files free)", file=sys.stderr, flush=True)


def main(spec: dict[str, Any]) -> int:
    apply_rlimits(spec)
    for forward in spec["forward"]:
        _forward(forward["port"], forward["socket"])
    record = _logger(spec["egress_log"])
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
    report_tmp_usage()
    return 128 - status if status < 0 else status


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
