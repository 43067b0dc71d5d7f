"""The cgroups that bound one run's memory and processes (``probes.run.bounds`` says why).

``find_cgroup(controller)`` finds where this process may make a run's cgroup for
"memory" or "pids" (cgroup v1, or a cgroup2 whose ``cgroup.subtree_control`` lists the
controller), or says why there is none; ``RunCgroup.make`` makes one with its limit,
``read`` gives what it counted (peaks, OOM kills, forks refused) and ``remove`` kills what
is left in it and removes it, keeping the counters. A run's cgroup is named after the harness
that made it (``probes.run.owner``): ``left_behind(parent)`` finds those whose harness is
gone, which ``sweep`` empties and removes.
"""

from __future__ import annotations

import os
import re
import signal
import time
import uuid
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from probes.run.owner import OWNER_PATTERN, owner_gone, owner_tag, pid_gone

__all__ = ["Cgroup", "RunCgroup", "find_cgroup", "left_behind", "sweep"]

_RELEASE_WAIT = 5.0  # seconds a run's cgroup may take to empty
# a run's or a trial's cgroup; before the owner's start time was in the name, its PID alone
_NAME = re.compile(r"loopprobe-(?:probe-)?(?:" + OWNER_PATTERN + r"|(?P<pid>\d+))-[0-9a-f]+")


@dataclass(frozen=True)
class Cgroup:
    """Where a run's cgroup for one controller ("memory", "pids") is made."""

    controller: str
    version: int  # 1 or 2
    parent: Path

    def limit_file(self) -> str:
        return "memory.limit_in_bytes" if (self.controller, self.version) == ("memory", 1) \
            else f"{self.controller}.max"

    def how(self) -> str:
        return f"cgroup v{self.version} {self.limit_file()} on a cgroup per run"


def _mounts() -> dict[str, tuple[Path, str]]:
    """Controller ("" for cgroup2) -> (mount point, the hierarchy's path mounted there)."""
    found: dict[str, tuple[Path, str]] = {}
    with open("/proc/self/mountinfo") as info:
        for line in info:
            fields, _, tail = line.partition(" - ")
            parts, kind = fields.split(), tail.split()
            if kind[0] == "cgroup2":
                found.setdefault("", (Path(parts[4]), parts[3]))
            elif kind[0] == "cgroup":
                for option in kind[2].split(","):
                    found.setdefault(option, (Path(parts[4]), parts[3]))
    return found


def _own_paths() -> dict[str, str]:
    """Controller ("" for cgroup2) -> this process's cgroup path in that hierarchy."""
    paths: dict[str, str] = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            paths[controller] = path
    return paths


def _under(mount: tuple[Path, str], path: str) -> Path | None:
    point, root = mount
    relative = os.path.relpath(path, root)
    return None if relative.startswith("..") else (point / relative).resolve()


def _try_parent(controller: str, version: int, parent: Path) -> Cgroup | str:
    """The cgroup if a child can be made and limited there, else why not."""
    place = Cgroup(controller, version, parent)
    probe = parent / f"loopprobe-probe-{owner_tag()}-{uuid.uuid4().hex[:8]}"
    try:
        probe.mkdir()
    except OSError as error:
        return f"cgroup v{version} {parent}: cannot make a cgroup ({error.strerror})"
    try:
        if not os.access(probe / place.limit_file(), os.W_OK):
            return f"cgroup v{version} {parent}: {place.limit_file()} is not writable"
        return place
    finally:
        probe.rmdir()


