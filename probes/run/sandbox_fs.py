"""The client's part of a probe's sandbox on a filesystem of its own, so that the kernel
counts what the run holds rather than the harness the names it finds.

``mounted_sandbox`` mounts a tmpfs at the probe's ``sandbox/`` for as long as the probe
runs: its ``size=`` is the sandbox bound in bytes and its ``nr_inodes=`` the bound in names,
so a write past either fails with ENOSPC whatever the client does with the names (a file
unlinked while held open keeps its pages; a sparse file holds only the pages written; a hard
link costs an inode on tmpfs, so names are bounded, links included). ``SandboxFs.usage``
reads what is held with one ``statvfs``. When the probe ends, what the client left is copied
out to an ordinary folder at the same path (``cp -a --sparse=always``: no link followed, a
FIFO or socket made anew and never opened, hard links kept, holes kept and runs of zeros
made holes, so the copy never takes more disk than the tmpfs held) and the tmpfs is
unmounted: the sandbox folder stays the probe's evidence, as without the mount. The folder's
own entries (``sandbox``, and the ``.sandbox-setup``/``.sandbox-kept`` the moves go through)
are handled by descriptor of the probe's folder, which is the harness's alone.

The tmpfs is named ``loopprobe-sandbox-<owner>`` (``probes.run.owner``), so a harness that
was killed before unmounting it is found and its mount swept (``probes.run.leftovers``).
"""

from __future__ import annotations

import ctypes
import functools
import os
import re
import shutil
import subprocess
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from probes.run.owner import OWNER_PATTERN, owner_tag, temp_folder_prefix

__all__ = ["FS_PREFIX", "FsUsage", "SandboxFs", "cannot_mount", "mounted_sandbox",
           "sandbox_mounts", "unmount"]

FS_PREFIX = "loopprobe-sandbox-"
_SOURCE = re.compile(re.escape(FS_PREFIX) + OWNER_PATTERN)
_MS_NOSUID, _MS_NODEV, _MNT_DETACH = 2, 4, 2
_SETUP, _KEPT = ".sandbox-setup", ".sandbox-kept"
_COPY = ("cp", "-a", "--sparse=always", "--")
_COPY_TIMEOUT = 600.0  # 1 GiB and 100,000 files copy out in 11 s; a hang is not waited on


@dataclass(frozen=True)
class FsUsage:
    bytes: int  # pages held, files unlinked while open included
    names: int  # inodes in use (a hard link counts as one), the root included
    full: str | None  # "bytes" or "names" when nothing more of it is free


@dataclass(frozen=True)
class SandboxFs:
    """The tmpfs a probe's client part lives on, while it is mounted."""

    root: Path
    size: int
    names: int

    def usage(self) -> FsUsage:
        found = os.statvfs(self.root)
        full = "bytes" if found.f_bavail == 0 else "names" if found.f_favail == 0 else None
        return FsUsage((found.f_blocks - found.f_bfree) * found.f_frsize,
                       found.f_files - found.f_ffree, full)

    def how(self) -> str:
        return (f"a tmpfs of its own at /sandbox (size={self.size}, nr_inodes={self.names}): "
                "the kernel counts every page held, files unlinked while open included")


@functools.cache
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    text = ctypes.c_char_p
    libc.mount.argtypes = [text, text, text, ctypes.c_ulong, text]
    libc.umount2.argtypes = [text, ctypes.c_int]
    return libc


def _mount(source: str, target: Path, options: str) -> None:
    if _libc().mount(source.encode(), os.fsencode(target), b"tmpfs", _MS_NOSUID | _MS_NODEV,
                     options.encode()) != 0:
        error = ctypes.get_errno()
        raise OSError(error, os.strerror(error), str(target))


def unmount(target: Path) -> None:
    """Unmount ``target``; lazily when it is busy (it goes once nothing holds it)."""
    if _libc().umount2(os.fsencode(target), 0) == 0:
        return
    if ctypes.get_errno() == 16 and _libc().umount2(os.fsencode(target), _MNT_DETACH) == 0:
        return  # EBUSY: detached now, freed when its last user goes
    error = ctypes.get_errno()
    raise OSError(error, os.strerror(error), str(target))


