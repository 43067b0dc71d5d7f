"""Before timing anything: both servers answer a real body with the same reply, fully parsed."""

from __future__ import annotations

from typing import Any

import httpx
import orjson

from bench import FIXED_TEXT
from bench.load import ANTHROPIC_VERSION, API_KEY
from mockapi.sse import decode_events

__all__ = ["VerifyError", "verify_reply"]

TIMEOUT = 10.0


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
