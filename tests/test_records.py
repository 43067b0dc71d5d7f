"""Journal records: the builders' exact bytes, and every line a real mock writes fits its type."""

from __future__ import annotations

import itertools
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, NotRequired, Union, get_args, get_origin

import httpx
import pytest
import typing_extensions

from mockapi import Journal, Match, MockServer, Rule, Scenario, api_error, raw, text
from mockapi.journal import records as records_module
from mockapi.journal.records import (
    EndReason,
    NearestRule,
    Outcome,
    RequestRecord,
    ResponseEndRecord,
    Routing,
    request_record,
    response_end_record,
    spliced_fields,
)

StartMock = Callable[..., MockServer]
HEADERS = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
ROUTING: Routing = {"kind": "main", "turn": 1, "attempt": 2, "stream": True, "model": "m",
                    "rule": "r", "reply_index": 0, "replay_of": None}
BASE: dict[str, Any] = {"seq": 7, "run": 1, "time": 1.5, "elapsed": 0.25, "method": "POST",
                        "path": "/v1/messages", "query": "", "headers": {"x-api-key": "[redacted]"}}
HEAD = (b'{"type":"request","seq":7,"run":1,"time":1.5,"elapsed":0.25,"method":"POST",'
        b'"path":"/v1/messages","query":"","headers":{"x-api-key":"[redacted]"},')


def constants(prefix: str) -> set[str]:
    return {getattr(records_module, name) for name in records_module.__all__
            if name.startswith(prefix)}


def test_the_constants_are_the_literal_values() -> None:
    assert constants("END_") == set(get_args(EndReason))
    assert constants("OUTCOME_") == set(get_args(Outcome))


def write(tmp_path: Path, record: Any, *extra: bytes) -> bytes:
    journal = Journal(tmp_path / "j.jsonl")
    journal.append(record, *extra)
    journal.close()
    return (tmp_path / "j.jsonl").read_bytes()


LINES: list[tuple[str, dict[str, Any], tuple[bytes | None, bytes | None, bool], bytes]] = [
    ("replied", {"outcome": "replied", "status": 200, "routing": ROUTING},
     (b'{"text":"hi"}', b'{"a": 1}', True),
     HEAD + b'"body_size":8,"outcome":"replied","status":200,"kind":"main","turn":1,'
     b'"attempt":2,"stream":true,"model":"m","rule":"r","reply_index":0,"replay_of":null,'
     b'"reply":{"text":"hi"},"body":{"a": 1}}\n'),
    ("no-rule", {"outcome": "no_rule", "status": 400, "error": "no rule",
                 "nearest": [{"rule": "r", "misses": ["turn: expected 2, found 1"]}],
                 "routing": {**ROUTING, "rule": None, "reply_index": None}},
     (None, b"{}", True),
     HEAD + b'"body_size":2,"outcome":"no_rule","status":400,"error":"no rule",'
     b'"nearest":[{"rule":"r","misses":["turn: expected 2, found 1"]}],"kind":"main",'
     b'"turn":1,"attempt":2,"stream":true,"model":"m","rule":null,"reply_index":null,'
     b'"replay_of":null,"body":{}}\n'),
    ("invalid-text-body", {"outcome": "invalid_request", "status": 400, "error": "bad"},
     (None, b"{nope", False),
     HEAD + b'"body_size":5,"outcome":"invalid_request","status":400,"error":"bad",'
     b'"body_text":"{nope"}\n'),
    ("binary-body", {"outcome": "invalid_request", "status": 400, "error": "bad"},
     (None, b"\xff", False),
     HEAD + b'"body_size":1,"outcome":"invalid_request","status":400,"error":"bad",'
     b'"body_base64":"/w=="}\n'),
    ("client-left", {"outcome": "client_disconnected", "status": None, "error": "gone"},
     (None, None, False),
     HEAD + b'"body_size":null,"outcome":"client_disconnected","status":null,'
     b'"error":"gone"}\n'),
]


@pytest.mark.parametrize(("fields", "spliced", "expected"), [(f, s, b) for _, f, s, b in LINES],
                         ids=[name for name, _, _, _ in LINES])
def test_request_record_line_is_byte_exact(
        tmp_path: Path, fields: dict[str, Any],
        spliced: tuple[bytes | None, bytes | None, bool], expected: bytes) -> None:
    reply, body, body_is_json = spliced
    record = request_record(**BASE, body_size=len(body) if body is not None else None, **fields)
    assert write(tmp_path, record, *spliced_fields(reply, body, body_is_json)) == expected


def test_response_end_record_line_is_byte_exact(tmp_path: Path) -> None:
    record = response_end_record(seq=3, run=2, time=1.5, elapsed=0.25,
                                 reason="truncated_by_script", events_sent=4, bytes_sent=99)
    assert write(tmp_path, record) == (
        b'{"type":"response_end","seq":3,"run":2,"time":1.5,"elapsed":0.25,'
        b'"reason":"truncated_by_script","events_sent":4,"bytes_sent":99}\n')


# ---- every record a real mock writes fits its TypedDict ---------------------------------


def _fits(value: Any, hint: Any) -> bool:
    origin, args = get_origin(hint), get_args(hint)
    if hint is Any:
        return True
    if hint is type(None):
        return value is None
    if origin in (Union, types.UnionType):
        return any(_fits(value, arg) for arg in args)
    if origin is Literal:
        return value in args
    if origin is list:
        return isinstance(value, list) and all(_fits(v, args[0]) for v in value)
    if origin is dict:
        return isinstance(value, dict) and all(
            _fits(k, args[0]) and _fits(v, args[1]) for k, v in value.items())
    if typing_extensions.is_typeddict(hint):  # the records are typing_extensions TypedDicts
        return isinstance(value, dict) and not _misfits(value, hint)
    if hint is float:
        return isinstance(value, float)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)


