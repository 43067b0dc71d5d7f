"""Every scripted fault as the exact plan of steps the app executes, byte for byte."""

from __future__ import annotations

from typing import Any

import pytest

from mockapi.journal.records import (
    END_COMPLETE,
    END_DISCONNECTED_BY_SCRIPT,
    END_STREAM_ERROR_BY_SCRIPT,
    END_TRUNCATED_BY_SCRIPT,
)
from mockapi.script.events import PreparedMessage, PreparedRaw, prepare
from mockapi.script.plan import Abort, End, Plan, Send, Sleep, StreamPlan, one_write, plan_raw
from mockapi.script.replies import Message, Raw, RawChunk, RawSpec, TextBlock, raw

# The greeting's events on the wire: "hello world" in chunks of 5 ("hello", " worl", "d").
START = (b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1",'
         b'"type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],'
         b'"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":100,'
         b'"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}}\n\n')
PING = b'event: ping\ndata: {"type":"ping"}\n\n'
BLOCK_START = (b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
               b'"content_block":{"type":"text","text":""}}\n\n')


def _delta(text: str) -> bytes:
    return (b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
            b'"delta":{"type":"text_delta","text":"' + text.encode() + b'"}}\n\n')


HELLO, WORL, D = _delta("hello"), _delta(" worl"), _delta("d")
BLOCK_STOP = b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
MESSAGE_DELTA = (b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":'
                 b'"end_turn","stop_sequence":null},"usage":{"input_tokens":100,'
                 b'"cache_creation_input_tokens":0,"cache_read_input_tokens":0,'
                 b'"output_tokens":2}}\n\n')
MESSAGE_STOP = b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
OVERLOADED = (b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error",'
              b'"message":"Overloaded"}}\n\n')
BOOM = b'event: error\ndata: {"type":"error","error":{"type":"api_error","message":"boom"}}\n\n'

TAIL = (PING, BLOCK_START, HELLO, WORL, D, BLOCK_STOP, MESSAGE_DELTA, MESSAGE_STOP)
EVENTS = (START, *TAIL)
NO_PING = (START, *TAIL[1:])
GREETING: dict[str, Any] = {"content": [TextBlock(text="hello world", chunk_size=5)]}


def sends(events: tuple[bytes, ...]) -> Plan:
    return tuple(Send(event) for event in events)


COMPLETE: Plan = (*sends(EVENTS), End(END_COMPLETE))


def prepared(**fields: Any) -> PreparedMessage:
    result = prepare(Message(**{**GREETING, **fields}), "r")
    assert isinstance(result, PreparedMessage)
    return result


def stream_plan(**fields: Any) -> StreamPlan:
    return prepared(**fields).plan


def test_the_greeting_is_the_events_of_the_tables() -> None:
    reply = prepared()
    assert tuple(reply.tail) == TAIL and len(reply.tail) == len(TAIL)
    assert reply.message_start("msg_1", "claude-sonnet-4-5") == START


STALL = {"seconds": 1.5}

