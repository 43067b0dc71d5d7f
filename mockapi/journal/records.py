"""Journal records as types: what each line of a journal holds, and the functions that build them.

A journal line is one JSON object; ``type`` says which record it is. ``request``
records what arrived and how it was answered, ``response_end`` how a streamed
body ended. (``Journal`` itself may add a ``journal_note`` line when it sets
a torn tail aside.) The builders fix the key order, so the bytes of a line are
stable. Importing this module loads no server code: the harness reads
journals with these types.
"""

from __future__ import annotations

import base64
from typing import Any, Final, Literal, NotRequired

import orjson

# typing_extensions: pydantic builds JSON Schemas from it on Python 3.11 (probes.report.schemas)
from typing_extensions import TypedDict

__all__ = [
    "END_CLIENT_DISCONNECTED",
    "END_COMPLETE",
    "END_DISCONNECTED_BY_SCRIPT",
    "END_SERVER_SHUTDOWN",
    "END_STREAM_ERROR_BY_SCRIPT",
    "END_TRUNCATED_BY_SCRIPT",
    "JOURNAL_FORMAT_VERSION",
    "MAX_JOURNALED_BODY_DEPTH",
    "MAX_WRITE_OFFSETS",
    "OUTCOME_CLIENT_DISCONNECTED",
    "OUTCOME_HELLO",
    "OUTCOME_INVALID_REQUEST",
    "OUTCOME_MOCK_ERROR",
    "OUTCOME_MODELS",
    "OUTCOME_NOT_FOUND",
    "OUTCOME_NO_RULE",
    "OUTCOME_OVER_LIMIT",
    "OUTCOME_REFUSED",
    "OUTCOME_REPLIED",
    "OUTCOME_THREAD_NOT_FOUND",
    "OUTCOME_TIMEOUT",
    "OUTCOME_TOO_LARGE",
    "BlobRecord",
    "BuiltinReply",
    "EndReason",
    "JournalNote",
    "JournalRecord",
    "NearestRule",
    "Outcome",
    "RequestRecord",
    "ResponseEndRecord",
    "Routing",
    "encode_body_field",
    "fits_in_a_record",
    "request_record",
    "response_end_record",
    "spliced_fields",
    "transport_outcome",
]

# The line format these types describe. It is not written into the lines (their bytes
# are fixed); a change to any record's fields changes this number. 4: blob records and
# request bodies that reference them (mockapi.journal.blobs); readers read 1 to 4.
JOURNAL_FORMAT_VERSION: Final = 4
MAX_WRITE_OFFSETS: Final = 4096

Outcome = Literal["refused", "replied", "no_rule", "invalid_request", "too_large", "client_disconnected",
                  "mock_error", "models", "hello", "not_found", "over_limit", "timeout",
                  "thread_not_found"]
OUTCOME_REPLIED: Final = "replied"  # a scripted reply (or a built-in one) was sent
OUTCOME_NO_RULE: Final = "no_rule"  # no rule matched: a 400 naming the nearest rules
OUTCOME_INVALID_REQUEST: Final = "invalid_request"  # headers or body refused
OUTCOME_TOO_LARGE: Final = "too_large"  # the body (413) or the headers (431) over their limit
OUTCOME_CLIENT_DISCONNECTED: Final = "client_disconnected"  # left before sending its body
OUTCOME_MOCK_ERROR: Final = "mock_error"  # the mock failed on the request: 500
OUTCOME_MODELS: Final = "models"  # GET /v1/models, /v1/models/{id}
OUTCOME_HELLO: Final = "hello"  # GET /api/hello
OUTCOME_NOT_FOUND: Final = "not_found"  # any other path: 404
# a browser Origin or a Host other than the mock's own address: 403, no reply consumed
OUTCOME_REFUSED: Final = "refused"
# a stream over max_streams: 529, no reply consumed
OUTCOME_OVER_LIMIT: Final = "over_limit"
# a thread continue from a reply no thread holds (never kept, expired): 404
OUTCOME_THREAD_NOT_FOUND: Final = "thread_not_found"
OUTCOME_TIMEOUT: Final = "timeout"  # the head or the body stalled past its timeout: 408

# a reply the mock made up, no rule having scripted it (RequestRecord.builtin_reply)
BuiltinReply = Literal["side-request", "warmup", "count-tokens"]

EndReason = Literal["complete", "client_disconnected", "disconnected_by_script",
                    "truncated_by_script", "stream_error_by_script", "server_shutdown"]
