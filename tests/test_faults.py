"""Every scripted fault, observed by a real HTTP client against a real uvicorn server.

In-process ASGI transports buffer whole bodies, so they cannot show a stall or
a dropped connection; these tests use httpx on a loopback socket and read the
raw bytes. No assertion is about elapsed time: a stall is proven by a client
whose read timeout is shorter than the stall, and by counting the events that
arrived before it gave up.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import orjson
import pytest

from mockapi import (
    Message,
    MockServer,
    Rule,
    Scenario,
    TextBlock,
    api_error,
    message,
    prompt_too_long,
    raw,
    text,
    tool_use,
)
from mockapi.script.replies import (
    ApiError,
    ApiErrorSpec,
    EventCount,
    Raw,
    RawChunk,
    RawSpec,
    Reply,
    StreamError,
    StreamStall,
)
from mockapi.script.sse import decode_events

StartMock = Callable[..., MockServer]

HEADERS = {"x-api-key": "sk-test-key", "anthropic-version": "2023-06-01"}
MODEL = "claude-sonnet-4-5"
STALL = 1.5  # seconds; every scripted stall the client must not sit out
SHORT_READ = 0.4  # a client read timeout well under STALL
PATIENT = httpx.Timeout(10.0)
IMPATIENT = httpx.Timeout(10.0, read=SHORT_READ)
JOURNAL_WAIT = 10.0  # upper bound for a record the server writes after the client left

GREETING = "hello world"  # with chunk_size 5: "hello", " worl", "d"
FULL = (
    "message_start", "ping", "content_block_start",
    "content_block_delta", "content_block_delta", "content_block_delta",
    "content_block_stop", "message_delta", "message_stop",
)
NO_PING = tuple(name for name in FULL if name != "ping")


def greeting(**fields: Any) -> Message:
    """A one-block text reply whose stream is exactly the events in FULL."""
    return message(TextBlock(text=GREETING, chunk_size=5), **fields)


def request_body(*, stream: bool, content: str = "say hello") -> dict[str, Any]:
    return {"model": MODEL, "max_tokens": 64, "stream": stream,
            "messages": [{"role": "user", "content": content}]}


def serve(mock_api: StartMock, *replies: Reply, always: bool = False) -> MockServer:
    """A mock whose one rule answers every request with ``replies`` in order."""
    repeat = "always" if always else "once"
    rule = (Rule(reply=replies[0], repeat=repeat) if len(replies) == 1
            else Rule(replies=list(replies), repeat=repeat))
    # sequential reply ids: the wire is compared byte for byte
    return mock_api(Scenario(classifier="plain", message_ids="sequential", rules=[rule]))


@dataclass
class Received:
    """What the client saw: status and headers (if they arrived), raw body bytes, the error."""

    status: int | None
    headers: httpx.Headers | None
    body: bytes
    error: httpx.HTTPError | None

    def events(self) -> list[tuple[str | None, dict[str, Any]]]:
        return [(name, orjson.loads(data)) for name, data in decode_events(self.body)]

    def names(self) -> tuple[str | None, ...]:
        return tuple(name for name, _ in self.events())


def post(url: str, body: dict[str, Any], timeout: httpx.Timeout = PATIENT) -> Received:
    """Send one request and read the reply byte by byte, keeping whatever arrived."""
    status: int | None = None
    headers: httpx.Headers | None = None
    chunks: list[bytes] = []
    try:
        with httpx.Client(timeout=timeout) as client, client.stream(
                "POST", f"{url}/v1/messages", headers=HEADERS, json=body) as response:
            status, headers = response.status_code, response.headers
            for chunk in response.iter_raw():
                chunks.append(chunk)
    except httpx.HTTPError as error:
        return Received(status, headers, b"".join(chunks), error)
    return Received(status, headers, b"".join(chunks), None)


def only_request(mock: MockServer) -> dict[str, Any]:
    requests = mock.read().requests()
    assert len(requests) == 1, requests
    return requests[0]


def wait_for_end(mock: MockServer, seq: int) -> dict[str, Any]:
    """The response_end record of ``seq``; the server writes it after the client has gone."""
    deadline = time.monotonic() + JOURNAL_WAIT
    while True:
        end = mock.read().ends().get(seq)
        if end is not None:
            return end
        if time.monotonic() > deadline:
            raise AssertionError(f"no response_end for seq {seq} within {JOURNAL_WAIT}s: "
                                 f"{mock.read().records}")
        time.sleep(0.02)


def assert_well_formed(received: Received) -> None:
    """Every event's data is JSON whose type is the event name."""
    for name, data in received.events():
        assert data["type"] == name


