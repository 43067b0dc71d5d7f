"""A journal's large repeated parts, written once as blob records and referenced by hash.

A real agent-loop request is mostly its system prompt and its tool list, the same from one
request to the next (Claude Code 2.1.235: 49 KB a request, 46 KB of it these two). From
journal format 4 on, a request record keeps its body's small parts inline and puts each
large part in a blob record of its own, once per journal, in its place a reference:

    {"type":"blob","sha256":"9f2c…","value":[{"name":"Bash",…},…]}
    {"type":"request","seq":7,…,"body_refs":[["tools"],["system"]],"body":{…,"system":"sha256:51d0…","tools":"sha256:9f2c…"}}

``body_refs`` lists where the references are (a path of keys and indexes into ``body``);
the value at each path is ``"sha256:<hex>"``, the SHA-256 of the blob's ``value`` exactly
as the blob line writes it. A reader puts each blob's value back in its place, so every
consumer sees the body it saw before (``resolve_body``); a reference is followed only where
``body_refs`` says, so a string of that shape that a client sent stays a string.

What is large: each block of a ``system`` list (a loop's first block can change on every
request, as Claude Code's billing header does, while the long blocks after it stay the
same) or a ``system`` string, the value of ``tools`` (the whole list: within a run it is
the same list, one reference a request; per tool it would be one each), and each content
block (or string ``content``) of a message, when its encoding is ``BLOB_THRESHOLD`` bytes
or more. Smaller values cost more as references than they save.

Hashing costs about as much as the write it saves (SHA-256: ~28 µs for 49 KB), so it is
done once per distinct value: ``BlobSplitter`` finds a part unchanged since the previous
request at its place with one comparison of bytes, and remembers recent large values with
their hash, found by length and CRC-32 and confirmed by comparing the bytes.

Where blobs are: the mock writes a blob in the same write as, and just before, the first
request line that references it (on disk before it, whole or absent like any line; with
fsync, synced before it). A report journal (``probes.report``) puts its blobs after its
records, so that the line numbers reports cite are those of the records. Readers accept
either: they gather the blobs first. A journal being written remembers where each blob's
value is in its file (``BlobPlaces``), so a read from the middle puts back the blobs written
before it.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import re
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from mockapi.journal.file import read_at

__all__ = ["BLOB_LINE_HEAD", "BLOB_THRESHOLD", "REF_PREFIX", "BlobError", "BlobPlaces",
           "BlobSplitter", "EncodedPart", "PartPath", "SplitBody", "blob_line", "blob_value_text",
           "parse_blob_line", "resolve_body"]

BLOB_THRESHOLD = 1024  # bytes of a value's encoding from which it becomes a blob
REF_PREFIX = "sha256:"
# large values remembered with their hash, per journal: enough for many clients' prompts
_RECENT_VALUES = 4096
_RECENT_BYTES = 64 * 1024 * 1024
_CANDIDATES_PER_KEY = 4
_HEX = re.compile(r"[0-9a-f]{64}")
# blobs whose place in the file is remembered (oldest forgotten first: a blob forgotten is
# written again when next referenced, and found by a scan of the file when read)
_BLOB_INDEX = 50_000
BLOB_LINE_HEAD = b'{"type":"blob","sha256":"'

_Path = list[str | int]
PartPath = tuple[str | int, ...]  # a place in a body, as a key of parts already encoded


class BlobError(ValueError):
    """A blob line that is not one, or a reference no blob resolves."""


def blob_line(digest: str, value: bytes) -> bytes:
    """The mock journal's line of a blob (``value``: its encoding, hashed to ``digest``)."""
    return BLOB_LINE_HEAD + digest.encode() + b'","value":' + value + b"}\n"


def blob_value_text(line: bytes) -> bytes:
    """The bytes of a blob line's ``value`` (its last member), as they were hashed."""
    for marker in (b'"value": ', b'"value":'):  # a report's lines have spaces, the mock's not
        at = line.find(marker)
        if at >= 0:
            return line[at + len(marker):].rstrip(b"\r\n").removesuffix(b"}")
    raise BlobError("a blob record without a value")


def parse_blob_line(line: bytes) -> tuple[str, bytes]:
    """(digest, value bytes) of a blob line, its hash checked; ``BlobError`` if it is not a
    blob whose value hashes to its name."""
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError as error:
        raise BlobError(f"a blob line that is not JSON: {error}") from None
    if not isinstance(record, dict) or set(record) != {"type", "sha256", "value"} \
            or record["type"] != "blob" or not isinstance(record["sha256"], str) \
            or not _HEX.fullmatch(record["sha256"]):
        raise BlobError("expected a blob record {type: blob, sha256: 64 hex digits, value}, "
                        f"found keys {sorted(record) if isinstance(record, dict) else record!r}")
    value = blob_value_text(line)
    found = hashlib.sha256(value).hexdigest()
    if found != record["sha256"]:
        raise BlobError(f"blob {record['sha256'][:12]}…: its value hashes to {found[:12]}…, "
                        "not to its name (altered or cut)")
    return record["sha256"], value


