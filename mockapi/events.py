"""Replies to wire form: the event sequence of a streamed message, its JSON body, error bodies.

Everything that does not depend on the request is encoded once, when a scenario
is installed (``prepare``), the plan of the body included; per request only
``message_start`` (id, model) and the JSON envelope are encoded.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

import orjson

from mockapi.plan import Plan, StreamPlan, plan_raw, plan_stream
from mockapi.replies import (
    ApiError,
    Message,
    Raw,
    RedactedThinkingBlock,
    Reply,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
)
from mockapi.sse import encode_event

__all__ = [
    "REPLY_REFERENCE_BYTES",
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


def _chunks(value: str, size: int) -> list[str]:
    return [value[i:i + size] for i in range(0, len(value), size)] or [""]


def _block_events(index: int, block: Any, tool_id: str) -> tuple[list[bytes], dict[str, Any]]:
    """The start/delta/stop events of one content block, and its complete JSON form."""
    events: list[bytes] = []

    def emit(payload: dict[str, Any]) -> None:
        events.append(encode_event(payload))

    def delta(d: dict[str, Any]) -> None:
        emit({"type": "content_block_delta", "index": index, "delta": d})

    if isinstance(block, TextBlock):
        emit({"type": "content_block_start", "index": index,
              "content_block": {"type": "text", "text": ""}})
        for piece in _chunks(block.text, block.chunk_size):
            delta({"type": "text_delta", "text": piece})
        complete: dict[str, Any] = {"type": "text", "text": block.text}
    elif isinstance(block, ToolUseBlock):
        emit({"type": "content_block_start", "index": index,
              "content_block": {"type": "tool_use", "id": tool_id, "name": block.name,
                                "input": {}}})
        partial = block.input_json if block.input_json is not None else orjson.dumps(
            block.input).decode()
        # The API opens every tool input with an empty chunk; clients must cope.
        delta({"type": "input_json_delta", "partial_json": ""})
        for piece in _chunks(partial, block.chunk_size):
            if piece:
                delta({"type": "input_json_delta", "partial_json": piece})
        complete = {"type": "tool_use", "id": tool_id, "name": block.name,
                    "input": _streamed_input(block)}
    elif isinstance(block, ThinkingBlock):
        signature = block.resolved_signature()
        emit({"type": "content_block_start", "index": index,
              "content_block": {"type": "thinking", "thinking": "", "signature": ""}})
        for piece in _chunks(block.thinking, block.chunk_size):
            delta({"type": "thinking_delta", "thinking": piece})
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
    tail: tuple[bytes, ...]  # every stream event after message_start
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
    tail: list[bytes] = [encode_event({"type": "ping"})] if reply.ping else []
    content: list[dict[str, Any]] = []
    for index, block in enumerate(blocks):
        tool_id = getattr(block, "id", None) or f"toolu_{safe_prefix}_{index}"
        events, complete = _block_events(index, block, tool_id)
        tail.extend(events)
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
    return PreparedMessage(
        reply=reply, description=_describe(reply), tail=tuple(tail),
        plan=plan_stream(reply, tail), content=tuple(content),
        stop_reason=stop_reason, usage_start=usage_start, usage_final=usage_final,
    )
