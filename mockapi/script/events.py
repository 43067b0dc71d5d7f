"""Replies to wire form: the event sequence of a streamed message, its JSON body, error bodies.

What does not depend on the request is prepared once, when a scenario is installed
(``prepare``): each content block's start and stop, the closing events, the plan of the
body. The deltas are not: a text of N characters in chunks of one is N events, so a
stream's ``Events`` encode them while the reply is sent, and memory follows the
scenario's size, not its number of events. Per request ``message_start`` (id, model)
and the JSON envelope are encoded too.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from mockapi.script.plan import Plan, StreamPlan, plan_raw, plan_stream
from mockapi.script.replies import (
    ApiError,
    Message,
    Raw,
    RedactedThinkingBlock,
    Reply,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
)
from mockapi.script.sse import encode_event

__all__ = [
    "REPLY_REFERENCE_BYTES",
    "Events",
    "PreparedError",
    "PreparedMessage",
    "PreparedRaw",
    "PreparedReply",
    "error_body",
    "prepare",
]


def error_body(error_type: str, message: str, request_id: str,
               details: dict[str, Any] | None = None) -> bytes:
    error: dict[str, Any] = {"type": error_type, "message": message}
    if details is not None:
        error["details"] = details
    return orjson.dumps({"type": "error", "error": error, "request_id": request_id})


@dataclass(frozen=True, slots=True)
class _Deltas:
    """The ``content_block_delta`` events of one string, ``size`` characters each."""

    index: int
    kind: str  # the delta's type: text_delta, thinking_delta, input_json_delta
    field: str  # where the piece goes: text, thinking, partial_json
    value: str
    size: int
    keep_empty: bool  # an empty string is one empty delta, else none

    def __len__(self) -> int:
        count = -(-len(self.value) // self.size)
        return 1 if not count and self.keep_empty else count

    def __iter__(self) -> Iterator[bytes]:
        value, size = self.value, self.size
        starts = range(0, len(value), size) if value else range(1 if self.keep_empty else 0)
        for i in starts:
            yield encode_event({"type": "content_block_delta", "index": self.index,
                                "delta": {"type": self.kind, self.field: value[i:i + size]}})


_DELTA_NAME = "content_block_delta"


class Events:
    """A stream's events after ``message_start``: fixed events encoded once, the deltas
    of each string encoded as they are read. Sized and iterable as many times as wanted."""

    __slots__ = ("_count", "_parts")

    def __init__(self, parts: list[bytes | _Deltas]):
        self._parts = tuple(parts)
        self._count = sum(1 if isinstance(p, bytes) else len(p) for p in self._parts)

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[bytes]:
        for part in self._parts:
            if isinstance(part, bytes):
                yield part
            else:
                yield from part

    def position_of(self, event: str) -> int | None:
        """How many events precede the first one named ``event``; None if none is."""
        name = b"event: " + event.encode() + b"\n"
        position = 0
        for part in self._parts:
            if isinstance(part, bytes):
                if part.startswith(name):
                    return position
                position += 1
            else:
                if event == _DELTA_NAME and len(part):
                    return position
                position += len(part)
        return None


_SURROGATE = re.compile("[\ud800-\udfff]")


def _deltas(index: int, kind: str, field: str, value: str, size: int,
            keep_empty: bool = True) -> _Deltas:
    # what cannot be encoded fails now, not mid-stream; orjson.dumps(value) would say the
    # same, but reserves several times the string's size to do it
    if not value.isascii() and _SURROGATE.search(value):
        raise ValueError("str is not valid UTF-8: surrogates not allowed")
    return _Deltas(index, kind, field, value, size, keep_empty)


def _block_events(index: int, block: Any, tool_id: str
                  ) -> tuple[list[bytes | _Deltas], dict[str, Any]]:
    """The start/delta/stop events of one content block, and its complete JSON form."""
    events: list[bytes | _Deltas] = []

    def emit(payload: dict[str, Any]) -> None:
        events.append(encode_event(payload))

    def delta(d: dict[str, Any]) -> None:
        emit({"type": "content_block_delta", "index": index, "delta": d})

    if isinstance(block, TextBlock):
        emit({"type": "content_block_start", "index": index,
              "content_block": {"type": "text", "text": ""}})
        events.append(_deltas(index, "text_delta", "text", block.text, block.chunk_size))
        complete: dict[str, Any] = {"type": "text", "text": block.text}
    elif isinstance(block, ToolUseBlock):
        emit({"type": "content_block_start", "index": index,
              "content_block": {"type": "tool_use", "id": tool_id, "name": block.name,
                                "input": {}}})
        partial = block.input_json if block.input_json is not None else orjson.dumps(
            block.input).decode()
        # The API opens every tool input with an empty chunk; clients must cope.
        delta({"type": "input_json_delta", "partial_json": ""})
        events.append(_deltas(index, "input_json_delta", "partial_json", partial,
                              block.chunk_size, keep_empty=False))
        complete = {"type": "tool_use", "id": tool_id, "name": block.name,
                    "input": _streamed_input(block)}
    elif isinstance(block, ThinkingBlock):
        signature = block.resolved_signature()
        emit({"type": "content_block_start", "index": index,
              "content_block": {"type": "thinking", "thinking": "", "signature": ""}})
        events.append(_deltas(index, "thinking_delta", "thinking", block.thinking,
                              block.chunk_size))
        delta({"type": "signature_delta", "signature": signature})
        complete = {"type": "thinking", "thinking": block.thinking, "signature": signature}
    elif isinstance(block, RedactedThinkingBlock):
        complete = {"type": "redacted_thinking", "data": block.data}
        emit({"type": "content_block_start", "index": index, "content_block": complete})
    else:  # pragma: no cover - the Block union is closed
        raise TypeError(f"unknown block {block!r}")
    emit({"type": "content_block_stop", "index": index})
    return events, complete


def _streamed_input(block: ToolUseBlock) -> dict[str, Any]:
    """The input a client assembles from the stream; ``input`` when ``input_json`` is unusable."""
    if block.input_json is None:
        return block.input
    try:
        parsed = orjson.loads(block.input_json)
    except orjson.JSONDecodeError:
        return block.input
    return parsed if isinstance(parsed, dict) else block.input


def _output_tokens(blocks: list[Any]) -> int:
    size = 0
    for b in blocks:
        if isinstance(b, TextBlock):
            size += len(b.text)
        elif isinstance(b, ThinkingBlock):
            size += len(b.thinking)
        elif isinstance(b, ToolUseBlock):
            size += len(b.input_json or orjson.dumps(b.input))
    return max(1, size // 4)


_ID_UNSAFE = re.compile(r"[^A-Za-z0-9_]")


@dataclass(frozen=True, slots=True)
class PreparedMessage:
    reply: Message
    description: bytes  # the scripted reply as JSON, for the journal
    tail: Events  # every stream event after message_start
    plan: StreamPlan
    content: tuple[dict[str, Any], ...]
    stop_reason: str | None
    usage_start: dict[str, Any]
    usage_final: dict[str, Any]

    def message_start(self, message_id: str, model: str) -> bytes:
        return encode_event({
            "type": "message_start",
            "message": {"id": message_id, "type": "message", "role": "assistant",
                        "model": model, "content": [], "stop_reason": None,
                        "stop_sequence": None, "usage": self.usage_start},
        })

    def json_body(self, message_id: str, model: str) -> bytes:
        return orjson.dumps({
            "id": message_id, "type": "message", "role": "assistant", "model": model,
            "content": self.content, "stop_reason": self.stop_reason,
            "stop_sequence": self.reply.stop_sequence, "usage": self.usage_final,
        })


@dataclass(frozen=True, slots=True)
class PreparedError:
    reply: ApiError
    description: bytes


@dataclass(frozen=True, slots=True)
class PreparedRaw:
    reply: Raw
    description: bytes
    chunks: tuple[tuple[float, bytes], ...]
    plan: Plan


PreparedReply = PreparedMessage | PreparedError | PreparedRaw


REPLY_REFERENCE_BYTES = 64 * 1024


def _describe(reply: Reply) -> bytes:
    """The reply for the journal; past REPLY_REFERENCE_BYTES a reference (its size and
    digest; the request record names its rule and reply_index), not a copy per request."""
    described = orjson.dumps(reply.model_dump(mode="json", exclude_defaults=True))
    if len(described) <= REPLY_REFERENCE_BYTES:
        return described
    return orjson.dumps({"by_reference": {
        "bytes": len(described), "sha256": hashlib.sha256(described).hexdigest()}})


def prepare(reply: Reply, id_prefix: str) -> PreparedReply:
    """Encode everything about ``reply`` that no request can change."""
    if isinstance(reply, ApiError):
        return PreparedError(reply, _describe(reply))
    if isinstance(reply, Raw):
        chunks = tuple((c.delay, c.to_bytes()) for c in reply.raw.chunks)
        return PreparedRaw(reply, _describe(reply), chunks, plan_raw(reply, chunks))

    blocks = reply.blocks()
    safe_prefix = _ID_UNSAFE.sub("_", id_prefix)
    tail: list[bytes | _Deltas] = [encode_event({"type": "ping"})] if reply.ping else []
    content: list[dict[str, Any]] = []
    for index, block in enumerate(blocks):
        tool_id = getattr(block, "id", None) or f"toolu_{safe_prefix}_{index}"
        parts, complete = _block_events(index, block, tool_id)
        tail.extend(parts)
        content.append(complete)

    usage = reply.usage.model_dump(exclude_none=True)
    output_tokens = reply.usage.output_tokens
    if output_tokens is None:
        output_tokens = _output_tokens(blocks)
    usage_final = {**usage, "output_tokens": output_tokens}
    usage_start = {**usage, "output_tokens": min(1, output_tokens)}
    stop_reason = reply.resolved_stop_reason()
    tail.append(encode_event({
        "type": "message_delta",
        "delta": {"stop_reason": stop_reason, "stop_sequence": reply.stop_sequence},
        "usage": usage_final,
    }))
    tail.append(encode_event({"type": "message_stop"}))
    events = Events(tail)
    return PreparedMessage(
        reply=reply, description=_describe(reply), tail=events,
        plan=plan_stream(reply, events), content=tuple(content),
        stop_reason=stop_reason, usage_start=usage_start, usage_final=usage_final,
    )
