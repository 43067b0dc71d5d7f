"""Reading a file loopprobe was given: regular, bounded, inside its folder, or refused in one line.

Every file a command reads that this run did not just write (a report folder, a journal, a
matrix, a shard, a bisect result, a file to validate) is hostile until read: a name can be a
named pipe that never ends, a symlink to ``/dev/zero`` or out of the folder, a gzip bomb,
JSON nested past Python's recursion limit, or YAML aliases that expand a kilobyte into
gigabytes. Every reader goes through here: what is refused is refused before it is opened
(``lstat``) or expanded, and ``ReadRefused`` carries the one line the command prints
(exit 2). Each bound is far above what loopprobe writes, and each says why.
"""

from __future__ import annotations

import json
import os
import stat
import zlib
from pathlib import Path
from typing import Any

from mockapi.script.scenario import MAX_SCENARIO_BYTES, ScenarioRefused, decode_scenario_text

__all__ = ["BLOB_SIDECAR_SUFFIX", "BLOB_STORE_NAME", "GZIP_RATIO_FLOOR", "MAX_DEPTH",
           "MAX_GZIP_RATIO", "MAX_JOURNAL_BYTES",
           "MAX_JSON_BYTES", "MAX_SCENARIO_BYTES", "ReadRefused", "check_file", "confined",
           "json_lines", "loads", "nested_deeper_than", "read_bytes", "read_journal", "read_json",
           "read_text", "read_yaml", "restore_blobs"]

# the largest committed report is ~0.6 MB and a matrix of every version ~0.2 MB: 50 times that
MAX_JSON_BYTES = 32 * 1024 * 1024
# a report's journal, once decompressed: the largest committed is ~2.5 MB
MAX_JOURNAL_BYTES = 128 * 1024 * 1024
# committed journals expand 2 to 25 times when decompressed; deflate's most is ~1,030 (a bomb)
MAX_GZIP_RATIO = 100
# below this a gzip file may expand any number of times (an empty journal is 20 bytes of gzip)
GZIP_RATIO_FLOOR = 1024 * 1024
# a report nests ~15 levels, a journal line ~11; Python's own limit is ~1,000 and every
# reader, the schema validator and the page templates recurse into what they are given
MAX_DEPTH = 200  # above the journal's bodies (mockapi.journal.records.MAX_JOURNALED_BODY_DEPTH)


class ReadRefused(Exception):
    """A file refused before or while it was read; its text is the whole one-line message.

    Not a ValueError or OSError: a reader's fallback for a file that is absent or not JSON
    must not turn a refusal into "no such file" and go on.
    """


_KINDS = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISDIR, "a folder"))


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or path.is_relative_to(folder)


def check_file(path: Path, *, within: Path | None = None) -> os.stat_result:
    """``path``'s status if it is a regular file (through a symlink only if the link stays
    inside ``within``); opens nothing. FileNotFoundError when there is nothing there."""
    status = os.lstat(path)
    if stat.S_ISLNK(status.st_mode):
        target = path.resolve()
        if within is not None and not _inside(target, within.resolve()):
            raise ReadRefused(f"{path}: a symlink to {target}, outside the folder {within} "
                              "being read: refused")
        status = os.stat(path)
    if not stat.S_ISREG(status.st_mode):
        raise ReadRefused(f"{path}: expected a regular file, found {_kind(status.st_mode)}: "
                          "refused (not opened)")
    return status


def confined(folder: Path, name: Any, source: Path, field: str) -> Path:
    """The file a field of ``source`` names (a report's ``journal``), if it is in ``folder``."""
    if not isinstance(name, str) or not name:
        raise ReadRefused(f"{source}: {field}: expected the name of a file beside it, found "
                          f"{name!r}: refused")
    path = folder / name
    if Path(name).is_absolute() or ".." in Path(name).parts \
            or not _inside(path.resolve(), folder.resolve()):
        raise ReadRefused(f"{source}: {field} {name!r} names a file outside the report's "
                          f"folder {folder}: refused")
    return path


