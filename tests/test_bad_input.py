"""Bad input is always refused clearly and recorded: fuzzed requests and fuzzed scenarios.

Requests go through the mock's real HTTP surface, in process (``httpx.ASGITransport``
on the Starlette app; an exception escaping the app becomes the 500 a server would
send instead of being raised in the test). Whatever arrives, the answer is either the
scripted reply of a valid request or the Anthropic error envelope with the status and
type the API uses — never a 500, never a traceback — and the request is in the journal
exactly once, with its outcome and its body (as JSON, text or base64). An oracle
written from the API's rules (orjson, the mock's parser, says what is JSON) gives the answer
each request must get.

Scenarios go through ``parse_scenario`` and ``load_scenario``: whatever the data, the
result is a ``Scenario`` or a ``ScenarioError`` whose problems each name a place in the
data and what was found there — never another exception — and a scenario the loader
accepts can be served.

Hypothesis runs derandomized (the same examples on every run), without deadlines.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import string
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import yaml
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from mockapi import KINDS, Journal, Match, Rule, Scenario, ScenarioError, read_journal, text
from mockapi.check.requests import MAX_BODY_BYTES
from mockapi.journal.read import parse_journal
from mockapi.journal.records import MAX_JOURNALED_BODY_DEPTH
from mockapi.script.scenario import load_scenario, parse_scenario
from mockapi.script.sse import decode_events
from mockapi.serve.app import MockApp
from probes.core.safe_read import nested_deeper_than

FUZZ = settings(
    max_examples=200, deadline=None, derandomize=True, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.large_base_example, HealthCheck.filter_too_much],
)

# ==== requests =================================================================================

API_HEADERS = {"x-api-key": "sk-fuzz", "anthropic-version": "2023-06-01",
               "content-type": "application/json"}
REQUIRED = {  # what the Messages API requires of a body, per path
    "/v1/messages": (("model", str), ("max_tokens", int), ("messages", list)),
    "/v1/messages/count_tokens": (("model", str), ("messages", list)),
}
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error",
               413: "request_too_large"}
OUTCOMES = {200: "replied", 400: "invalid_request", 401: "invalid_request", 413: "too_large"}
BODY_FIELDS = ("body", "body_text", "body_base64")
CATCH_ALL = Scenario(rules=[Rule(id="catch-all", match=Match(kind="any"), reply=text("ok"),
                                 repeat="always")])


class Sent:
    """One request. (Not a dataclass: Hypothesis would print a 30 KB body whole.)"""

    def __init__(self, path: str, headers: dict[str, str], body: bytes, *,
                 chunked: bool = False):
        self.path, self.headers, self.body = path, headers, body
        self.chunked = chunked  # sent without a content-length, in pieces

    def __repr__(self) -> str:  # a deep body is shown by its ends
        body = self.body if len(self.body) <= 240 else (
            self.body[:120] + b" ... " + self.body[-80:])
        return (f"Sent(path={self.path!r}, headers={self.headers!r}, body={body!r} "
                f"[{len(self.body)} bytes], chunked={self.chunked})")


@dataclass(frozen=True)
class Expected:
    status: int
    message: str = ""  # how the error message starts


def expected_answer(sent: Sent, limit: int) -> Expected:
    """The oracle: the answer the Messages API gives this request."""
    if len(sent.body) > limit:
        return Expected(413, f"Request exceeds the maximum allowed number of bytes ({limit})")
    names = {name.lower() for name in sent.headers}
    if "x-api-key" not in names and "authorization" not in names:
        return Expected(401, "x-api-key header is required")
    if "anthropic-version" not in names:
        return Expected(400, "anthropic-version: header is required")
    try:
        body = orjson.loads(sent.body)
    except orjson.JSONDecodeError:
        return Expected(400, "The request body is not valid JSON: ")
    if not isinstance(body, dict):
        return Expected(400, "The request body must be a JSON object, got ")
    for name, kind in REQUIRED[sent.path.partition("?")[0]]:
        if name not in body:
            return Expected(400, f"{name}: Field required")
        value = body[name]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            return Expected(400, f"{name}: Input should be a valid ")
    return Expected(200)


def expected_body_field(raw: bytes) -> tuple[str, Any]:
    """How the journal must keep a body: parsed JSON, else text, else base64.

    A JSON body nested deeper than MAX_JOURNALED_BODY_DEPTH is kept as text: inside its
    record it would be deeper than loopprobe's readers accept (or, near orjson's 1024
    levels, than the journal's own reader can read).
    """
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass
    else:
        if nested_deeper_than(value, MAX_JOURNALED_BODY_DEPTH):
            return "body_text", raw.decode("utf-8")
        return "body", value
    try:
        return "body_text", raw.decode("utf-8")
    except UnicodeDecodeError:
        return "body_base64", base64.b64encode(raw).decode()


async def in_pieces(body: bytes, size: int = 1000) -> AsyncIterator[bytes]:
    for start in range(0, len(body), size):
        yield body[start:start + size]


class Harness:
    """One in-process mock with its journal; checks every answer and what was recorded."""

    def __init__(self, tmp_path: Path, **options: Any):
        tmp_path.mkdir(parents=True, exist_ok=True)
        self.journal_path = tmp_path / "journal.jsonl"
        self.journal = Journal(self.journal_path)
        self.mock = MockApp(CATCH_ALL, self.journal, **options)
        self.runner = asyncio.Runner()
        transport = httpx.ASGITransport(app=self.mock.app, raise_app_exceptions=False)
        self.client = httpx.AsyncClient(transport=transport, base_url="http://mock")
        self.offset = 0
        self.sent = 0

    def close(self) -> None:
        self.runner.run(self.client.aclose())
        self.runner.close()
        self.journal.close()

    def send(self, sent: Sent) -> httpx.Response:
        content: bytes | AsyncIterator[bytes] = (
            in_pieces(sent.body) if sent.chunked else sent.body)
        return self.runner.run(self.client.post(sent.path, headers=sent.headers,
                                                content=content))

    def new_records(self) -> list[dict[str, Any]]:
        """Journal records written since the last call, read as ``read_journal`` reads them."""
        with self.journal_path.open("rb") as handle:
            handle.seek(self.offset)
            data = handle.read()
        assert not data or data.endswith(b"\n"), f"a journal line was left unfinished: {data!r}"
        self.offset += len(data)
        for line in data.split(b"\n")[:-1]:
            try:
                orjson.loads(line)
            except orjson.JSONDecodeError as error:
                raise AssertionError(
                    f"the journal line of this request cannot be read back ({error}), so "
                    f"read_journal fails on the whole journal: {line[:160]!r}…") from None
        # as read_journal reads them: a blob written for an earlier request is in the file
        contents = parse_journal(data, str(self.journal_path), blob_elsewhere=self.journal.blob)
        assert contents.torn == [], contents.torn_tail
        return list(contents.records)  # type: ignore[arg-type]

    def check(self, sent: Sent) -> httpx.Response:
        """Send ``sent`` and check the answer and the journal against the oracle."""
        # Each example stands alone: whatever an earlier (failed) example left is skipped.
        self.offset = self.journal_path.stat().st_size
        seq = self.journal.last_seq + 1
        request_id = f"req_loopprobe_{seq:06d}"
        response = self.send(sent)
        self.sent += 1
        expected = expected_answer(sent, self.mock.max_body_bytes)
        if expected.status == 200 and response.status_code == 400 and not self.mock.lenient:
            # what the real API also refuses (mockapi.check.validation, tested on its own in
            # test_validation.py); everything else below still holds for it
            expected = Expected(400, "")
        shown = response.content[:300]
        assert b"Traceback" not in response.content, shown
        assert response.status_code != 500, f"the mock failed on this request: {shown!r}"
        assert response.status_code == expected.status, (expected, response.status_code, shown)
        assert response.headers.get("request-id") == request_id, response.headers
        message: str | None = None
        if expected.status == 200:
            check_reply(sent, response)
        else:
            assert response.headers["content-type"] == "application/json"
            envelope = response.json()
            assert isinstance(envelope, dict)
            assert set(envelope) == {"type", "error", "request_id"}, envelope
            assert (envelope["type"], envelope["request_id"]) == ("error", request_id)
            assert isinstance(envelope["error"], dict)
            assert set(envelope["error"]) == {"type", "message"}, envelope
            assert envelope["error"]["type"] == ERROR_TYPES[expected.status], envelope
            message = envelope["error"]["message"]
            assert isinstance(message, str) and message.startswith(expected.message), (
                expected, message)

        records = self.new_records()
        requests = [r for r in records if r.get("type") == "request"]
        ends = [r for r in records if r.get("type") == "response_end"]
        assert len(requests) == 1, f"{len(requests)} journal records for one request: {records}"
        assert len(records) == len(requests) + len(ends), records
        (record,) = requests
        assert (record["seq"], record["method"], record["path"]) == (
            seq, "POST", sent.path.partition("?")[0])
        assert (record["outcome"], record["status"]) == (
            OUTCOMES[expected.status], expected.status), record
        if message is not None:
            assert record["error"] == message
        kept = [name for name in BODY_FIELDS if name in record]
        if expected.status == 413:  # refused before the body was read (whole)
            assert (record["body_size"], kept) == (None, []), record
        else:
            assert record["body_size"] == len(sent.body)
            if sent.body:
                field, value = expected_body_field(sent.body)
                assert kept == [field], (kept, field)
                assert record[field] == value
            else:
                assert kept == []
        if expected.status == 200 and is_stream(sent):
            assert [(e["seq"], e["reason"]) for e in ends] == [(seq, "complete")], ends
        else:
            assert ends == [], ends
        return response


def is_stream(sent: Sent) -> bool:
    return (not sent.path.startswith("/v1/messages/count_tokens")
            and orjson.loads(sent.body).get("stream") is True)


def check_reply(sent: Sent, response: httpx.Response) -> None:
    """A valid request gets the catch-all rule's reply (or the built-in token count)."""
    if sent.path.startswith("/v1/messages/count_tokens"):
        assert response.json() == {"input_tokens": max(1, len(sent.body) // 4)}
    elif is_stream(sent):
        assert response.headers["content-type"].startswith("text/event-stream")
        names = [name for name, _ in decode_events(response.content)]
        assert names[0] == "message_start" and names[-1] == "message_stop", names
    else:
        reply = response.json()
        assert reply["type"] == "message"
        assert reply["content"] == [{"type": "text", "text": "ok"}]


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Callable[..., Harness]]:
    made: list[Harness] = []

    def make(**options: Any) -> Harness:
        made.append(Harness(tmp_path / f"mock-{len(made)}", **options))
        return made[-1]

    yield make
    for each in made:
        each.close()


# ---- request strategies --------------------------------------------------------------------

JSON_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=16))
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=12)
BLOCKS = st.one_of(
    st.fixed_dictionaries(  # a typed block, its fields right or wrong
        {"type": st.sampled_from(["text", "image", "tool_use", "tool_result", "thinking",
                                  "document", ""])},
        optional={name: JSON_VALUES for name in ("text", "content", "tool_use_id", "id",
                                                 "name", "input", "source", "cache_control")}),
    st.fixed_dictionaries({}, optional={"text": st.text(max_size=16),  # a block without type
                                        "tool_use_id": st.text(max_size=8)}),
    JSON_VALUES,
)
CONTENTS = st.one_of(st.text(max_size=40), st.lists(BLOCKS, max_size=4), JSON_VALUES)
MESSAGES = st.lists(
    st.one_of(
        st.fixed_dictionaries({}, optional={
            "role": st.one_of(st.sampled_from(["user", "assistant", "system"]), JSON_VALUES),
            "content": CONTENTS, "name": JSON_VALUES}),
        JSON_VALUES),
    max_size=5)
