"""Which process a reporter on the collector's socket is, and whether a run's launch started it.

The collector (``probes.run.collector``) lets only a process the run's own launch started
claim the run's egress stream: the reporter's PID comes from the socket (``SO_PEERCRED``) and
its parents are followed up through /proc, as this process's PID namespace numbers them.
"""

from __future__ import annotations

import socket
import struct
from pathlib import Path

__all__ = ["descends_from", "peer_pid", "unproven"]

# how many parents are followed up from a reporter (bwrap, its init, the first process: 3)
_ANCESTRY_DEPTH = 32


def peer_pid(sock: socket.socket) -> int | None:
    """The PID of the process at the other end of a Unix socket, if the kernel says."""
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        return None
    pid: int = struct.unpack("3i", raw)[0]
    return pid


def _parent(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    # "pid (comm) state ppid ...": comm is the process's own choice, so read after its end
    fields = stat[stat.rfind(b")") + 1:].split()
    try:
        return int(fields[1])
    except (IndexError, ValueError):
        return None


def descends_from(pid: int | None, ancestors: set[int]) -> bool:
    """Whether process ``pid`` is one of ``ancestors`` or started by one (its parents read
    from /proc, as this process's PID namespace numbers them)."""
    for _ in range(_ANCESTRY_DEPTH):
        if pid is None or pid <= 1:
            return False
        if pid in ancestors:
            return True
        pid = _parent(pid)
    return False


def unproven(pid: int | None) -> str:
    """Why a reporter could not be shown to be of the run's launch."""
    if pid is None:
        return "the socket did not say which process it is"
    if _parent(pid) is None:
        return "gone before its parents could be read"
    return "not started by the process the run launched"
