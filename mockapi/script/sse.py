"""Server-sent events on the wire: pure functions from events to bytes and back.

The Messages API frames every event as an ``event:`` line, one ``data:`` line of
compact JSON whose ``type`` equals the event name, and a blank line, all with
``\\n`` separators. These functions fix that framing so the mock's output is
byte-stable; sse-starlette only carries the pre-encoded bytes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson

__all__ = ["SEPARATOR", "decode_events", "encode_event", "encode_raw_event"]

SEPARATOR = "\n"


def encode_raw_event(event: str, data: bytes) -> bytes:
    """Frame ``data`` (already-encoded, single-line JSON) as the SSE event ``event``."""
    if b"\n" in data or b"\r" in data:
        raise ValueError("SSE data must be a single line; encode it as compact JSON")
    if "\n" in event or "\r" in event:
        raise ValueError(f"SSE event name must be a single line, got {event!r}")
    return b"event: " + event.encode() + b"\ndata: " + data + b"\n\n"


def encode_event(payload: dict[str, Any]) -> bytes:
    """Encode one Messages API stream event; its ``type`` is also the event name."""
    event = payload.get("type")
    if not isinstance(event, str) or not event:
        raise ValueError(f"a stream event needs a string 'type', got {event!r}")
    return encode_raw_event(event, orjson.dumps(payload))


def decode_events(stream: bytes) -> Iterator[tuple[str | None, str]]:
    """Split an SSE byte stream into ``(event, data)`` pairs (for tests and readers).

    Follows the WHATWG rules the clients use: any of CRLF, CR, LF ends a line,
    several ``data:`` lines join with ``\\n``, comment lines are skipped.
    """
    event: str | None = None
    data: list[str] = []
    for line in stream.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if line == "":
            if data or event is not None:
                yield event, "\n".join(data)
            event, data = None, []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "event":
            event = value
        elif field == "data":
            data.append(value)
    if data or event is not None:
        yield event, "\n".join(data)
