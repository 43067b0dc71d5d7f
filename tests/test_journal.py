"""The request journal: secrets redacted, bodies kept exactly, lines whole, numbering continued."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from mockapi import Journal, MockServer, Rule, Scenario, read_journal, text
from mockapi.journal.read import TornLine
from mockapi.journal.records import MAX_JOURNALED_BODY_DEPTH
from mockapi.journal.redact import REDACTED, redact_query
from probes.report.schemas import validate_path

StartMock = Callable[..., MockServer]

API_HEADERS = {"anthropic-version": "2023-06-01", "content-type": "application/json"}
TIMEOUT = httpx.Timeout(10.0)


def always_hi(mock_api: StartMock, **options: Any) -> MockServer:
    return mock_api(Scenario(classifier="plain", rules=[Rule(reply=text("hi"), repeat="always")]),
                    **options)


def body_json(content: str, *, stream: bool = False) -> dict[str, Any]:
    return {"model": "claude-sonnet-4-5", "max_tokens": 16, "stream": stream,
            "messages": [{"role": "user", "content": content}]}


def journal_lines(mock: MockServer) -> list[bytes]:
    data = mock.journal.path.read_bytes()
    assert data.endswith(b"\n")
    return data.split(b"\n")[:-1]


# ---- redaction -------------------------------------------------------------------------

SECRETS = {
    "x-api-key": "sk-ant-api03-SECRET-KEY-0001",
    "authorization": "Bearer SECRET-BEARER-0002",
    "proxy-authorization": "Basic SECRET-PROXY-0003",
    "cookie": "session=SECRET-COOKIE-0004",
}
# Every route that records a request, including the ones that refuse it.
RECORDED_CALLS: list[tuple[str, str, bytes]] = [
    ("POST", "/v1/messages", orjson.dumps(body_json("fine"))),
    ("POST", "/v1/messages", b"{not json"),
    ("POST", "/v1/messages/count_tokens", orjson.dumps(body_json("count"))),
    ("GET", "/v1/models", b""),
    ("GET", "/v1/models/claude-sonnet-4-5", b""),
    ("GET", "/api/hello", b""),
    ("DELETE", "/no/such/route", b""),
]


def test_secret_headers_never_reach_the_journal(mock_api: StartMock) -> None:
    mock = always_hi(mock_api)
    headers = {**API_HEADERS, "X-Api-Key": SECRETS["x-api-key"],
               "Authorization": SECRETS["authorization"],
               "Proxy-Authorization": SECRETS["proxy-authorization"],
               "Cookie": SECRETS["cookie"], "x-visible": "kept"}
    with httpx.Client(timeout=TIMEOUT) as client:
        for method, path, content in RECORDED_CALLS:
            client.request(method, f"{mock.url}{path}", headers=headers, content=content)
        admin_view = mock.admin("GET", "requests").content

    written = mock.journal.path.read_bytes()
    for name, secret in SECRETS.items():
        for fragment in (secret, secret.split()[-1], secret.split("=")[-1]):
            assert fragment.encode() not in written, name
            assert fragment.encode() not in admin_view, name
    records = read_journal(mock.journal.path).requests()
    assert len(records) == len(RECORDED_CALLS)
    for record in records:
        for name in SECRETS:
            assert record["headers"][name] == REDACTED
        assert record["headers"]["x-visible"] == "kept"
        assert record["headers"]["anthropic-version"] == "2023-06-01"


QUERY_KEY = "sk-ant-api03-QUERY-SECRET-0005"


@pytest.mark.parametrize(("query", "journaled"), [
    ("", ""),
    ("beta=true", "beta=true"),  # what Claude Code sends: as it came, byte for byte
    ("api_key=k1&beta=true", "api_key=[redacted]&beta=true"),
    ("beta=true&X-Api-Key=k2", "beta=true&X-Api-Key=[redacted]"),
    ("access_token=k3&refresh_token=k4&id=7", "access_token=[redacted]&refresh_token=[redacted]&id=7"),
    ("key=k5&keyword=kept&monkey=kept", "key=[redacted]&keyword=kept&monkey=kept"),
    ("api%5Fkey=k6", "api%5Fkey=[redacted]"),  # the name is read percent-decoded
    ("api+key=kept&Token=k7", "api+key=kept&Token=[redacted]"),
    ("client_secret=k8&password=k9&sig=k10", "client_secret=[redacted]&password=[redacted]&sig=[redacted]"),
    ("token", "token"),  # a name without a value carries nothing
    ("a=1&&b=2&token=", "a=1&&b=2&token=[redacted]"),
    ("api_key=k11=more", "api_key=[redacted]"),
])
def test_secret_query_parameters_are_redacted(query: str, journaled: str) -> None:
    assert redact_query(query) == journaled


def test_a_key_in_the_query_string_never_reaches_the_journal(mock_api: StartMock) -> None:
    mock = always_hi(mock_api)
    with httpx.Client(timeout=TIMEOUT) as client:
        for method, path, content in RECORDED_CALLS:
            client.request(method, f"{mock.url}{path}?api_key={QUERY_KEY}&beta=true",
                           headers={**API_HEADERS, "x-api-key": "k"}, content=content)
        admin_view = mock.admin("GET", "requests").content
    assert QUERY_KEY.encode() not in mock.journal.path.read_bytes()
    assert QUERY_KEY.encode() not in admin_view
    records = read_journal(mock.journal.path).requests()
    assert [r["query"] for r in records] == ["api_key=[redacted]&beta=true"] * len(RECORDED_CALLS)


# ---- request bodies --------------------------------------------------------------------

PRETTY = orjson.dumps(body_json("pretty"), option=orjson.OPT_INDENT_2)
UNICODE = ('{"model":"claude-sonnet-4-5","max_tokens":16,"messages":[{"role":"user",'
           '"content":"h\u00e9llo \u2014 \U0001f389 \u2028 line-sep, escaped: \\u00e9 \\n"}]}'
           ).encode()
ODD_SPACING = (b'{ "max_tokens" :16 ,"model":"m",  "x": 1.50, "y": 1e2, "z": -0.0,\t'
               b'"messages":[{"role":"user","content":"spaced"}] }')
BIG = orjson.dumps(body_json("big " + "x" * 1_000_000))


def _nested(depth: int) -> bytes:
    """A valid request body nesting ``depth`` levels (its metadata nested the rest), with
    brackets in a string too, which do not nest."""
    return (b'{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"[[{{"}],'
            b'"metadata":' + b'{"a":' * (depth - 1) + b'1' + b'}' * (depth - 1) + b'}')

BODIES = [
    # (raw body, journal field it must be recorded in)
    pytest.param(ODD_SPACING, "body", id="json-odd-spacing-and-numbers"),
    pytest.param(UNICODE, "body", id="json-raw-unicode"),
    pytest.param(BIG, "body", id="json-1mb"),
    pytest.param(PRETTY, "body", id="json-with-newlines"),
    pytest.param(PRETTY.replace(b"\n", b"\r\n"), "body", id="json-with-crlf"),
    pytest.param(b"not json at all\nsecond line \xc3\xa9", "body_text", id="not-json"),
    pytest.param(b"\xff\xfe{\"model\": \x80", "body_base64", id="invalid-utf8"),
    # as deep as a record may hold it, and deeper: whole, as text (every reader still parses
    # the record: loopprobe's readers refuse files nested deeper than 200 levels)
    pytest.param(_nested(MAX_JOURNALED_BODY_DEPTH), "body", id="json-at-the-depth-bound"),
    pytest.param(_nested(MAX_JOURNALED_BODY_DEPTH + 1), "body_text", id="json-past-it"),
    pytest.param(_nested(1000), "body_text", id="json-1000-deep"),
]


@pytest.mark.parametrize(("sent", "field"), BODIES)
def test_request_body_is_recorded_exactly(mock_api: StartMock, sent: bytes, field: str) -> None:
    mock = always_hi(mock_api)
    marker_headers = {**API_HEADERS, "x-api-key": "k"}
    httpx.post(f"{mock.url}/v1/messages", headers=marker_headers, content=sent, timeout=TIMEOUT)

    *blobs, line = journal_lines(mock)
    # only the 1 MB body has a part large enough to be written once, as a blob before it
    assert len(blobs) == (1 if sent is BIG else 0)
    [record] = read_journal(mock.journal.path).requests()
    assert record["body_size"] == len(sent)
    recorded_fields = [f for f in ("body", "body_text", "body_base64") if f in record]
    assert recorded_fields == [field]
    if field == "body":
        assert record["body"] == orjson.loads(sent)
        if b"\n" not in sent and b"\r" not in sent and not blobs:
            assert b'"body":' + sent in line  # spliced byte for byte, not re-encoded
    elif field == "body_text":
        assert record["body_text"].encode() == sent
    else:
        assert base64.b64decode(record["body_base64"]) == sent
    # every journal line is one loopprobe's readers accept
    assert validate_path(mock.journal.path)[1] == []


def test_empty_body_is_recorded_without_a_body_field(mock_api: StartMock) -> None:
    mock = always_hi(mock_api)
    httpx.post(f"{mock.url}/v1/messages", headers={**API_HEADERS, "x-api-key": "k"},
               content=b"", timeout=TIMEOUT)
    [record] = read_journal(mock.journal.path).requests()
    assert record["body_size"] == 0
    assert not {"body", "body_text", "body_base64"} & set(record)


# ---- torn tails --------------------------------------------------------------------------

TAILS = [
    pytest.param(b'{"type":"request","seq":3,"bo', id="half-a-record"),
    pytest.param(b'{"type":"request","seq":3}', id="whole-record-without-newline"),
    pytest.param(b"{", id="one-byte"),
    pytest.param(b'{"type":"request","body_text":"\xe2\x80', id="cut-inside-utf8"),
]


def write_records(path: Path, count: int) -> None:
    journal = Journal(path)
    for _ in range(count):
        journal.append({"type": "request", "seq": journal.next_seq()})
    journal.close()


@pytest.mark.parametrize("tail", TAILS)
def test_reader_skips_and_reports_a_torn_last_line(tmp_path: Path, tail: bytes) -> None:
    path = tmp_path / "journal.jsonl"
    write_records(path, 2)
    with path.open("ab") as handle:
        handle.write(tail)

    contents = read_journal(path)
    assert [r["seq"] for r in contents.records] == [1, 2]
    assert contents.torn_tail is not None
    assert f"({len(tail)} bytes)" in contents.torn_tail


@pytest.mark.parametrize("content", [b"", b"\n", None], ids=["empty", "blank-line", "missing"])
def test_reader_on_an_empty_or_missing_journal(tmp_path: Path, content: bytes | None) -> None:
    path = tmp_path / "journal.jsonl"
    if content is not None:
        path.write_bytes(content)
    contents = read_journal(path)
    assert (contents.records, contents.torn_tail) == ([], None)


def test_reader_skips_and_lists_a_corrupt_line_that_is_not_the_last(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    path.write_bytes(b'{"type":"request","seq":1}\n{"type":"req\n{"type":"request","seq":2}\n')
    contents = read_journal(path)
    assert [r["seq"] for r in contents.requests()] == [1, 2]
    assert contents.torn == [TornLine(line=2, offset=27, size=12, last=False)]
    assert contents.torn_tail == (
        f"{path}: 1 line(s) are not journal records (writes cut short) and were skipped: "
        "line 2 (12 bytes at offset 27)")


@pytest.mark.parametrize("tail", TAILS)
def test_reopening_after_a_torn_tail_keeps_the_journal_readable(
        mock_api: StartMock, tmp_path: Path, tail: bytes) -> None:
    """A server killed mid-write, then restarted on the same journal, must lose nothing more."""
    path = tmp_path / "journal.jsonl"
    write_records(path, 2)
    with path.open("ab") as handle:
        handle.write(tail)

    mock = always_hi(mock_api, journal_path=path)
    response = httpx.post(f"{mock.url}/v1/messages", headers={**API_HEADERS, "x-api-key": "k"},
                          json=body_json("after the restart"), timeout=TIMEOUT)
    assert response.status_code == 200

    contents = read_journal(path)  # must not raise
    requests = contents.requests()
    assert [r["seq"] for r in requests[:2]] == [1, 2]
    [new] = [r for r in requests if r.get("body", {}).get("messages") ==
             body_json("after the restart")["messages"]]
    assert new["seq"] > 2
    assert response.headers["request-id"] == f"req_loopprobe_{new['seq']:06d}"


# ---- concurrency ----------------------------------------------------------------------------

CONCURRENT = 100


def test_concurrent_requests_each_get_one_whole_line(mock_api: StartMock) -> None:
    mock = always_hi(mock_api)
    # Unique markers, mixed sizes (some over a pipe buffer) and both reply forms.
    sent = {
        f"marker-{i:03d}-{uuid.uuid4().hex}": (i % 2 == 0, "p" * (i % 7) * 20_000)
        for i in range(CONCURRENT)
    }

    def send(client: httpx.Client, marker: str) -> tuple[str, str]:
        stream, padding = sent[marker]
        response = client.post(f"{mock.url}/v1/messages",
                               headers={**API_HEADERS, "x-api-key": "k"},
                               content=orjson.dumps(body_json(marker + padding, stream=stream)))
        assert response.status_code == 200, response.text
        return marker, response.headers["request-id"]

    limits = httpx.Limits(max_connections=32)
    with httpx.Client(timeout=TIMEOUT, limits=limits) as client, \
            ThreadPoolExecutor(max_workers=32) as pool:
        answered = dict(pool.map(lambda m: send(client, m), list(sent)))

    lines = journal_lines(mock)
    contents = read_journal(mock.journal.path)
    assert contents.torn_tail is None
    # each padded body's content (distinct markers: no two alike) written once, as a blob
    blobs = [line for line in lines if line.startswith(b'{"type":"blob"')]
    assert len(blobs) == sum(1 for _, padding in sent.values() if padding)
    assert len(lines) == len(contents.records) + len(blobs)
    requests = contents.requests()
    assert len(requests) == CONCURRENT
    assert sorted(r["seq"] for r in requests) == list(range(1, CONCURRENT + 1))
    marker_size = len(next(iter(sent)))  # every marker has the same length
    by_marker = {r["body"]["messages"][0]["content"][:marker_size]: r for r in requests}
    assert set(by_marker) == set(sent)
    for marker, (stream, padding) in sent.items():
        record = by_marker[marker]
        assert record["body"] == body_json(marker + padding, stream=stream)
        assert answered[marker] == f"req_loopprobe_{record['seq']:06d}"
    streamed = {r["seq"] for r in requests if r["stream"]}
    assert {seq for seq, end in contents.ends().items() if end["reason"] == "complete"} == streamed


# ---- numbering across restarts ---------------------------------------------------------------


def test_seq_continues_when_the_journal_is_reopened(mock_api: StartMock, tmp_path: Path) -> None:
    path = tmp_path / "shared.jsonl"
    ids: list[str] = []
    for round_size in (3, 2):
        mock = always_hi(mock_api, journal_path=path)
        for i in range(round_size):
            response = httpx.post(f"{mock.url}/v1/messages",
                                  headers={**API_HEADERS, "x-api-key": "k"},
                                  json=body_json(f"round of {round_size}, #{i}"), timeout=TIMEOUT)
            ids.append(response.json()["id"])
        mock.stop()

    assert [r["seq"] for r in read_journal(path).requests()] == [1, 2, 3, 4, 5]
    # the seq is in every reply id, and the rest cannot be guessed (mockapi.serve.threads)
    assert [i[:20] for i in ids] == [f"msg_loopprobe_{seq:06d}" for seq in range(1, 6)]
    assert all(len(i) == 20 + 1 + 24 for i in ids) and len(set(i[21:] for i in ids)) == 5
    reopened = Journal(path)
    assert reopened.last_seq == 5 and reopened.next_seq() == 6
    reopened.close()


def test_with_fsync_every_line_is_synced_before_the_reply(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import os as os_module

    import httpx

    from mockapi import Match, MockServer, Rule, Scenario, text
    from mockapi.journal import write as journal_module

    events: list[tuple[str, int]] = []
    real_fsync = os_module.fsync

    def recording_fsync(fd: int) -> None:
        real_fsync(fd)
        events.append(("fsync", Path(f"/proc/self/fd/{fd}").stat().st_size))

    monkeypatch.setattr(journal_module.os, "fsync", recording_fsync)
    scenario = Scenario(classifier="plain", rules=[
        Rule(match=Match(), reply=text("synced"), repeat="always")])
    path = tmp_path / "synced.jsonl"
    with MockServer(scenario, path, fsync=True) as mock:
        for n in range(3):
            answer = httpx.post(f"{mock.url}/v1/messages", timeout=10, headers={
                "x-api-key": "k", "anthropic-version": "2023-06-01"}, json={
                "model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": str(n)}]})
            assert answer.status_code == 200
            # the line recording this request ends at `end`; a sync covering it had happened
            # by the time the answer arrived (a JSON answer writes no later line)
            data = path.read_bytes()
            end = data.index(b"\n", data.index(f'"content":"{n}"'.encode())) + 1
            assert max((size for _, size in events), default=0) >= end
    lines = [line for line in path.read_bytes().split(b"\n") if line]
    assert len([e for e in events if e[0] == "fsync"]) == len(lines)
