"""Every file access of the harness beneath a sandbox: no link followed, only regular files
and directories opened, every read capped.

The client can write everything under its sandbox, during and between its runs, so every
path there is hostile: a symlink to a host file (``~/.bashrc``, ``/proc/self/environ``), a
hard link, a FIFO that blocks an open, a device, a file of gigabytes, a directory where a
file was. The harness reaches the sandbox only through ``SandboxFiles``:

- every path is walked one component at a time from a descriptor of the sandbox's root,
  each opened with ``O_NOFOLLOW`` under the descriptor of its parent (``openat``); a
  component that is a link, or not a directory, refuses the access;
- writes go to a new file created with ``O_EXCL`` beside the target, then renamed over it:
  whatever the client put at the target (a link, a hard link) is replaced, never written
  through;
- reads open regular files only (``O_NONBLOCK``: a FIFO cannot block the open), refuse a
  file with more than one name, and stop at a byte limit;
- listings walk directories by descriptor (``os.fwalk``) without following links, with a
  limit on the entries seen.

A refusal raises ``Refused`` naming the path and what was found there; callers record it as
the client's doing, never as the harness's failure. ``tests/test_sandbox_files.py`` plants a
link, a hard link, a FIFO, a device and a huge file at every path a probe run touches, and
fails when any access to the sandbox bypasses this module.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import secrets
import shutil
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

__all__ = ["DEPTH_LIMIT", "READ_LIMIT", "WALK_LIMIT", "Entry", "Read", "Refused", "SandboxFiles", "kind_of"]

READ_LIMIT = 1024 * 1024
WALK_LIMIT = 10_000
DEPTH_LIMIT = 64
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_CHUNK = 65536


class Refused(Exception):
    """The harness would not touch a sandbox path: what is there is not what it may use."""

    def __init__(self, relative: str, found: str):
        super().__init__(f"{relative}: {found}")
        self.relative = relative
        self.found = found


def kind_of(mode: int) -> str:
    """What a file of ``mode`` is, in words."""
    for test, name in ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a directory"),
                       (stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "a special file"


@dataclass(frozen=True)
class Read:
    """A file's first ``limit`` bytes and its size."""

    data: bytes
    size: int

    @property
    def truncated(self) -> bool:
        return self.size > len(self.data)

    def text(self) -> str:
        return self.data.decode("utf-8", "replace")


@dataclass(frozen=True)
class Entry:
    """One name found by ``SandboxFiles.walk``: a regular file, or what else it was."""

    relative: str
    kind: str
    size: int = 0
    allocated: int = 0  # bytes on disk (st_blocks)
    inode: tuple[int, int] = (0, 0)  # (st_dev, st_ino)
    links: int = 1

    @property
    def regular(self) -> bool:
        return self.kind == "a regular file"