def read_bytes(path: Path, *, limit: int = MAX_JSON_BYTES, within: Path | None = None) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes (see ``check_file``)."""
    size = check_file(path, within=within).st_size
    if size > limit:
        raise ReadRefused(f"{path}: expected at most {limit:,} bytes, found {size:,}: refused")
    try:
        # O_NONBLOCK: a file swapped for a pipe since the check opens at once, and is refused
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as error:
        if isinstance(error, FileNotFoundError):
            raise
        raise ReadRefused(f"{path}: cannot be read: {error.strerror or error}") from None
    with os.fdopen(fd, "rb") as handle:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise ReadRefused(f"{path}: expected a regular file, found {_kind(mode)}: refused")
        data = handle.read(limit + 1)  # a file growing while read stops here
    if len(data) > limit:
        raise ReadRefused(f"{path}: expected at most {limit:,} bytes, found more: refused")
    return data


def read_text(path: Path, *, limit: int = MAX_JSON_BYTES, within: Path | None = None) -> str:
    data = read_bytes(path, limit=limit, within=within)
    try:
        return data.decode()
    except UnicodeDecodeError as error:
        raise ReadRefused(f"{path}: expected UTF-8 text, found byte {data[error.start]:#04x} "
                          f"at offset {error.start}: refused") from None


def nested_deeper_than(value: Any, limit: int) -> bool:
    """Whether ``value`` nests objects and arrays more than ``limit`` deep (walked without
    recursion: the point is a value too deep to recurse into)."""
    stack = [(value, 1)] if isinstance(value, dict | list) else []
    while stack:
        node, level = stack.pop()
        if level > limit:
            return True
        children = node.values() if isinstance(node, dict) else node
        stack.extend((child, level + 1) for child in children
                     if isinstance(child, dict | list))
    return False


def _too_deep(source: str) -> ReadRefused:
    return ReadRefused(f"{source}: nested deeper than {MAX_DEPTH} levels (a loopprobe file "
                       "nests at most ~20): refused")


def json_lines(text: str) -> list[str]:
    """The lines of a JSON-lines text, split at LF alone: str.splitlines also splits at
    U+2028, U+2029, U+0085 and other breaks a JSON string may hold raw (Node's
    JSON.stringify writes U+2028 as it is), which would cut one record in two."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def loads(data: str | bytes, source: str) -> Any:
    """JSON no deeper than ``MAX_DEPTH``; ValueError (JSONDecodeError) when it is not JSON."""
    try:
        value = json.loads(data)
    except RecursionError:  # json's C parser stops at Python's limit, cleanly
        raise _too_deep(source) from None
    if isinstance(value, dict | list) and nested_deeper_than(value, MAX_DEPTH):
        raise _too_deep(source)
    return value


def read_json(path: Path, *, within: Path | None = None, limit: int = MAX_JSON_BYTES) -> Any:
    """A JSON file, bounded (see ``read_bytes`` and ``loads``); ValueError if not JSON."""
    return loads(read_bytes(path, limit=limit, within=within), str(path))


def _gunzip(data: bytes, path: Path) -> bytes:
    """Every gzip member of ``data``, decompressed a piece at a time up to a cap: a bomb is
    refused at the cap, never expanded whole."""
    cap = min(MAX_JOURNAL_BYTES, max(GZIP_RATIO_FLOOR, MAX_GZIP_RATIO * len(data)))
    out, rest = bytearray(), data
    try:
        while rest:
            stream = zlib.decompressobj(wbits=zlib.MAX_WBITS | 16)
            out += stream.decompress(rest, cap + 1 - len(out))
            if len(out) > cap:
                raise ReadRefused(
                    f"{path}: expected gzip expanding to at most {cap:,} bytes ({MAX_GZIP_RATIO} "
                    f"times its {len(data):,}; journals expand 2 to 25 times), found more: "
                    "refused")
            if not stream.eof:
                raise ReadRefused(f"{path}: expected a whole gzip file, found one cut short: "
                                  "refused")
            rest = stream.unused_data
    except zlib.error as error:
        raise ReadRefused(f"{path}: expected gzip, found data it cannot decompress ({error}): "
                          "refused") from None
    return bytes(out)


