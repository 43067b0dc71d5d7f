"""The bound on a probe's sandbox folder (bytes and names), watched during each run.

Two ways, chosen by what the machine allows (``probes.run.bounds`` says why):

- on its own tmpfs (``probes.run.sandbox_fs``, as root): the kernel refuses a write past the
  bound (ENOSPC) whatever the names are, and ``SandboxWatch.poll`` reads the filesystem's
  counters (one ``statvfs``, every poll) and stops the run when nothing more is free;
- otherwise, a walk of the names (``disk_usage``, by descriptor, no link followed, each
  inode once) at most every 0.5 s, which stops the run past the bound: a file unlinked while
  held open has no name and is not counted, and what is written between two walks is seen
  only at the next.

Either way ``end`` is the folder as the run left it (a walk, for the file bound too) and
``hit`` names the bound when the run reached it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from probes.run.sandbox_fs import SandboxFs
from probes.sandbox.files import SandboxFiles

__all__ = ["MAX_ENTRIES", "WALK_INTERVAL", "DiskUsage", "SandboxWatch", "disk_usage",
           "not_counted"]

MAX_ENTRIES = 200_000
WALK_INTERVAL = 0.5


@dataclass(frozen=True)
class DiskUsage:
    bytes: int  # allocated (st_blocks), each inode once
    entries: int
    largest: tuple[str, int] | None  # (path relative to the root, st_size)
    complete: bool  # False: the walk stopped at max_entries


def disk_usage(root: Path, max_entries: int = MAX_ENTRIES) -> DiskUsage:
    """The disk used under ``root``, walked as every harness access to a sandbox is
    (``probes.sandbox.files``: by descriptor, no link followed), each inode once."""
    total, entries, largest = 0, 0, None
    seen: set[tuple[int, int]] = set()
    for entry in SandboxFiles(root).walk(limit=max_entries):
        if entry.allocated == 0 and entry.kind.startswith("more than"):
            if entry.kind.endswith("the walk stopped"):
                return DiskUsage(total, entries, largest, complete=False)
            continue
        entries += 1
        if entry.links > 1 and entry.kind != "a directory":
            if entry.inode in seen:
                continue
            seen.add(entry.inode)
        total += entry.allocated
        if entry.regular and (largest is None or entry.size > largest[1]):
            largest = (entry.relative, entry.size)
    return DiskUsage(total, entries, largest, complete=True)


def not_counted(why: str) -> str:
    """What the walk misses, for the report of a machine where nothing can be mounted."""
    return (f"a watchdog summing the blocks of the names under /sandbox every {WALK_INTERVAL} s "
            f"or more: files unlinked while held open are not counted ({why})")


class SandboxWatch:
    """One run's watch on the sandbox folder's bound of ``size`` bytes and ``names`` names."""

    def __init__(self, root: Path, size: int, names: int, fs: SandboxFs | None) -> None:
        self.root, self.size, self.names, self.fs = root, size, names, fs
        self._next_walk = 0.0
        self.peak_bytes: int | None = None
        self.peak_names = 0
        self.stopped: str | None = None

    def poll(self) -> str | None:
        """Why the run must be stopped, or ``None``; cheap to ask often."""
        if self.stopped is not None:
            return self.stopped
        if self.fs is not None:
            usage = self.fs.usage()
            self._peak(usage.bytes, usage.names)
            if usage.full is not None:
                self.stopped = (f"bound sandbox reached: its filesystem is full ({usage.bytes} "
                                f"of {self.size} bytes and {usage.names} of {self.names} "
                                "names held)")
            return self.stopped
        now = time.monotonic()
        if now < self._next_walk:
            return None
        walked = disk_usage(self.root, self.names)
        # a big folder is walked less often: the watchdog takes at most a fifth of the time
        self._next_walk = now + max(WALK_INTERVAL, 4 * (time.monotonic() - now))
        self._peak(walked.bytes, walked.entries)
        self.stopped = self._over(walked)
        return self.stopped

    def _peak(self, used: int, names: int) -> None:
        self.peak_bytes = max(self.peak_bytes or 0, used)
        self.peak_names = max(self.peak_names, names)

    def _over(self, usage: DiskUsage) -> str | None:
        if not usage.complete:
            return (f"bound sandbox reached: more than {self.names} files and folders under "
                    "the sandbox folder")
        if usage.bytes > self.size:
            return (f"bound sandbox reached: the sandbox folder uses {usage.bytes} bytes, "
                    f"expected at most {self.size}")
        return None

    def end(self) -> DiskUsage:
        """The folder at the end of the run (it may have grown since the last poll)."""
        self.poll()
        return disk_usage(self.root, self.names)

    def hit(self, usage: DiskUsage) -> dict[str, Any] | None:
        """The bound, when the run reached it; ``usage``: the folder at the end."""
        reason = self.stopped if self.fs is not None else self.stopped or self._over(usage)
        if reason is None:
            return None
        how = "the sandbox's own filesystem (tmpfs): " if self.fs is not None \
            else "the disk watchdog: "
        held = f", at most {self.peak_bytes} bytes and {self.peak_names} names held" \
            if self.fs is not None else ""
        return {"bound": "sandbox", "limit": self.size,
                "observed": f"{usage.bytes} bytes in {usage.entries} entries at the end{held}",
                "how": how + reason}