REQUIRED_VALUES: dict[str, SearchStrategy[Any]] = {
    "model": st.sampled_from(["claude-sonnet-4-5", "", "claude-x"]),
    "max_tokens": st.one_of(st.integers(min_value=-5, max_value=2**40), st.just(2**63)),
    "messages": MESSAGES,
}
OPTIONAL_VALUES: dict[str, SearchStrategy[Any]] = {
    "stream": st.one_of(st.booleans(), JSON_VALUES),
    "system": st.one_of(st.text(max_size=20), st.lists(BLOCKS, max_size=3), JSON_VALUES),
    "tools": st.one_of(
        st.lists(st.fixed_dictionaries({}, optional={"name": st.one_of(st.text(max_size=8),
                                                                       JSON_VALUES),
                                                     "input_schema": JSON_VALUES}),
                 max_size=3),
        JSON_VALUES),
    "thinking": st.one_of(st.fixed_dictionaries({"type": st.one_of(
        st.sampled_from(["enabled", "disabled"]), JSON_VALUES)}), JSON_VALUES),
    "temperature": JSON_VALUES,
    "metadata": JSON_VALUES,
    "output_config": JSON_VALUES,
}


@st.composite
def body_objects(draw: st.DrawFn) -> dict[str, Any]:
    """A Messages API body: each field mostly right, sometimes mistyped or missing."""
    body: dict[str, Any] = {}
    for name, good in REQUIRED_VALUES.items():
        how = draw(st.integers(0, 7))
        if how == 0:
            continue  # missing
        body[name] = draw(JSON_VALUES) if how == 1 else draw(good)
    body.update(draw(st.fixed_dictionaries({}, optional=OPTIONAL_VALUES)))
    body.update(draw(st.dictionaries(st.text(max_size=10), JSON_VALUES, max_size=2)))
    return body