@dataclass(eq=False)  # compared by identity: values are large
class EncodedPart:
    """A large value with its encoding (as a blob line writes it) and, once hashed, its
    SHA-256; the value is never changed (``mockapi.check.repeated_parts`` shares it)."""

    value: Any
    encoded: bytes
    digest: str | None = None


@dataclass
class SplitBody:
    """A body's journal fields: the skeleton, where its references are, the new blobs."""

    body: bytes  # the skeleton's encoding
    refs: list[_Path] = field(default_factory=list)
    blobs: dict[str, bytes] = field(default_factory=dict)  # digest -> value: not yet written


class BlobSplitter:
    """Splits request bodies into a skeleton and blobs, remembering which blobs a journal
    holds (``written``) and the hashes of recent large values."""

    def __init__(self, *, threshold: int = BLOB_THRESHOLD,
                 encode: Callable[[Any], bytes] = orjson.dumps) -> None:
        self.threshold = threshold
        self.encode = encode
        self.written: set[str] = set()
        self._recent: OrderedDict[tuple[int, int], list[tuple[bytes, str]]] \
            = OrderedDict()
        self._recent_bytes = 0
        # system's and tools' values on the previous request: one comparison finds them
        # unchanged (message blocks move from place to place: the bounded cache finds them)
        self._last: dict[str | int, tuple[bytes, str]] = {}

    def split(self, body: dict[str, Any],
              known: Mapping[PartPath, EncodedPart] | None = None) -> SplitBody:
        """``body``'s skeleton, references and new blobs; ``known``: parts of it already
        encoded (``mockapi.check.repeated_parts``), by path, used as they are."""
        skeleton: Any = None
        refs: list[_Path] = []
        blobs: dict[str, bytes] = {}
        if not known or self.encode is not orjson.dumps:  # encoded as orjson writes them
            known = {}
        for path, encoded, part in self._large_parts(body, known):
            if part is not None and part.digest is not None:
                digest = part.digest
            else:
                place = path[0] if len(path) == 1 else None  # tools, a whole system: one each
                last = self._last.get(place) if place is not None else None
                if last is not None and last[0] == encoded:  # as on the previous request
                    digest = last[1]
                else:
                    digest = self._digest(encoded)
                    if place is not None:
                        self._last[place] = (encoded, digest)
                if part is not None:
                    part.digest = digest
            if digest not in self.written:
                blobs[digest] = encoded
            if skeleton is None:
                skeleton = dict(body)
            _replace(skeleton, path, REF_PREFIX + digest)
            refs.append(path)
        if skeleton is None:
            return SplitBody(self.encode(body))
        return SplitBody(self.encode(skeleton), refs, blobs)

    def _large_parts(self, body: Mapping[str, Any],
                     known: Mapping[PartPath, EncodedPart]
                     ) -> Iterator[tuple[_Path, bytes, EncodedPart | None]]:
        """Each large part of ``body`` (``tools``, ``system`` or each of its blocks, a
        message's content or one of its blocks), by path, encoded, with its ``known`` part;
        in the body's order."""
        encode, threshold = self.encode, self.threshold
        for key, value in body.items():
            if key == "system" and isinstance(value, list):
                # block by block: a loop's first block can change on every request (Claude
                # Code's billing header) while the long ones after it stay the same
                for j, block in enumerate(value):
                    part = known.get(("system", j))
                    if part is not None and part.value is block:
                        yield ["system", j], part.encoded, part
                    elif isinstance(block, dict | list) or (
                            isinstance(block, str) and len(block) * 6 + 2 >= threshold):
                        encoded = encode(block)
                        if len(encoded) >= threshold:
                            yield ["system", j], encoded, None
            elif key in ("system", "tools"):
                part = known.get((key,))
                if part is not None and part.value is value:
                    yield [key], part.encoded, part
                    continue
                if isinstance(value, str) and len(value) * 6 + 2 < threshold:
                    continue  # at most 6 bytes a character (\u0001): too short to be large
                encoded = encode(value)
                if len(encoded) >= threshold:
                    yield [key], encoded, None
            elif key == "messages" and isinstance(value, list):
                for i, message in enumerate(value):
                    content = message.get("content") if isinstance(message, dict) else None
                    if isinstance(content, str):
                        if len(content) * 6 + 2 >= threshold:
                            encoded = encode(content)
                            if len(encoded) >= threshold:
                                yield ["messages", i, "content"], encoded, None
                    elif isinstance(content, list) and len(encode(content)) >= threshold:
                        # (a content list under the threshold has no large block: one call)
                        for j, block in enumerate(content):
                            encoded = encode(block)
                            if len(encoded) >= threshold:
                                yield ["messages", i, "content", j], encoded, None

    def _digest(self, encoded: bytes) -> str:
        # found by length and CRC-32 (a fifth of SHA-256's cost; values that differ by a
        # date or a path in a long prompt get different keys), confirmed byte for byte
        size = len(encoded)
        key = (size, zlib.crc32(encoded))
        candidates = self._recent.get(key)
        if candidates is not None:
            for value, digest in candidates:
                if value == encoded:
                    self._recent.move_to_end(key)
                    return digest
        digest = hashlib.sha256(encoded).hexdigest()
        if candidates is None:
            candidates = self._recent[key] = []
        if len(candidates) >= _CANDIDATES_PER_KEY:
            self._recent_bytes -= len(candidates.pop(0)[0])
        candidates.append((encoded, digest))
        self._recent_bytes += size
        while len(self._recent) > _RECENT_VALUES or self._recent_bytes > _RECENT_BYTES:
            _, dropped = self._recent.popitem(last=False)
            self._recent_bytes -= sum(len(value) for value, _ in dropped)
        return digest


