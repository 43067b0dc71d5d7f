"""toolloop: a minimal generic agent loop with the loop drivers' three tools, to test the harness.

A test double, never a model of a real client: it exists so the generic agent-loop catalog
(``probes.catalog.agent_loop``) has a loop that keeps every obligation, and one that breaks
exactly one when told to (``plant``). Run as ``python -I toolloop.py SPEC_JSON``; stdlib only.
It prints what every loop driver prints: an ``assistant`` event per reply, then one
``result`` event.

The spec: ``prompt``, ``model``, ``max_iterations`` (null: none), ``max_retries``,
``options`` (``{"thinking": {...}}`` is sent as the request's ``thinking``), ``plant``
(the names of the violations to plant, see ``PLANTS``).
"""

from __future__ import annotations

import http.client
import json
import os
import sys
import time
import urllib.parse
from pathlib import Path
from typing import Any

PLANTS = {
    "wrong-id": "each tool_result carries another id than its tool_use's",
    "split-results": "each tool_result goes in a user message of its own",
    "error-not-flagged": "a raising tool's result has no is_error",
    "no-step-limit": "the step limit is ignored",
    "limit-silent": "a run stopped by the step limit is reported as a finished answer",
    "no-retry": "an overloaded reply is never retried",
    "ignore-retry-after": "a retry is sent at once, whatever retry-after says",
    "truncate-silently": "a stream without message_stop is taken as the whole reply",
    "drop-thinking": "thinking blocks are left out of the assistant turn sent back",
    "pause-ends": "stop_reason pause_turn ends the loop",
    "crash-at-start": "the loop dies before its first request (a driver that cannot start)",
}
TOOLS = [
    {"name": "add", "description": "Add two integers.",
     "input_schema": {"type": "object", "required": ["a", "b"],
                      "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}},
    {"name": "fail", "description": "A tool that always fails with the given reason.",
     "input_schema": {"type": "object", "required": ["reason"],
                      "properties": {"reason": {"type": "string"}}}},
    {"name": "read_file", "description": "Read a text file of the workspace.",
     "input_schema": {"type": "object", "required": ["path"],
                      "properties": {"path": {"type": "string"}}}},
]
RETRIED = (408, 409, 429, 500, 502, 503, 504, 529)


class ApiError(Exception):
    def __init__(self, message: str, status: int | None = None, wait: float = 0.0):
        super().__init__(message)
        self.status, self.wait = status, wait


def emit(event: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def _events(response: http.client.HTTPResponse) -> Any:
    data: list[str] = []
    while True:
        raw = response.readline()
        if not raw:
            return
        line = raw.decode("utf-8").rstrip("\r\n")
        if line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
        elif not line and data:
            yield json.loads("\n".join(data))
            data = []


def _assemble(response: http.client.HTTPResponse, plant: set[str]) -> dict[str, Any]:
    blocks: dict[int, dict[str, Any]] = {}
    partial: dict[int, str] = {}
    stop_reason = None
    for event in _events(response):
        kind = event.get("type")
        if kind == "error":
            raise ApiError(json.dumps(event), 529)
        if kind == "content_block_start":
            blocks[event["index"]] = dict(event["content_block"])
            partial[event["index"]] = ""
        elif kind == "content_block_delta":
            block, delta = blocks[event["index"]], event["delta"]
            if delta["type"] == "text_delta":
                block["text"] = block.get("text", "") + delta["text"]
            elif delta["type"] == "input_json_delta":
                partial[event["index"]] += delta["partial_json"]
            elif delta["type"] == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta["thinking"]
            elif delta["type"] == "signature_delta":
                block["signature"] = delta["signature"]
        elif kind == "content_block_stop":
            block = blocks[event["index"]]
            if block["type"] == "tool_use":
                block["input"] = json.loads(partial[event["index"]] or "{}")
        elif kind == "message_delta":
            stop_reason = event["delta"].get("stop_reason")
        elif kind == "message_stop":
            break
    else:
        if "truncate-silently" not in plant:
            raise ApiError("the stream ended before message_stop", None)
    return {"role": "assistant", "content": [blocks[i] for i in sorted(blocks)],
            "stop_reason": stop_reason or "end_turn"}


def _wait(response: http.client.HTTPResponse) -> float:
    if (ms := response.getheader("retry-after-ms")) is not None:
        return float(ms) / 1000
    return float(response.getheader("retry-after") or 0.5)


def request(spec: dict[str, Any], messages: list[dict[str, Any]]) -> dict[str, Any]:
    base = urllib.parse.urlsplit(os.environ["ANTHROPIC_BASE_URL"])
    body: dict[str, Any] = {"model": spec["model"], "max_tokens": 2048, "stream": True,
                            "messages": messages, "tools": TOOLS}
    body.update(spec.get("options") or {})
    headers = {"x-api-key": os.environ.get("ANTHROPIC_API_KEY", ""),
               "anthropic-version": "2023-06-01", "content-type": "application/json"}
    connection = http.client.HTTPConnection(base.hostname or "127.0.0.1", base.port or 80,
                                            timeout=60)
    try:
        connection.request("POST", base.path.rstrip("/") + "/v1/messages",
                           body=json.dumps(body).encode(), headers=headers)
        response = connection.getresponse()
        if response.status >= 400:
            raise ApiError(f"{response.status} {response.read().decode('utf-8', 'replace')}",
                           response.status, _wait(response))
        return _assemble(response, set(spec.get("plant") or ()))
    except (OSError, http.client.HTTPException, ValueError, KeyError) as error:
        raise ApiError(f"{type(error).__name__}: {error}") from None
    finally:
        connection.close()


def with_retries(spec: dict[str, Any], messages: list[dict[str, Any]]) -> dict[str, Any]:
    plant = set(spec.get("plant") or ())
    retries = 0 if "no-retry" in plant else int(spec.get("max_retries") or 0)
    for attempt in range(retries + 1):
        try:
            return request(spec, messages)
        except ApiError as error:
            if attempt == retries or (error.status is not None and error.status not in RETRIED):
                raise
            time.sleep(0 if "ignore-retry-after" in plant else error.wait)
    raise AssertionError("unreachable")


def run_tool(name: str, tool_input: dict[str, Any]) -> str:
    if name == "add":
        return str(int(tool_input["a"]) + int(tool_input["b"]))
    if name == "fail":
        raise RuntimeError(str(tool_input.get("reason")))
    if name == "read_file":
        return (Path.cwd() / str(tool_input["path"])).read_text()
    raise LookupError(f"no tool {name}")


def results_of(uses: list[dict[str, Any]], plant: set[str]) -> list[dict[str, Any]]:
    results = []
    for use in uses:
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": use["id"]
                                  + ("_other" if "wrong-id" in plant else "")}
        try:
            result["content"] = run_tool(use["name"], use["input"])
        except Exception as error:  # a tool's failure is the model's to see
            result["content"] = f"{type(error).__name__}: {error}"
            if "error-not-flagged" not in plant:
                result["is_error"] = True
        results.append(result)
    return results


def run(spec: dict[str, Any]) -> int:
    plant = set(spec.get("plant") or ())
    unknown = plant - set(PLANTS)
    if unknown:
        raise SystemExit(f"toolloop: unknown plants {sorted(unknown)}; known: {sorted(PLANTS)}")
    if "crash-at-start" in plant:
        raise SystemExit("toolloop: planted crash before the first request")
    limit = None if "no-step-limit" in plant else spec.get("max_iterations")
    messages: list[dict[str, Any]] = [{"role": "user", "content": spec["prompt"]}]
    turns, reply = 0, None
    while limit is None or turns < limit:
        try:
            reply = with_retries(spec, messages)
        except ApiError as error:
            emit({"type": "result", "subtype": "error", "is_error": True, "num_turns": turns,
                  "result": f"ApiError: {error}"})
            return 1
        turns += 1
        stop_reason = reply.pop("stop_reason")
        emit({"type": "assistant", "message": {**reply, "stop_reason": stop_reason}})
        sent = dict(reply)
        reply["stop_reason"] = stop_reason
        if "drop-thinking" in plant:
            sent["content"] = [b for b in reply["content"] if b.get("type") != "thinking"]
        messages.append(sent)
        if stop_reason == "pause_turn" and "pause-ends" not in plant:
            continue
        uses = [b for b in reply["content"] if b.get("type") == "tool_use"]
        if not uses:
            break
        results = results_of(uses, plant)
        if "split-results" in plant:
            messages += [{"role": "user", "content": [r]} for r in results]
        else:
            messages.append({"role": "user", "content": results})
    texts = [b["text"] for b in (reply or {}).get("content", []) if b.get("type") == "text"]
    # the last reply's stop reason, as the tool runner hands back its last message
    last_stop = (reply or {}).get("stop_reason")
    emit({"type": "result", "subtype": "success", "is_error": False, "num_turns": turns,
          "result": "".join(texts) or None,
          "stop_reason": "end_turn" if "limit-silent" in plant else last_stop})
    return 0


if __name__ == "__main__":
    sys.exit(run(json.loads(sys.argv[1])))