@st.composite
def encoded(draw: st.DrawFn, values: SearchStrategy[Any]) -> bytes:
    """JSON text of a value, written compactly, spaced, pretty (LF or CRLF) or ASCII-escaped."""
    value = draw(values)
    style = draw(st.sampled_from(["compact", "spaced", "pretty", "crlf", "ascii"]))
    if style == "compact":
        return orjson.dumps(value)
    if style == "spaced":
        return json.dumps(value, ensure_ascii=False).encode()
    if style == "ascii":
        return json.dumps(value).encode()
    pretty = json.dumps(value, indent=2, ensure_ascii=False).encode()
    return pretty.replace(b"\n", b"\r\n") if style == "crlf" else pretty


INVALID_UTF8 = [b"\xff", b"\x80", b"\xc3", b"\xc3\x28", b"\xed\xa0\x80", b"\xf4\x90\x80\x80",
                b"\xe2\x82", b"\xfe\xfe\xff\xff", b"\xc0\xaf"]


@st.composite
def invalid_utf8(draw: st.DrawFn) -> bytes:
    """A JSON body with a byte sequence that is not UTF-8 somewhere in it."""
    raw = draw(encoded(body_objects()))
    at = draw(st.integers(0, len(raw)))
    return raw[:at] + draw(st.sampled_from(INVALID_UTF8)) + raw[at:]


# total depths where the JSON libraries change behaviour (orjson writes 254 levels, reads 1024)
DEPTH_EDGES = [252, 253, 254, 255, 256, 1019, 1020, 1021, 1022, 1023, 1024, 1025]
DEEP_PLACES = ["content", "messages", "system", "tools", "metadata", "model", "body", "extra"]


@st.composite
def deep_bodies(draw: st.DrawFn) -> bytes:
    """A body with 100–5000 levels of arrays and/or objects nested somewhere in it."""
    depth = draw(st.one_of(st.integers(100, 5000), st.sampled_from(DEPTH_EDGES)))
    shape = draw(st.sampled_from(["arrays", "objects", "alternating"]))
    sep = draw(st.sampled_from(["", " ", "\n", "\r\n", "\t"]))
    opens: list[str] = []
    closes: list[str] = []
    for level in range(depth):
        if shape == "arrays" or (shape == "alternating" and level % 2 == 0):
            opens.append("[")
            closes.append("]")
        else:
            opens.append('{"k":')
            closes.append("}")
    nested = sep.join(opens) + sep + "0" + sep + sep.join(reversed(closes))
    place = draw(st.sampled_from(DEEP_PLACES))
    if place == "body":
        return nested.encode()
    fields = {"model": '"claude-sonnet-4-5"', "max_tokens": "16",
              "messages": '[{"role":"user","content":"hi"}]'}
    if place == "content":
        fields["messages"] = '[{"role":"user","content":' + sep + nested + sep + "}]"
    else:
        fields[place] = nested
    parts = [f'"{name}":{sep}{value}' for name, value in fields.items()]
    return ("{" + sep + ("," + sep).join(parts) + sep + "}").encode()