class BlobPlaces:
    """Where one journal's file holds each blob's value, the latest ``_BLOB_INDEX`` of them;
    a blob forgotten is no longer ``written`` for ``splitter`` (it is written again when next
    referenced) and is found by a scan of the file."""

    def __init__(self, splitter: BlobSplitter):
        self._splitter = splitter
        self._spans: dict[str, tuple[int, int]] = {}  # digest -> (offset, size) of its value

    def written(self, digest: str, offset: int, line: bytes, size: int) -> None:
        """The blob ``line`` is at ``offset`` of the file; its value is ``size`` bytes."""
        self._splitter.written.add(digest)
        # the value ends the line, before its closing brace and newline
        self._spans[digest] = (offset + len(line.rstrip(b"\n")) - 1 - size, size)
        if len(self._spans) > _BLOB_INDEX:  # memory bounded whatever the run's length
            forgotten = next(iter(self._spans))
            del self._spans[forgotten]
            self._splitter.written.discard(forgotten)

    def value(self, fd: int, digest: str) -> bytes | None:
        """The value of a blob the file ``fd`` holds, as written; None if it holds none."""
        span = self._spans.get(digest)
        if span is None:
            return _find_blob(fd, digest)  # forgotten by the index, or never written
        return read_at(fd, span[1], span[0])


def _find_blob(fd: int, digest: str) -> bytes | None:
    """A blob's value found by reading the file (mapped, not loaded), its hash checked."""
    head = BLOB_LINE_HEAD + digest.encode() + b'"'
    if os.fstat(fd).st_size == 0:
        return None
    with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as data:
        at = data.find(head)
        while at >= 0:
            if at == 0 or data[at - 1] == 0x0A:  # where a line starts
                end = data.find(b"\n", at)
                try:
                    return parse_blob_line(data[at:end if end >= 0 else len(data)])[1]
                except BlobError:
                    pass  # altered: another copy may be whole
            at = data.find(head, at + 1)
    return None


def _replace(skeleton: dict[str, Any], path: _Path, ref: str) -> None:
    """Put ``ref`` at ``path``, copying each container on the way (the body is the caller's)."""
    parent: Any = skeleton
    for step in path[:-1]:
        child = parent[step]
        copy = dict(child) if isinstance(child, dict) else list(child)
        parent[step] = copy
        parent = copy
    parent[path[-1]] = ref


def resolve_body(body: Any, refs: Any, value_of: Callable[[str], Any]) -> Any:
    """``body`` with the value of each blob it references put back in its place
    (``value_of(digest)``, a fresh value each time); ``BlobError`` for a reference that is
    not one (a path not in the body, not ``sha256:<hex>``) or names no blob."""
    if not isinstance(refs, list):
        raise BlobError(f"body_refs: expected a list of paths, found {type(refs).__name__}")
    for path in refs:
        if not isinstance(path, list) or not path:
            raise BlobError(f"body_refs: expected a path (a list of keys and indexes), "
                            f"found {path!r}")
        parent = body
        try:
            for step in path[:-1]:
                parent = parent[step]
            ref = parent[path[-1]]
        except (KeyError, IndexError, TypeError):
            raise BlobError(f"body_refs: {path!r} is not a place in the body") from None
        if not isinstance(ref, str) or not ref.startswith(REF_PREFIX) \
                or not _HEX.fullmatch(ref[len(REF_PREFIX):]):
            raise BlobError(f"body_refs: at {path!r} expected 'sha256:<64 hex digits>', "
                            f"found {str(ref)[:80]!r}")
        parent[path[-1]] = value_of(ref[len(REF_PREFIX):])
    return body
