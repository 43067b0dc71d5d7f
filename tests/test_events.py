"""mockapi.script.events.prepare: the exact event sequence and JSON body of every reply kind."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import pytest

from mockapi.script.events import (
    PreparedError,
    PreparedMessage,
    PreparedRaw,
    error_body,
    prepare,
)
from mockapi.script.replies import (
    Message,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
    api_error,
    message,
    prompt_too_long,
    raw,
    text,
    thinking,
    tool_use,
)
from mockapi.script.sse import decode_events

MSG_ID = "msg_test_1"
MODEL = "claude-sonnet-4-5"

# Which delta type each block type may carry (Claude Code rejects any other pairing).
DELTA_FOR_BLOCK = {
    "text": {"text_delta", "citations_delta"},
    "tool_use": {"input_json_delta"},
    "thinking": {"thinking_delta", "signature_delta"},
    "redacted_thinking": set(),
}


def prepared_message(reply: Message, id_prefix: str = "rule-1_0") -> PreparedMessage:
    prepared = prepare(reply, id_prefix)
    assert isinstance(prepared, PreparedMessage)
    return prepared


def stream_bytes(prepared: PreparedMessage) -> bytes:
    return prepared.message_start(MSG_ID, MODEL) + b"".join(prepared.tail)


def events_of(prepared: PreparedMessage) -> list[dict[str, Any]]:
    """Every event as decoded JSON; checks that each event name equals its data type."""
    payloads: list[dict[str, Any]] = []
    for name, data in decode_events(stream_bytes(prepared)):
        payload = json.loads(data)
        assert name == payload["type"]
        payloads.append(payload)
    return payloads


def shape(events: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """(type, index, block or delta type) of each event, for sequence assertions."""
    out: list[tuple[Any, ...]] = []
    for e in events:
        if e["type"] == "content_block_start":
            out.append((e["type"], e["index"], e["content_block"]["type"]))
        elif e["type"] == "content_block_delta":
            out.append((e["type"], e["index"], e["delta"]["type"]))
        elif e["type"] == "content_block_stop":
            out.append((e["type"], e["index"]))
        else:
            out.append((e["type"],))
    return out


def assemble(events: list[dict[str, Any]]) -> dict[str, Any]:
    """A strict accumulator, as clients do it: the complete message a stream describes."""
    assert events[0]["type"] == "message_start"
    snapshot: dict[str, Any] = json.loads(json.dumps(events[0]["message"]))
    json_bufs: dict[int, str] = {}
    open_blocks: set[int] = set()
    for e in events[1:]:
        kind = e["type"]
        if kind == "content_block_start":
            assert e["index"] == len(snapshot["content"]), "block indexes count up from 0"
            snapshot["content"].append(json.loads(json.dumps(e["content_block"])))
            open_blocks.add(e["index"])
        elif kind == "content_block_delta":
            assert e["index"] in open_blocks
            block = snapshot["content"][e["index"]]
            delta = e["delta"]
            assert delta["type"] in DELTA_FOR_BLOCK[block["type"]]
            if delta["type"] == "text_delta":
                block["text"] += delta["text"]
            elif delta["type"] == "input_json_delta":
                json_bufs[e["index"]] = json_bufs.get(e["index"], "") + delta["partial_json"]
            elif delta["type"] == "thinking_delta":
                block["thinking"] += delta["thinking"]
            elif delta["type"] == "signature_delta":
                block["signature"] = delta["signature"]
        elif kind == "content_block_stop":
            open_blocks.remove(e["index"])
            block = snapshot["content"][e["index"]]
            if block["type"] == "tool_use":
                block["input"] = json.loads(json_bufs.get(e["index"], "") or "{}")
        elif kind == "message_delta":
            snapshot["stop_reason"] = e["delta"]["stop_reason"]
            snapshot["stop_sequence"] = e["delta"]["stop_sequence"]
            snapshot["usage"] = {**snapshot["usage"], **e["usage"]}
        elif kind in ("message_stop", "ping"):
            pass
        else:
            raise AssertionError(f"unexpected event {kind}")
    assert not open_blocks
    return snapshot


def default_signature(thought: str) -> str:
    digest = hashlib.sha256(thought.encode()).digest()
    return base64.b64encode(b"loopprobe-signature:" + digest).decode()


# ---- whole-stream bytes --------------------------------------------------------


def test_text_reply_stream_is_byte_exact() -> None:
    prepared = prepared_message(text("hi"))
    usage = (b'{"input_tokens":100,"cache_creation_input_tokens":0,'
             b'"cache_read_input_tokens":0,"output_tokens":1}')
    assert stream_bytes(prepared) == (
        b'event: message_start\n'
        b'data: {"type":"message_start","message":{"id":"msg_test_1","type":"message",'
        b'"role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,'
        b'"stop_sequence":null,"usage":' + usage + b'}}\n\n'
        b'event: ping\ndata: {"type":"ping"}\n\n'
        b'event: content_block_start\n'
        b'data: {"type":"content_block_start","index":0,'
        b'"content_block":{"type":"text","text":""}}\n\n'
        b'event: content_block_delta\n'
        b'data: {"type":"content_block_delta","index":0,'
        b'"delta":{"type":"text_delta","text":"hi"}}\n\n'
        b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
        b'event: message_delta\n'
        b'data: {"type":"message_delta","delta":{"stop_reason":"end_turn",'
        b'"stop_sequence":null},"usage":' + usage + b'}\n\n'
        b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
    )
    assert prepared.json_body(MSG_ID, MODEL) == (
        b'{"id":"msg_test_1","type":"message","role":"assistant",'
        b'"model":"claude-sonnet-4-5","content":[{"type":"text","text":"hi"}],'
        b'"stop_reason":"end_turn","stop_sequence":null,"usage":' + usage + b'}'
    )


def test_message_start_carries_id_model_and_start_usage_per_call() -> None:
    prepared = prepared_message(text("x", usage={"input_tokens": 7}))
    ((_, data_a),) = decode_events(prepared.message_start("msg_a", "m-a"))
    ((_, data_b),) = decode_events(prepared.message_start("msg_b", "m-b"))
    start_a, start_b = json.loads(data_a), json.loads(data_b)
    assert start_a == {"type": "message_start", "message": {
        "id": "msg_a", "type": "message", "role": "assistant", "model": "m-a", "content": [],
        "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 7, "cache_creation_input_tokens": 0,
                  "cache_read_input_tokens": 0, "output_tokens": 1}}}
    assert start_b["message"]["id"] == "msg_b"
    assert start_b["message"]["model"] == "m-b"


# ---- text ------------------------------------------------------------------------


def test_text_is_split_into_text_deltas_of_chunk_size() -> None:
    events = events_of(prepared_message(message(TextBlock(text="abcdefgh", chunk_size=3))))
    assert shape(events) == [
        ("message_start",), ("ping",),
        ("content_block_start", 0, "text"),
        ("content_block_delta", 0, "text_delta"),
        ("content_block_delta", 0, "text_delta"),
        ("content_block_delta", 0, "text_delta"),
        ("content_block_stop", 0),
        ("message_delta",), ("message_stop",),
    ]
    assert [e["delta"]["text"] for e in events if e["type"] == "content_block_delta"] == [
        "abc", "def", "gh"]
    assert events[2]["content_block"] == {"type": "text", "text": ""}


def test_empty_text_still_sends_one_delta() -> None:
    events = events_of(prepared_message(text("")))
    assert shape(events)[2:5] == [("content_block_start", 0, "text"),
                                  ("content_block_delta", 0, "text_delta"),
                                  ("content_block_stop", 0)]
    assert events[3]["delta"] == {"type": "text_delta", "text": ""}


def test_no_ping_when_disabled() -> None:
    events = events_of(prepared_message(text("hi", ping=False)))
    assert [e["type"] for e in events] == [
        "message_start", "content_block_start", "content_block_delta", "content_block_stop",
        "message_delta", "message_stop"]


# ---- tool_use ----------------------------------------------------------------------


def test_several_tool_use_blocks_in_one_message() -> None:
    read_input = {"file_path": "/tmp/workspace/probe-fixture.txt", "limit": 20}
    glob_input = {"pattern": "**/*.py", "path": "/tmp/ü"}
    reply = message(
        TextBlock(text="Let me look."),
        ToolUseBlock(name="Read", input=read_input, chunk_size=7),
        ToolUseBlock(name="Glob", input=glob_input, id="toolu_glob", chunk_size=5),
    )
    prepared = prepared_message(reply, "ask-to-read_0")
    events = events_of(prepared)

    shapes = shape(events)
    assert shapes[:5] == [("message_start",), ("ping",), ("content_block_start", 0, "text"),
                          ("content_block_delta", 0, "text_delta"), ("content_block_stop", 0)]
    assert shapes[-2:] == [("message_delta",), ("message_stop",)]
    for index, block_input, size, tool_id, name in (
        (1, read_input, 7, "toolu_ask_to_read_0_1", "Read"),
        (2, glob_input, 5, "toolu_glob", "Glob"),
    ):
        own = [e for e in events if e.get("index") == index]
        assert own[0] == {"type": "content_block_start", "index": index, "content_block": {
            "type": "tool_use", "id": tool_id, "name": name, "input": {}}}
        assert own[-1] == {"type": "content_block_stop", "index": index}
        deltas = own[1:-1]
        assert {d["delta"]["type"] for d in deltas} == {"input_json_delta"}
        chunks = [d["delta"]["partial_json"] for d in deltas]
        assert chunks[0] == ""
        assert all(len(c) == size for c in chunks[1:-1])
        assert 0 < len(chunks[-1]) <= size
        assert json.loads("".join(chunks)) == block_input
    # blocks are streamed one after the other, never interleaved
    assert [s[1] for s in shapes if len(s) > 1] == sorted(s[1] for s in shapes if len(s) > 1)

    assert prepared.stop_reason == "tool_use"
    assert events[-2]["delta"] == {"stop_reason": "tool_use", "stop_sequence": None}
    assert list(prepared.content) == [
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "toolu_ask_to_read_0_1", "name": "Read", "input": read_input},
        {"type": "tool_use", "id": "toolu_glob", "name": "Glob", "input": glob_input},
    ]


def test_tool_use_with_empty_input_streams_empty_chunk_then_braces() -> None:
    events = events_of(prepared_message(tool_use("Bash")))
    assert [e["delta"]["partial_json"] for e in events if e["type"] == "content_block_delta"] == [
        "", "{}"]


def test_default_tool_ids_are_deterministic_and_sanitised() -> None:
    reply = message(ToolUseBlock(name="A"), ToolUseBlock(name="B"))
    first = prepared_message(reply, "my-rule.x_2")
    second = prepared_message(reply, "my-rule.x_2")
    assert tuple(first.tail) == tuple(second.tail)
    assert [b["id"] for b in first.content] == ["toolu_my_rule_x_2_0", "toolu_my_rule_x_2_1"]
    other = prepared_message(reply, "other_0")
    assert [b["id"] for b in other.content] == ["toolu_other_0_0", "toolu_other_0_1"]


@pytest.mark.parametrize(
    ("input_json", "chunk_size", "expected_chunks"),
    [
        pytest.param('{"file_path": "/a', 4, ["", '{"fi', 'le_p', 'ath"', ': "/', "a"],
                     id="invalid-truncated"),
        pytest.param("not json at all", 100, ["", "not json at all"], id="not-json"),
        pytest.param('{"a":1}', 3, ["", '{"a', '":1', "}"], id="valid"),
        pytest.param("", 10, [""], id="empty"),
    ],
)
def test_input_json_is_streamed_as_given(input_json: str, chunk_size: int,
                                         expected_chunks: list[str]) -> None:
    block = ToolUseBlock(name="Read", input_json=input_json, chunk_size=chunk_size)
    events = events_of(prepared_message(message(block)))
    chunks = [e["delta"]["partial_json"] for e in events if e["type"] == "content_block_delta"]
    assert chunks == expected_chunks
    assert "".join(chunks) == input_json


def test_invalid_input_json_leaves_the_json_body_with_the_declared_input() -> None:
    # the non-streaming fallback after a broken stream gets the usable `input`
    block = ToolUseBlock(name="Read", input={"file_path": "/a"}, input_json='{"file_path": "/a',
                         id="toolu_x")
    body = json.loads(prepared_message(message(block)).json_body(MSG_ID, MODEL))
    assert body["content"] == [
        {"type": "tool_use", "id": "toolu_x", "name": "Read", "input": {"file_path": "/a"}}]


def test_valid_input_json_gives_the_same_input_in_the_json_body() -> None:
    block = ToolUseBlock(name="Read", input_json='{"file_path": "/from/input_json"}',
                         id="toolu_x")
    prepared = prepared_message(message(block))
    streamed = assemble(events_of(prepared))["content"]
    assert streamed == [{"type": "tool_use", "id": "toolu_x", "name": "Read",
                         "input": {"file_path": "/from/input_json"}}]
    assert json.loads(prepared.json_body(MSG_ID, MODEL))["content"] == streamed


# ---- thinking -------------------------------------------------------------------------


def test_thinking_then_text() -> None:
    thought = "t" * 70
    prepared = prepared_message(thinking(thought, "answer"))
    events = events_of(prepared)
    assert shape(events) == [
        ("message_start",), ("ping",),
        ("content_block_start", 0, "thinking"),
        ("content_block_delta", 0, "thinking_delta"),
        ("content_block_delta", 0, "thinking_delta"),
        ("content_block_delta", 0, "thinking_delta"),
        ("content_block_delta", 0, "signature_delta"),
        ("content_block_stop", 0),
        ("content_block_start", 1, "text"),
        ("content_block_delta", 1, "text_delta"),
        ("content_block_stop", 1),
        ("message_delta",), ("message_stop",),
    ]
    assert events[2]["content_block"] == {"type": "thinking", "thinking": "", "signature": ""}
    assert [len(e["delta"].get("thinking", "")) for e in events[3:6]] == [32, 32, 6]
    signature = events[6]["delta"]["signature"]
    assert signature == default_signature(thought)
    assert signature != ""
    assert prepared.stop_reason == "end_turn"
    assert list(prepared.content) == [
        {"type": "thinking", "thinking": thought, "signature": signature},
        {"type": "text", "text": "answer"},
    ]


@pytest.mark.parametrize(("given", "expected"), [
    ("EqQBCkYIARgCKkBsig", "EqQBCkYIARgCKkBsig"),
    ("", default_signature("hmm")),
    (None, default_signature("hmm")),
])
def test_signature_delta_is_one_and_non_empty(given: str | None, expected: str) -> None:
    events = events_of(prepared_message(message(ThinkingBlock(thinking="hmm", signature=given))))
    signatures = [e["delta"]["signature"] for e in events
                  if e["type"] == "content_block_delta" and e["delta"]["type"] == "signature_delta"]
    assert signatures == [expected]
    stop_at = next(i for i, e in enumerate(events) if e["type"] == "content_block_stop")
    assert events[stop_at - 1]["delta"]["type"] == "signature_delta"


def test_redacted_thinking_has_no_deltas() -> None:
    prepared = prepared_message(message(RedactedThinkingBlock(data="EmwKAhgB"),
                                        TextBlock(text="ok")))
    events = events_of(prepared)
    assert shape(events) == [
        ("message_start",), ("ping",),
        ("content_block_start", 0, "redacted_thinking"),
        ("content_block_stop", 0),
        ("content_block_start", 1, "text"),
        ("content_block_delta", 1, "text_delta"),
        ("content_block_stop", 1),
        ("message_delta",), ("message_stop",),
    ]
    assert events[2]["content_block"] == {"type": "redacted_thinking", "data": "EmwKAhgB"}
    assert prepared.content[0] == {"type": "redacted_thinking", "data": "EmwKAhgB"}


# ---- stop_reason --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        pytest.param(text("x"), "end_turn", id="text"),
        pytest.param(tool_use("Read"), "tool_use", id="tool"),
        pytest.param(message(TextBlock(text="a"), ToolUseBlock(name="R")), "tool_use",
                     id="text+tool"),
        pytest.param(thinking("t"), "end_turn", id="thinking"),
        pytest.param(message(RedactedThinkingBlock(data="d")), "end_turn", id="redacted"),
        pytest.param(Message(), "end_turn", id="empty-message"),
        pytest.param(text("x", stop_reason="max_tokens"), "max_tokens", id="explicit-max"),
        pytest.param(tool_use("Read", stop_reason="end_turn"), "end_turn",
                     id="explicit-end-turn-with-tool"),
        pytest.param(text("x", stop_reason="tool_use"), "tool_use", id="explicit-tool-use"),
        pytest.param(text("x", stop_reason="refusal"), "refusal", id="refusal"),
        pytest.param(text("x", stop_reason=None), None, id="explicit-none"),
        pytest.param(tool_use("Read", stop_reason=None), None, id="explicit-none-with-tool"),
        pytest.param(Message.model_validate({"text": "x", "stop_reason": None}), None,
                     id="explicit-none-from-data"),
        pytest.param(Message.model_validate({"content": [{"name": "Read"}]}), "tool_use",
                     id="tool-from-data"),
    ],
)
def test_stop_reason(reply: Message, expected: str | None) -> None:
    prepared = prepared_message(reply)
    events = events_of(prepared)
    assert prepared.stop_reason == expected
    assert events[-2]["type"] == "message_delta"
    assert events[-2]["delta"]["stop_reason"] == expected
    assert json.loads(prepared.json_body(MSG_ID, MODEL))["stop_reason"] == expected


def test_stop_sequence_reaches_delta_and_body() -> None:
    prepared = prepared_message(text("x", stop_reason="stop_sequence", stop_sequence="###"))
    events = events_of(prepared)
    assert events[-2]["delta"] == {"stop_reason": "stop_sequence", "stop_sequence": "###"}
    body = json.loads(prepared.json_body(MSG_ID, MODEL))
    assert (body["stop_reason"], body["stop_sequence"]) == ("stop_sequence", "###")


# ---- usage ----------------------------------------------------------------------------------


def test_usage_in_message_start_and_cumulative_message_delta() -> None:
    reply = text("x", usage={"input_tokens": 5, "output_tokens": 40,
                             "cache_read_input_tokens": 7, "service_tier": "standard"})
    prepared = prepared_message(reply)
    events = events_of(prepared)
    assert events[0]["message"]["usage"] == {
        "input_tokens": 5, "output_tokens": 1, "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 7, "service_tier": "standard"}
    final = {"input_tokens": 5, "output_tokens": 40, "cache_creation_input_tokens": 0,
             "cache_read_input_tokens": 7, "service_tier": "standard"}
    assert events[-2]["usage"] == final
    assert json.loads(prepared.json_body(MSG_ID, MODEL))["usage"] == final
    assert prepared.usage_start["output_tokens"] == 1
    assert prepared.usage_final == final


@pytest.mark.parametrize(
    ("reply", "output_tokens"),
    [
        pytest.param(text("a" * 400), 100, id="text-400-chars"),
        pytest.param(text("abc"), 1, id="at-least-one"),
        pytest.param(thinking("t" * 40, "a" * 40), 20, id="thinking+text"),
        pytest.param(tool_use("R", {"k": "v" * 33}), 10, id="tool-input"),
        pytest.param(message(ToolUseBlock(name="R", input_json="x" * 80)), 20, id="input-json"),
        pytest.param(text("a" * 400, usage={"output_tokens": 0}), 0, id="explicit-zero"),
    ],
)
def test_default_output_tokens(reply: Message, output_tokens: int) -> None:
    prepared = prepared_message(reply)
    events = events_of(prepared)
    assert events[-2]["usage"]["output_tokens"] == output_tokens
    assert events[0]["message"]["usage"]["output_tokens"] == min(1, output_tokens)


# ---- the non-streaming body equals the assembled stream --------------------------------------


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param(text("Hello, world! " * 10), id="text"),
        pytest.param(tool_use("Read", {"file_path": "/x", "nested": {"a": [1, 2, None]}}),
                     id="tool"),
        pytest.param(message(ThinkingBlock(thinking="because " * 20, chunk_size=7),
                             TextBlock(text="so", chunk_size=1),
                             ToolUseBlock(name="Bash", input={"command": "ls -la"}, chunk_size=2),
                             ToolUseBlock(name="Read", input={"file_path": "é"}, id="toolu_e")),
                     id="mixed"),
        pytest.param(message(RedactedThinkingBlock(data="abc"), TextBlock(text="")),
                     id="redacted+empty-text"),
        pytest.param(text("x", stop_reason="max_tokens", usage={"output_tokens": 9}),
                     id="overrides"),
    ],
)
def test_json_body_equals_the_assembled_stream(reply: Message) -> None:
    prepared = prepared_message(reply)
    assembled = assemble(events_of(prepared))
    body = json.loads(prepared.json_body(MSG_ID, MODEL))
    assert body == assembled
    assert body["content"] == list(prepared.content)


def test_json_body_uses_given_id_and_model() -> None:
    body = json.loads(prepared_message(text("x")).json_body("msg_other", "claude-opus-4-1"))
    assert (body["id"], body["type"], body["role"], body["model"]) == (
        "msg_other", "message", "assistant", "claude-opus-4-1")


def test_description_is_the_reply_without_defaults() -> None:
    assert prepared_message(text("hi")).description == b'{"text":"hi"}'


# ---- errors and raw replies -------------------------------------------------------------------


def test_prepare_api_error() -> None:
    prepared = prepare(api_error(529, "Overloaded", headers={"retry-after": "3"}), "r_0")
    assert isinstance(prepared, PreparedError)
    assert prepared.reply.error.resolved_type() == "overloaded_error"
    assert json.loads(prepared.description) == {
        "error": {"status": 529, "message": "Overloaded", "headers": {"retry-after": "3"}}}


@pytest.mark.parametrize(("status", "error_type"), [
    (400, "invalid_request_error"), (401, "authentication_error"), (403, "permission_error"),
    (404, "not_found_error"), (413, "request_too_large"), (429, "rate_limit_error"),
    (500, "api_error"), (529, "overloaded_error"), (503, "api_error"),
])
def test_api_error_default_types(status: int, error_type: str) -> None:
    prepared = prepare(api_error(status), "r_0")
    assert isinstance(prepared, PreparedError)
    assert prepared.reply.error.resolved_type() == error_type


def test_prompt_too_long_wording() -> None:
    prepared = prepare(prompt_too_long(), "r_0")
    assert isinstance(prepared, PreparedError)
    assert prepared.reply.error.status == 400
    assert prepared.reply.error.resolved_type() == "invalid_request_error"
    assert prepared.reply.error.message == "prompt is too long: 216327 tokens > 200000 maximum"


def test_prepare_raw_keeps_bytes_and_delays() -> None:
    reply = raw("event: ping\n", b"\x00\xff", status=200)
    prepared = prepare(reply, "r_0")
    assert isinstance(prepared, PreparedRaw)
    assert prepared.chunks == ((0, b"event: ping\n"), (0, b"\x00\xff"))


def test_error_body_envelope_is_byte_exact() -> None:
    assert error_body("not_found_error", "Not found", "req_1") == (
        b'{"type":"error","error":{"type":"not_found_error","message":"Not found"},'
        b'"request_id":"req_1"}')