def read_journal(path: Path, *, within: Path | None = None) -> bytes:
    """A journal's bytes, plain (``.jsonl``) or gzipped (``.gz``), bounded both ways; blob
    lines moved to a shared store put back (``probes.core.blob_store``)."""
    data = read_bytes(path, limit=MAX_JOURNAL_BYTES, within=within)
    return restore_blobs(path, _gunzip(data, path) if path.name.endswith(".gz") else data)


def read_yaml(path: Path, *, within: Path | None = None) -> Any:
    """A YAML file read as the mock reads a scenario (at most its size, no aliases), no
    deeper than ``MAX_DEPTH``; a ScenarioError (a ValueError) when it is not valid YAML."""
    data = read_bytes(path, limit=MAX_SCENARIO_BYTES, within=within)
    try:
        value = decode_scenario_text(data, str(path))
    except ScenarioRefused as error:
        said = " ".join("; ".join(error.problems).split())  # one line, whatever the parser said
        raise ReadRefused(f"{path}: {said}: refused") from None
    if isinstance(value, dict | list) and nested_deeper_than(value, MAX_DEPTH):
        raise _too_deep(str(path))
    return value


# the shared blob store (probes.core.blob_store writes it; every journal read puts it back)
BLOB_SIDECAR_SUFFIX = ".blobs"  # not .json: readers take every *.json of a folder for a report
BLOB_STORE_NAME = "blobs"
_STORED_BLOB_HEAD = b'{"sha256": "'  # a report journal's blob line (sorted keys)


def restore_blobs(journal: Path, data: bytes) -> bytes:
    """``data`` (the journal's plain bytes) with the blob lines its sidecar names put back;
    ``data`` unchanged when it has none."""
    sidecar = journal.with_name(journal.name + BLOB_SIDECAR_SUFFIX)
    if not sidecar.is_file():
        return data
    try:
        index = json.loads(read_bytes(sidecar, limit=1 << 22))
        store_text, digests = index["store"], index["blobs"]
    except (ValueError, KeyError, TypeError):
        raise ReadRefused(f"{sidecar}: expected {{store, blobs}}: refused") from None
    parts = Path(str(store_text)).parts
    if not parts or parts[-1] != BLOB_STORE_NAME or any(p != ".." for p in parts[:-1]):
        raise ReadRefused(f"{sidecar}: store {store_text!r}: expected ../…/{BLOB_STORE_NAME}: "
                          "refused")
    store = journal.parent
    for part in parts:
        store = store / part
        if store.is_symlink():
            raise ReadRefused(f"{sidecar}: {store} is a symlink: refused")
    restored = [data if not data or data.endswith(b"\n") else data + b"\n"]
    total = len(data)
    for digest in digests:
        if not isinstance(digest, str) or len(digest) != 64 or \
                any(c not in "0123456789abcdef" for c in digest):
            raise ReadRefused(f"{sidecar}: {digest!r}: expected a SHA-256: refused")
        path = store / digest[:2] / f"{digest}.json"
        if not path.is_file() or path.is_symlink():
            raise ReadRefused(f"{journal}: blob {digest[:12]}… is not in the store {store}: "
                              "refused")
        line = read_bytes(path, limit=MAX_JOURNAL_BYTES).rstrip(b"\n")
        total += len(line) + 1
        if total > MAX_JOURNAL_BYTES:
            raise ReadRefused(f"{journal}: more than {MAX_JOURNAL_BYTES} bytes restored: "
                              "refused")
        if not line.startswith(_STORED_BLOB_HEAD + digest.encode()):
            raise ReadRefused(f"{path}: not the blob line of {digest[:12]}…: refused")
        restored.append(line + b"\n")
    return b"".join(restored)
