"""Bounds on one contained client run: memory, processes, /tmp, the sandbox folder, file size.

``find_limiter(bounds)`` finds what can enforce each bound on this machine; its
``describe()`` says so for the report, and ``confine(sandbox_root)`` gives the per-run
``RunConfinement`` the runner uses: ``wrap`` starts bwrap inside the run's cgroups,
``should_stop`` watches the sandbox folder, ``hits`` names each bound the run reached;
``sandbox_fs(client_root)`` puts a probe's sandbox folder on its own filesystem. The
cgroups themselves (finding where to make one, making, reading, removing) are
``probes.run.cgroups``'s.

What enforces what, and why (tried on kernel 6.18, bwrap 0.8.0, bun 1.4 in Claude Code 2.1.235):

- memory and processes: a cgroup per run, made under the harness's own cgroup (cgroup v1
  ``memory.limit_in_bytes`` and ``pids.max``, or a cgroup2 whose ``cgroup.subtree_control``
  lists the controller). Over the memory bound the kernel OOM-kills in the run's cgroup only
  (a 256 MiB allocation under 64 MiB: exit 137, ``oom_kill 1``); over the process bound a
  fork fails with EAGAIN (47 of 300 forks under 50) and ``pids.events`` counts it. Both
  count threads, and /tmp's pages are charged to the memory bound too.
- without a writable cgroup, processes fall back to RLIMIT_NPROC set in the sandbox: for a
  user it counts in the run's user namespace only (48 forks under 50, with 60 processes of
  the same user outside); for root it is not enforced at all, inside bwrap's user namespace
  too (300 of 300 forks under 50). Memory is then not bounded: RLIMIT_AS and RLIMIT_DATA
  bound each process's address space, not the run's memory (bun reserves 9.6 GiB of
  address space for 313 MiB resident; ``claude.exe --version`` crashes with SIGSEGV or a
  bun panic under RLIMIT_AS below 768 MiB and RLIMIT_DATA below 1 GiB), so a bound that
  holds for a run of several processes would crash the client instead of bounding it.
- /tmp: ``bwrap --size BYTES --tmpfs /tmp``; a write past it fails with ENOSPC, seen only
  inside: the sandbox's first process says on stderr when it finds /tmp full after the
  client (``tmp_hit_from_stderr``).
- /sandbox (the probe's sandbox folder, all its runs together): as root, a tmpfs of its own
  mounted at the folder while the probe runs (``size=`` the bound in bytes, ``nr_inodes=``
  in names; ``probes.run.sandbox_fs``), copied out to an ordinary folder when it ends. The
  kernel counts what is held, not what is named: a file unlinked while held open keeps its
  pages (a walk of the names missed it: 2,280 MiB written under a 2 GiB bound, none hit), a
  sparse file holds the pages written, a hard link costs an inode as a file does; a write
  past either fails with ENOSPC, and the watch (``probes.run.sandbox_bound``: one
  ``statvfs`` per poll, 17 us) stops the run once nothing is free. Its pages are memory,
  charged to the writer's memory cgroup (64 MiB written by a run under cgroup v1: ``shmem``
  64 MiB in the run's cgroup), and they stay charged after the run's cgroup is removed (to
  the harness's, above it) until the folder is unmounted: a run's writes to /sandbox count
  against its memory bound as /tmp's do (2 GiB of 4; 100 MiB written to /sandbox under a 64
  MiB memory bound: exit 137, ``oom_kill 1``, named as the memory bound), and a probe's
  folder holds at most its bound of the machine's memory between its runs. A loop-mounted
  sparse ext4 image costs no memory and little time too (mkfs.ext4 of 2 GiB without journal,
  lazy tables: 7-10 ms; mount 5 ms), but a hard link costs it no inode (names are bounded
  only by directory blocks), its metadata takes 56 MiB of the 2 GiB, and it needs a loop
  device (absent in most containers) and e2fsprogs. The probe suite's 61 runs on Claude Code
  2.1.235, each probe's folder on its tmpfs, gave the results of the committed reports (544
  checks alike; the 38 checks added since pass) with at most 152 KiB and 32 names held;
  mounting, copying in, copying out and unmounting took 14 ms a probe (median; 39 ms at
  most); a folder holding 1 GiB and 100,000 files copies out in 11 s. Where nothing can be
  mounted (not root), a watchdog sums ``st_blocks`` of the names under the folder at most
  every 0.5 s (or 4 times its last walk's time) and stops the run past the bound, or past
  200,000 names; ``describe()`` says that files unlinked while held open are not counted
  there. A walk takes 2.4 ms for 520 files and 0.4 s for 100,000.
- one file: RLIMIT_FSIZE (a longer write gets SIGXFSZ, or EFBIG where ignored; fallocate
  too).

The defaults, against the 61 runs of the probe suite on Claude Code 2.1.235, each in its own
cgroup (2 cores): at most 215 MiB (median 153) and 21 tasks (median 19); the sandbox
folder at most 1.1 MiB in 57 entries; the same results as without bounds. bun starts
threads per core, so more cores mean more tasks: 512 leaves room for that.
"""