# (fields of the reply, the exact plan of a response whose message_start is START)
STREAM_TABLE: list[tuple[str, dict[str, Any], Plan]] = [
    ("fault-free", {}, COMPLETE),
    ("no-ping", {"ping": False}, (*sends(NO_PING), End(END_COMPLETE))),
    ("stall-after-0", {"stall": {"after_events": 0, **STALL}},
     (Sleep(1.5), *COMPLETE)),
    ("stall-after-3", {"stall": {"after_events": 3, **STALL}},
     (*sends(EVENTS[:3]), Sleep(1.5), *sends(EVENTS[3:]), End(END_COMPLETE))),
    ("stall-after-the-last-event", {"stall": {"after_events": 9, **STALL}},
     (*sends(EVENTS), Sleep(1.5), End(END_COMPLETE))),
    ("stall-after-more-events-than-sent", {"stall": {"after_events": 10, **STALL}}, COMPLETE),
    ("stall-of-zero-seconds-still-yields", {"stall": {"after_events": 1, "seconds": 0}},
     (Send(START), Sleep(0), *sends(TAIL), End(END_COMPLETE))),
    ("stall-before-message_start", {"stall": {"before_event": "message_start", **STALL}},
     (Sleep(1.5), *COMPLETE)),
    ("stall-before-the-first-delta", {"stall": {"before_event": "content_block_delta", **STALL}},
     (*sends(EVENTS[:3]), Sleep(1.5), *sends(EVENTS[3:]), End(END_COMPLETE))),
    ("stall-before-message_stop", {"stall": {"before_event": "message_stop", **STALL}},
     (*sends(EVENTS[:8]), Sleep(1.5), Send(MESSAGE_STOP), End(END_COMPLETE))),
    ("stall-before-an-event-never-sent", {"ping": False,
                                          "stall": {"before_event": "ping", **STALL}},
     (*sends(NO_PING), End(END_COMPLETE))),
    ("disconnect-after-0", {"disconnect": {"after_events": 0}},
     (Abort(END_DISCONNECTED_BY_SCRIPT),)),
    ("disconnect-after-4", {"disconnect": {"after_events": 4}},
     (*sends(EVENTS[:4]), Abort(END_DISCONNECTED_BY_SCRIPT))),
    ("disconnect-after-the-last-event", {"disconnect": {"after_events": 9}},
     (*sends(EVENTS), Abort(END_DISCONNECTED_BY_SCRIPT))),
    ("disconnect-after-more-events-than-sent", {"disconnect": {"after_events": 10}}, COMPLETE),
    ("truncate-after-0", {"truncate": {"after_events": 0}}, (End(END_TRUNCATED_BY_SCRIPT),)),
    ("truncate-after-3", {"truncate": {"after_events": 3}},
     (*sends(EVENTS[:3]), End(END_TRUNCATED_BY_SCRIPT))),
    ("truncate-after-the-last-event", {"truncate": {"after_events": 9}},
     (*sends(EVENTS), End(END_TRUNCATED_BY_SCRIPT))),
    ("stream-error-after-0", {"stream_error": {"after_events": 0}},
     (Send(OVERLOADED), End(END_STREAM_ERROR_BY_SCRIPT))),
    ("stream-error-after-5", {"stream_error": {"after_events": 5, "type": "api_error",
                                               "message": "boom"}},
     (*sends(EVENTS[:5]), Send(BOOM), End(END_STREAM_ERROR_BY_SCRIPT))),
    ("stream-error-after-the-last-event", {"stream_error": {"after_events": 9}},
     (*sends(EVENTS), Send(OVERLOADED), End(END_STREAM_ERROR_BY_SCRIPT))),
    ("stall-comes-before-a-fault-at-its-position",
     {"stall": {"after_events": 3, **STALL}, "disconnect": {"after_events": 3}},
     (*sends(EVENTS[:3]), Sleep(1.5), Abort(END_DISCONNECTED_BY_SCRIPT))),
    ("disconnect-before-truncate-before-stream-error",
     {"disconnect": {"after_events": 3}, "truncate": {"after_events": 3},
      "stream_error": {"after_events": 3}},
     (*sends(EVENTS[:3]), Abort(END_DISCONNECTED_BY_SCRIPT))),
    ("truncate-before-stream-error", {"truncate": {"after_events": 3},
                                      "stream_error": {"after_events": 3}},
     (*sends(EVENTS[:3]), End(END_TRUNCATED_BY_SCRIPT))),
    ("the-earliest-fault-wins", {"stream_error": {"after_events": 2},
                                 "truncate": {"after_events": 6}},
     (*sends(EVENTS[:2]), Send(OVERLOADED), End(END_STREAM_ERROR_BY_SCRIPT))),
    ("a-stall-after-the-end-never-comes", {"truncate": {"after_events": 2},
                                           "stall": {"after_events": 5, **STALL}},
     (*sends(EVENTS[:2]), End(END_TRUNCATED_BY_SCRIPT))),
]


@pytest.mark.parametrize(("fields", "expected"), [(f, p) for _, f, p in STREAM_TABLE],
                         ids=[name for name, _, _ in STREAM_TABLE])
