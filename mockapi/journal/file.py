"""The journal's file and the files beside it: opened or made, never through a link.

A journal path is often predictable (``serve --journal journal.jsonl``, the ``mock_api``
fixture's ``mockapi-journal-0.jsonl``), so someone able to write its folder could plant a
link there and have the mock append to, or create, a file of theirs choosing. So the
journal's own name is opened with ``O_NOFOLLOW``: an existing one must be a regular file
of one name (not a symbolic link, a named pipe, a device, a socket, a folder, nor a file
with other hard links), checked before it is opened (a pipe would block the open) and
again on the descriptor; a missing one is created with ``O_CREAT | O_EXCL`` (a link planted
meanwhile fails the creation, and the name is looked at again). Anything else is refused
in one line naming the path and what it is (``JournalRefused``). Every later read and write
goes through that descriptor, never the name again.

The files the mock writes beside it are made the same way: the ``.pid`` file is written to
a new name and renamed over the old one (a link at its name is replaced, not followed), a
torn tail's ``.torn-at-<offset>`` file is created new (an existing name gets a suffix).

The folders above the journal are the caller's path and are followed as given: a user's
home or ``/tmp`` may itself be a link (``/tmp`` is one on macOS), and whoever can plant a
link in a folder above could as well replace the folder the journal is in.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from pathlib import Path
from typing import Any

__all__ = ["JournalError", "JournalInUse", "JournalRefused", "open_journal", "read_at",
           "remove_pid_file", "set_aside_torn_tail", "write_pid_file"]

_OPEN = os.O_RDWR | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_KINDS = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a named pipe (FIFO)"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a folder"))


class JournalError(RuntimeError):
    """The journal cannot take a line now; nothing of the line is on disk."""


class JournalInUse(JournalError):
    """Another server holds the journal's lock (two servers would write duplicate seqs)."""


class JournalRefused(JournalError):
    """The journal's path names something the mock must not write through; said in one line."""


def _refused(path: Path, status: os.stat_result) -> JournalRefused | None:
    """Why the file ``status`` describes cannot be the journal at ``path``, or None."""
    kind = next((name for test, name in _KINDS if test(status.st_mode)), None)
    if kind == "a symbolic link":
        try:
            kind += f" (to {os.readlink(path)})"
        except OSError:
            pass
    elif kind is None and not stat.S_ISREG(status.st_mode):
        kind = "not a regular file"
    elif kind is None and status.st_nlink > 1:
        kind = f"a file with {status.st_nlink} names (hard links)"
    if kind is None:
        return None
    return JournalRefused(f"the journal {path} is {kind}: refused (expected a regular file of "
                          "one name, or no file; the mock never writes through a link)")


def _open_or_create(path: Path) -> int:
    for _ in range(8):  # a name swapped between the looks: looked at again, a few times
        try:
            found = os.lstat(path)
        except FileNotFoundError:
            try:
                return os.open(path, _OPEN | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                continue
        refusal = _refused(path, found)
        if refusal is not None:
            raise refusal
        try:
            return os.open(path, _OPEN)
        except FileNotFoundError:
            continue
        except OSError as error:
            if error.errno == errno.ELOOP:  # made a link since the look
                continue
            raise
    raise JournalRefused(f"the journal {path} kept changing while it was opened: refused")


def open_journal(path: Path) -> int:
    """A descriptor of the journal at ``path`` (read-write, appending, locked), the file made
    if missing; ``JournalRefused`` when the name is not a regular file of one name,
    ``JournalInUse`` when another server holds it, OSError when it cannot be opened."""
    fd = _open_or_create(path)
    try:
        refusal = _refused(path, os.fstat(fd))  # what was opened, whatever the name is now
        if refusal is not None:
            raise refusal
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise JournalInUse(f"the journal {path} is being written by another mock "
                               f"({_holder(path)}); give each server its own --journal"
                               ) from None
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_at(fd: int, size: int, offset: int) -> bytes:
    """``size`` bytes of the file at ``offset`` (fewer at its end)."""
    parts, done = [], 0
    while done < size:
        part = os.pread(fd, size - done, offset + done)
        if not part:
            break
        parts.append(part)
        done += len(part)
    return b"".join(parts)


def _pid_file(path: Path) -> Path:
    return path.with_name(path.name + ".pid")


def _holder(path: Path) -> str:
    try:
        fd = os.open(_pid_file(path), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return "another process"
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "another process"
        return f"pid {os.read(fd, 32).decode(errors='replace').strip()}"
    finally:
        os.close(fd)


def _create_new(path: Path, data: bytes) -> Path:
    """``data`` in a file made at ``path``, or at ``path.1``, ``path.2``... if it is taken."""
    for index in range(1000):
        candidate = path if index == 0 else path.with_name(f"{path.name}.{index}")
        try:
            fd = os.open(candidate, _NEW, 0o600)
        except FileExistsError:
            continue
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        return candidate
    raise FileExistsError(errno.EEXIST, "every name is taken", str(path))


def write_pid_file(path: Path) -> None:
    """``<journal>.pid`` holding this process's id, replacing whatever had that name."""
    made = _create_new(path.with_name(f".{path.name}.pid.{os.getpid()}"),
                       f"{os.getpid()}\n".encode())
    os.replace(made, _pid_file(path))


def remove_pid_file(path: Path) -> None:
    _pid_file(path).unlink(missing_ok=True)


def set_aside_torn_tail(fd: int, path: Path) -> dict[str, Any] | None:
    """Move a last line without a newline (a write cut by a kill) to a side file made new.

    Appending after it would glue the next record onto the fragment and make the
    journal unreadable; the fragment is kept, never dropped.
    """
    size = end = os.fstat(fd).st_size
    keep = 0
    while end > 0:
        start = max(0, end - 65536)
        newline = read_at(fd, end - start, start).rfind(b"\n")
        if newline >= 0:
            keep = start + newline + 1
            break
        end = start
    if keep == size:
        return None
    fragment = read_at(fd, size - keep, keep)
    side = _create_new(path.with_name(f"{path.name}.torn-at-{keep}"), fragment)
    os.ftruncate(fd, keep)
    return {"offset": keep, "bytes": len(fragment), "moved_to": side.name}