from __future__ import annotations

import functools
import os
import re
import signal
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from probes.run.cgroups import Cgroup, RunCgroup, find_cgroup
from probes.run.owner import owner_tag
from probes.run.sandbox_bound import (
    MAX_ENTRIES,
    DiskUsage,
    SandboxWatch,
    disk_usage,
    not_counted,
)
from probes.run.sandbox_fs import SandboxFs, cannot_mount, mounted_sandbox

__all__ = ["MAX_ENTRIES", "Bounds", "DiskUsage", "GiB", "Limiter", "MiB", "RunConfinement",
           "disk_usage", "find_limiter", "tmp_hit_from_stderr", "unbounded"]

MiB = 1 << 20
GiB = 1 << 30
_TMP_MARKER = re.compile(r"^loopprobe sandbox: bound tmp reached: /(?:tmp|dev/shm) full "
                        r"\((\d+) of (\d+) bytes used, (\d+) files free\)$", re.MULTILINE)
_NO_CGROUP_HELP = ("run as root, or under a delegated cgroup2 whose cgroup.subtree_control "
                  "lists memory and pids; or bound the whole harness with "
                  "`systemd-run --user --scope -p MemoryMax=... -p TasksMax=... loopprobe ...`")


@dataclass(frozen=True)
class Bounds:
    """What one client run may use; the defaults leave a real Claude Code run room."""

    memory_bytes: int = 4 * GiB  # every process of the run together, /tmp's pages included
    processes: int = 512  # tasks: threads count
    tmp_bytes: int = 1 * GiB  # the run's private /tmp
    sandbox_bytes: int = 2 * GiB  # held by the probe's sandbox folder, all its runs together
    sandbox_names: int = MAX_ENTRIES  # files, folders, links (and hard links) in it
    file_bytes: int = 1 * GiB  # the largest file the run may write

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"Bounds.{name}: expected a positive int, got {value!r}")


# ---- one run ---------------------------------------------------------------------------