# every byte was written and, on TCP, acknowledged by the client's side (see ``delivery``)
END_COMPLETE: Final = "complete"
END_SERVER_SHUTDOWN: Final = "server_shutdown"  # the server stopped while it was playing
END_CLIENT_DISCONNECTED: Final = "client_disconnected"
END_DISCONNECTED_BY_SCRIPT: Final = "disconnected_by_script"  # the connection was dropped
END_TRUNCATED_BY_SCRIPT: Final = "truncated_by_script"  # the body ended early, cleanly
END_STREAM_ERROR_BY_SCRIPT: Final = "stream_error_by_script"  # an error event, then the end


class NearestRule(TypedDict):
    rule: str
    misses: list[str]  # why it did not answer, field by field; or why it is spent


class Routing(TypedDict):
    """How the script routed a Messages API request."""

    kind: str
    turn: int
    attempt: int
    stream: bool
    model: str | None
    rule: str | None
    reply_index: int | None
    replay_of: int | None  # the seq whose reply a non-streaming fallback got again
    # a message-thread request: what it sent and what the thread supplied (mockapi.serve.threads)
    thread: NotRequired[dict[str, Any]]
    # a reply no rule scripted: "side-request" or "warmup" (the built-in side replies of a
    # claude-code scenario), "count-tokens" (the built-in token count); absent otherwise and
    # in journals of format 2 and older
    builtin_reply: NotRequired[BuiltinReply]


class RequestRecord(TypedDict):
    """One request, written before its reply starts; keys in the order they are written."""

    type: Literal["request"]
    seq: int
    run: int
    time: float  # wall clock at arrival
    elapsed: float  # seconds since the mock started, when recorded
    method: str
    path: str
    query: str
    headers: dict[str, str]  # lower-case names, secrets redacted, repeats joined with ", "
    body_size: int | None  # None: the body was not read (too large, or the client left)
    outcome: Outcome
    status: int | None  # None: the client left before any reply
    error: NotRequired[str]
    nearest: NotRequired[list[NearestRule]]  # outcome no_rule
    kind: NotRequired[str]  # kind … replay_of: the Routing of a Messages API request
    turn: NotRequired[int]
    attempt: NotRequired[int]
    stream: NotRequired[bool]
    model: NotRequired[str | None]
    rule: NotRequired[str | None]
    reply_index: NotRequired[int | None]
    replay_of: NotRequired[int | None]
    thread: NotRequired[dict[str, Any]]
    builtin_reply: NotRequired[BuiltinReply]
    reply: NotRequired[dict[str, Any]]  # the scripted reply, without its defaults
    # in the file only (format 4): where body holds a blob's "sha256:<hex>"; readers put
    # each blob's value back and drop this field (mockapi.journal.blobs)
    body_refs: NotRequired[list[list[str | int]]]
    body: NotRequired[Any]  # the body, when it is JSON; else body_text, else body_base64
    body_text: NotRequired[str]
    body_base64: NotRequired[str]


class ResponseEndRecord(TypedDict):
    """How a streamed body ended (JSON and error replies have none)."""

    type: Literal["response_end"]
    seq: int
    run: int
    time: float
    elapsed: float
    reason: EndReason
    events_sent: int  # body writes: SSE events, or raw chunks
    bytes_sent: int
    # when each body write went out, in ms since the response started (at most
    # MAX_WRITE_OFFSETS; write_offsets_truncated when cut); absent in older journals
    write_offsets_ms: NotRequired[list[float]]
    write_offsets_truncated: NotRequired[bool]
    # how far delivery was seen: "acknowledged" (TCP: the client's side acknowledged every
    # byte while the connection was open), "unacknowledged" (bytes_unacknowledged of them
    # never were: the connection was reset or the wait ran out); absent where it cannot be
    # seen (a Unix socket, whose forwarder's fate is unknown; an in-process app)
    delivery: NotRequired[str]
    bytes_unacknowledged: NotRequired[int]


class JournalNote(TypedDict):
    """What the journal itself noted: a torn last line moved aside when a server restarted,
    unreadable lines found, writes that failed (each kept field names one of them)."""

    type: Literal["journal_note"]
    note: str
    offset: NotRequired[int]  # a torn last line: where it was, its size, its side file
    bytes: NotRequired[int]
    moved_to: NotRequired[str]
    lines: NotRequired[list[int]]  # unreadable lines kept in place: numbers and offsets
    offsets: NotRequired[list[int]]
    failures: NotRequired[list[dict[str, Any]]]  # failed writes: time, error, unavailable


class BlobRecord(TypedDict):
    """A large part of request bodies, written once (format 4; ``mockapi.journal.blobs``):
    in the file only, readers put it back where requests reference it."""

    type: Literal["blob"]
    sha256: str  # of value's bytes exactly as the line writes them
    value: Any