# numbers JSON allows but a double cannot hold, and numbers JSON does not allow
ODD_NUMBERS = ["1e400", "-1e400", "18446744073709551616", "-9223372036854775809", "1E2",
               "-0", "0.0", "NaN", "Infinity", "-Infinity", "0x10", "01", "+1", ".5", "1."]


@st.composite
def odd_numbers(draw: st.DrawFn) -> bytes:
    """A body whose max_tokens (or another number in it) is written oddly."""
    number = draw(st.sampled_from(ODD_NUMBERS))
    field = draw(st.sampled_from(["max_tokens", "temperature", "top_k"]))
    body = {"model": "claude-sonnet-4-5", "max_tokens": 8,
            "messages": [{"role": "user", "content": "hi"}], field: "NUMBER"}
    return orjson.dumps(body).replace(b'"NUMBER"', number.encode())


HEADER_SETS = st.one_of(
    st.just(API_HEADERS), st.just(API_HEADERS), st.just(API_HEADERS), st.just(API_HEADERS),
    st.sampled_from([
        {"authorization": "Bearer tok", "anthropic-version": "2099-01-01"},
        {"x-api-key": "sk-fuzz"},  # no anthropic-version
        {"anthropic-version": "2023-06-01", "content-type": "application/json"},  # no key
        {},
        {**API_HEADERS, "content-type": "text/plain"},
    ]))
PATHS = st.sampled_from(["/v1/messages", "/v1/messages", "/v1/messages", "/v1/messages",
                         "/v1/messages?beta=true", "/v1/messages/count_tokens"])
ANY_BODY = st.one_of(
    st.binary(max_size=200),
    invalid_utf8(),
    encoded(JSON_VALUES),
    encoded(body_objects()),
    encoded(body_objects()),
    odd_numbers(),
    deep_bodies(),
)


@st.composite
def requests(draw: st.DrawFn, bodies: SearchStrategy[bytes] = ANY_BODY) -> Sent:
    return Sent(draw(PATHS), draw(HEADER_SETS), draw(bodies), chunked=draw(st.booleans()))


# ---- request properties --------------------------------------------------------------------


def test_any_request_is_refused_clearly_or_answered_and_always_recorded(
        harness: Callable[..., Harness]) -> None:
    mock = harness()

    @settings(FUZZ, max_examples=300)
    @given(requests())
    def check(sent: Sent) -> None:
        mock.check(sent)

    check()
    assert len(read_journal(mock.journal_path).requests()) == mock.sent


def test_a_lenient_mock_answers_what_it_does_not_refuse_for_size_headers_or_json(
        harness: Callable[..., Harness]) -> None:
    mock = harness(lenient=True)

    @settings(FUZZ, max_examples=150)
    @given(requests())
    def check(sent: Sent) -> None:
        mock.check(sent)

    check()


def test_deeply_nested_bodies_are_refused_or_answered_and_recorded(
        harness: Callable[..., Harness]) -> None:
    mock = harness()

    @settings(FUZZ, max_examples=120)
    @given(requests(deep_bodies()))
    def check(sent: Sent) -> None:
        mock.check(sent)

    check()
    assert len(read_journal(mock.journal_path).requests()) == mock.sent


SMALL_LIMIT = 600


@st.composite
def bodies_near_the_limit(draw: st.DrawFn) -> bytes:
    """Bodies from well under to well over SMALL_LIMIT bytes, valid or not."""
    size = draw(st.integers(SMALL_LIMIT - 200, SMALL_LIMIT + 200))
    if draw(st.booleans()):
        return draw(st.binary(min_size=size, max_size=size))
    body = draw(body_objects())
    raw = orjson.dumps(body)
    pad = max(0, size - len(raw) - len(',"pad":""'))
    return orjson.dumps({**body, "pad": "p" * pad})


def test_bodies_over_the_limit_are_413_and_recorded(harness: Callable[..., Harness]) -> None:
    mock = harness(max_body_bytes=SMALL_LIMIT, lenient=True)

    @FUZZ
    @given(requests(bodies_near_the_limit()))
    def check(sent: Sent) -> None:
        mock.check(sent)

    check()
    outcomes = {r["outcome"] for r in read_journal(mock.journal_path).requests()}
    assert {"too_large", "replied", "invalid_request"} <= outcomes  # both sides were tried


