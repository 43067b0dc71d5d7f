"""What a killed harness left on the machine, swept when the next one starts.

A harness ended by SIGKILL (a cancelled CI job) cannot remove what its runs had: their
memory and pids cgroups, the socket folder of each probe in the temp folder, and the tmpfs
of each probe's sandbox folder (memory the kernel keeps for as long as it is mounted). Each
is named after its harness (``probes.run.owner``), so ``sweep`` removes those of harnesses
that are gone, and only those: a live run's, or one whose owner cannot be looked up from
here (another PID namespace), is left alone. A tmpfs is unmounted without its contents
being copied out: what the killed run's client wrote is lost with it (its probe folder,
evidence and all, stays where it was).
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path

from probes.run import cgroups
from probes.run.owner import TEMP_FOLDER, owner_gone
from probes.run.sandbox_fs import sandbox_mounts, unmount

__all__ = ["sweep"]


def sweep(cgroup_parents: Iterable[Path]) -> list[str]:
    """Remove what harnesses now gone left: their sandbox mounts, their runs' cgroups under
    ``cgroup_parents``, their socket folders in the temp folder. What was removed, and what
    could not be, one line each."""
    done = []
    for owner, mounted in sandbox_mounts():
        if owner_gone(owner):
            try:
                unmount(mounted)
                done.append(f"unmounted {mounted}")
            except OSError as error:
                done.append(f"could not unmount {mounted} ({error.strerror})")
    for parent in dict.fromkeys(cgroup_parents):
        for left in cgroups.left_behind(parent):
            done.append(f"removed the cgroup {left}" if cgroups.sweep(left)
                        else f"could not remove the cgroup {left} (tasks still in it)")
    temp = Path(tempfile.gettempdir())
    try:
        names = sorted(os.listdir(temp))
    except OSError:
        names = []
    for name in names:
        found = TEMP_FOLDER.fullmatch(name)
        if found is not None and _own_folder(temp / name) and owner_gone(found["owner"]):
            shutil.rmtree(temp / name, ignore_errors=True)  # by descriptor: no link followed
            done.append(f"removed {temp / name}")
    return done


def _own_folder(path: Path) -> bool:
    """A folder (not a link to one) of this user's: the temp folder is everyone's."""
    try:
        found = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(found.st_mode) and found.st_uid == os.geteuid()
