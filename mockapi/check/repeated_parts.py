"""A request body's large top-level parts, parsed once while they repeat.

An agent loop sends the same system prompt and tool list on every request of a session
(Claude Code 2.1.235: 30 of its 33 KB on average); parsing them is most of what a request
costs the mock. ``RepeatedParts`` remembers what the previous body held at ``tools`` and,
block by block, at ``system`` (a list whose first block can change on every request while
the long ones stay), each large value with its encoding as ``orjson`` writes it (compact,
as agent loops' JSON libraries write it) and, once the journal has hashed it, its SHA-256.

A body that holds such an encoding verbatim where it was (after its key, or among the
blocks of its list) is parsed without it: each such encoding is replaced by a sentinel of
its own (a JSON string of random hex digits, drawn when the process starts and never shown
to anyone), the rest is parsed, and the remembered values are put in the sentinels'
places. This gives the body ``orjson.loads`` would give, because

- each replaced encoding is a complete JSON value on its own (it was parsed before), so a
  parser reading the body reaches its end exactly where it reaches the end of the
  sentinel, in the same state;
- a sentinel is found at ``tools`` or among the top-level blocks of ``system`` only if it
  was parsed there as a value (the client cannot write a string it cannot know), and
  every sentinel must be found where it belongs, once; for a key given twice the parser
  keeps the last, as it does for the whole body.

Anything else (a different part, no sentinel where expected, text that does not parse) is
parsed whole, the ordinary way, which also gives the ordinary error. Parsed parts are
shared between requests: the mock never changes a body it parsed (``mockapi.journal.blobs``
copies what it replaces).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import orjson

from mockapi.journal.blobs import EncodedPart, PartPath

__all__ = ["PLACES", "RepeatedParts"]

PLACES = ("system", "tools")  # the top-level members that repeat from request to request
_LARGE = 1024  # bytes of encoding from which a value is worth remembering
_TRIES = 4  # occurrences of a key looked at before parsing the body whole
_KEPT = 4  # whole values remembered per place (a loop's side requests have their own)
_WINDOW = 4096  # bytes searched past a block that changed for the next remembered one
_ANCHOR = 64  # bytes of a remembered block searched for

_BLOCK = "system block"  # the kind of a span that is one block of a system list


class RepeatedParts:
    """The large parts of recent request bodies at ``system`` and ``tools``, for the next."""

    def __init__(self) -> None:
        self.whole: dict[str, list[EncodedPart]] = {place: [] for place in PLACES}
        self.blocks: list[EncodedPart] = []  # the large blocks of the last system list
        self._token = secrets.token_hex(16)
        self._markers = {place: b'"' + place.encode() + b'":' for place in PLACES}
        self.reused = 0  # bodies parsed with a remembered part (for tests and the bench)
        self._last: tuple[Any, dict[PartPath, EncodedPart]] = (None, {})

    def loads(self, raw: bytes) -> Any:
        """``orjson.loads(raw)``, with the remembered parts it holds reused; raises what
        ``orjson.loads`` raises."""
        found = self._with_known(raw)
        parts: dict[PartPath, EncodedPart] = {}
        if found is None:
            body = orjson.loads(raw)
        else:
            body, parts = found
            self.reused += 1
        if isinstance(body, dict):
            self._learn(raw, body, parts)
            self._last = (body, parts)
        return body

    def parts_of(self, body: dict[str, Any]) -> dict[PartPath, EncodedPart]:
        """The remembered parts of the body ``loads`` gave last, by path ({} for another)."""
        last_body, parts = self._last
        return parts if body is last_body else {}

    # ---- parsing with what is remembered ------------------------------------------------

    def _with_known(self, raw: bytes) -> tuple[Any, dict[PartPath, EncodedPart]] | None:
        spans: list[tuple[int, int, str, EncodedPart]] = []  # start, end, kind, part
        for place in PLACES:
            # keys usually follow one another: look after the last part found first
            after = max((end for _, end, _, _ in spans), default=0)
            spans += self._whole_span(raw, place, after) or (
                self._block_spans(raw, after) if place == "system" else [])
        if not spans:
            return None
        spans.sort(key=lambda span: span[0])
        pieces: list[bytes] = []
        cursor, tokens = 0, {}
        for n, (start, end, place, part) in enumerate(spans):
            if start < cursor:  # overlapping finds: not values of one body
                return None
            token = f"{self._token}{n:04x}"
            tokens[token] = (place, part)
            pieces += (raw[cursor:start], b'"' + token.encode() + b'"')
            cursor = end
        pieces.append(raw[cursor:])
        try:
            body = orjson.loads(b"".join(pieces))
        except orjson.JSONDecodeError:
            return None
        if not isinstance(body, dict):
            return None
        parts = _put_back(body, tokens)
        return None if parts is None else (body, parts)

    def _whole_span(self, raw: bytes, place: str,
                    after: int) -> list[tuple[int, int, str, EncodedPart]]:
        parts = self.whole[place]
        if not parts:
            return []
        for start in self._after_key(raw, place, after):
            for part in parts:
                if raw.startswith(part.encoded, start):
                    if part is not parts[0]:
                        parts.remove(part)
                        parts.insert(0, part)
                    return [(start, start + len(part.encoded), place, part)]  # whole
        return []

    def _block_spans(self, raw: bytes, after: int) -> list[tuple[int, int, str, EncodedPart]]:
        """The remembered blocks of ``system``, in their order, from its opening bracket on;
        a block not where the previous one ended is looked for a little further on."""
        if not self.blocks:
            return []
        spans = []
        for start in self._after_key(raw, "system", after):
            if raw[start:start + 1] != b"[":
                continue
            cursor = start + 1
            for part in self.blocks:
                at = cursor if raw.startswith(part.encoded, cursor) else \
                    raw.find(part.encoded[:_ANCHOR], cursor, cursor + _WINDOW)
                if at < 0 or not raw.startswith(part.encoded, at):
                    continue
                cursor = at + len(part.encoded)
                spans.append((at, cursor, _BLOCK, part))
                if raw[cursor:cursor + 1] == b",":
                    cursor += 1
            break
        return spans

    def _after_key(self, raw: bytes, place: str, after: int = 0) -> Iterator[int]:
        """Where a value of ``place`` could start: after up to ``_TRIES`` of its keys, those
        after ``after`` first (found as they are asked for: a scan costs)."""
        marker, tries = self._markers[place], _TRIES
        for start, end in ((after, len(raw)), (0, after + len(marker))) if after else \
                ((0, len(raw)),):
            at = raw.find(marker, start, end)
            while at >= 0 and tries:
                tries -= 1
                yield at + len(marker)
                at = raw.find(marker, at + len(marker), end)

    # ---- remembering -----------------------------------------------------------------

    def _learn(self, raw: bytes, body: dict[str, Any], parts: dict[PartPath, EncodedPart]) -> None:
        """Remember the large parts of ``body`` (``parts``: those reused, by path; the ones
        learnt here are added)."""
        system = body.get("system")
        if isinstance(system, list):
            blocks = []
            for j, block in enumerate(system):
                part = parts.get(("system", j))
                if part is None:
                    if not _may_be_large(block):
                        continue
                    encoded = _encoded(block)
                    if encoded is None or len(encoded) < _LARGE or encoded[:_ANCHOR] not in raw:
                        continue  # small, or not written as orjson writes it
                    part = parts[("system", j)] = EncodedPart(block, encoded)
                blocks.append(part)
            self.blocks = blocks
        for place in PLACES:
            value = body.get(place)
            if (place,) in parts or not isinstance(value, str | list | dict) or (
                    place == "system" and isinstance(value, list)):
                continue
            encoded = _encoded(value)
            if encoded is None or len(encoded) < _LARGE or not any(
                    raw.startswith(encoded, at) for at in self._after_key(raw, place)):
                continue  # small, or not written as orjson writes it
            known = self.whole[place]
            same = next((p for p in known if p.encoded == encoded), None)
            if same is not None:
                known.remove(same)
            known.insert(0, part := EncodedPart(value, encoded))
            del known[_KEPT:]
            parts[(place,)] = part


def _encoded(value: Any) -> bytes | None:
    """``value`` as orjson writes it; None for one it will not write (nested deeper than
    orjson writes: such a body is journaled whole, ``mockapi.journal.records.fits_in_a_record``)."""
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError:
        return None


def _may_be_large(block: Any) -> bool:
    """Whether ``block``'s encoding could reach ``_LARGE`` bytes (an upper bound, without
    encoding it: a flat object of short strings, such as a billing header block, cannot)."""
    if isinstance(block, str):
        return len(block) * 6 + 2 >= _LARGE
    if isinstance(block, dict):
        bound = 2
        for key, value in block.items():
            if not isinstance(key, str) or not isinstance(value, str):
                return True
            bound += (len(key) + len(value)) * 6 + 6  # quotes, colon, comma
        return bound >= _LARGE
    return isinstance(block, list)


def _put_back(body: dict[str, Any], tokens: dict[str, tuple[str, EncodedPart]]
              ) -> dict[PartPath, EncodedPart] | None:
    """Put each remembered value where its sentinel was parsed and say where, by path; None
    unless every sentinel was found where it belongs (the value of its key, or a block of
    ``system``), once."""
    found: dict[PartPath, EncodedPart] = {}
    used: set[str] = set()
    for place in PLACES:
        value = body.get(place)
        if isinstance(value, str):
            hit = tokens.get(value)
            if hit is not None and hit[0] == place:
                body[place] = hit[1].value
                found[(place,)] = hit[1]
                used.add(value)
        elif place == "system" and isinstance(value, list):
            for j, block in enumerate(value):
                if isinstance(block, str):
                    hit = tokens.get(block)
                    if hit is not None and hit[0] == _BLOCK:
                        value[j] = hit[1].value
                        found[("system", j)] = hit[1]
                        used.add(block)
    return found if len(found) == len(used) == len(tokens) else None