JournalRecord = RequestRecord | ResponseEndRecord | JournalNote


def request_record(*, seq: int, run: int, time: float, elapsed: float, method: str, path: str,
                   query: str, headers: dict[str, str], body_size: int | None,
                   outcome: Outcome, status: int | None, error: str | None = None,
                   nearest: list[NearestRule] | None = None,
                   routing: Routing | None = None,
                   thread: dict[str, Any] | None = None) -> RequestRecord:
    """A request record less its spliced fields (``spliced_fields``)."""
    record: RequestRecord = {
        "type": "request", "seq": seq, "run": run, "time": time, "elapsed": elapsed,
        "method": method, "path": path, "query": query, "headers": headers,
        "body_size": body_size, "outcome": outcome, "status": status,
    }
    if error is not None:
        record["error"] = error
    if nearest is not None:
        record["nearest"] = nearest
    if routing is not None:
        record = {**record, **routing}
    if thread is not None:  # a refused thread request: what it asked for
        record["thread"] = thread
    return record


def transport_outcome(status: int) -> Outcome:
    """The outcome of a request the transport refused before any route saw it."""
    outcomes: dict[int, Outcome] = {400: OUTCOME_INVALID_REQUEST, 408: OUTCOME_TIMEOUT,
                                    503: OUTCOME_OVER_LIMIT}
    return outcomes.get(status, OUTCOME_TOO_LARGE)


def spliced_fields(reply: bytes | None, body: bytes | None, body_is_json: bool) -> list[bytes]:
    """A request record's last fields, already encoded: the scripted reply, then the body."""
    fields = [b'"reply":' + reply] if reply is not None else []
    if body:
        fields.append(encode_body_field(body, body_is_json))
    return fields


def response_end_record(*, seq: int, run: int, time: float, elapsed: float, reason: EndReason,
                        events_sent: int, bytes_sent: int,
                        write_offsets: list[float] | None = None, delivery: str | None = None,
                        unacknowledged: int = 0) -> ResponseEndRecord:
    record: ResponseEndRecord = {
        "type": "response_end", "seq": seq, "run": run, "time": time, "elapsed": elapsed,
        "reason": reason, "events_sent": events_sent, "bytes_sent": bytes_sent}
    if write_offsets is not None:
        record["write_offsets_ms"] = [round(o * 1000, 1) for o in write_offsets[:MAX_WRITE_OFFSETS]]
        if len(write_offsets) > MAX_WRITE_OFFSETS:
            record["write_offsets_truncated"] = True
    if delivery is not None:
        record["delivery"] = delivery
        if unacknowledged:
            record["bytes_unacknowledged"] = unacknowledged
    return record


def encode_body_field(raw: bytes, parsed_ok: bool) -> bytes:
    """The journal's body field: the raw JSON if it parsed, else text or base64."""
    if parsed_ok:
        # CR and LF can only be whitespace in JSON (inside strings they must be escaped), so
        # blanking them keeps the body's value and makes it one line at any depth (re-encoding
        # it with orjson fails beyond 254 levels).
        line = raw
        if b"\n" in raw or b"\r" in raw:
            line = raw.replace(b"\r", b" ").replace(b"\n", b" ")
        if fits_in_a_record(line):
            return b'"body":' + line
    try:
        return b'"body_text":' + orjson.dumps(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return b'"body_base64":' + orjson.dumps(base64.b64encode(raw).decode())


# A body nested deeper is journaled as text (whole, as a string): a request is whatever its
# client sends, and a record every reader parses must not depend on how deep the client
# nested it (loopprobe's readers refuse files nested deeper than 200 levels; the record adds
# one). The mock still answers such a request; the API's own limit is not documented.
MAX_JOURNALED_BODY_DEPTH = 180
_ORJSON_DEPTH = 1024  # orjson refuses more


def fits_in_a_record(body: bytes) -> bool:
    """Whether ``body`` nests at most ``MAX_JOURNALED_BODY_DEPTH`` levels."""
    # bytes.replace finds a byte with memchr; bytes.count walks every byte (6x slower here)
    opening = 2 * len(body) - len(body.replace(b"[", b"")) - len(body.replace(b"{", b""))
    if opening <= MAX_JOURNALED_BODY_DEPTH:
        return True
    # exact, and in C: orjson parses it inside enough brackets only if it is shallow enough
    padding = _ORJSON_DEPTH - MAX_JOURNALED_BODY_DEPTH
    try:
        orjson.loads(b"[" * padding + body + b"]" * padding)
    except orjson.JSONDecodeError:
        return False
    return True