# ---- the complete stream: the baseline every fault is compared with -----------------


def test_complete_stream_is_the_baseline(mock_api: StartMock) -> None:
    mock = serve(mock_api, greeting())
    got = post(mock.url, request_body(stream=True))

    assert got.error is None and got.status == 200
    assert got.headers is not None
    assert got.headers["content-type"].startswith("text/event-stream")
    assert got.names() == FULL
    assert_well_formed(got)
    start = got.events()[0][1]["message"]
    assert (start["id"], start["model"], start["stop_reason"]) == (
        "msg_loopprobe_000001", MODEL, None)
    deltas = [data["delta"]["text"] for name, data in got.events()
              if name == "content_block_delta"]
    assert "".join(deltas) == GREETING
    end = wait_for_end(mock, only_request(mock)["seq"])
    assert (end["reason"], end["events_sent"], end["bytes_sent"]) == (
        "complete", len(FULL), len(got.body))


# ---- stall_before ----------------------------------------------------------------------

STALL_BEFORE_CASES = [
    pytest.param(greeting(stall_before=STALL), True, True, id="message-stream"),
    pytest.param(greeting(stall_before=STALL), False, True, id="message-json"),
    pytest.param(Raw(raw=RawSpec(chunks=[RawChunk(data="data: x\n\n")]), stall_before=STALL),
                 True, True, id="raw"),
    # An API error has no body stream, so the app writes no response_end for it.
    pytest.param(ApiError(error=ApiErrorSpec(status=529), stall_before=STALL), True, False,
                 id="api-error"),
]


@pytest.mark.parametrize(("reply", "stream", "records_end"), STALL_BEFORE_CASES)
def test_stall_before_outlasts_an_impatient_client(
        mock_api: StartMock, reply: Reply, stream: bool, records_end: bool) -> None:
    mock = serve(mock_api, reply)
    got = post(mock.url, request_body(stream=stream), IMPATIENT)

    assert isinstance(got.error, httpx.ReadTimeout), got
    assert got.status is None and got.body == b""
    # The request is recorded before the stall starts...
    request = only_request(mock)
    assert request["outcome"] == "replied" and request["stream"] is stream
    if records_end:
        # ...and the client leaving during the stall is recorded as such, with nothing sent.
        end = wait_for_end(mock, request["seq"])
        assert (end["reason"], end["events_sent"], end["bytes_sent"]) == (
            "client_disconnected", 0, 0)


@pytest.mark.parametrize("seconds", [0, 0.2], ids=["zero", "shorter-than-read-timeout"])
def test_stall_before_a_patient_client_sits_out(mock_api: StartMock, seconds: float) -> None:
    mock = serve(mock_api, greeting(stall_before=seconds))
    got = post(mock.url, request_body(stream=True))

    assert got.error is None and got.status == 200
    assert got.names() == FULL
    end = wait_for_end(mock, only_request(mock)["seq"])
    assert end["reason"] == "complete"


# ---- stall inside the stream ---------------------------------------------------------


STALL_POSITIONS = [
    # (where the stall is scripted, how many events arrive before it)
    pytest.param({"after_events": 0}, 0, id="after-0"),
    pytest.param({"after_events": 1}, 1, id="after-1"),
    pytest.param({"after_events": 3}, 3, id="after-3"),
    pytest.param({"after_events": 8}, 8, id="after-8"),
    pytest.param({"before_event": "message_start"}, 0, id="before-message_start"),
    pytest.param({"before_event": "content_block_delta"}, 3, id="before-first-delta"),
    pytest.param({"before_event": "message_delta"}, 7, id="before-message_delta"),
    pytest.param({"before_event": "message_stop"}, 8, id="before-message_stop"),
]


@pytest.mark.parametrize(("position", "after"), STALL_POSITIONS)
def test_stall_inside_stream_delivers_exactly_the_events_before_it(
        mock_api: StartMock, position: dict[str, Any], after: int) -> None:
    mock = serve(mock_api, greeting(stall=StreamStall(seconds=STALL, **position)))
    got = post(mock.url, request_body(stream=True), IMPATIENT)

    assert isinstance(got.error, httpx.ReadTimeout), got
    assert got.status == 200  # headers went out before the stall
    assert got.names() == FULL[:after]
    end = wait_for_end(mock, only_request(mock)["seq"])
    assert (end["reason"], end["events_sent"], end["bytes_sent"]) == (
        "client_disconnected", after, len(got.body))


