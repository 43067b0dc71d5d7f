"""Byte-exact SSE framing of every Messages API stream event, and the decoder."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mockapi.script.sse import SEPARATOR, decode_events, encode_event, encode_raw_event

# (payload, exact bytes on the wire). Each payload is shaped as the API sends it.
EVENT_TABLE: list[tuple[str, dict[str, Any], bytes]] = [
    (
        "message_start",
        {"type": "message_start", "message": {
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 1}}},
        b'event: message_start\n'
        b'data: {"type":"message_start","message":{"id":"msg_1","type":"message",'
        b'"role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,'
        b'"stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":1}}}\n\n',
    ),
    (
        "content_block_start/text",
        {"type": "content_block_start", "index": 0,
         "content_block": {"type": "text", "text": ""}},
        b'event: content_block_start\n'
        b'data: {"type":"content_block_start","index":0,'
        b'"content_block":{"type":"text","text":""}}\n\n',
    ),
    (
        "content_block_start/tool_use",
        {"type": "content_block_start", "index": 1,
         "content_block": {"type": "tool_use", "id": "toolu_01", "name": "Read", "input": {}}},
        b'event: content_block_start\n'
        b'data: {"type":"content_block_start","index":1,'
        b'"content_block":{"type":"tool_use","id":"toolu_01","name":"Read","input":{}}}\n\n',
    ),
    (
        "content_block_start/thinking",
        {"type": "content_block_start", "index": 0,
         "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
        b'event: content_block_start\n'
        b'data: {"type":"content_block_start","index":0,'
        b'"content_block":{"type":"thinking","thinking":"","signature":""}}\n\n',
    ),
    (
        "content_block_start/redacted_thinking",
        {"type": "content_block_start", "index": 2,
         "content_block": {"type": "redacted_thinking", "data": "EmwKAhgBEgy3"}},
        b'event: content_block_start\n'
        b'data: {"type":"content_block_start","index":2,'
        b'"content_block":{"type":"redacted_thinking","data":"EmwKAhgBEgy3"}}\n\n',
    ),
    (
        "content_block_delta/text_delta",
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "text_delta", "text": "Hello \"world\"\n\u00e9"}},
        b'event: content_block_delta\n'
        b'data: {"type":"content_block_delta","index":0,'
        b'"delta":{"type":"text_delta","text":"Hello \\"world\\"\\n\xc3\xa9"}}\n\n',
    ),
    (
        "content_block_delta/input_json_delta",
        {"type": "content_block_delta", "index": 1,
         "delta": {"type": "input_json_delta", "partial_json": "{\"file_path\": \"/a"}},
        b'event: content_block_delta\n'
        b'data: {"type":"content_block_delta","index":1,'
        b'"delta":{"type":"input_json_delta","partial_json":"{\\"file_path\\": \\"/a"}}\n\n',
    ),
    (
        "content_block_delta/thinking_delta",
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "thinking_delta", "thinking": "Let me think"}},
        b'event: content_block_delta\n'
        b'data: {"type":"content_block_delta","index":0,'
        b'"delta":{"type":"thinking_delta","thinking":"Let me think"}}\n\n',
    ),
    (
        "content_block_delta/signature_delta",
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "signature_delta", "signature": "EqQBCkYIARgC"}},
        b'event: content_block_delta\n'
        b'data: {"type":"content_block_delta","index":0,'
        b'"delta":{"type":"signature_delta","signature":"EqQBCkYIARgC"}}\n\n',
    ),
    (
        "content_block_stop",
        {"type": "content_block_stop", "index": 3},
        b'event: content_block_stop\ndata: {"type":"content_block_stop","index":3}\n\n',
    ),
    (
        "message_delta",
        {"type": "message_delta",
         "delta": {"stop_reason": "tool_use", "stop_sequence": None},
         "usage": {"output_tokens": 42}},
        b'event: message_delta\n'
        b'data: {"type":"message_delta","delta":{"stop_reason":"tool_use",'
        b'"stop_sequence":null},"usage":{"output_tokens":42}}\n\n',
    ),
    (
        "message_stop",
        {"type": "message_stop"},
        b'event: message_stop\ndata: {"type":"message_stop"}\n\n',
    ),
    (
        "ping",
        {"type": "ping"},
        b'event: ping\ndata: {"type":"ping"}\n\n',
    ),
    (
        "error",
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        b'event: error\n'
        b'data: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n',
    ),
]


@pytest.mark.parametrize(("payload", "expected"), [(p, b) for _, p, b in EVENT_TABLE],
                         ids=[name for name, _, _ in EVENT_TABLE])
def test_encode_event_is_byte_exact(payload: dict[str, Any], expected: bytes) -> None:
    assert encode_event(payload) == expected


@pytest.mark.parametrize(("payload", "expected"), [(p, b) for _, p, b in EVENT_TABLE],
                         ids=[name for name, _, _ in EVENT_TABLE])
def test_encoded_event_decodes_back(payload: dict[str, Any], expected: bytes) -> None:
    decoded = list(decode_events(expected))
    assert len(decoded) == 1
    event, data = decoded[0]
    assert event == payload["type"]
    assert json.loads(data) == payload


def test_separator_is_lf() -> None:
    assert SEPARATOR == "\n"


def test_encode_raw_event_frames_given_bytes_verbatim() -> None:
    assert encode_raw_event("custom", b'{"x": 1}') == b'event: custom\ndata: {"x": 1}\n\n'
    # the data need not be JSON: raw framing carries what it is given
    assert encode_raw_event("message_start", b"not json") == (
        b"event: message_start\ndata: not json\n\n")


@pytest.mark.parametrize("data", [b'{"a":\n1}', b'{"a":\r1}', b"line1\r\nline2", b"\n"])
def test_encode_raw_event_rejects_multi_line_data(data: bytes) -> None:
    with pytest.raises(ValueError, match="SSE data must be a single line"):
        encode_raw_event("ping", data)


@pytest.mark.parametrize("event", ["ping\n", "a\rb", "x\r\ny"])
def test_encode_raw_event_rejects_multi_line_event_names(event: str) -> None:
    with pytest.raises(ValueError, match="SSE event name must be a single line"):
        encode_raw_event(event, b"{}")


@pytest.mark.parametrize(
    ("payload", "shown"),
    [
        ({}, "None"),
        ({"index": 0}, "None"),
        ({"type": ""}, "''"),
        ({"type": None}, "None"),
        ({"type": 3}, "3"),
        ({"type": ["ping"]}, "['ping']"),
    ],
)
def test_encode_event_needs_a_string_type(payload: dict[str, Any], shown: str) -> None:
    with pytest.raises(ValueError) as raised:
        encode_event(payload)
    assert str(raised.value) == f"a stream event needs a string 'type', got {shown}"


def test_encode_event_with_a_newline_inside_a_string_stays_single_line() -> None:
    encoded = encode_event({"type": "content_block_delta", "index": 0,
                            "delta": {"type": "text_delta", "text": "a\nb\r\nc"}})
    assert encoded.count(b"\n") == 3  # event line, data line, blank line
    assert b"\r" not in encoded


def test_a_whole_stream_round_trips() -> None:
    payloads = [p for _, p, _ in EVENT_TABLE]
    stream = b"".join(encode_event(p) for p in payloads)
    decoded = list(decode_events(stream))
    assert [e for e, _ in decoded] == [p["type"] for p in payloads]
    assert [json.loads(d) for _, d in decoded] == payloads


@pytest.mark.parametrize(
    ("stream", "expected"),
    [
        pytest.param(b'event: ping\r\ndata: {"type":"ping"}\r\n\r\n',
                     [("ping", '{"type":"ping"}')], id="crlf"),
        pytest.param(b'event: ping\rdata: {"type":"ping"}\r\r',
                     [("ping", '{"type":"ping"}')], id="cr"),
        pytest.param(b': ping - 2025-01-01 00:00:00\r\n\r\nevent: message_stop\r\n'
                     b'data: {"type":"message_stop"}\r\n\r\n',
                     [("message_stop", '{"type":"message_stop"}')], id="sse-starlette-comment"),
        pytest.param(b':comment\nevent: a\n:inner comment\ndata: 1\n\n',
                     [("a", "1")], id="comment-lines-skipped"),
        pytest.param(b"data: first\ndata: second\n\n", [(None, "first\nsecond")],
                     id="multi-data-lines-join"),
        pytest.param(b"event:tight\ndata:x\n\n", [("tight", "x")], id="no-space-after-colon"),
        pytest.param(b"event: a\ndata:  two spaces\n\n", [("a", " two spaces")],
                     id="only-one-leading-space-stripped"),
        pytest.param(b"event: a\nid: 7\nretry: 10\ndata: 1\n\n", [("a", "1")],
                     id="other-fields-ignored"),
        pytest.param(b"event: a\ndata: 1", [("a", "1")], id="unterminated-tail"),
        pytest.param(b"\n\n\nevent: a\ndata: 1\n\n\n\n", [("a", "1")], id="extra-blank-lines"),
        pytest.param(b"event: only-name\n\n", [("only-name", "")], id="event-without-data"),
        pytest.param(b"", [], id="empty"),
        pytest.param('event: t\ndata: "\u00e9\u4e2d"\n\n'.encode(), [("t", '"\u00e9\u4e2d"')],
                     id="utf8"),
    ],
)
def test_decode_events(stream: bytes, expected: list[tuple[str | None, str]]) -> None:
    assert list(decode_events(stream)) == expected


def test_decode_events_mixed_separators() -> None:
    stream = (encode_event({"type": "ping"}).replace(b"\n", b"\r\n")
              + encode_event({"type": "message_stop"}))
    assert list(decode_events(stream)) == [
        ("ping", '{"type":"ping"}'), ("message_stop", '{"type":"message_stop"}')]
