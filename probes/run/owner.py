"""Whose is each thing a harness leaves on the machine while it runs, and whether its owner
is gone.

A run's cgroups, its socket folder in the temp folder and its sandbox's filesystem are named
after the harness that made them: ``owner_tag()`` is ``<pid>.<start>.<pid namespace>``, the
start being the process's start time in clock ticks after boot (``/proc/PID/stat``, field
22), so a PID the kernel has given to another process since does not pass for the owner.
``owner_gone(tag)`` is true only when the owner is provably gone: no process of that PID in
this PID namespace, or one started at another time. An owner in another PID namespace
cannot be looked up from here, so it is never taken for gone.
"""

from __future__ import annotations

import os
import re

__all__ = ["OWNER_PATTERN", "TEMP_FOLDER", "owner_gone", "owner_tag", "pid_gone",
           "temp_folder_prefix"]

OWNER_PATTERN = r"(?P<owner>\d+\.\d+\.\d+)"
# a folder the harness makes in the temp folder (``tempfile.mkdtemp``): a probe's sockets
TEMP_FOLDER = re.compile(r"loopprobe-" + OWNER_PATTERN + r"-[a-z0-9_]{8}")
_TAG = re.compile(r"(\d+)\.(\d+)\.(\d+)")


def _start_time(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[19]) if len(fields) > 19 and fields[19].isdigit() else None


def _pid_namespace() -> int:
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


def owner_tag(pid: int | None = None) -> str:
    """This process (or its child ``pid``), as the names of what it makes carry it."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}.{_start_time(pid) or 0}.{_pid_namespace()}"


def temp_folder_prefix(owner: str | None = None) -> str:
    """The prefix of a folder this harness (or ``owner``) makes in the temp folder."""
    return f"loopprobe-{owner or owner_tag()}-"


def owner_gone(tag: str) -> bool:
    """Whether the harness ``tag`` names has ended (only a proof counts: see above)."""
    found = _TAG.fullmatch(tag)
    if found is None:
        return False
    pid, start, namespace = (int(g) for g in found.groups())
    if namespace != _pid_namespace():
        return False
    running = _start_time(pid)
    return running is None or running != start


def pid_gone(pid: int) -> bool:
    """For names made before the start time was part of them: gone when no process has
    the PID (a live one may be another process: that leftover waits for its PID to end)."""
    return _start_time(pid) is None