def test_the_real_limit_by_content_length(harness: Callable[..., Harness]) -> None:
    """A declared size over 32 MiB is refused before a byte of the body is read."""
    mock = harness()
    body = orjson.dumps({"model": "claude-sonnet-4-5", "max_tokens": 1,
                         "messages": [{"role": "user", "content": "small, but declared huge"}]})
    declared = MAX_BODY_BYTES + 1
    response = mock.send(Sent("/v1/messages", {**API_HEADERS, "content-length": str(declared)},
                              body))
    assert response.status_code == 413
    assert response.json() == {
        "type": "error", "request_id": "req_loopprobe_000001",
        "error": {"type": "request_too_large", "message": (
            f"Request exceeds the maximum allowed number of bytes ({MAX_BODY_BYTES}); "
            f"content-length was {declared}")}}
    (record,) = mock.new_records()
    assert (record["seq"], record["outcome"], record["status"], record["body_size"]) == (
        1, "too_large", 413, None)
    assert not any(name in record for name in BODY_FIELDS)


def test_the_real_limit_counted_while_reading(harness: Callable[..., Harness]) -> None:
    """Without a content-length, the 32 MiB limit is counted as the body arrives."""
    mock = harness()
    mebibyte = b" " * (1024 * 1024)  # JSON whitespace: the body would be valid but for its size

    async def body() -> AsyncIterator[bytes]:
        yield b'{"model":"claude-sonnet-4-5","max_tokens":1,"messages":[]'
        for _ in range(MAX_BODY_BYTES // len(mebibyte)):
            yield mebibyte
        yield b"}"

    response = mock.runner.run(mock.client.post("/v1/messages", headers=API_HEADERS,
                                                content=body()))
    assert response.status_code == 413
    assert response.json()["error"] == {
        "type": "request_too_large",
        "message": f"Request exceeds the maximum allowed number of bytes ({MAX_BODY_BYTES})"}
    (record,) = mock.new_records()
    assert (record["outcome"], record["status"], record["body_size"]) == (
        "too_large", 413, None)


# ==== scenarios ================================================================================

KEYS = st.text(alphabet=string.ascii_lowercase + "_", min_size=1, max_size=8)
NUMBERS = st.one_of(
    st.integers(min_value=-3, max_value=12),
    st.sampled_from([2**31, 2**63 - 1, 2**63, 2**64, -(2**63) - 1, 10**30, 10**100]),
    st.floats())
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, st.text(max_size=12))
JUNK = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(KEYS, inner, max_size=3), max_leaves=8)
SHORT = st.text(max_size=12)
BIG = st.sampled_from([2**63 - 1, 2**63, 2**64, 10**30])
POSITIVE = st.one_of(st.integers(1, 9), BIG)
NON_NEGATIVE = st.one_of(st.integers(0, 9), BIG)
SECONDS = st.one_of(st.just(0), st.floats(0, 0.01), st.just(1e308))
EVENTS = st.sampled_from(["message_start", "ping", "content_block_start",
                          "content_block_delta", "content_block_stop", "message_delta",
                          "message_stop"])
HEADERS = st.dictionaries(KEYS, SHORT, max_size=2)
TOOL_INPUTS = st.dictionaries(KEYS, JUNK, max_size=3)