def test_stall_inside_stream_a_patient_client_gets_everything(mock_api: StartMock) -> None:
    mock = serve(mock_api, greeting(stall=StreamStall(after_events=3, seconds=0.3)))
    got = post(mock.url, request_body(stream=True))

    assert got.error is None
    assert got.names() == FULL
    assert wait_for_end(mock, only_request(mock)["seq"])["reason"] == "complete"


# ---- disconnect, truncate, stream_error ----------------------------------------------


@pytest.mark.parametrize("after", [0, 1, 4, 8, 9])
def test_disconnect_after_n_events_breaks_the_body(mock_api: StartMock, after: int) -> None:
    mock = serve(mock_api, greeting(disconnect=EventCount(after_events=after)))
    got = post(mock.url, request_body(stream=True))

    assert got.status == 200
    # The chunked body never gets its terminating chunk: an incomplete message, not an end.
    assert isinstance(got.error, httpx.RemoteProtocolError), got
    assert got.names() == FULL[:after]
    end = wait_for_end(mock, only_request(mock)["seq"])
    assert (end["reason"], end["events_sent"], end["bytes_sent"]) == (
        "disconnected_by_script", after, len(got.body))


@pytest.mark.parametrize("after", [0, 3, 8])
def test_truncate_after_n_events_ends_cleanly(mock_api: StartMock, after: int) -> None:
    mock = serve(mock_api, greeting(truncate=EventCount(after_events=after)))
    got = post(mock.url, request_body(stream=True))

    assert got.error is None and got.status == 200
    assert got.names() == FULL[:after]
    assert "message_stop" not in got.names()
    end = wait_for_end(mock, only_request(mock)["seq"])
    assert (end["reason"], end["events_sent"], end["bytes_sent"]) == (
        "truncated_by_script", after, len(got.body))


STREAM_ERRORS = [
    pytest.param(StreamError(after_events=0), id="first-overloaded-default"),
    pytest.param(StreamError(after_events=4, type="api_error", message="Internal server error"),
                 id="mid-api-error"),
    pytest.param(StreamError(after_events=8, type="overloaded_error", message="Overloaded"),
                 id="before-message-stop"),
]


@pytest.mark.parametrize("fault", STREAM_ERRORS)
def test_stream_error_event_after_n_events(mock_api: StartMock, fault: StreamError) -> None:
    mock = serve(mock_api, greeting(stream_error=fault))
    got = post(mock.url, request_body(stream=True))

    assert got.error is None and got.status == 200
    assert got.names() == (*FULL[:fault.after_events], "error")
    assert got.events()[-1][1] == {
        "type": "error", "error": {"type": fault.type, "message": fault.message}}
    end = wait_for_end(mock, only_request(mock)["seq"])
    assert (end["reason"], end["events_sent"], end["bytes_sent"]) == (
        "stream_error_by_script", fault.after_events + 1, len(got.body))


# ---- ping ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("ping", "expected"), [(True, FULL), (False, NO_PING)],
                         ids=["ping-on", "ping-off"])
def test_ping_event(mock_api: StartMock, ping: bool, expected: tuple[str, ...]) -> None:
    mock = serve(mock_api, greeting(ping=ping))
    got = post(mock.url, request_body(stream=True))

    assert got.error is None
    assert got.names() == expected
    if ping:
        assert got.events()[1] == ("ping", {"type": "ping"})  # right after message_start
    # No keep-alive comments from the SSE library: the stream is exactly the scripted events.
    assert not any(line.startswith(b":") for line in got.body.split(b"\n"))


# ---- raw replies ---------------------------------------------------------------------

RAW_BYTES = [
    pytest.param((b"\xff\xfe\x00binary", "event: odd\r\ndata: {not json\r\n\r\n", b"no-newline"),
                 id="invalid-utf8-crlf-no-final-newline"),
    pytest.param(("event: message_start\n", "data: {\"type\":", "\"message_start\"}\n\n"),
                 id="event-split-across-chunks"),
    pytest.param(("",), id="single-empty-chunk"),
]


@pytest.mark.parametrize("chunks", RAW_BYTES)
def test_raw_bytes_arrive_byte_exact(mock_api: StartMock, chunks: tuple[str | bytes, ...]) -> None:
    expected = b"".join(c if isinstance(c, bytes) else c.encode() for c in chunks)
    mock = serve(mock_api, raw(*chunks))
    got = post(mock.url, request_body(stream=True))

    assert got.error is None and got.status == 200
    assert got.body == expected
    end = wait_for_end(mock, only_request(mock)["seq"])
    assert (end["reason"], end["events_sent"], end["bytes_sent"]) == (
        "complete", len(chunks), len(expected))