class RunConfinement:
    """The bounds of one client run: how to start it, when to stop it, what it reached."""

    def __init__(self, bounds: Bounds | None, sandbox_root: Path,
                 cgroups: list[RunCgroup], fs: SandboxFs | None = None) -> None:
        self.bounds = bounds
        self.sandbox_root = sandbox_root
        self.cgroups = {c.place.controller: c for c in cgroups}
        self.sandbox = SandboxWatch(sandbox_root, bounds.sandbox_bytes, bounds.sandbox_names,
                                    fs) if bounds is not None else None
        self._pids_seen = 0

    def wrap(self, argv: list[str]) -> list[str]:
        """The host argv: ``argv`` started inside the run's cgroups."""
        if not self.cgroups:
            return list(argv)
        # a shell joins the cgroups and execs bwrap: everything of the run starts inside
        join = ('while [ "$1" != -- ]; do echo $$ > "$1" || '
                '{ echo "loopprobe: cannot join the cgroup $1" >&2; exit 125; }; shift; done; '
                'shift; exec "$@"')
        procs = [str(c.path / "cgroup.procs") for c in self.cgroups.values()]
        return ["/bin/sh", "-c", join, "loopprobe-bounds", *procs, "--", *argv]

    def should_stop(self) -> str | None:
        """Why the run must be stopped (the sandbox folder's bound reached), or ``None``.
        Cheap to poll often: a folder without a filesystem of its own is walked at most
        every 0.5 s."""
        if self.sandbox is None:
            return None
        if "pids" in self.cgroups:  # for a peak where the kernel keeps none (pids.peak)
            self._pids_seen = max(self._pids_seen, self.cgroups["pids"].read()["current"])
        return self.sandbox.poll()

    def usage(self) -> dict[str, int]:
        """What the run used at its peak, as far as it is measured here."""
        found: dict[str, int] = {}
        if "memory" in self.cgroups:
            found["memory_peak_bytes"] = self.cgroups["memory"].read()["peak"]
        if "pids" in self.cgroups:
            found["processes_peak"] = max(self.cgroups["pids"].read()["peak"], self._pids_seen)
        if self.sandbox is not None and self.sandbox.peak_bytes is not None:
            found["sandbox_bytes"] = self.sandbox.peak_bytes
        return found

    def hits(self, stderr: str = "", returncode: int | None = None) -> list[dict[str, Any]]:
        """Each bound the run reached, with how it is known. ``stderr`` and ``returncode``
        are the run's: /tmp full is reported there, and a client killed by SIGXFSZ."""
        bounds = self.bounds
        if bounds is None or self.sandbox is None:
            return []
        found: list[dict[str, Any]] = []
        if "memory" in self.cgroups:
            memory = self.cgroups["memory"].read()
            if memory["oom_kill"]:
                found.append({"bound": "memory", "limit": bounds.memory_bytes,
                              "observed": f"peak {memory['peak']} bytes",
                              "how": f"cgroup: {memory['oom_kill']} process(es) OOM-killed, "
                                     f"the limit reached {memory['at_limit']} times"})
        if "pids" in self.cgroups:
            pids = self.cgroups["pids"].read()
            if pids["refused"]:
                found.append({"bound": "processes", "limit": bounds.processes,
                              "observed": f"peak {max(pids['peak'], self._pids_seen)} tasks",
                              "how": f"cgroup pids.events: {pids['refused']} fork(s) or "
                                     "thread creation(s) refused (EAGAIN)"})
        if (tmp := tmp_hit_from_stderr(stderr)) is not None:
            found.append(tmp | {"limit": bounds.tmp_bytes})
        usage = self.sandbox.end()
        if (sandbox := self.sandbox.hit(usage)) is not None:
            found.append(sandbox)
        found += self._file_hits(usage, returncode)
        return found

    def _file_hits(self, usage: DiskUsage, returncode: int | None) -> list[dict[str, Any]]:
        assert self.bounds is not None
        limit = self.bounds.file_bytes
        hits = []
        if returncode in (-signal.SIGXFSZ, 128 + signal.SIGXFSZ):
            hits.append({"bound": "file", "limit": limit, "observed": f"exit {returncode}",
                         "how": "the client was killed by SIGXFSZ (RLIMIT_FSIZE)"})
        # a write cut at the bound leaves the file exactly at it
        if usage.largest is not None and usage.largest[1] == limit:
            hits.append({"bound": "file", "limit": limit,
                         "observed": f"{usage.largest[0]}: {usage.largest[1]} bytes",
                         "how": "a file in the sandbox folder reached RLIMIT_FSIZE: the write "
                                "past it failed (SIGXFSZ or EFBIG)"})
        return hits


def tmp_hit_from_stderr(stderr: str) -> dict[str, Any] | None:
    """The tmp bound as reported by the sandbox's first process (``sandbox_init``)."""
    found = _TMP_MARKER.search(stderr)
    if found is None:
        return None
    used, size, files_free = (int(g) for g in found.groups())
    return {"bound": "tmp", "limit": size,
            "observed": f"{used} of {size} bytes used, {files_free} files free",
            "how": "the sandbox's first process found /tmp full after the client exited"}


# ---- what enforces the bounds here -------------------------------------------------------


def unbounded(reason: str) -> dict[str, Any]:
    """``describe()`` of runs with no bounds at all."""
    return {name: _not_enforced(None, reason) for name in ("memory", "processes", "tmp", "sandbox", "file")}