class Shapes:
    """Scenario-shaped data. ``junk``: any field may hold anything, keys may be unknown, and
    exclusive fields may come together; otherwise every value is one the models declare valid.
    """

    def __init__(self, junk: bool):
        self.junk = junk

    def maybe(self, good: SearchStrategy[Any]) -> SearchStrategy[Any]:
        return st.one_of(good, good, good, JUNK) if self.junk else good

    def record(self, optional: dict[str, SearchStrategy[Any]],
               required: dict[str, SearchStrategy[Any]] | None = None) -> SearchStrategy[Any]:
        known = st.fixed_dictionaries(
            {name: self.maybe(value) for name, value in (required or {}).items()},
            optional={name: self.maybe(value) for name, value in optional.items()})
        if not self.junk:
            return known
        names = set(optional) | set(required or {})
        unknown = st.dictionaries(KEYS.filter(lambda k: k not in names), JUNK, min_size=1,
                                  max_size=2)
        return st.one_of(known, known, known, st.tuples(known, unknown).map(
            lambda both: {**both[1], **both[0]}))

    def either(self, *forms: SearchStrategy[Any]) -> SearchStrategy[Any]:
        return st.one_of(*forms)

    def scenario(self) -> SearchStrategy[Any]:
        kinds = st.sampled_from([*KINDS, "any"] + (["mian", ""] if self.junk else []))
        count = st.one_of(NON_NEGATIVE, st.integers(-3, -1)) if self.junk else NON_NEGATIVE
        positive = st.one_of(POSITIVE, st.integers(-3, 0)) if self.junk else POSITIVE
        seconds = st.one_of(SECONDS, st.floats()) if self.junk else SECONDS
        match = self.record({
            "kind": st.one_of(kinds, st.lists(kinds, min_size=1, max_size=3)),
            "turn": positive, "attempt": positive,
            "last_user_text_contains": st.one_of(SHORT, st.lists(SHORT, max_size=2)),
            "tool_result_for": SHORT, "declares_tool": SHORT, "declares_tool_input": SHORT,
            "system_contains": SHORT,
            "model": SHORT, "stream": st.booleans(),
            "path": st.sampled_from(["/v1/messages", "/v1/messages/count_tokens"])})
        blocks = st.one_of(
            self.record({"type": st.just("text"), "chunk_size": positive}, {"text": SHORT}),
            self.record({"type": st.just("tool_use"), "input": TOOL_INPUTS, "id": SHORT,
                         "input_json": SHORT, "chunk_size": positive},
                        {"name": SHORT.filter(bool)}),
            self.record({"type": st.just("thinking"), "signature": SHORT,
                         "chunk_size": positive}, {"thinking": SHORT}),
            self.record({"type": st.just("redacted_thinking")}, {"data": SHORT.filter(bool)}),
            *([self.record({"url": SHORT}, {"type": st.sampled_from(["image", "video"])})]
              if self.junk else []))
        usage = self.record({"input_tokens": count, "output_tokens": count,
                             "cache_creation_input_tokens": count,
                             "cache_read_input_tokens": count,
                             "server_tool_use": TOOL_INPUTS, "service_tier": SHORT})
        stall = st.one_of(self.record({}, {"after_events": count, "seconds": seconds}),
                          self.record({}, {"before_event": EVENTS, "seconds": seconds}))
        events = self.record({}, {"after_events": count})
        common = {"stop_reason": SHORT, "stop_sequence": SHORT, "usage": usage,
                  "model": SHORT, "id": SHORT, "headers": HEADERS, "ping": st.booleans(),
                  "stall_before": seconds, "stall": stall,
                  "stream_error": self.record({"type": SHORT, "message": SHORT},
                                              {"after_events": count}),
                  "disconnect": events, "truncate": events, "replay_to_fallback": st.booleans()}
        content = st.lists(blocks, max_size=3)
        messages = (self.record({**common, "text": SHORT, "content": content}) if self.junk
                    else st.one_of(self.record({**common, "text": SHORT}),
                                   self.record({**common, "content": content})))
        status = st.integers(100, 700) if self.junk else st.integers(400, 599)
        errors = self.record({"stall_before": seconds}, {"error": self.record(
            {"type": SHORT, "message": SHORT, "headers": HEADERS}, {"status": status})})
        chunk = (self.record({"data": SHORT, "data_base64": SHORT, "delay": seconds}) if self.junk
                 else st.one_of(self.record({"delay": seconds}, {"data": SHORT}),
                                self.record({"delay": seconds}, {"data_base64": SHORT})))
        raws = self.record({"stall_before": seconds}, {"raw": self.record(
            {"status": st.integers(50, 700) if self.junk else st.integers(100, 599),
             "content_type": SHORT, "headers": HEADERS, "disconnect": st.booleans()},
            {"chunks": st.lists(chunk, min_size=0 if self.junk else 1, max_size=3)})})
        reply = st.one_of(messages, messages, errors, raws)
        replies = st.lists(reply, min_size=0 if self.junk else 1, max_size=3)
        repeat = st.sampled_from(["once", "always"] + (["twice"] if self.junk else []))
        if self.junk:
            rule = self.record({"id": st.sampled_from(["a", "b", "rule-1", "rule-2", ""]),
                                "match": match, "reply": reply, "replies": replies,
                                "repeat": repeat})
        else:
            rule = st.one_of(self.record({"match": match, "repeat": repeat}, {"reply": reply}),
                             self.record({"match": match, "repeat": repeat},
                                         {"replies": replies}))
        top = self.record({
            "schema_version": st.sampled_from([1, 2]) if self.junk else st.just(1),
            "name": SHORT, "description": SHORT,
            "classifier": st.sampled_from(["claude-code", "plain"] + (["x"] if self.junk
                                                                      else [])),
            "side_replies": st.sampled_from(["auto", "none"] + (["some"] if self.junk else [])),
            "models": st.lists(SHORT, max_size=3),
            "rules": st.lists(rule, max_size=4)})
        # Whole scenarios, and single rules, matches and replies so that deep fields are
        # reached as often as top-level ones.
        one_rule = rule.map(lambda r: {"rules": [r]})
        one_match = match.map(lambda m: {"rules": [{"match": m, "reply": {"text": "x"}}]})
        one_reply = reply.map(lambda r: {"rules": [{"reply": r}]})
        shapes = [top, one_rule, one_match, one_reply, one_reply]
        return st.one_of(*shapes, JUNK) if self.junk else st.one_of(*shapes)


SCENARIO_JUNK = Shapes(junk=True).scenario()
SCENARIO_VALID = Shapes(junk=False).scenario()
# "where: what is wrong (... found ...)"; where is a path in the data or "(top level)"
NAME = r"[a-z_][a-z0-9_]*"
PROBLEM = re.compile(rf"(?P<where>\(top level\)|(?:{NAME}|\[\d+\])(?:\[\d+\]|\.{NAME})*): "
                     r"(?P<what>.+)", re.DOTALL)


def outcome_of(load: Callable[[], Scenario]) -> Scenario | ScenarioError:
    """The loader's answer: a Scenario or a ScenarioError; any other exception fails."""
    try:
        return load()
    except ScenarioError as error:
        return error
    except BaseException as error:
        raise AssertionError(f"the loader raised {type(error).__name__} instead of listing "
                             f"the problem: {error!s:.300}") from error


def check_problems(error: ScenarioError) -> list[tuple[str, str]]:
    assert isinstance(error.problems, list) and error.problems, error
    located = []
    for problem in error.problems:
        assert isinstance(problem, str), problem
        match = PROBLEM.fullmatch(problem)
        assert match, f"a problem without its place: {problem!r}"
        assert re.search(r"\bfound\b", match["what"]), f"a problem without what was found: " \
                                                       f"{problem!r}"
        located.append((match["where"], match["what"]))
    return located