def test_stream_plan_is_byte_exact(fields: dict[str, Any], expected: Plan) -> None:
    assert tuple(stream_plan(**fields).steps(START)) == expected


@pytest.mark.parametrize(("fields", "expected"), [(f, p) for _, f, p in STREAM_TABLE],
                         ids=[name for name, _, _ in STREAM_TABLE])
def test_one_write_exactly_when_the_plan_only_sends_then_completes(
        fields: dict[str, Any], expected: Plan) -> None:
    plan = stream_plan(**fields)
    whole = one_write(expected)
    assert plan.whole is (whole is not None)
    if whole is not None:
        assert (START + b"".join(plan.tail), len(plan.tail) + 1) == whole


@pytest.mark.parametrize("expected", [p for _, _, p in STREAM_TABLE],
                         ids=[name for name, _, _ in STREAM_TABLE])
def test_a_plan_ends_once_and_last(expected: Plan) -> None:
    endings = [i for i, step in enumerate(expected) if isinstance(step, End | Abort)]
    assert endings == [len(expected) - 1]


def test_message_start_is_the_only_per_request_step() -> None:
    plan = stream_plan(stall={"after_events": 3, **STALL})
    assert tuple(plan.steps(b"other start")) == (
        Send(b"other start"), *tuple(plan.steps(START))[1:])
    assert tuple(stream_plan(truncate={"after_events": 0}).steps(START)) == (
        End(END_TRUNCATED_BY_SCRIPT),)


@pytest.mark.parametrize(
    ("plan", "expected"),
    [
        pytest.param((Send(b"a"), Send(b"bc"), End(END_COMPLETE)), (b"abc", 2), id="sends"),
        pytest.param((End(END_COMPLETE),), (b"", 0), id="only-the-end"),
        pytest.param((Send(b"a"), End(END_TRUNCATED_BY_SCRIPT)), None, id="other-end"),
        pytest.param((Send(b"a"), Abort(END_DISCONNECTED_BY_SCRIPT)), None, id="abort"),
        pytest.param((Send(b"a"), Sleep(0), End(END_COMPLETE)), None, id="a-sleep"),
        pytest.param((Send(b"a"),), None, id="no-end"),
        pytest.param((), None, id="empty"),
    ],
)
def test_one_write(plan: Plan, expected: tuple[bytes, int] | None) -> None:
    assert one_write(plan) == expected


# ---- raw replies ----------------------------------------------------------------------

RAW_TABLE: list[tuple[str, Raw, Plan]] = [
    ("text-chunks", raw("a", "b"), (Send(b"a"), Send(b"b"), End(END_COMPLETE))),
    ("bytes-chunk", raw(b"\xff\x00", "x"), (Send(b"\xff\x00"), Send(b"x"), End(END_COMPLETE))),
    ("single-empty-chunk", raw(""), (Send(b""), End(END_COMPLETE))),
    ("delays", Raw(raw=RawSpec(chunks=[RawChunk(data="1", delay=0.25),
                                       RawChunk(data_base64="Mg==", delay=0),
                                       RawChunk(data="3", delay=2)])),
     (Sleep(0.25), Send(b"1"), Send(b"2"), Sleep(2), Send(b"3"), End(END_COMPLETE))),
    ("disconnect", raw("x", "y", disconnect=True),
     (Send(b"x"), Send(b"y"), Abort(END_DISCONNECTED_BY_SCRIPT))),
    ("status-and-headers-are-not-the-body",
     raw("z", status=502, content_type="text/html", headers={"x": "y"}),
     (Send(b"z"), End(END_COMPLETE))),
]


@pytest.mark.parametrize(("reply", "expected"), [(r, p) for _, r, p in RAW_TABLE],
                         ids=[name for name, _, _ in RAW_TABLE])
def test_raw_plan_is_byte_exact(reply: Raw, expected: Plan) -> None:
    prepared_raw = prepare(reply, "r")
    assert isinstance(prepared_raw, PreparedRaw)
    assert prepared_raw.plan == plan_raw(reply, prepared_raw.chunks) == expected


