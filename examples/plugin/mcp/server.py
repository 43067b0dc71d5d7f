#!/usr/bin/env python3
"""A stdio MCP server with one tool, word_count, in the standard library only.

The transport is newline-delimited JSON-RPC 2.0 on stdin/stdout (one message per
line, no embedded newlines); anything for humans goes to stderr. It answers
initialize, ping, tools/list and tools/call, ignores notifications, and answers
any other request with JSON-RPC error -32601.
"""
from __future__ import annotations

import json
import sys
from typing import Any

SERVER_INFO = {"name": "guard-rails-words", "version": "0.1.0"}
DEFAULT_PROTOCOL = "2025-06-18"
SUPPORTED_PROTOCOLS = ("2024-11-05", "2025-03-26", "2025-06-18")

TOOLS = [{
    "name": "word_count",
    "description": "Count the words, lines and characters of a text.",
    "inputSchema": {
        "type": "object",
        "properties": {"text": {"type": "string", "description": "the text to count"}},
        "required": ["text"],
    },
}]


def word_count(arguments: dict[str, Any]) -> dict[str, Any]:
    text = arguments.get("text")
    if not isinstance(text, str):
        return {"content": [{"type": "text", "text": "word_count needs a string `text`"}],
                "isError": True}
    words, lines = len(text.split()), len(text.splitlines())
    return {"content": [{"type": "text",
                         "text": f"{words} words, {lines} lines, {len(text)} characters"}],
            "isError": False}


def handle(message: dict[str, Any]) -> dict[str, Any] | None:
    """The answer to one message, or None for a notification."""
    method, params = message.get("method"), message.get("params") or {}
    if "id" not in message:
        return None
    if method == "initialize":
        asked = params.get("protocolVersion")
        result: Any = {
            "protocolVersion": asked if asked in SUPPORTED_PROTOCOLS else DEFAULT_PROTOCOL,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": SERVER_INFO,
        }
    elif method == "ping":
        result = {}
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call":
        if params.get("name") != "word_count":
            return _error(message["id"], -32602, f"unknown tool: {params.get('name')!r}")
        result = word_count(params.get("arguments") or {})
    else:
        return _error(message["id"], -32601, f"method not found: {method!r}")
    return {"jsonrpc": "2.0", "id": message["id"], "result": result}


def _error(request_id: Any, code: int, text: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": text}}


def main() -> int:
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            message = json.loads(line)
        except json.JSONDecodeError as exc:
            answer: dict[str, Any] | None = _error(None, -32700, f"parse error: {exc}")
        else:
            answer = handle(message) if isinstance(message, dict) else _error(
                None, -32600, "a message must be a JSON object")
        if answer is not None:
            sys.stdout.write(json.dumps(answer, separators=(",", ":")) + "\n")
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