@functools.cache
def cannot_mount() -> str | None:
    """Why no tmpfs can be mounted here (``None``: one can), tried once per process."""
    trial = Path(tempfile.mkdtemp(prefix=temp_folder_prefix()))  # swept if left
    try:
        _mount(f"{FS_PREFIX}{owner_tag()}", trial, "size=4096,nr_inodes=4")
        unmount(trial)
    except OSError as error:
        return (f"no filesystem can be mounted for the sandbox folder ({error.strerror}): "
                "mounting needs root (CAP_SYS_ADMIN)")
    finally:
        trial.rmdir()
    return None


def _copy(source: Path, target: Path) -> str | None:
    """``source``'s contents into the folder ``target``; what went wrong, if anything."""
    try:
        done = subprocess.run([*_COPY, f"{source}/.", str(target)], capture_output=True,
                              timeout=_COPY_TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        return f"the copy took more than {_COPY_TIMEOUT:.0f} s"
    if done.returncode == 0:
        return None
    return done.stderr.decode(errors="replace").strip()[-500:] or f"cp exited {done.returncode}"


@contextmanager
def mounted_sandbox(client_root: Path, size: int, names: int) -> Iterator[SandboxFs]:
    """The client part at ``client_root`` on a tmpfs of ``size`` bytes and ``names``
    inodes for the block, what the harness put there before moved in, and copied back
    out to an ordinary folder after."""
    probe = os.open(client_root.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    name = client_root.name
    try:
        os.rename(name, _SETUP, src_dir_fd=probe, dst_dir_fd=probe)
        os.mkdir(name, 0o755, dir_fd=probe)
        try:
            _mount(f"{FS_PREFIX}{owner_tag()}", client_root,
                   f"size={size},nr_inodes={names},mode=0755")
        except OSError:
            os.rmdir(name, dir_fd=probe)
            os.rename(_SETUP, name, src_dir_fd=probe, dst_dir_fd=probe)
            raise
        try:
            if (failed := _copy(client_root.parent / _SETUP, client_root)) is not None:
                raise RuntimeError(f"the sandbox folder could not be moved onto its own "
                                   f"filesystem: {failed}")
            shutil.rmtree(_SETUP, dir_fd=probe)
            yield SandboxFs(client_root, size, names)
        finally:
            _keep(client_root, probe)
    finally:
        os.close(probe)


def _keep(client_root: Path, probe: int) -> None:
    """Copy what the tmpfs holds to an ordinary folder, unmount it, and put the copy at its
    place (the run's processes are gone: nothing writes there any more)."""
    name = client_root.name
    os.mkdir(_KEPT, 0o700, dir_fd=probe)
    failed = _copy(client_root, client_root.parent / _KEPT)
    unmount(client_root)
    os.rmdir(name, dir_fd=probe)
    os.rename(_KEPT, name, src_dir_fd=probe, dst_dir_fd=probe)
    if failed is not None:
        warnings.warn(f"the sandbox folder {client_root} was kept in part: {failed}",
                      stacklevel=3)


def _unescape(field: bytes) -> str:
    """A mountinfo path: spaces, tabs, newlines and backslashes are written as ``\\ooo``."""
    return os.fsdecode(re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m.group(1), 8)]), field))


def sandbox_mounts() -> list[tuple[str, Path]]:
    """Every sandbox tmpfs mounted here: (its owner's tag, where it is mounted)."""
    found = []
    with open("/proc/self/mountinfo", "rb") as info:
        for line in info:
            fields, _, tail = line.partition(b" - ")
            kind = tail.split()
            if len(kind) < 2 or kind[0] != b"tmpfs":
                continue
            if (source := _SOURCE.fullmatch(os.fsdecode(kind[1]))) is not None:
                found.append((source["owner"], Path(_unescape(fields.split()[4]))))
    return found