def _misfits(record: dict[str, Any], kind: Any) -> list[str]:
    """What in ``record`` its TypedDict does not describe: unknown, missing, mistyped, reordered."""
    hints = typing.get_type_hints(kind, include_extras=True)
    optional = {k for k, h in hints.items() if get_origin(h) is NotRequired}
    problems = [f"unknown key {k}" for k in record if k not in hints]
    problems += [f"missing key {k}" for k in hints if k not in optional and k not in record]
    for key, value in record.items():
        if key in hints:
            hint = get_args(hints[key])[0] if key in optional else hints[key]
            if not _fits(value, hint):
                problems.append(f"{key}={value!r} is not {hint}")
    declared = [k for k in hints if k in record]
    if list(record) != declared:
        problems.append(f"keys in the order {list(record)}, declared {declared}")
    return problems


def _send_everything(mock: MockServer) -> None:
    def post(content: str, *, stream: bool = True, path: str = "/v1/messages",
             headers: dict[str, str] = HEADERS, body: bytes | None = None) -> None:
        sent = body if body is not None else httpx.Request("POST", "/", json={
            "model": "m", "max_tokens": 5, "stream": stream,
            "messages": [{"role": "user", "content": content}]}).content
        try:
            httpx.post(f"{mock.url}{path}", headers=headers, content=sent, timeout=10)
        except httpx.RemoteProtocolError:
            pass  # a scripted disconnect

    for content in ("hello", "truncate", "disconnect", "error", "raw", "raw-drop", "nothing"):
        post(f"<{content}>")
    post("<hello>", stream=False)
    post("<hello>", path="/v1/messages/count_tokens", stream=False)
    post("x", headers={"anthropic-version": "1"})
    post("x", body=b"\xff\xfe")
    post("x", body=b"{nope")
    post("x", body=b"[" * 200)
    post("<hello>", headers={**HEADERS, "origin": "https://page.example"})
    for path in ("/v1/models", "/v1/models/m", "/api/hello", "/nowhere?q=1"):
        httpx.get(f"{mock.url}{path}", timeout=10)


def test_every_record_a_mock_writes_fits_its_type(mock_api: StartMock) -> None:
    rules = [
        Rule(match=Match(last_user_text_contains="<hello>"), reply=text("hi"), repeat="always"),
        Rule(match=Match(last_user_text_contains="<truncate>"),
             reply=text("hi", truncate={"after_events": 2})),
        Rule(match=Match(last_user_text_contains="<disconnect>"),
             reply=text("hi", disconnect={"after_events": 2})),
        Rule(match=Match(last_user_text_contains="<error>"), reply=api_error(529)),
        Rule(match=Match(last_user_text_contains="<raw>"), reply=raw("a", "b")),
        Rule(match=Match(last_user_text_contains="<raw-drop>"), reply=raw("a", disconnect=True)),
    ]
    mock = mock_api(Scenario(classifier="plain", rules=rules, models=["m"]), max_body_bytes=100)
    _send_everything(mock)
    mock.stop()  # every response_end is written
    records = mock.read().records
    kinds = {"request": RequestRecord, "response_end": ResponseEndRecord}
    problems = {i: _misfits(r, kinds[r["type"]]) for i, r in enumerate(records)}
    assert {i: p for i, p in problems.items() if p} == {}
    outcomes = {r["outcome"] for r in records if r["type"] == "request"}
    # timeout, over_limit, server_shutdown: test_mock_hardening.py; thread_not_found: test_threads.py
    assert outcomes == set(get_args(Outcome)) - {"client_disconnected", "mock_error", "timeout",
                                                 "over_limit", "thread_not_found"}
    reasons = {r["reason"] for r in records if r["type"] == "response_end"}
    assert reasons == set(get_args(EndReason)) - {"client_disconnected", "stream_error_by_script",
                                                  "server_shutdown"}
    assert {"body", "body_text", "body_base64", "reply", "nearest", "error", "replay_of"} <= {
        k for r in records for k in r}


def test_nearest_rule_is_what_the_script_reports() -> None:
    assert set(typing.get_type_hints(NearestRule)) == {"rule", "misses"}


def test_write_offsets_say_when_each_event_went_out(mock_api: StartMock) -> None:
    """A stall of 0.3 s after three events shows as a gap between the third and fourth write;
    a fault-free stream (one write) has one offset."""
    mock = mock_api(Scenario(classifier="plain", rules=[
        Rule(match=Match(last_user_text_contains="<stall>"),
             reply=text("hi", stall={"after_events": 3, "seconds": 0.3})),
        Rule(match=Match(last_user_text_contains="<whole>"), reply=text("hi"))]))
    for content in ("<stall>", "<whole>"):
        httpx.post(f"{mock.url}/v1/messages", headers=HEADERS, timeout=10, json={
            "model": "m", "max_tokens": 5, "stream": True,
            "messages": [{"role": "user", "content": content}]})
    mock.stop()
    stalled, whole = [r for r in mock.read().records if r["type"] == "response_end"]
    offsets = stalled["write_offsets_ms"]
    assert len(offsets) == stalled["events_sent"] and offsets == sorted(offsets)
    gaps = [b - a for a, b in itertools.pairwise(offsets)]
    assert gaps[2] >= 290 and gaps[2] == max(gaps)  # the scripted stall, not a speed bound
    assert len(whole["write_offsets_ms"]) == 1