def test_raw_status_content_type_and_headers(mock_api: StartMock) -> None:
    reply = raw("upstream exploded", status=502, content_type="text/html",
                headers={"x-custom": "yes", "retry-after": "3"})
    mock = serve(mock_api, reply)
    got = post(mock.url, request_body(stream=True))

    assert got.error is None and got.status == 502
    assert got.headers is not None
    assert got.headers["content-type"].startswith("text/html")
    assert (got.headers["x-custom"], got.headers["retry-after"]) == ("yes", "3")
    assert got.body == b"upstream exploded"


def test_raw_disconnect_aborts_after_the_bytes(mock_api: StartMock) -> None:
    mock = serve(mock_api, raw(b"event: ping\n", b"data: {\"type\":\"ping\"}\n\n", disconnect=True))
    got = post(mock.url, request_body(stream=True))

    assert isinstance(got.error, httpx.RemoteProtocolError), got
    assert got.body == b"event: ping\ndata: {\"type\":\"ping\"}\n\n"
    end = wait_for_end(mock, only_request(mock)["seq"])
    assert (end["reason"], end["events_sent"]) == ("disconnected_by_script", 2)


def delayed_raw(delay: float) -> Raw:
    return Raw(raw=RawSpec(chunks=[RawChunk(data="first;"),
                                   RawChunk(data_base64="c2Vjb25k", delay=delay)]))  # "second"


def test_raw_chunk_delay_stalls_mid_body(mock_api: StartMock) -> None:
    mock = serve(mock_api, delayed_raw(STALL))
    got = post(mock.url, request_body(stream=True), IMPATIENT)

    assert isinstance(got.error, httpx.ReadTimeout), got
    assert got.body == b"first;"
    end = wait_for_end(mock, only_request(mock)["seq"])
    assert (end["reason"], end["events_sent"]) == ("client_disconnected", 1)

    patient = serve(mock_api, delayed_raw(0.2))
    assert post(patient.url, request_body(stream=True)).body == b"first;second"


# ---- API errors ---------------------------------------------------------------------------

API_ERRORS = [
    pytest.param(api_error(529, "Overloaded", headers={"x-should-retry": "true"}),
                 529, "overloaded_error", "Overloaded", {"x-should-retry": "true"},
                 id="529-overloaded"),
    pytest.param(api_error(429, "Number of request tokens has exceeded your rate limit",
                           headers={"retry-after": "7", "x-should-retry": "true"}),
                 429, "rate_limit_error", "Number of request tokens has exceeded your rate limit",
                 {"retry-after": "7", "x-should-retry": "true"}, id="429-retry-after"),
    pytest.param(api_error(500, "Internal server error", headers={"x-should-retry": "false"}),
                 500, "api_error", "Internal server error", {"x-should-retry": "false"},
                 id="500-no-retry"),
    pytest.param(api_error(418, "teapot", type="custom_error"), 418, "custom_error", "teapot", {},
                 id="explicit-type"),
    pytest.param(prompt_too_long(), 400, "invalid_request_error",
                 "prompt is too long: 216327 tokens > 200000 maximum", {},
                 id="prompt-too-long-default"),
    pytest.param(prompt_too_long(1234567, 1000000), 400, "invalid_request_error",
                 "prompt is too long: 1234567 tokens > 1000000 maximum", {},
                 id="prompt-too-long-custom"),
]


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
@pytest.mark.parametrize(("reply", "status", "error_type", "text_", "headers"), API_ERRORS)
def test_api_error_envelope_and_headers(
        mock_api: StartMock, stream: bool, reply: Reply, status: int, error_type: str,
        text_: str, headers: dict[str, str]) -> None:
    mock = serve(mock_api, reply)
    got = post(mock.url, request_body(stream=stream))

    assert got.error is None and got.status == status
    assert got.headers is not None
    assert got.headers["content-type"].startswith("application/json")
    assert got.headers["request-id"] == "req_loopprobe_000001"
    for name, value in headers.items():
        assert got.headers[name] == value
    assert orjson.loads(got.body) == {
        "type": "error", "error": {"type": error_type, "message": text_},
        "request_id": "req_loopprobe_000001"}
    request = only_request(mock)
    assert (request["outcome"], request["status"], request["rule"]) == (
        "replied", status, "rule-1")


# ---- stop_reason ---------------------------------------------------------------------------

