"""What the scripted model says: messages, API errors and raw bytes, as data.

The same pydantic models load scenario files (YAML/JSON) and are built from
Python with the helper functions at the bottom (``text``, ``tool_use``,
``api_error``…). Content blocks are written as in the Messages API
(``{type: tool_use, id, name, input}``); fields that only shape the stream
(``chunk_size``, ``input_json``) sit beside them.

Stream faults (``stall``, ``disconnect``, ``truncate``, ``stream_error``) apply
to streaming requests only. ``stall_before`` delays any reply before its first
byte. A non-streaming request gets the same message as complete JSON.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, model_validator

__all__ = [
    "ERROR_TYPES_BY_STATUS",
    "PROMPT_TOO_LONG",
    "STREAM_EVENT_TYPES",
    "ApiError",
    "ApiErrorSpec",
    "Block",
    "EventCount",
    "Message",
    "Raw",
    "RawChunk",
    "RawSpec",
    "RedactedThinkingBlock",
    "Reply",
    "StreamError",
    "StreamStall",
    "TextBlock",
    "ThinkingBlock",
    "ToolUseBlock",
    "Usage",
    "api_error",
    "message",
    "prompt_too_long",
    "raw",
    "text",
    "thinking",
    "tool_use",
]

# The wording Claude Code and other clients match to start reactive compaction.
PROMPT_TOO_LONG = "prompt is too long: {tokens} tokens > {maximum} maximum"

ERROR_TYPES_BY_STATUS = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TextBlock(_Model):
    type: Literal["text"] = "text"
    text: str
    chunk_size: int = Field(default=32, gt=0, description="characters per text_delta")


class ToolUseBlock(_Model):
    type: Literal["tool_use"] = "tool_use"
    name: str = Field(min_length=1)
    input: dict[str, Any] = Field(default_factory=dict)
    id: str | None = Field(default=None, description="default: toolu_<rule>_<reply>_<block>")
    input_json: str | None = Field(
        default=None, description="raw partial_json to stream instead of `input` (may be invalid)"
    )
    chunk_size: int = Field(default=24, gt=0, description="characters per input_json_delta")


class ThinkingBlock(_Model):
    type: Literal["thinking"] = "thinking"
    thinking: str
    signature: str | None = Field(default=None, description="default: derived from the text")
    chunk_size: int = Field(default=32, gt=0)

    def resolved_signature(self) -> str:
        if self.signature:
            return self.signature
        digest = hashlib.sha256(self.thinking.encode()).digest()
        return base64.b64encode(b"loopprobe-signature:" + digest).decode()


class RedactedThinkingBlock(_Model):
    type: Literal["redacted_thinking"] = "redacted_thinking"
    data: str = Field(min_length=1)


def _block_tag(value: Any) -> str | None:
    if not isinstance(value, dict):
        return getattr(value, "type", None)
    if "type" in value:
        return value["type"] if isinstance(value["type"], str) else None
    # `type` may be left out where the other keys say it: {text: hi}, {name: Read, input: {}}
    for key, tag in (("name", "tool_use"), ("thinking", "thinking"),
                     ("data", "redacted_thinking"), ("text", "text")):
        if key in value:
            return tag
    return None


Block = Annotated[
    Annotated[TextBlock, Tag("text")] | Annotated[ToolUseBlock, Tag("tool_use")]
    | Annotated[ThinkingBlock, Tag("thinking")]
    | Annotated[RedactedThinkingBlock, Tag("redacted_thinking")],
    Discriminator(_block_tag, custom_error_type="unknown_block",
                  custom_error_message="expected a content block with type text, tool_use, "
                                       "thinking or redacted_thinking"),
]


STREAM_EVENT_TYPES = ("message_start", "ping", "content_block_start", "content_block_delta",
                      "content_block_stop", "message_delta", "message_stop")


class StreamStall(_Model):
    """Pause the stream after N events, or just before the first event of a type."""

    after_events: int | None = Field(default=None, ge=0)
    before_event: Literal[STREAM_EVENT_TYPES] | None = Field(  # type: ignore[valid-type]
        default=None, description="e.g. message_delta")
    seconds: float = Field(ge=0)

    @model_validator(mode="after")
    def _one_position(self) -> StreamStall:
        if (self.after_events is None) == (self.before_event is None):
            raise ValueError("give exactly one of `after_events` or `before_event`")
        return self


class StreamError(_Model):
    after_events: int = Field(ge=0)
    type: str = "overloaded_error"
    message: str = "Overloaded"


class EventCount(_Model):
    after_events: int = Field(ge=0)


class Usage(_Model):
    model_config = ConfigDict(extra="allow", frozen=True)
    input_tokens: int = Field(default=100, ge=0)
    output_tokens: int | None = Field(default=None, ge=0, description="default: from content")
    cache_creation_input_tokens: int = Field(default=0, ge=0)
    cache_read_input_tokens: int = Field(default=0, ge=0)


class Message(_Model):
    """An assistant message, streamed or returned as JSON."""

    text: str | None = Field(default=None, description="shorthand for one text block")
    content: list[Block] = Field(default_factory=list)
    stop_reason: str | None = Field(
        default=None, description="default: tool_use if a tool_use block is present, else end_turn"
    )
    stop_sequence: str | None = None
    usage: Usage = Field(default_factory=Usage)
    model: str | None = Field(default=None, description="default: the request's model")
    id: str | None = Field(default=None, description="default: msg_loopprobe_<seq>")
    headers: dict[str, str] = Field(default_factory=dict)
    ping: bool = Field(default=True, description="send one ping after message_start, as the API does")
    stall_before: float = Field(default=0, ge=0, description="seconds before the first byte")
    stall: StreamStall | None = None
    stream_error: StreamError | None = None
    disconnect: EventCount | None = Field(default=None, description="abort the connection")
    truncate: EventCount | None = Field(default=None, description="end the stream cleanly")
    replay_to_fallback: bool = Field(
        default=True,
        description="a non-streaming re-send of this turn (the client's fallback after a broken "
                    "stream) gets this same message; false: it gets the rule's next reply")
    expire_thread: bool = Field(
        default=False,
        description="a message-thread reply that is not kept: a continue from it gets 404 "
                    "thread_not_found, as after the thread's idle time")

    @model_validator(mode="after")
    def _one_content_form(self) -> Message:
        if self.text is not None and self.content:
            raise ValueError("give either `text` or `content`, not both")
        return self

    def blocks(self) -> list[TextBlock | ToolUseBlock | ThinkingBlock | RedactedThinkingBlock]:
        return [TextBlock(text=self.text)] if self.text is not None else list(self.content)

    def resolved_stop_reason(self) -> str | None:
        if "stop_reason" in self.model_fields_set:
            return self.stop_reason
        has_tool = any(isinstance(b, ToolUseBlock) for b in self.blocks())
        return "tool_use" if has_tool else "end_turn"


class ApiErrorSpec(_Model):
    status: int = Field(ge=400, le=599)
    type: str | None = Field(default=None, description="default: the type the API uses for status")
    message: str = "Scripted error"
    headers: dict[str, str] = Field(default_factory=dict)

    def resolved_type(self) -> str:
        return self.type or ERROR_TYPES_BY_STATUS.get(self.status, "api_error")


class ApiError(_Model):
    """An HTTP error in the Anthropic error envelope."""

    error: ApiErrorSpec
    stall_before: float = Field(default=0, ge=0)


class RawChunk(_Model):
    data: str | None = None
    data_base64: str | None = None
    delay: float = Field(default=0, ge=0, description="seconds before this chunk")

    @model_validator(mode="after")
    def _one_form(self) -> RawChunk:
        if (self.data is None) == (self.data_base64 is None):
            raise ValueError("give exactly one of `data` or `data_base64`")
        return self

    def to_bytes(self) -> bytes:
        if self.data is not None:
            return self.data.encode()
        return base64.b64decode(self.data_base64 or "", validate=True)


class RawSpec(_Model):
    status: int = Field(default=200, ge=100, le=599)
    content_type: str = "text/event-stream"
    headers: dict[str, str] = Field(default_factory=dict)
    chunks: list[RawChunk] = Field(min_length=1)
    disconnect: bool = Field(default=False, description="abort instead of ending cleanly")


class Raw(_Model):
    """Arbitrary bytes, sent as given (for streams no real API would send)."""

    raw: RawSpec
    stall_before: float = Field(default=0, ge=0)


def _reply_tag(value: Any) -> str:
    if isinstance(value, dict):
        if "error" in value:
            return "error"
        if "raw" in value:
            return "raw"
        return "message"
    if isinstance(value, ApiError):
        return "error"
    return "raw" if isinstance(value, Raw) else "message"


Reply = Annotated[
    Annotated[Message, Tag("message")] | Annotated[ApiError, Tag("error")] | Annotated[Raw, Tag("raw")],
    Discriminator(_reply_tag),
]


# ---- Python builders -------------------------------------------------------


def message(*blocks: TextBlock | ToolUseBlock | ThinkingBlock | RedactedThinkingBlock,
            **fields: Any) -> Message:
    return Message(content=list(blocks), **fields)


def text(value: str, **fields: Any) -> Message:
    return Message(text=value, **fields)


def tool_use(name: str, input: dict[str, Any] | None = None, *, id: str | None = None,
             **fields: Any) -> Message:
    return Message(content=[ToolUseBlock(name=name, input=input or {}, id=id)], **fields)


def thinking(thought: str, answer: str | None = None, **fields: Any) -> Message:
    blocks: list[Any] = [ThinkingBlock(thinking=thought)]
    if answer is not None:
        blocks.append(TextBlock(text=answer))
    return Message(content=blocks, **fields)


def api_error(status: int, message: str = "Scripted error", *, type: str | None = None,
              headers: dict[str, str] | None = None) -> ApiError:
    return ApiError(error=ApiErrorSpec(status=status, type=type, message=message,
                                       headers=headers or {}))


def prompt_too_long(tokens: int = 216327, maximum: int = 200000) -> ApiError:
    return api_error(400, PROMPT_TOO_LONG.format(tokens=tokens, maximum=maximum))


def raw(*chunks: str | bytes, status: int = 200, content_type: str = "text/event-stream",
        headers: dict[str, str] | None = None, disconnect: bool = False) -> Raw:
    parts = [
        RawChunk(data_base64=base64.b64encode(c).decode()) if isinstance(c, bytes)
        else RawChunk(data=c)
        for c in chunks
    ]
    return Raw(raw=RawSpec(status=status, content_type=content_type, headers=headers or {},
                           chunks=parts, disconnect=disconnect))
