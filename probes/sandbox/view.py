"""What of the host every bubblewrap sandbox of the harness shows: the system's directories
and a few files of /etc, read-only, and the interpreter a client runs on, read-only at its
own path; and no capability.

``probes.run.sandbox_place`` builds a probe run's view on it; ``probes.clients.info_run`` a
client's short informational run (``--version``, ``--help``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

__all__ = ["ETC_SHOWN", "NO_CAPABILITIES", "SYSTEM_DIRS", "fresh_mounts", "runtime_prefix",
           "system_mounts"]

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# what programs need of /etc; nothing that configures tools per machine or user (npmrc,
# gitconfig, environment, profile) is shown
ETC_SHOWN = ("alternatives", "ca-certificates", "group", "ld.so.cache", "ld.so.conf",
             "ld.so.conf.d", "localtime", "mime.types", "nsswitch.conf", "os-release", "passwd",
             "ssl")
# Run by root, bwrap leaves the sandbox root of its user namespace with every capability in
# it: enough to remount a read-only bind read-write and write the host's file behind it.
# Dropped from the bounding set too, so no exec regains one.
NO_CAPABILITIES = ("--cap-drop", "ALL")


def system_mounts() -> list[str]:
    """bwrap's arguments showing the system's directories (a link kept a link) and the
    files of ``ETC_SHOWN`` that exist, all read-only."""
    args: list[str] = []
    for directory in SYSTEM_DIRS:
        if os.path.islink(directory):
            args += ["--symlink", os.readlink(directory), directory]
        elif os.path.isdir(directory):
            args += ["--ro-bind", directory, directory]
    for name in ETC_SHOWN:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    return args


def fresh_mounts(tmp_size: Sequence[str] = ()) -> list[str]:
    """bwrap's arguments for the sandbox's own /proc, /dev and /tmp (``tmp_size``: bwrap's
    ``--size`` arguments for /dev/shm and /tmp). They go before anything is bound beneath
    them: a filesystem mounted later over a folder hides what was bound there (a cache
    under /tmp vanished under the sandbox's /tmp). /dev is a tmpfs as large as half the
    host's memory: its /dev/shm gets the /tmp bound, and the rest is made read-only (the
    device nodes still work)."""
    return ["--proc", "/proc", "--dev", "/dev", *tmp_size, "--tmpfs", "/dev/shm",
            "--remount-ro", "/dev", *tmp_size, "--tmpfs", "/tmp"]


def runtime_prefix(executable: str) -> Path | None:
    """The install prefix of the interpreter an executable resolves to (``prefix/bin/exe``),
    when it is not one of the system's directories."""
    real = Path(os.path.realpath(executable))
    if not real.is_file() or any(real.is_relative_to(d) for d in SYSTEM_DIRS):
        return None
    return real.parent.parent