STOP_REASONS = [
    pytest.param(greeting(), "end_turn", id="default-text"),
    pytest.param(tool_use("Read", {"file_path": "/tmp/a"}), "tool_use", id="default-tool"),
    pytest.param(greeting(stop_reason="max_tokens"), "max_tokens", id="max-tokens"),
    pytest.param(greeting(stop_reason="tool_use"), "tool_use", id="tool-use-without-tool-block"),
    pytest.param(greeting(stop_reason="refusal"), "refusal", id="refusal"),
    pytest.param(greeting(stop_reason=None), None, id="none"),
]


@pytest.mark.parametrize(("reply", "expected"), STOP_REASONS)
def test_stop_reason_in_stream_and_json(
        mock_api: StartMock, reply: Message, expected: str | None) -> None:
    blocks = [b.type for b in reply.blocks()]
    mock = serve(mock_api, reply, always=True)

    streamed = post(mock.url, request_body(stream=True, content="streamed"))
    assert streamed.error is None
    deltas = [data for name, data in streamed.events() if name == "message_delta"]
    assert len(deltas) == 1 and deltas[0]["delta"]["stop_reason"] == expected
    started = [data["content_block"]["type"] for name, data in streamed.events()
               if name == "content_block_start"]
    assert started == blocks  # an override never adds or drops a block

    as_json = post(mock.url, request_body(stream=False, content="as json"))
    assert as_json.error is None
    body = orjson.loads(as_json.body)
    assert body["stop_reason"] == expected
    assert [b["type"] for b in body["content"]] == blocks


# ---- non-streaming: faults are stream-only, the JSON is always complete ----------------

STREAM_ONLY_FAULTS = [
    pytest.param({"stall": StreamStall(after_events=2, seconds=STALL)}, id="stall"),
    pytest.param({"disconnect": EventCount(after_events=3)}, id="disconnect"),
    pytest.param({"truncate": EventCount(after_events=3)}, id="truncate"),
    pytest.param({"stream_error": StreamError(after_events=3)}, id="stream-error"),
    pytest.param({"ping": False}, id="no-ping"),
]


@pytest.mark.parametrize("faults", STREAM_ONLY_FAULTS)
def test_non_streaming_form_is_complete_json(mock_api: StartMock, faults: dict[str, Any]) -> None:
    mock = serve(mock_api, greeting(**faults))
    # Impatient on purpose: a stream stall must not delay the JSON form.
    got = post(mock.url, request_body(stream=False), IMPATIENT)

    assert got.error is None and got.status == 200
    body = orjson.loads(got.body)
    assert body == {
        "id": "msg_loopprobe_000001", "type": "message", "role": "assistant", "model": MODEL,
        "content": [{"type": "text", "text": GREETING}], "stop_reason": "end_turn",
        "stop_sequence": None, "usage": body["usage"]}
    assert body["usage"]["output_tokens"] >= 1 and body["usage"]["input_tokens"] == 100


# ---- fallback after a broken stream: the same message, the rule not consumed --------------


def test_non_streaming_resend_after_broken_stream_replays_the_message(
        mock_api: StartMock) -> None:
    first = text("the first answer", disconnect=EventCount(after_events=3))
    mock = serve(mock_api, first, text("the second answer"))
    same_turn = "one conversation state"

    broken = post(mock.url, request_body(stream=True, content=same_turn))
    assert isinstance(broken.error, httpx.RemoteProtocolError)
    assert mock.mock.script.state()[0]["served"] == 1

    fallback = post(mock.url, request_body(stream=False, content=same_turn))
    assert fallback.error is None and fallback.status == 200
    assert orjson.loads(fallback.body)["content"] == [
        {"type": "text", "text": "the first answer"}]
    assert mock.mock.script.state()[0]["served"] == 1  # not consumed again

    retried = post(mock.url, request_body(stream=True, content=same_turn))
    assert retried.error is None
    deltas = [d["delta"]["text"] for n, d in retried.events() if n == "content_block_delta"]
    assert "".join(deltas) == "the second answer"
    assert mock.mock.script.state()[0]["served"] == 2

    records = mock.read().requests()
    assert [(r["seq"], r["turn"], r["attempt"], r["stream"], r["rule"], r["reply_index"],
             r["replay_of"]) for r in records] == [
        (1, 1, 1, True, "rule-1", 0, None),
        (2, 1, 2, False, "rule-1", 0, 1),
        (3, 1, 3, True, "rule-1", 1, None),
    ]
    assert records[1]["reply"] == records[0]["reply"]
