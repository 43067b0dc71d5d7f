"""Before timing anything: every server answers a real body with the same reply, fully parsed,
and the floor's reply is our mock's, byte for byte on the wire (but for the per-request ids)."""

from __future__ import annotations

import re
import socket
from typing import Any

import httpx
import orjson

from bench import FIXED_TEXT
from bench.load import ANTHROPIC_VERSION, API_KEY, build_requests
from mockapi.script.sse import decode_events

__all__ = ["VerifyError", "normalize_ids", "raw_reply", "verify_reply", "verify_same_bytes"]

TIMEOUT = 10.0
# the ids our mock numbers per request (message and request id); the floor keeps one of each
_IDS = re.compile(rb"\b(msg|req)_loopprobe_\d{6}\b")


class VerifyError(RuntimeError):
    pass


def verify_reply(url: str, body: bytes, stream: bool) -> dict[str, Any]:
    """The reply's shape (status, content type, event names); raises if it is not the text."""
    response = httpx.post(f"{url}/v1/messages", content=body, timeout=TIMEOUT, headers={
        "x-api-key": API_KEY, "anthropic-version": ANTHROPIC_VERSION,
        "content-type": "application/json"})
    shape: dict[str, Any] = {"status": response.status_code,
                             "content_type": response.headers.get("content-type"),
                             "bytes": len(response.content)}
    if response.status_code != 200:
        raise VerifyError(f"{url}: status {response.status_code}: {response.text[:300]}")
    if stream:
        events = [(name, orjson.loads(data)) for name, data in decode_events(response.content)]
        shape["events"] = [name for name, _ in events]
        text = "".join(d["delta"].get("text", "") for name, d in events
                       if name == "content_block_delta")
        complete = bool(events) and events[-1][0] == "message_stop"
    else:
        message = response.json()
        text = "".join(b.get("text", "") for b in message.get("content", []))
        complete = message.get("type") == "message"
    if text != FIXED_TEXT or not complete:
        raise VerifyError(f"{url}: expected the reply {FIXED_TEXT!r} (complete), got {text!r} "
                          f"(complete: {complete})")
    return shape


def raw_reply(port: int, body: bytes) -> bytes:
    """The whole HTTP/1.1 response, as sent, to the bench's request with ``body``."""
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as connection:
        connection.sendall(build_requests(port, [body])[0])
        data = b""
        while not _complete(data):
            chunk = connection.recv(65536)
            if not chunk:
                break
            data += chunk
    return data


def _complete(data: bytes) -> bool:
    end = data.find(b"\r\n\r\n")
    if end < 0:
        return False
    head = data[:end + 2].lower()
    at = head.find(b"\r\ncontent-length:")
    if at >= 0:
        length = int(head[at + 17:head.index(b"\r\n", at + 2)])
        return len(data) >= end + 4 + length
    return data.endswith(b"\r\n0\r\n\r\n")


def normalize_ids(reply: bytes) -> bytes:
    """``reply`` with its per-request ids numbered 000000 (their length is kept)."""
    return _IDS.sub(rb"\1_loopprobe_000000", reply)


def verify_same_bytes(reference_port: int, port: int, body: bytes) -> int:
    """The reply size; raises unless the server at ``port`` answers ``body`` with the bytes
    of the one at ``reference_port`` (status line, headers, framing and body; the ids aside)."""
    expected = normalize_ids(raw_reply(reference_port, body))
    got = normalize_ids(raw_reply(port, body))
    if expected != got:
        at = next((i for i, (a, b) in enumerate(zip(expected, got, strict=False)) if a != b),
                  min(len(expected), len(got)))
        raise VerifyError(f"127.0.0.1:{port}: its reply differs from 127.0.0.1:{reference_port}'s "
                          f"at byte {at} of {len(got)} (expected {len(expected)}): "
                          f"{got[max(0, at - 40):at + 80]!r} instead of "
                          f"{expected[max(0, at - 40):at + 80]!r}")
    return len(got)
