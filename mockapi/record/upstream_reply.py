"""The upstream's answer as a scenario reply: what the recorder (``mockapi.record``) writes
as each rule's ``reply``.

A complete stream or JSON message becomes a message reply (text, tool_use, thinking and
redacted_thinking blocks, ``stop_reason``, ``usage``, ``model``, ``id``); an error status
with its type and message becomes an error reply; anything a message reply cannot say (a
stream cut off or carrying an error event, a block the mock does not know) becomes the
upstream's bytes as a ``raw`` reply. Strings are escaped so that the scenario's
``{placeholders}`` render them back as they were, and a reply that would not is kept raw.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable
from typing import Any

import httpx
import orjson
from pydantic import ValidationError

from mockapi.script.scenario import ScenarioError, parse_scenario
from mockapi.script.sse import decode_events

__all__ = ["reply_from_exchange"]

_KEPT_ERROR_HEADERS = ("retry-after", "x-should-retry")

def _message_from_stream(body: bytes) -> tuple[dict[str, Any] | None, bool]:
    """The whole message a well-formed stream carried, and whether it sent a ping; None
    when the stream is not one a message reply reproduces (cut off, an error event, a
    block or delta the mock does not know)."""
    start: dict[str, Any] | None = None
    blocks: dict[int, dict[str, Any]] = {}
    partial: dict[int, str] = {}
    final_usage: dict[str, Any] = {}
    stop: dict[str, Any] = {}
    ping = stopped = False
    try:
        for _, data in decode_events(body):
            if not data:
                continue
            event = orjson.loads(data)
            kind = event.get("type")
            if kind == "message_start":
                start = dict(event["message"])
            elif kind == "ping":
                ping = True
            elif kind == "content_block_start":
                blocks[event["index"]] = dict(event["content_block"])
                partial[event["index"]] = ""
            elif kind == "content_block_delta":
                block, delta = blocks[event["index"]], event["delta"]
                if delta["type"] == "text_delta":
                    block["text"] += delta["text"]
                elif delta["type"] == "input_json_delta":
                    partial[event["index"]] += delta["partial_json"]
                elif delta["type"] == "thinking_delta":
                    block["thinking"] += delta["thinking"]
                elif delta["type"] == "signature_delta":
                    block["signature"] = block.get("signature", "") + delta["signature"]
                else:
                    return None, ping
            elif kind == "content_block_stop":
                index = event["index"]
                if blocks[index].get("type") == "tool_use" and partial[index]:
                    blocks[index]["input"] = orjson.loads(partial[index])
            elif kind == "message_delta":
                stop = dict(event.get("delta") or {})
                final_usage = dict(event.get("usage") or {})
            elif kind == "message_stop":
                stopped = True
            else:  # an error event, or one the mock does not know
                return None, ping
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        return None, ping
    if start is None or not stopped:
        return None, ping
    start["content"] = [blocks[i] for i in sorted(blocks)]
    start["stop_reason"] = stop.get("stop_reason")
    start["stop_sequence"] = stop.get("stop_sequence")
    start["usage"] = {**(start.get("usage") or {}), **final_usage}
    return start, ping


def _message_reply(message: Any, ping: bool | None) -> dict[str, Any] | None:
    """A scenario message reply saying what ``message`` (the API's JSON) says; None when
    it holds what a message reply cannot say."""
    if not isinstance(message, dict) or message.get("type", "message") != "message":
        return None
    content: list[dict[str, Any]] = []
    for block in message.get("content") or []:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text" and not block.get("citations"):
            content.append({"type": "text", "text": block.get("text")})
        elif kind == "tool_use":
            content.append({"type": "tool_use", "id": block.get("id"), "name": block.get("name"),
                            "input": block.get("input")})
        elif kind == "thinking":
            content.append({"type": "thinking", "thinking": block.get("thinking"),
                            "signature": block.get("signature") or None})
        elif kind == "redacted_thinking":
            content.append({"type": "redacted_thinking", "data": block.get("data")})
        else:
            return None
    usage = {k: v for k, v in (message.get("usage") or {}).items() if v is not None}
    reply: dict[str, Any] = {"content": content, "stop_reason": message.get("stop_reason"),
                             "stop_sequence": message.get("stop_sequence"), "usage": usage}
    for key in ("model", "id"):
        if isinstance(message.get(key), str):
            reply[key] = message[key]
    if ping is not None:
        reply["ping"] = ping
    return reply


def _error_reply(status: int, body: bytes, headers: httpx.Headers) -> dict[str, Any] | None:
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    error = parsed.get("error") if isinstance(parsed, dict) else None
    if not (isinstance(error, dict) and isinstance(error.get("message"), str)
            and isinstance(error.get("type"), str) and 400 <= status <= 599):
        return None
    kept = {name: headers[name] for name in _KEPT_ERROR_HEADERS if name in headers}
    spec: dict[str, Any] = {"status": status, "type": error["type"], "message": error["message"]}
    if kept:
        spec["headers"] = kept
    return {"error": spec}


def _raw_reply(status: int, content_type: str, chunks: Iterable[bytes],
               cut_off: bool) -> dict[str, Any]:
    """The upstream's bytes as they came (base64: no placeholder can touch them)."""
    parts = [{"data_base64": base64.b64encode(c).decode()} for c in chunks if c] or [
        {"data_base64": ""}]
    raw: dict[str, Any] = {"status": max(100, min(status, 599)), "content_type": content_type,
                           "chunks": parts}
    if cut_off:
        raw["disconnect"] = True
    return {"raw": raw}


def reply_from_exchange(status: int, headers: httpx.Headers, chunks: list[bytes],
                        complete: bool) -> dict[str, Any]:
    """The scenario reply (as data) that answers as the upstream did: a message, an error,
    or, for anything else, its raw bytes (``disconnect`` when the body was cut off)."""
    body = b"".join(chunks)
    content_type = headers.get("content-type", "application/octet-stream")
    candidate: dict[str, Any] | None = None
    if complete and status == 200 and content_type.startswith("text/event-stream"):
        message, ping = _message_from_stream(body)
        candidate = _message_reply(message, ping) if message is not None else None
    elif complete and status == 200 and content_type.startswith("application/json"):
        try:
            candidate = _message_reply(orjson.loads(body), None)
        except orjson.JSONDecodeError:
            candidate = None
    elif complete and status >= 400:
        candidate = _error_reply(status, body, headers)
    if candidate is not None:
        escaped: dict[str, Any] = _escape_placeholders(candidate)
        if _renders_back(escaped, candidate):
            return escaped
    return _raw_reply(status, content_type, chunks, cut_off=not complete)


def _escape(value: str) -> str:
    # each {name} or {{name}} one brace deeper: rendering takes exactly one level off
    out, position = [], 0
    for match in _PLACEHOLDER.finditer(value):
        out += [value[position:match.start()], "{", match.group(0), "}"]
        position = match.end()
    out.append(value[position:])
    return "".join(out)


def _escape_placeholders(value: Any) -> Any:
    if isinstance(value, str):
        return _escape(value)
    if isinstance(value, list):
        return [_escape_placeholders(v) for v in value]
    if isinstance(value, dict):
        return {k: _escape_placeholders(v) for k, v in value.items()}
    return value


def _renders_back(escaped: dict[str, Any], original: dict[str, Any]) -> bool:
    """Whether ``escaped``, loaded and rendered as the mock does, is ``original``."""
    try:
        rule = {"match": {"kind": "any"}, "reply": escaped}
        rendered = parse_scenario({"rules": [rule]}).render({})
        expected = parse_scenario({"rules": [{**rule, "reply": original}]})
    except (ScenarioError, ValidationError):
        return False
    return rendered.rules[0].reply == expected.rules[0].reply


# the scenario's placeholder syntax (mockapi.script.scenario renders it)
_PLACEHOLDER = re.compile(r"\{\{([A-Za-z_][A-Za-z0-9_]*)\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")