def find_cgroup(controller: str) -> Cgroup | str:
    """A parent for per-run cgroups of ``controller``, or every reason none was found."""
    mounts, own, reasons = _mounts(), _own_paths(), []
    if controller in mounts and controller in own:
        parent = _under(mounts[controller], own[controller])
        if parent is not None:
            found = _try_parent(controller, 1, parent)
            if isinstance(found, Cgroup):
                return found
            reasons.append(found)
    if "" in mounts:
        # the harness's own cgroup2, or the hierarchy's root (root only): the one whose
        # children may get the controller
        candidates = [p for p in (_under(mounts[""], own.get("", "/")), mounts[""][0])
                      if p is not None]
        for parent in dict.fromkeys(candidates):
            enabled = (parent / "cgroup.subtree_control")
            listed = enabled.is_file() and controller in enabled.read_text().split()
            if not listed:
                reasons.append(f"cgroup2 {parent}: {controller} is not in cgroup.subtree_control")
                continue
            found = _try_parent(controller, 2, parent)
            if isinstance(found, Cgroup):
                return found
            reasons.append(found)
    return "; ".join(reasons) or "no cgroup hierarchy is mounted"


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _read_keyed(path: Path) -> dict[str, int]:
    """A flat-keyed cgroup file ("oom_kill 1", "max 3") as a dict."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return {}
    return {k: int(v) for k, _, v in (line.partition(" ") for line in lines) if v.isdigit()}


@dataclass
class RunCgroup:
    place: Cgroup
    path: Path
    counters: dict[str, int] = field(default_factory=dict)  # kept when it is removed

    @classmethod
    def make(cls, place: Cgroup, run_id: str, limit: int) -> RunCgroup:
        path = place.parent / f"loopprobe-{run_id}"
        path.mkdir()
        made = cls(place, path)
        try:
            (path / place.limit_file()).write_text(str(limit))
            # swap is memory too: without this a run over its bound would swap, not stop
            if place.version == 1 and place.controller == "memory":
                _write_if_present(path / "memory.memsw.limit_in_bytes", str(limit))
            elif place.controller == "memory":
                _write_if_present(path / "memory.swap.max", "0")
        except OSError:
            made.remove()
            raise
        return made

    def read(self) -> dict[str, int]:
        if self.counters:
            return self.counters
        if self.place.controller == "pids":
            events = _read_keyed(self.path / "pids.events")
            return {"refused": events.get("max", 0),
                    "peak": _read_int(self.path / "pids.peak") or 0,
                    "current": _read_int(self.path / "pids.current") or 0}
        if self.place.version == 1:
            oom = _read_keyed(self.path / "memory.oom_control")
            return {"oom_kill": oom.get("oom_kill", 0),
                    "at_limit": _read_int(self.path / "memory.failcnt") or 0,
                    "peak": _read_int(self.path / "memory.max_usage_in_bytes") or 0}
        events = _read_keyed(self.path / "memory.events")
        return {"oom_kill": events.get("oom_kill", 0), "at_limit": events.get("max", 0),
                "peak": _read_int(self.path / "memory.peak") or 0}

    def remove(self) -> None:
        """Keep the counters and remove the cgroup. Its tasks leave it shortly after bwrap
        exits; a run still going when its confinement ends is killed, so nothing of it is
        left outside its bounds."""
        started = time.monotonic()
        while True:
            counters = self.read()
            try:
                self.path.rmdir()
            except FileNotFoundError:
                return
            except OSError as error:
                waited = time.monotonic() - started
                if waited > _RELEASE_WAIT:
                    warnings.warn(f"cannot remove the run's cgroup {self.path} "
                                  f"({error.strerror}); tasks still in it: {self._tasks()}",
                                  stacklevel=2)
                    return
                if waited > 1:
                    self._kill()
                time.sleep(0.05)
                continue
            self.counters = counters
            return

    def _tasks(self) -> list[int]:
        return _tasks(self.path)

    def _kill(self) -> None:
        _kill(self.path)


def _tasks(path: Path) -> list[int]:
    try:
        return [int(t) for t in (path / "cgroup.procs").read_text().split()]
    except OSError:
        return []


def _kill(path: Path) -> None:
    for pid in _tasks(path):  # only the run's own processes are in its cgroup
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def left_behind(parent: Path) -> list[Path]:
    """The cgroups under ``parent`` that a harness now gone made for its runs."""
    try:
        names = sorted(p.name for p in parent.iterdir())
    except OSError:
        return []
    found = []
    for name in names:
        if (match := _NAME.fullmatch(name)) is None:
            continue
        path = parent / name
        # a name without the start time and namespace could be a live harness's elsewhere:
        # only an empty one is taken
        gone = owner_gone(match["owner"]) if match["owner"] else (
            pid_gone(int(match["pid"])) and not _tasks(path))
        if gone:
            found.append(path)
    return found


def sweep(path: Path) -> bool:
    """Kill what is left in a gone harness's cgroup and remove it; whether it went."""
    deadline = time.monotonic() + _RELEASE_WAIT
    while True:
        _kill(path)
        try:
            path.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)


def _write_if_present(path: Path, value: str) -> None:
    if path.exists():
        path.write_text(value)
