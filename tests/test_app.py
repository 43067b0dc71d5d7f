"""The mock's HTTP surface, in process (no socket): Messages API, errors, recording, admin."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from starlette.testclient import TestClient

from mockapi.journal.read import read_journal
from mockapi.journal.write import Journal
from mockapi.script.events import PreparedMessage, prepare
from mockapi.script.matching import Match
from mockapi.script.replies import (
    Message,
    StreamError,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
    api_error,
    message,
    raw,
    text,
    tool_use,
)
from mockapi.script.scenario import Rule, Scenario
from mockapi.script.sse import decode_events
from mockapi.serve.admin import SCENARIO_BODY
from mockapi.serve.app import MockApp

API_HEADERS = {"x-api-key": "test-key", "anthropic-version": "2023-06-01"}
TOOLS = [{"name": "Read", "description": "read", "input_schema": {"type": "object"}}]


@dataclass
class Mock:
    app: MockApp
    client: TestClient
    journal_path: Path

    def records(self) -> list[dict[str, Any]]:
        return read_journal(self.journal_path).records

    def requests(self) -> list[dict[str, Any]]:
        return read_journal(self.journal_path).requests()

    def last(self) -> dict[str, Any]:
        return self.requests()[-1]

    def post(self, body: Any = None, *, path: str = "/v1/messages",
             headers: dict[str, str] | None = None, content: Any = None) -> Any:
        sent_headers = {**API_HEADERS, **(headers or {})}
        if content is None:
            content = orjson.dumps(body)
            sent_headers.setdefault("content-type", "application/json")
        return self.client.post(path, headers=sent_headers, content=content)


MakeMock = Callable[..., Mock]


@pytest.fixture
def make_mock(tmp_path: Path) -> Iterator[MakeMock]:
    journals: list[Journal] = []

    def make(scenario: Scenario | None = None, **options: Any) -> Mock:
        path = tmp_path / f"journal-{len(journals)}.jsonl"
        journal = Journal(path)
        journals.append(journal)
        app = MockApp(scenario or Scenario(), journal, **options)
        return Mock(app, TestClient(app.app), path)

    yield make
    for journal in journals:
        journal.close()


def body_for(*user_texts: str, stream: bool = False, **extra: Any) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    for i, content in enumerate(user_texts):
        if i:
            messages.append({"role": "assistant", "content": "ok"})
        messages.append({"role": "user", "content": content})
    body: dict[str, Any] = {"model": "claude-sonnet-4-5", "max_tokens": 1024,
                            "messages": messages, "tools": TOOLS, "stream": stream}
    body.update(extra)
    return body


def envelope(error_type: str, message: str, request_id: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": error_type, "message": message},
            "request_id": request_id}


def expected_stream(reply: Message, id_prefix: str, message_id: str, model: str) -> bytes:
    prepared = prepare(reply, id_prefix)
    assert isinstance(prepared, PreparedMessage)
    return prepared.message_start(message_id, model) + b"".join(prepared.tail)


# sequential reply ids where the wire is compared byte for byte (the default is unguessable)
SEQUENTIAL = "sequential"
ALWAYS_HI = Scenario(message_ids=SEQUENTIAL, rules=[Rule(id="hi", reply=text("hi"), repeat="always")])


# ---- POST /v1/messages -------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/v1/messages", "/v1/messages?beta=true"])
def test_non_streaming_message(make_mock: MakeMock, path: str) -> None:
    mock = make_mock(ALWAYS_HI)
    response = mock.post(body_for("hello"), path=path)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.headers["request-id"] == "req_loopprobe_000001"
    assert response.json() == {
        "id": "msg_loopprobe_000001", "type": "message", "role": "assistant",
        "model": "claude-sonnet-4-5", "content": [{"type": "text", "text": "hi"}],
        "stop_reason": "end_turn", "stop_sequence": None,
        "usage": {"input_tokens": 100, "cache_creation_input_tokens": 0,
                  "cache_read_input_tokens": 0, "output_tokens": 1}}
    record = mock.last()
    assert {k: record[k] for k in ("type", "seq", "run", "method", "path", "query", "outcome",
                                   "status", "kind", "turn", "attempt", "stream", "model",
                                   "rule", "reply_index", "replay_of", "reply", "body")} == {
        "type": "request", "seq": 1, "run": 1, "method": "POST", "path": "/v1/messages",
        "query": "beta=true" if "?" in path else "", "outcome": "replied", "status": 200,
        "kind": "main", "turn": 1, "attempt": 1, "stream": False, "model": "claude-sonnet-4-5",
        "rule": "hi", "reply_index": 0, "replay_of": None, "reply": {"text": "hi"},
        "body": body_for("hello")}
    assert record["headers"]["x-api-key"] == "[redacted]"
    assert record["headers"]["anthropic-version"] == "2023-06-01"


@pytest.mark.parametrize("path", ["/v1/messages", "/v1/messages?beta=true"])
def test_streaming_message_is_byte_exact(make_mock: MakeMock, path: str) -> None:
    reply = message(ThinkingBlock(thinking="plan"), TextBlock(text="Reading."),
                    ToolUseBlock(name="Read", input={"file_path": "/w/a.txt"}))
    mock = make_mock(Scenario(message_ids=SEQUENTIAL, rules=[Rule(id="r", reply=reply)]))
    response = mock.post(body_for("go", stream=True, model="claude-opus-4-1"), path=path)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["request-id"] == "req_loopprobe_000001"
    expected = expected_stream(reply, "r_0", "msg_loopprobe_000001", "claude-opus-4-1")
    assert response.content == expected  # no comment pings, no \r\n
    end = [r for r in mock.records() if r["type"] == "response_end"]
    assert len(end) == 1
    assert (end[0]["seq"], end[0]["reason"], end[0]["bytes_sent"], end[0]["events_sent"]) == (
        1, "complete", len(expected), len(list(decode_events(expected))))


def test_scripted_model_and_id_override_the_request(make_mock: MakeMock) -> None:
    mock = make_mock(Scenario(rules=[Rule(reply=text("x", model="claude-x", id="msg_fixed",
                                                      headers={"x-extra": "1"}))]))
    response = mock.post(body_for("a"))
    assert (response.json()["id"], response.json()["model"]) == ("msg_fixed", "claude-x")
    assert response.headers["x-extra"] == "1"


def test_unknown_fields_are_accepted(make_mock: MakeMock) -> None:
    mock = make_mock(ALWAYS_HI)
    body = body_for("hello", context_management={"edits": [{"type": "clear"}]},
                    mcp_servers=[], service_tier="auto", output_config={"effort": "low"},
                    a_field_from_next_month={"nested": [1, 2, {"x": None}]})
    response = mock.post(body)
    assert response.status_code == 200
    assert response.json()["content"] == [{"type": "text", "text": "hi"}]
    assert mock.last()["body"] == body


def test_any_anthropic_version_and_a_bearer_token_are_accepted(make_mock: MakeMock) -> None:
    mock = make_mock(ALWAYS_HI)
    response = mock.client.post("/v1/messages", content=orjson.dumps(body_for("a")), headers={
        "authorization": "Bearer tok", "anthropic-version": "2099-12-31",
        "content-type": "application/json"})
    assert response.status_code == 200
    assert mock.last()["headers"]["authorization"] == "[redacted]"


def test_non_streaming_resend_replays_the_streamed_reply(make_mock: MakeMock) -> None:
    reply = tool_use("Read", {"file_path": "/x"}, id="toolu_1")
    mock = make_mock(Scenario(rules=[Rule(id="read", reply=reply)]))
    streamed = mock.post(body_for("go", stream=True))
    fallback = mock.post(body_for("go", stream=False))
    assert streamed.status_code == fallback.status_code == 200
    assert fallback.json()["content"] == [
        {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "/x"}}]
    assert fallback.json()["stop_reason"] == "tool_use"
    second = mock.last()
    assert (second["rule"], second["turn"], second["attempt"], second["replay_of"]) == (
        "read", 1, 2, 1)


def test_scripted_api_error(make_mock: MakeMock) -> None:
    mock = make_mock(Scenario(rules=[Rule(reply=api_error(
        529, "Overloaded", headers={"retry-after": "7", "x-should-retry": "true"}))]))
    response = mock.post(body_for("a", stream=True))
    assert response.status_code == 529
    assert response.json() == envelope("overloaded_error", "Overloaded", "req_loopprobe_000001")
    assert response.headers["retry-after"] == "7"
    assert response.headers["x-should-retry"] == "true"
    assert response.headers["request-id"] == "req_loopprobe_000001"
    assert (mock.last()["outcome"], mock.last()["status"]) == ("replied", 529)


def test_scripted_raw_reply(make_mock: MakeMock) -> None:
    mock = make_mock(Scenario(rules=[Rule(reply=raw("data: {}\n\n", b"\xff", status=200,
                                                    content_type="text/plain"))]))
    response = mock.post(body_for("a", stream=True))
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    assert response.content == b"data: {}\n\n\xff"
    end = [r for r in mock.records() if r["type"] == "response_end"]
    assert [(e["reason"], e["events_sent"], e["bytes_sent"]) for e in end] == [
        ("complete", 2, 11)]


@pytest.mark.parametrize(
    ("fault", "after", "reason"),
    [
        ({"truncate": {"after_events": 3}}, 3, "truncated_by_script"),
        ({"stream_error": {"after_events": 2}}, 2, "stream_error_by_script"),
        ({"stream_error": {"after_events": 0, "type": "api_error", "message": "boom"}}, 0,
         "stream_error_by_script"),
    ],
)
def test_stream_faults(make_mock: MakeMock, fault: dict[str, Any], after: int,
                       reason: str) -> None:
    reply = Message.model_validate({"text": "hello", **fault})
    mock = make_mock(Scenario(message_ids=SEQUENTIAL, rules=[Rule(id="f", reply=reply)]))
    response = mock.post(body_for("a", stream=True))
    clean = expected_stream(text("hello"), "f_0", "msg_loopprobe_000001", "claude-sonnet-4-5")
    events = [name for name, _ in decode_events(clean)]
    kept = b"".join(clean.split(b"\n\n")[i] + b"\n\n" for i in range(after))
    sent_events = after
    if reply.stream_error is not None:
        error: StreamError = reply.stream_error
        kept += ("event: error\ndata: " + json.dumps(
            {"type": "error", "error": {"type": error.type, "message": error.message}},
            separators=(",", ":")) + "\n\n").encode()
        sent_events += 1
    assert len(events) == 7
    assert response.content == kept
    (end,) = [r for r in mock.records() if r["type"] == "response_end"]
    assert (end["reason"], end["events_sent"], end["bytes_sent"]) == (
        reason, sent_events, len(kept))


def test_anthropic_sdk_reads_stream_and_json(make_mock: MakeMock) -> None:
    anthropic = pytest.importorskip("anthropic")
    httpx2 = pytest.importorskip("httpx2")
    reply = message(ThinkingBlock(thinking="hmm " * 20), TextBlock(text="Let me read it."),
                    ToolUseBlock(name="Read", input={"file_path": "/w/é.txt", "limit": 3},
                                 chunk_size=4))
    mock = make_mock(Scenario(rules=[Rule(id="r", reply=reply, repeat="always")]))

    async def run() -> tuple[Any, Any]:
        async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=mock.app.app)) as http:
            client = anthropic.AsyncAnthropic(api_key="k", base_url="http://mock",
                                              http_client=http, max_retries=0)
            async with client.messages.stream(
                    model="claude-sonnet-4-5", max_tokens=100, tools=TOOLS,
                    messages=[{"role": "user", "content": "go"}]) as stream:
                streamed = await stream.get_final_message()
            plain = await client.messages.create(
                model="claude-sonnet-4-5", max_tokens=100, tools=TOOLS,
                messages=[{"role": "user", "content": "go again"}])
            return streamed, plain

    streamed, plain = asyncio.run(run())
    # the repetition of an `always` reply gets tool ids of its own
    for result, tool_id in ((streamed, "toolu_r_0_2"), (plain, "toolu_r_0_2_2")):
        assert result.stop_reason == "tool_use"
        assert [b.type for b in result.content] == ["thinking", "text", "tool_use"]
        assert result.content[2].input == {"file_path": "/w/é.txt", "limit": 3}
        assert result.content[2].id == tool_id
        assert result.content[0].thinking == "hmm " * 20
        assert result.content[0].signature
    assert [r["outcome"] for r in mock.requests()] == ["replied", "replied"]


# ---- invalid requests -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"not json", "The request body is not valid JSON: "),
        (b"", "The request body is not valid JSON: "),
        (b'{"model": "m",', "The request body is not valid JSON: "),
        (b"[1, 2]", "The request body must be a JSON object, got list"),
        (b'"text"', "The request body must be a JSON object, got str"),
        (b"null", "The request body must be a JSON object, got NoneType"),
    ],
)
def test_bodies_that_are_not_json_objects(make_mock: MakeMock, content: bytes,
                                          message: str) -> None:
    mock = make_mock(ALWAYS_HI)
    response = mock.post(content=content, headers={"content-type": "application/json"})
    assert response.status_code == 400
    got = response.json()
    assert set(got) == {"type", "error", "request_id"}
    assert got["type"] == "error"
    assert got["request_id"] == "req_loopprobe_000001"
    assert got["error"]["type"] == "invalid_request_error"
    assert got["error"]["message"].startswith(message)
    assert response.headers["request-id"] == "req_loopprobe_000001"
    record = mock.last()
    assert (record["outcome"], record["status"], record["error"]) == (
        "invalid_request", 400, got["error"]["message"])
    assert record["body_size"] == len(content)


@pytest.mark.parametrize("content", [b"not json", b'{"model": "m",'])
def test_a_body_that_is_not_json_is_recorded_as_text(make_mock: MakeMock, content: bytes) -> None:
    mock = make_mock(ALWAYS_HI)
    assert mock.post(content=content, headers={"content-type": "application/json"}
                     ).status_code == 400
    assert mock.last()["body_text"] == content.decode()
    assert "body" not in mock.last()


def test_a_body_that_is_not_utf8_is_recorded_as_base64(make_mock: MakeMock) -> None:
    mock = make_mock(ALWAYS_HI)
    response = mock.post(content=b"\xff\xfe\x00", headers={"content-type": "application/json"})
    assert response.status_code == 400
    assert mock.last()["body_base64"] == base64.b64encode(b"\xff\xfe\x00").decode()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"max_tokens": 5, "messages": []}, "model: Field required"),
        ({"model": "m", "messages": []}, "max_tokens: Field required"),
        ({"model": "m", "max_tokens": 5}, "messages: Field required"),
        ({}, "model: Field required"),
        ({"model": 5, "max_tokens": 5, "messages": []},
         "model: Input should be a valid string, got int"),
        ({"model": None, "max_tokens": 5, "messages": []},
         "model: Input should be a valid string, got NoneType"),
        ({"model": "m", "max_tokens": "5", "messages": []},
         "max_tokens: Input should be a valid integer, got str"),
        ({"model": "m", "max_tokens": True, "messages": []},
         "max_tokens: Input should be a valid integer, got bool"),
        ({"model": "m", "max_tokens": 1.5, "messages": []},
         "max_tokens: Input should be a valid integer, got float"),
        ({"model": "m", "max_tokens": 5, "messages": {"role": "user"}},
         "messages: Input should be a valid list, got dict"),
        ({"model": "m", "max_tokens": 5, "messages": "hi"},
         "messages: Input should be a valid list, got str"),
    ],
)
def test_missing_and_mistyped_required_fields(make_mock: MakeMock, body: dict[str, Any],
                                              message: str) -> None:
    mock = make_mock(ALWAYS_HI)
    response = mock.post(body)
    assert response.status_code == 400
    assert response.json() == envelope("invalid_request_error", message, "req_loopprobe_000001")
    assert (mock.last()["outcome"], mock.last()["status"]) == ("invalid_request", 400)


@pytest.mark.parametrize(
    ("content", "headers", "status"),
    [
        pytest.param(b'{"model": "m"}', API_HEADERS, 400, id="missing-fields"),
        pytest.param(b'{"model": 5, "max_tokens": 1, "messages": []}', API_HEADERS, 400,
                     id="wrong-type"),
        pytest.param(b"[1, 2]", API_HEADERS, 400, id="not-an-object"),
        pytest.param(b'{"model": "m", "max_tokens": 1, "messages": []}', {"x-api-key": "k"},
                     400, id="no-version"),
        pytest.param(b'{"model": "m", "max_tokens": 1, "messages": []}',
                     {"anthropic-version": "2023-06-01"}, 401, id="no-key"),
    ],
)
def test_refused_json_bodies_are_journaled_as_json(make_mock: MakeMock, content: bytes,
                                                   headers: dict[str, str], status: int) -> None:
    mock = make_mock(ALWAYS_HI)
    response = mock.client.post("/v1/messages", content=content,
                                headers={**headers, "content-type": "application/json"})
    assert response.status_code == status
    record = mock.last()
    assert "body_text" not in record
    assert record.get("body") == orjson.loads(content)


def test_missing_anthropic_version(make_mock: MakeMock) -> None:
    mock = make_mock(ALWAYS_HI)
    response = mock.client.post("/v1/messages", content=orjson.dumps(body_for("a")),
                                headers={"x-api-key": "k", "content-type": "application/json"})
    assert response.status_code == 400
    assert response.json() == envelope("invalid_request_error",
                                       "anthropic-version: header is required",
                                       "req_loopprobe_000001")
    assert (mock.last()["outcome"], mock.last()["status"]) == ("invalid_request", 400)


@pytest.mark.parametrize("path", ["/v1/messages", "/v1/messages/count_tokens"])
def test_no_key_at_all_is_401(make_mock: MakeMock, path: str) -> None:
    mock = make_mock(ALWAYS_HI)
    response = mock.client.post(path, content=orjson.dumps(body_for("a")),
                                headers={"anthropic-version": "2023-06-01",
                                         "content-type": "application/json"})
    assert response.status_code == 401
    assert response.json() == envelope("authentication_error", "x-api-key header is required",
                                       "req_loopprobe_000001")
    assert mock.last()["status"] == 401


def test_too_large_by_content_length(make_mock: MakeMock) -> None:
    mock = make_mock(ALWAYS_HI, max_body_bytes=64)
    body = body_for("x" * 100)
    size = len(orjson.dumps(body))
    response = mock.post(body)
    assert response.status_code == 413
    assert response.json() == envelope(
        "request_too_large",
        f"Request exceeds the maximum allowed number of bytes (64); content-length was {size}",
        "req_loopprobe_000001")
    record = mock.last()
    assert (record["outcome"], record["status"], record["body_size"]) == ("too_large", 413, None)
    assert "body" not in record


def test_too_large_without_content_length(make_mock: MakeMock) -> None:
    mock = make_mock(ALWAYS_HI, max_body_bytes=64)

    def chunks() -> Iterator[bytes]:
        yield b'{"model": "m", "max_tokens": 5, "messages": [{"role": "user", '
        yield b'"content": "' + b"x" * 100 + b'"}]}'

    response = mock.post(content=chunks(), headers={"content-type": "application/json"})
    assert response.status_code == 413
    assert response.json() == envelope(
        "request_too_large", "Request exceeds the maximum allowed number of bytes (64)",
        "req_loopprobe_000001")
    assert mock.last()["outcome"] == "too_large"


def test_a_body_at_the_limit_is_accepted(make_mock: MakeMock) -> None:
    body = body_for("x")
    mock = make_mock(ALWAYS_HI, max_body_bytes=len(orjson.dumps(body)))
    assert mock.post(body).status_code == 200


def test_no_rule_is_a_400_naming_kind_and_turn(make_mock: MakeMock) -> None:
    mock = make_mock(Scenario(rules=[Rule(id="first", match=Match(turn=1), reply=text("1"))]))
    assert mock.post(body_for("a")).status_code == 200
    response = mock.post(body_for("a", "b"))
    message = ("loopprobe mock: no scenario rule matched request #2 (kind=main, turn=2, "
               "attempt=1); nearest rule 'first': turn: expected 1, got 2; "
               "spent: served its 1 reply(ies) (repeat: once)")
    assert response.status_code == 400
    assert response.json() == envelope("invalid_request_error", message, "req_loopprobe_000002")
    assert response.headers["x-should-retry"] == "false"
    record = mock.last()
    assert {k: record[k] for k in ("outcome", "status", "error", "kind", "turn", "attempt",
                                   "rule", "nearest")} == {
        "outcome": "no_rule", "status": 400, "error": message, "kind": "main", "turn": 2,
        "attempt": 1, "rule": None,
        "nearest": [{"rule": "first", "misses": [
            "turn: expected 1, got 2", "spent: served its 1 reply(ies) (repeat: once)"]}]}


def test_side_requests_get_builtin_answers_over_http(make_mock: MakeMock) -> None:
    mock = make_mock(Scenario(classifier="claude-code", rules=[Rule(id="main", reply=text("M"))]))
    warm = mock.post(body_for("Warmup"))
    title_body = body_for("hello", thinking={"type": "disabled"}, output_config={"format": {
        "type": "json_schema", "schema": {"type": "object",
                                          "properties": {"title": {"type": "string"}}}}})
    del title_body["tools"]
    title = mock.post(title_body)
    main = mock.post(body_for("hello"))
    assert warm.json()["content"] == [{"type": "text", "text": "OK"}]
    assert json.loads(title.json()["content"][0]["text"]) == {"title": "loopprobe"}
    assert main.json()["content"] == [{"type": "text", "text": "M"}]
    assert [(r["kind"], r["rule"]) for r in mock.requests()] == [
        ("warmup", "builtin:warmup"), ("side", "builtin:side"), ("main", "main")]


# ---- count_tokens, models, hello, unknown paths --------------------------------------------------


@pytest.mark.parametrize("path", ["/v1/messages/count_tokens",
                                  "/v1/messages/count_tokens?beta=true"])
def test_count_tokens(make_mock: MakeMock, path: str) -> None:
    mock = make_mock(ALWAYS_HI)
    body = {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "hello"}],
            "tools": TOOLS}
    raw_body = orjson.dumps(body)
    response = mock.post(content=raw_body, path=path,
                         headers={"content-type": "application/json"})
    assert response.status_code == 200
    assert response.json() == {"input_tokens": len(raw_body) // 4}
    assert response.headers["request-id"] == "req_loopprobe_000001"
    record = mock.last()
    assert (record["path"], record["outcome"], record["status"], record["rule"]) == (
        "/v1/messages/count_tokens", "replied", 200, "builtin:count_tokens")
    # counting never spends a Messages rule
    assert mock.post(body_for("a")).json()["content"] == [{"type": "text", "text": "hi"}]
    assert mock.app.script.state()[0]["served"] == 1


def test_count_tokens_needs_model_and_messages_but_not_max_tokens(make_mock: MakeMock) -> None:
    mock = make_mock(ALWAYS_HI)
    response = mock.post({"model": "m"}, path="/v1/messages/count_tokens")
    assert response.status_code == 400
    assert response.json()["error"]["message"] == "messages: Field required"
    minimal = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    assert mock.post(minimal, path="/v1/messages/count_tokens").json() == {
        "input_tokens": len(orjson.dumps(minimal)) // 4}
    tiny = mock.post(content=b'{"model":"","messages":[{"role":"user","content":"x"}]}',
                     path="/v1/messages/count_tokens", headers={"content-type": "application/json"})
    assert tiny.json() == {"input_tokens": 13}
    empty = mock.post({"model": "m", "messages": []}, path="/v1/messages/count_tokens")
    assert (empty.status_code, empty.json()["error"]["message"]) == (
        400, "messages: at least one message is required, got []")


def test_models_list(make_mock: MakeMock) -> None:
    mock = make_mock(Scenario(models=["claude-a", "claude-b"]))
    response = mock.client.get("/v1/models", headers=API_HEADERS)
    assert response.status_code == 200
    assert response.json() == {
        "data": [
            {"type": "model", "id": "claude-a", "display_name": "claude-a",
             "created_at": "2025-01-01T00:00:00Z"},
            {"type": "model", "id": "claude-b", "display_name": "claude-b",
             "created_at": "2025-01-01T00:00:00Z"}],
        "has_more": False, "first_id": "claude-a", "last_id": "claude-b"}
    assert (mock.last()["path"], mock.last()["outcome"]) == ("/v1/models", "models")


def test_models_list_of_an_empty_scenario(make_mock: MakeMock) -> None:
    mock = make_mock(Scenario(models=[]))
    assert mock.client.get("/v1/models").json() == {
        "data": [], "has_more": False, "first_id": None, "last_id": None}


def test_one_model(make_mock: MakeMock) -> None:
    mock = make_mock(Scenario())
    response = mock.client.get("/v1/models/claude-opus-4-1", headers=API_HEADERS)
    assert response.status_code == 200
    assert response.json() == {"type": "model", "id": "claude-opus-4-1",
                               "display_name": "claude-opus-4-1",
                               "created_at": "2025-01-01T00:00:00Z"}


def test_unknown_model_is_404(make_mock: MakeMock) -> None:
    mock = make_mock(Scenario())
    response = mock.client.get("/v1/models/claude-nonexistent", headers=API_HEADERS)
    assert response.status_code == 404
    assert response.json() == envelope(
        "not_found_error", "Not found: GET /v1/models/claude-nonexistent", "req_loopprobe_000001")
    assert (mock.last()["outcome"], mock.last()["status"]) == ("not_found", 404)


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_hello(make_mock: MakeMock, method: str) -> None:
    mock = make_mock(Scenario())
    response = mock.client.request(method, "/api/hello")
    assert response.status_code == 200
    if method == "GET":
        assert response.json() == {"message": "hello"}
    record = mock.last()
    assert (record["method"], record["path"], record["outcome"], record["status"]) == (
        method, "/api/hello", "hello", 200)


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/v1/unknown"), ("POST", "/v1/complete"), ("GET", "/v1/messages"),
     ("PUT", "/v1/messages"), ("DELETE", "/v1/models/x"), ("PATCH", "/"),
     ("OPTIONS", "/v1/messages"), ("POST", "/v1/messages/"), ("GET", "/v1/messages/batches")],
)
def test_unknown_paths_are_404_and_recorded(make_mock: MakeMock, method: str,
                                            path: str) -> None:
    mock = make_mock(ALWAYS_HI)
    response = mock.client.request(method, path, headers=API_HEADERS,
                                   content=b'{"x": 1}' if method in ("POST", "PUT") else None)
    assert response.status_code == 404
    assert response.json() == envelope("not_found_error", f"Not found: {method} {path}",
                                       "req_loopprobe_000001")
    record = mock.last()
    assert (record["seq"], record["method"], record["path"], record["outcome"],
            record["status"]) == (1, method, path, "not_found", 404)
    if method in ("POST", "PUT"):
        assert record["body"] == {"x": 1}


@pytest.mark.parametrize("method", ["TRACE", "PROPFIND", "CONNECT"])
def test_any_method_is_recorded(make_mock: MakeMock, method: str) -> None:
    mock = make_mock(ALWAYS_HI)
    response = mock.client.request(method, "/v1/anything", headers=API_HEADERS)
    assert response.status_code in (404, 405)
    assert [(r["method"], r["path"]) for r in mock.requests()] == [(method, "/v1/anything")]


@pytest.mark.parametrize(
    ("method", "path", "body", "status"),
    [
        pytest.param("POST", "/v1/messages", body_for("a"), 200, id="message"),
        pytest.param("POST", "/v1/messages", body_for("a", stream=True), 200, id="stream"),
        pytest.param("POST", "/v1/messages", {"model": "m"}, 400, id="invalid"),
        pytest.param("POST", "/v1/messages/count_tokens",
                     {"model": "m", "messages": [{"role": "user", "content": "hi"}]}, 200,
                     id="count_tokens"),
        pytest.param("GET", "/v1/models", None, 200, id="models"),
        pytest.param("GET", "/v1/models/claude-sonnet-4-5", None, 200, id="model"),
        pytest.param("GET", "/v1/nope", None, 404, id="not-found"),
    ],
)
def test_request_id_header(make_mock: MakeMock, method: str, path: str, body: Any,
                           status: int) -> None:
    mock = make_mock(ALWAYS_HI)
    response = mock.client.request(method, path, headers=API_HEADERS,
                                   content=orjson.dumps(body) if body is not None else None)
    assert response.status_code == status
    assert response.headers.get("request-id") == "req_loopprobe_000001"


def test_every_request_is_journaled_in_order(make_mock: MakeMock) -> None:
    mock = make_mock(Scenario(rules=[Rule(id="one", reply=text("1"))]), max_body_bytes=2048)
    c = mock.client
    sent: list[tuple[str, str, str, int]] = []

    def check(response: Any, method: str, path: str, outcome: str) -> None:
        sent.append((method, path, outcome, response.status_code))

    check(c.head("/api/hello"), "HEAD", "/api/hello", "hello")
    check(mock.post(body_for("a")), "POST", "/v1/messages", "replied")
    check(mock.post(body_for("a", "b")), "POST", "/v1/messages", "no_rule")
    check(mock.post(content=b"{", headers={"content-type": "application/json"}),
          "POST", "/v1/messages", "invalid_request")
    check(mock.post(body_for("x" * 3000)), "POST", "/v1/messages", "too_large")
    check(c.post("/v1/messages", content=orjson.dumps(body_for("a"))),
          "POST", "/v1/messages", "invalid_request")
    check(mock.post({"model": "m", "messages": [{"role": "user", "content": "hi"}]},
                    path="/v1/messages/count_tokens"),
          "POST", "/v1/messages/count_tokens", "replied")
    check(c.get("/v1/models"), "GET", "/v1/models", "models")
    check(c.get("/v1/models/nope"), "GET", "/v1/models/nope", "not_found")
    check(c.get("/_mock/state"), "GET", "/_mock/state", "admin")
    check(c.get("/_mock/requests"), "GET", "/_mock/requests", "admin")
    check(c.post("/_mock/reset"), "POST", "/_mock/reset", "admin")
    check(c.get("/favicon.ico"), "GET", "/favicon.ico", "not_found")
    expected = [(m, p, o, s) for m, p, o, s in sent if not p.startswith("/_mock/")]
    requests = mock.requests()
    assert [(r["method"], r["path"], r["outcome"], r["status"]) for r in requests] == expected
    assert [r["seq"] for r in requests] == list(range(1, len(expected) + 1))
    assert [r["run"] for r in requests] == [1] * 9 + [2]
    assert not any(r["path"].startswith("/_mock") for r in mock.records() if "path" in r)


# ---- admin ------------------------------------------------------------------------------------


def test_admin_requests_lists_the_current_run(make_mock: MakeMock) -> None:
    mock = make_mock(ALWAYS_HI)
    mock.post(body_for("a"))
    mock.post(body_for("a", stream=True))
    listing = mock.client.get("/_mock/requests").json()
    assert listing["torn_tail"] is None
    assert [(r["type"], r["seq"]) for r in listing["records"]] == [
        ("request", 1), ("request", 2), ("response_end", 2)]
    assert listing["records"][0]["body"] == body_for("a")
    after = mock.client.get("/_mock/requests", params={"after": 1}).json()
    assert [(r["type"], r["seq"]) for r in after["records"]] == [
        ("request", 2), ("response_end", 2)]
    assert mock.client.post("/_mock/reset").json() == {"run": 2}
    mock.post(body_for("b"))
    current = mock.client.get("/_mock/requests").json()["records"]
    assert [(r["seq"], r["run"]) for r in current] == [(3, 2)]
    every = mock.client.get("/_mock/requests", params={"run": "all"}).json()["records"]
    assert [(r["seq"], r["run"]) for r in every] == [(1, 1), (2, 1), (2, 1), (3, 2)]


def test_admin_state(make_mock: MakeMock) -> None:
    mock = make_mock(Scenario(name="st", rules=[Rule(id="a", reply=text("{workspace}")),
                                                Rule(id="b", replies=[text("1"), text("2")],
                                                     repeat="always")]),
                     context={"workspace": "/w"})
    mock.post(body_for("x"))
    state = mock.client.get("/_mock/state").json()
    assert state == {
        "scenario": "st", "run": 1, "open_streams": 0, "journal": str(mock.journal_path),
        "context": {"workspace": "/w"}, "journal_problem": None, "journal_failed_writes": 0,
        "journal_last_failure": None, "threads": [],
        "thread_store": {"threads": 0, "bytes": 0, "max_threads": 1024,
                         "max_bytes": 64 * 1024 * 1024, "expired": 0, "evicted": 0,
                         "not_kept": 0},
        "builtin_replies": {"total": 0, "by_reply": {}, "requests": []},
        "connections": None,  # in-process: no server, no connection cap
        "rules": [
            {"id": "a", "replies": 1, "served": 1, "repeat": "once", "spent": True},
            {"id": "b", "replies": 2, "served": 0, "repeat": "always", "spent": False}]}


def test_admin_scenario_installs_a_good_one(make_mock: MakeMock) -> None:
    mock = make_mock(ALWAYS_HI)
    new = {"name": "fresh", "rules": [{"id": "ws", "reply": {"text": "at {workspace}"}}]}
    response = mock.client.post("/_mock/scenario",
                                json={"scenario": new, "context": {"workspace": "/tmp/w"}})
    assert response.status_code == 200
    assert response.json() == {"installed": True, "scenario": "fresh"}
    answer = mock.post(body_for("a"))
    assert answer.json()["content"] == [{"type": "text", "text": "at /tmp/w"}]
    assert mock.last()["rule"] == "ws"
    assert mock.client.get("/_mock/state").json()["scenario"] == "fresh"


def test_admin_scenario_accepts_yaml(make_mock: MakeMock) -> None:
    mock = make_mock(ALWAYS_HI)
    yaml_text = "name: from-yaml\nrules:\n  - id: y\n    reply: {text: YAML}\n"
    response = mock.client.post("/_mock/scenario", content=yaml_text,
                                headers={"content-type": "application/yaml"})
    assert response.json() == {"installed": True, "scenario": "from-yaml"}
    assert mock.post(body_for("a")).json()["content"] == [{"type": "text", "text": "YAML"}]


@pytest.mark.parametrize(
    ("request_kwargs", "problems"),
    [
        pytest.param({"json": {"scenario": {"rules": [
            {"match": {"turn": 0}, "reply": {"text": "x"}},
            {"reply": {"text": "y"}, "repeat": "twice"}]}}},
            ["rules[0].match.turn: Input should be greater than or equal to 1 (found 0)",
             "rules[1].repeat: Input should be 'once' or 'always' (found \"twice\")"],
            id="invalid-rules"),
        pytest.param({"json": {"scenario": {"rules": [{"reply": {"text": "{workspace}"}}]}}},
                     ["placeholder {workspace} has no value; the run provides: nothing"],
                     id="missing-placeholder"),
        pytest.param({"json": {"rules": []}},
                     [f"(top level): {SCENARIO_BODY}; found a bare scenario (keys: rules): "
                      'wrap it as {"scenario": ...}, or send it as YAML'],
                     id="no-envelope"),
        pytest.param({"content": b"{not json", "headers": {"content-type": "application/json"}},
                     [f"(top level): {SCENARIO_BODY}; found a body that is not valid JSON: "
                      "Expecting property name enclosed in double quotes: line 1 column 2 "
                      "(char 1)"], id="not-json"),
        pytest.param({"json": {"scenario": [1]}},
                     ["(top level): expected a mapping with `rules`, found list"],
                     id="scenario-not-mapping"),
    ],
)
def test_admin_scenario_refuses_a_bad_one(make_mock: MakeMock, request_kwargs: dict[str, Any],
                                          problems: list[str]) -> None:
    mock = make_mock(Scenario(name="old", rules=[Rule(id="old", reply=text("still here"),
                                                      repeat="always")]))
    response = mock.client.post("/_mock/scenario", **request_kwargs)
    assert response.status_code == 400
    assert response.json() == {"installed": False, "problems": problems}
    assert mock.post(body_for("a")).json()["content"] == [{"type": "text", "text": "still here"}]
    assert mock.last()["rule"] == "old"
    assert mock.client.get("/_mock/state").json()["scenario"] == "old"


def test_admin_reset_serves_rules_again(make_mock: MakeMock) -> None:
    mock = make_mock(Scenario(rules=[Rule(id="once", match=Match(turn=1), reply=text("first"))]))
    assert mock.post(body_for("a")).status_code == 200
    assert mock.post(body_for("b")).status_code == 400  # turn 2: nothing left
    response = mock.client.post("/_mock/reset")
    assert response.json() == {"run": 2}
    again = mock.post(body_for("c"))
    assert again.json()["content"] == [{"type": "text", "text": "first"}]
    record = mock.last()
    assert (record["run"], record["turn"], record["attempt"], record["rule"]) == (
        2, 1, 1, "once")
    assert mock.client.post("/_mock/reset").json() == {"run": 3}
    assert mock.client.get("/_mock/state").json()["run"] == 3


def test_admin_reset_keeps_the_rendered_context(make_mock: MakeMock) -> None:
    mock = make_mock(Scenario(rules=[Rule(reply=text("{workspace}"))]),
                     context={"workspace": "/ctx"})
    mock.client.post("/_mock/reset")
    assert mock.post(body_for("a")).json()["content"][0]["text"] == "/ctx"


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/_mock/requests"), ("GET", "/_mock/state"), ("POST", "/_mock/scenario"),
     ("PUT", "/_mock/scenario"), ("POST", "/_mock/reset")],
)
def test_admin_token(make_mock: MakeMock, method: str, path: str) -> None:
    mock = make_mock(ALWAYS_HI, admin_token="s3cret")
    kwargs: dict[str, Any] = {"json": {"scenario": {"rules": []}}} if "scenario" in path else {}
    denied = mock.client.request(method, path, **kwargs)
    assert denied.status_code == 403
    assert denied.json() == envelope(
        "permission_error", "the admin prefix needs the x-loopprobe-admin-token header",
        "req_loopprobe_admin")
    wrong = mock.client.request(method, path, headers={"x-loopprobe-admin-token": "nope"},
                                **kwargs)
    assert wrong.status_code == 403
    allowed = mock.client.request(method, path, headers={"x-loopprobe-admin-token": "s3cret"},
                                  **kwargs)
    assert allowed.status_code == 200
    # the Messages API itself needs no admin token
    assert mock.post(body_for("a")).status_code in (200, 400)
    assert all(not r["path"].startswith("/_mock") for r in mock.requests())


def test_admin_denied_leaves_the_state_alone(make_mock: MakeMock) -> None:
    mock = make_mock(ALWAYS_HI, admin_token="s3cret")
    mock.client.post("/_mock/reset")
    mock.client.post("/_mock/scenario", json={"scenario": {"name": "evil", "rules": []}})
    assert (mock.app.run, mock.app.scenario.name) == (1, "unnamed")