@dataclass(frozen=True)
class Limiter:
    """How ``bounds`` are enforced on this machine (``find_limiter``)."""

    bounds: Bounds
    memory: Cgroup | str  # where runs' cgroups go, or why there are none
    pids: Cgroup | str
    tmp_size: bool  # bwrap takes --size
    root: bool
    mount: str | None = "not tried"  # why the sandbox folder gets no tmpfs (None: it does)

    def describe(self) -> dict[str, Any]:
        b = self.bounds
        if isinstance(self.memory, Cgroup):
            memory = _enforced(b.memory_bytes, self.memory.how(),
                               "the kernel OOM-kills a process of the run")
        else:
            memory = _not_enforced(b.memory_bytes, (
                f"no memory cgroup could be made ({self.memory}): {_NO_CGROUP_HELP}. RLIMIT_AS "
                "and RLIMIT_DATA are not used: they bound each process's address space, "
                "which the client reserves far beyond what it uses"))
        if isinstance(self.pids, Cgroup):
            processes = _enforced(b.processes, self.pids.how(),
                                  "a fork or new thread fails with EAGAIN")
        elif not self.root:
            processes = _enforced(b.processes, "RLIMIT_NPROC set in the sandbox (counted in "
                                  "the run's user namespace)", "a fork or new thread fails "
                                  "with EAGAIN, uncounted: the hit is not reported")
        else:
            processes = _not_enforced(b.processes, (
                f"no pids cgroup could be made ({self.pids}): {_NO_CGROUP_HELP}; RLIMIT_NPROC "
                "does not apply to root, inside bwrap's user namespace either"))
        tmp = _enforced(b.tmp_bytes, "bwrap --size on the run's private /tmp tmpfs (its "
                        "pages count as the run's memory too)", "a write fails with ENOSPC") \
            if self.tmp_size else _not_enforced(b.tmp_bytes, "this bwrap has no --size")
        return {"memory": memory, "processes": processes, "tmp": tmp,
                "sandbox": _enforced(b.sandbox_bytes, (
                    SandboxFs(Path("/sandbox"), b.sandbox_bytes, b.sandbox_names).how()
                    if self.mount is None else not_counted(self.mount))
                    + f"; at most {b.sandbox_names} names",
                    "the run is stopped (a write past it fails with ENOSPC first)"
                    if self.mount is None else "the run is stopped"),
                "file": _enforced(b.file_bytes, "RLIMIT_FSIZE, set in the sandbox before the "
                                  "client starts", "the write fails: SIGXFSZ, or EFBIG where "
                                  "the signal is ignored")}

    def bwrap_args_for_tmp(self) -> list[str]:
        """What goes right before ``--tmpfs /tmp``."""
        return ["--size", str(self.bounds.tmp_bytes)] if self.tmp_size else []

    def rlimits(self) -> dict[str, int]:
        """Resource limits the sandbox's first process sets on itself before the client."""
        limits = {"RLIMIT_FSIZE": self.bounds.file_bytes,
                  # a core of a client killed by SIGXFSZ would be as large as the client
                  "RLIMIT_CORE": 0}
        if not isinstance(self.pids, Cgroup) and not self.root:
            limits["RLIMIT_NPROC"] = self.bounds.processes
        return limits

    def sandbox_fs(self, client_root: Path) -> AbstractContextManager[SandboxFs | None]:
        """The probe's client part on a tmpfs of the sandbox bound for the block, where one
        can be mounted (``probes.run.sandbox_fs``); otherwise ``None``: it is walked."""
        if self.mount is not None:
            return nullcontext(None)
        return mounted_sandbox(client_root, self.bounds.sandbox_bytes, self.bounds.sandbox_names)

    @contextmanager
    def confine(self, sandbox_root: Path,
                fs: SandboxFs | None = None) -> Iterator[RunConfinement]:
        """One client run: its cgroups exist for the block and are removed after it."""
        run_id = f"{owner_tag()}-{uuid.uuid4().hex[:12]}"
        made: list[RunCgroup] = []
        try:
            for place, limit in ((self.memory, self.bounds.memory_bytes),
                                 (self.pids, self.bounds.processes)):
                if isinstance(place, Cgroup):
                    made.append(RunCgroup.make(place, run_id, limit))
            yield RunConfinement(self.bounds, sandbox_root, made, fs)
        finally:
            for cgroup in made:
                cgroup.remove()


def _enforced(limit: int, how: str, when_hit: str) -> dict[str, Any]:
    return {"limit": limit, "enforced_by": how, "when_hit": when_hit}


def _not_enforced(limit: int | None, why: str) -> dict[str, Any]:
    return {"limit": limit, "enforced_by": None, "not_enforced_because": why}


@functools.lru_cache(maxsize=8)
def _bwrap_takes_size(bwrap: str) -> bool:
    try:
        shown = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "--size" in shown.stdout + shown.stderr


@functools.lru_cache(maxsize=8)
def find_limiter(bounds: Bounds, bwrap: str = "bwrap") -> Limiter:
    """What can enforce ``bounds`` here (tries making a cgroup; remembered per bounds)."""
    return Limiter(bounds, find_cgroup("memory"), find_cgroup("pids"),
                   _bwrap_takes_size(bwrap), os.geteuid() == 0, cannot_mount())