# ---- every field of a reply either shapes the plan or says why it does not --------------
# A field missing from these tables fails the first test, so a new fault cannot be
# silently left out of the plan (and so out of the app, which executes only the plan).

STREAM_FAULTS: dict[str, Any] = {
    "stall": {"after_events": 1, "seconds": 1},
    "disconnect": {"after_events": 1},
    "truncate": {"after_events": 1},
    "stream_error": {"after_events": 1},
}
CONTENT: dict[str, dict[str, Any]] = {  # field -> the change of the greeting that sets it
    "text": {"content": [], "text": "bye"},
    "content": {"content": [TextBlock(text="bye")]},
    "stop_reason": {"stop_reason": "max_tokens"},
    "stop_sequence": {"stop_sequence": "STOP"},
    "usage": {"usage": {"input_tokens": 7}},
    "ping": {"ping": False},
}
NOT_IN_THE_PLAN: dict[str, tuple[Any, str]] = {
    "model": ("claude-other", "in message_start, built per request"),
    "id": ("msg_other", "in message_start, built per request"),
    "headers": ({"x-other": "1"}, "HTTP headers, sent before the body"),
    "stall_before": (5, "waited before the response starts, watching for the client leaving"),
    "expire_thread": (True, "whether a message thread keeps the reply, decided per request"),
    "replay_to_fallback": (False, "which reply a fallback re-send gets, not how this one goes"),
}


def test_every_message_field_is_classified() -> None:
    classified = {*STREAM_FAULTS, *CONTENT, *NOT_IN_THE_PLAN}
    assert set(Message.model_fields) == classified, (
        "a new Message field must be added to STREAM_FAULTS, CONTENT or NOT_IN_THE_PLAN")


@pytest.mark.parametrize("name", sorted(STREAM_FAULTS))
def test_every_stream_fault_changes_the_plan_and_needs_more_than_one_write(name: str) -> None:
    faulty = stream_plan(**{name: STREAM_FAULTS[name]})
    assert name in Message(**{**GREETING, name: STREAM_FAULTS[name]}).model_fields_set
    assert tuple(faulty.steps(START)) != COMPLETE
    assert not faulty.whole


@pytest.mark.parametrize("name", sorted(CONTENT))
def test_every_content_field_changes_the_plan(name: str) -> None:
    assert name in Message(**{**GREETING, **CONTENT[name]}).model_fields_set
    assert tuple(stream_plan(**CONTENT[name]).steps(START)) != COMPLETE


@pytest.mark.parametrize("name", sorted(NOT_IN_THE_PLAN))
def test_fields_outside_the_plan_leave_it_alone(name: str) -> None:
    assert tuple(stream_plan(**{name: NOT_IN_THE_PLAN[name][0]}).steps(START)) == COMPLETE


RAW_IN_THE_PLAN = {"chunks": [{"data": "other"}], "disconnect": True}
RAW_NOT_IN_THE_PLAN = {"status": 502, "content_type": "text/html", "headers": {"x": "y"}}


def test_every_raw_field_is_classified() -> None:
    assert set(RawSpec.model_fields) == {*RAW_IN_THE_PLAN, *RAW_NOT_IN_THE_PLAN}
    assert set(Raw.model_fields) == {"raw", "stall_before"}  # stall_before: as for a message


@pytest.mark.parametrize(("name", "value", "changes"),
                         [(n, v, True) for n, v in RAW_IN_THE_PLAN.items()]
                         + [(n, v, False) for n, v in RAW_NOT_IN_THE_PLAN.items()])
def test_raw_fields_change_the_plan_or_not(name: str, value: Any, changes: bool) -> None:
    base = {"chunks": [{"data": "a"}]}
    before = prepare(Raw(raw=RawSpec(**base)), "r")
    after = prepare(Raw(raw=RawSpec(**{**base, name: value})), "r")
    assert isinstance(before, PreparedRaw) and isinstance(after, PreparedRaw)
    assert (before.plan != after.plan) is changes