def why_unresolved(data: Any, where: str) -> str | None:
    """Why the place ``where`` is not in ``data`` (None if it is, or is a missing key)."""
    if where == "(top level)":
        return None
    parts = re.findall(rf"\[(\d+)\]|({NAME})", where)
    node = data
    for position, (index, key) in enumerate(parts):
        if index:
            if not isinstance(node, list) or int(index) >= len(node):
                return f"no item [{index}] in {type(node).__name__}"
            node = node[int(index)]
        elif not isinstance(node, dict):
            return f"no key {key!r} in {type(node).__name__} {node!r:.40}"
        elif key in node:
            node = node[key]
        elif position < len(parts) - 1:
            return f"no key {key!r}"
        # else: a field left out (required, or whose default is what is wrong)
    return None


def test_any_scenario_data_is_a_scenario_or_a_list_of_located_problems(tmp_path: Path) -> None:
    file = tmp_path / "scenario"

    @settings(FUZZ, max_examples=300)
    @given(SCENARIO_JUNK, st.sampled_from([".json", ".yaml"]))
    def check(data: Any, suffix: str) -> None:
        parsed = outcome_of(lambda: parse_scenario(data, "fuzz"))
        if isinstance(parsed, ScenarioError):
            check_problems(parsed)
        # the same data as a file
        path = file.with_suffix(suffix)
        path.write_text(json.dumps(data) if suffix == ".json" else yaml_dump(data))
        loaded = outcome_of(lambda: load_scenario(path))
        assert type(loaded) is type(parsed), (parsed, loaded)
        if isinstance(loaded, ScenarioError):
            assert loaded.problems == parsed.problems  # type: ignore[union-attr]

    check()


def test_every_problem_names_a_place_that_is_in_the_data() -> None:
    @settings(FUZZ, max_examples=300)
    @given(SCENARIO_JUNK)
    def check(data: Any) -> None:
        parsed = outcome_of(lambda: parse_scenario(data, "fuzz"))
        if isinstance(parsed, ScenarioError):
            for where, what in check_problems(parsed):
                why = why_unresolved(data, where)
                assert why is None, f"{where!r} is not a place in the data ({why}): {what}"

    check()


def test_a_scenario_the_loader_accepts_can_be_served(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "journal.jsonl")
    file = tmp_path / "scenario.json"
    accepted = 0

    @FUZZ
    @given(SCENARIO_VALID)
    def check(data: Any) -> None:
        nonlocal accepted
        file.write_text(json.dumps(data))
        loaded = outcome_of(lambda: load_scenario(file))
        if isinstance(loaded, ScenarioError):
            reject()  # e.g. a rule id reused: the loader said so, which is all it must do
        assert isinstance(loaded, Scenario)
        accepted += 1
        context = {name: "value" for name in loaded.placeholders()}
        try:
            MockApp(loaded, journal, context=context)
        except BaseException as error:
            raise AssertionError(f"load_scenario accepted {file.name}, but the mock cannot "
                                 f"serve it: {type(error).__name__}: {error!s:.300}") from error

    try:
        check()
    finally:
        journal.close()
    assert accepted >= 100


def yaml_dump(data: Any) -> str:
    # allow_unicode=True makes PyYAML write U+0085 (a YAML line break) raw inside a quoted
    # scalar, which its own loader then folds to a space: escapes round-trip every string.
    return yaml.safe_dump(data, sort_keys=False)


# ---- scenario files with what only files have: nesting, YAML types, aliases ------------------

NESTING_DEPTHS = (100, 500, 1000, 5000)


def nested_files(depth: int, suffix: str) -> dict[str, str]:
    """Scenario files with ``depth`` levels of lists where a string, rules or an input go."""
    nested = "[" * depth + "]" * depth  # JSON, and YAML's flow style
    tool = '{"rules": [{"reply": {"content": [{"type": "tool_use", "name": "R", "input": '
    return {
        "name": '{"name": ' + nested + "}",
        "rules": '{"rules": ' + nested + "}",
        "tool input": tool + '{"deep": ' + nested + "}}]}}]}",
    }


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_deeply_nested_scenario_files_are_refused_as_problems(tmp_path: Path,
                                                              suffix: str) -> None:
    wrong: list[str] = []
    for depth in NESTING_DEPTHS:
        for place, content in nested_files(depth, suffix).items():
            path = tmp_path / f"{place.replace(' ', '-')}-{depth}{suffix}"
            path.write_text(content)
            try:
                loaded = load_scenario(path)
            except ScenarioError as error:
                check_problems_or_decoding(error)
                continue
            except BaseException as error:  # collected: every depth and place is reported
                wrong.append(f"{depth} levels in {place}: {type(error).__name__}: {error!s:.80}")
                continue
            try:
                MockApp(loaded, Journal(tmp_path / "journal.jsonl"))
            except BaseException as error:
                wrong.append(f"{depth} levels in {place}: accepted, then the mock cannot "
                             f"serve it: {type(error).__name__}: {error!s:.80}")
    assert not wrong, "\n".join(wrong)


def check_problems_or_decoding(error: ScenarioError) -> None:
    if error.problems and error.problems[0].startswith(("not valid JSON: ", "not valid YAML: ")):
        assert len(error.problems) == 1
        return
    check_problems(error)