def _found(name: str, parent: int) -> str:
    """What is at ``name`` in the folder open at ``parent``, not following a link."""
    try:
        return kind_of(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
    except OSError as error:
        return f"unreadable ({error.strerror})"


def _parts(relative: str | PurePosixPath) -> list[str]:
    text = str(relative)
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if text.startswith("/") or ".." in parts or "\0" in text:
        raise Refused(text, "expected a path relative to the sandbox, without ..")
    return parts


class SandboxFiles:
    """File access beneath ``root``, a directory the harness created (its own parent is the
    harness's, so the root itself cannot be swapped by the client)."""

    def __init__(self, root: Path):
        self.root = root

    @classmethod
    def create(cls, root: Path) -> SandboxFiles:
        """A new, empty root (its parent is the harness's)."""
        root.mkdir()
        root.chmod(0o755)  # the client enters it, whatever the process's umask is
        return cls(root)

    # ---- descriptors ------------------------------------------------------------------

    def _root_fd(self) -> int:
        return os.open(self.root, _DIR_FLAGS)

    def _dir_fd(self, parts: list[str], shown: str, *, create: bool) -> int:
        """A descriptor of the directory ``parts`` beneath the root, each component opened
        without following links (created when missing and ``create``)."""
        fd = self._root_fd()
        try:
            for part in parts:
                try:
                    child = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise
                    try:
                        os.mkdir(part, 0o755, dir_fd=fd)
                        made = True
                    except FileExistsError:
                        made = False  # made meanwhile: opened below, without following it
                    child = self._open_dir_or_refuse(part, fd, shown)
                    if made:
                        os.fchmod(child, 0o755)  # whatever the process's umask is
                except OSError:  # a link (ELOOP), a file (ENOTDIR), unreadable
                    raise self._refusal(part, fd, shown) from None
                os.close(fd)
                fd = child
            return fd
        except BaseException:
            os.close(fd)
            raise

    def _open_dir_or_refuse(self, part: str, parent: int, shown: str) -> int:
        try:
            return os.open(part, _DIR_FLAGS, dir_fd=parent)
        except OSError:
            raise self._refusal(part, parent, shown) from None

    @staticmethod
    def _refusal(part: str, parent: int, shown: str) -> Refused:
        found = _found(part, parent)
        return Refused(shown, f"{part!r} on the way is {found}, expected a directory")

    # ---- writes -----------------------------------------------------------------------

    def make_dirs(self, relative: str | PurePosixPath) -> None:
        os.close(self._dir_fd(_parts(relative), str(relative), create=True))

    def write(self, relative: str | PurePosixPath, data: bytes | str, *,
              mtime: float | None = None, mode: int = 0o644) -> None:
        """Put ``data`` at ``relative`` as a new file: whatever was there (a link, a hard
        link, a file) is replaced, not written through; a directory there is refused."""
        parts = _parts(relative)
        if not parts:
            raise Refused(str(relative), "expected a file name")
        content = data.encode() if isinstance(data, str) else data
        parent = self._dir_fd(parts[:-1], str(relative), create=True)
        temporary = f".loopprobe-{secrets.token_hex(8)}"
        try:
            try:
                fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                             | os.O_CLOEXEC, mode, dir_fd=parent)
                try:
                    with os.fdopen(fd, "wb", closefd=False) as out:
                        out.write(content)
                    os.fchmod(fd, mode)
                    if mtime is not None:
                        os.utime(fd, (mtime, mtime))
                finally:
                    os.close(fd)
            except OSError as error:  # the client filled its folder's own filesystem
                if error.errno not in (errno.ENOSPC, errno.EDQUOT):
                    raise
                with contextlib.suppress(OSError):
                    os.unlink(temporary, dir_fd=parent)
                raise Refused(str(relative), "no room: the sandbox folder is full") from None
            try:
                os.replace(temporary, parts[-1], src_dir_fd=parent, dst_dir_fd=parent)
            except OSError:
                os.unlink(temporary, dir_fd=parent)
                raise Refused(str(relative), f"{_found(parts[-1], parent)}, expected a file or "
                                             "nothing") from None
        finally:
            os.close(parent)

    def symlink(self, relative: str | PurePosixPath, target: str) -> None:
        """Make a new link at ``relative`` pointing at ``target`` (as given: the harness
        never follows it); something already there is refused."""
        parts = _parts(relative)
        if not parts:
            raise Refused(str(relative), "expected a link name")
        parent = self._dir_fd(parts[:-1], str(relative), create=True)
        try:
            os.symlink(target, parts[-1], dir_fd=parent)
        except FileExistsError:
            raise Refused(str(relative), f"{_found(parts[-1], parent)}, expected nothing") from None
        finally:
            os.close(parent)

    # ---- reads ------------------------------------------------------------------------

    def _open_file(self, relative: str | PurePosixPath) -> tuple[int, os.stat_result]:
        parts = _parts(relative)
        if not parts:
            raise Refused(str(relative), "expected a file name")
        parent = self._dir_fd(parts[:-1], str(relative), create=False)
        try:
            try:
                before = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
            except FileNotFoundError:
                raise
            except OSError as error:  # e.g. a folder the client made unsearchable
                raise Refused(str(relative), f"could not be looked at ({error.strerror})") \
                    from None
            if not stat.S_ISREG(before.st_mode):
                raise Refused(str(relative), f"{kind_of(before.st_mode)}, expected a "
                                             "regular file")
            try:
                fd = os.open(parts[-1], _READ_FLAGS, dir_fd=parent)
            except OSError as error:
                raise Refused(str(relative), f"could not be opened ({error.strerror})") from None
        finally:
            os.close(parent)
        opened = os.fstat(fd)
        problem = None
        if not stat.S_ISREG(opened.st_mode) or (opened.st_dev, opened.st_ino) != (
                before.st_dev, before.st_ino):
            problem = "replaced while it was opened"
        elif opened.st_nlink > 1:
            problem = f"a hard link ({opened.st_nlink} names), expected a file of one name"
        if problem:
            os.close(fd)
            raise Refused(str(relative), problem)
        return fd, opened

    def read(self, relative: str | PurePosixPath, *, limit: int = READ_LIMIT) -> Read:
        """The first ``limit`` bytes of the regular file at ``relative``. Raises
        ``FileNotFoundError`` when nothing is there, ``Refused`` when something else is."""
        fd, opened = self._open_file(relative)
        try:
            chunks, kept = [], 0
            while kept < limit:
                chunk = os.read(fd, min(_CHUNK, limit - kept))
                if not chunk:
                    break
                chunks.append(chunk)
                kept += len(chunk)
            size = max(opened.st_size, kept)
            return Read(b"".join(chunks), size)
        finally:
            os.close(fd)

    def digest(self, relative: str | PurePosixPath, *, limit: int = 256 * 1024 * 1024) -> str:
        """The SHA-256 of a regular file (of its first ``limit`` bytes, said so when cut)."""
        fd, opened = self._open_file(relative)
        try:
            digest, seen = hashlib.sha256(), 0
            while seen < limit and (chunk := os.read(fd, min(_CHUNK * 16, limit - seen))):
                digest.update(chunk)
                seen += len(chunk)
            cut = f" (first {seen} of {opened.st_size} bytes)" if opened.st_size > seen else ""
            return digest.hexdigest() + cut
        finally:
            os.close(fd)

    def kind(self, relative: str | PurePosixPath) -> str | None:
        """What is at ``relative`` (``None``: nothing, or a refused path on the way)."""
        parts = _parts(relative)
        if not parts:
            return "a directory"
        try:
            parent = self._dir_fd(parts[:-1], str(relative), create=False)
        except (FileNotFoundError, Refused):
            return None
        try:
            return kind_of(os.stat(parts[-1], dir_fd=parent, follow_symlinks=False).st_mode)
        except OSError:
            return None
        finally:
            os.close(parent)

    def exists(self, relative: str | PurePosixPath) -> bool:
        try:
            return self.kind(relative) is not None
        except Refused:
            return False

    def walk(self, relative: str | PurePosixPath = "", *,
             limit: int = WALK_LIMIT) -> Iterator[Entry]:
        """Every name beneath the directory ``relative`` (directories included), without
        following links, sorted, at most ``limit`` (then one entry says the walk was cut).
        Nothing is yielded when the directory is missing; ``Refused`` is raised (at the
        first ``next``) when it, or a folder on the way, is not a directory."""
        base = _parts(relative)
        try:
            top = self._dir_fd(base, str(relative), create=False)
        except FileNotFoundError:
            return
        seen = [0]
        yield from self._walk(top, "/".join(base), limit, seen, 0)

    def _walk(self, fd: int, prefix: str, limit: int, seen: list[int],
              depth: int) -> Iterator[Entry]:
        """The names in the directory open at ``fd`` (closed here), depth first."""
        try:
            try:
                with os.scandir(fd) as listing:
                    names = sorted(entry.name for entry in listing)
            except OSError as error:  # a folder the client made unreadable
                yield Entry(prefix, f"an unreadable folder ({error.strerror})")
                return
            for name in names:
                seen[0] += 1
                if seen[0] > limit:
                    if seen[0] == limit + 1:
                        yield Entry(prefix, f"more than {limit} names: the walk stopped")
                    return
                shown = f"{prefix}/{name}" if prefix else name
                try:
                    found = os.stat(name, dir_fd=fd, follow_symlinks=False)
                except OSError:
                    continue  # gone meanwhile
                yield Entry(shown, kind_of(found.st_mode), found.st_size,
                            found.st_blocks * 512, (found.st_dev, found.st_ino),
                            found.st_nlink)
                if stat.S_ISDIR(found.st_mode):
                    if depth >= DEPTH_LIMIT:
                        yield Entry(shown, f"more than {DEPTH_LIMIT} folders deep: not "
                                           "entered")
                        continue
                    try:
                        child = os.open(name, _DIR_FLAGS, dir_fd=fd)
                    except OSError:
                        continue  # swapped for a link or a file meanwhile: not entered
                    yield from self._walk(child, shown, limit, seen, depth + 1)
        finally:
            os.close(fd)

    def remove(self) -> None:
        """Remove the whole sandbox (``shutil.rmtree`` works by descriptor: no link is
        followed out of it)."""
        shutil.rmtree(self.root, ignore_errors=True)