@pytest.mark.parametrize("content", [
    pytest.param("name: {2024-01-01: a date as a key}\n", id="date-key-in-a-found-value"),
    pytest.param("rules: [{match: {turn: {2024-01-01: x}}, reply: {text: a}}]\n",
                 id="date-key-deeper"),
    pytest.param("name: &self [*self]\n", id="alias-cycle"),
    pytest.param("rules: &self [{reply: {text: a}, match: *self}]\n", id="alias-cycle-in-rules"),
    pytest.param("name: !!set {a, b}\nmodels: !!binary aGVsbG8=\n", id="set-and-binary"),
    pytest.param("? [1, 2]\n: x\n", id="list-as-key"),
    pytest.param("1.5: x\n~: y\n", id="non-string-keys"),
])
def test_yaml_oddities_are_refused_as_problems(tmp_path: Path, content: str) -> None:
    path = tmp_path / "odd.yaml"
    path.write_text(content)
    error = outcome_of(lambda: load_scenario(path))
    assert isinstance(error, ScenarioError), error
    assert error.problems and all(isinstance(p, str) and p for p in error.problems)


# ---- one file, many mistakes: all of them are listed ----------------------------------------

MANY_MISTAKES = {
    "schema_version": 2,
    "name": ["not", "a", "string"],
    "classifier": "smart",
    "models": "claude-sonnet-4-5",
    "rulez": [],
    "rules": [
        {"id": "first", "match": {"kind": "main", "turn": -1, "attempt": 0},
         "reply": {"text": "a"}},
        {"id": "first", "reply": {"text": "the same id again"}},
        {"match": {"stream": "sometimes", "path": 5},
         "replies": [{"error": {"status": 600}},
                     {"raw": {"status": 99, "chunks": [{"data": "x", "data_base64": "eA=="}]}}]},
        {"reply": {"content": [{"type": "text", "text": "x", "chunk_size": 0}],
                   "stall": {"after_events": 1, "before_event": "ping", "seconds": -1},
                   "usage": {"input_tokens": -5}}},
        {"reply": {"text": "x"}, "replies": [{"text": "y"}], "repeat": "forever"},
        "not a rule",
    ],
}

# Every mistake, in document order (duplicate ids last, as the loader finds them afterwards).
# Two rules have a mistake in a field *and* a mistake in how their fields go together
# (rules[3].reply.stall, rules[4]); both kinds must be listed at once.
MANY_MISTAKES_PROBLEMS = [
    "schema_version: Input should be 1 (found 2)",
    'name: Input should be a valid string (found ["not", "a", "string"])',
    "classifier: Input should be 'claude-code' or 'plain' (found \"smart\")",
    'models: Input should be a valid list (found "claude-sonnet-4-5")',
    "rules[0].match.turn: Input should be greater than or equal to 1 (found -1)",
    "rules[0].match.attempt: Input should be greater than or equal to 1 (found 0)",
    'rules[2].match.stream: Input should be a valid boolean, unable to interpret input '
    '(found "sometimes")',
    "rules[2].match.path: Input should be a valid string (found 5)",
    "rules[2].replies[0].error.status: Input should be less than or equal to 599 (found 600)",
    "rules[2].replies[1].raw.status: Input should be greater than or equal to 100 (found 99)",
    "rules[2].replies[1].raw.chunks[0]: Value error, give exactly one of `data` or "
    '`data_base64` (found {"data": "x", "data_base64": "eA=="})',
    "rules[3].reply.content[0].chunk_size: Input should be greater than 0 (found 0)",
    "rules[3].reply.usage.input_tokens: Input should be greater than or equal to 0 (found -5)",
    "rules[3].reply.stall.seconds: Input should be greater than or equal to 0 (found -1)",
    "rules[3].reply.stall: Value error, give exactly one of `after_events` or `before_event` "
    '(found {"after_events": 1, "before_event": "ping", "seconds": -1})',
    "rules[4]: Value error, give exactly one of `reply` or `replies` "
    '(found {"reply": {"text": "x"}, "replies": [{"text": "y"}], "repeat": "forever"})',
    "rules[4].repeat: Input should be 'once' or 'always' (found \"forever\")",
    'rules[5]: Input should be a valid dictionary or instance of Rule (found "not a rule")',
    "rulez: unknown key \"rulez\" in the scenario; expected one of schema_version, name, "
    "description, classifier, side_replies, validation, thread_idle_seconds, message_ids, models, rules; "
    "did you mean \"rules\"? (found {\"rulez\": []})",
    "rules[1].id: rule id 'first' is used twice, first by rules[0] (found \"first\")",
]


def test_a_file_with_many_mistakes_lists_every_one(tmp_path: Path) -> None:
    path = tmp_path / "many-mistakes.json"
    path.write_text(json.dumps(MANY_MISTAKES, indent=2))
    with pytest.raises(ScenarioError) as raised:
        load_scenario(path)
    assert raised.value.source == str(path)
    problems = raised.value.problems
    missing = [p for p in MANY_MISTAKES_PROBLEMS if p not in problems]
    unexpected = [p for p in problems if p not in MANY_MISTAKES_PROBLEMS]
    assert not missing and not unexpected, (
        f"mistakes not listed: {missing}; problems not expected: {unexpected}")
    assert sorted(problems) == sorted(MANY_MISTAKES_PROBLEMS)  # none listed twice
    assert str(raised.value).startswith(
        f"invalid scenario {path}: {len(MANY_MISTAKES_PROBLEMS)} problem(s)\n")
