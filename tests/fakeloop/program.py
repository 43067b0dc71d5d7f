"""fakeloop: a minimal agent loop that exists to test the loopprobe harness.

It is a test double, never a model of a real client: what it does says nothing
about Claude Code or any other client. Run as ``python -I program.py SPEC_JSON``;
stdlib only, it imports nothing of loopprobe. It prints the stream-json event
protocol (``system/init``, ``assistant``, ``user``, a final ``result``), one JSON
object per line.

The spec (JSON): ``prompt``, ``model``, ``tools`` (names, null for all it has),
``max_turns`` (null for none), ``session_id`` (a new session) or ``resume`` (an
existing one), ``hooks`` (``{"command", "events"}`` or null), ``egress``
(``"host:port"``: first CONNECT there through ``$HTTPS_PROXY``), ``hang`` (sleep
for an hour after init, with a sleeping child in the same process group).

Where it differs from Claude Code, deliberately:
- tools: only Read (the file's text, without line numbers), Bash and Write; tool names the
  spec asks for that it does not have are not offered;
- no system prompt, no retries, no side requests, no settings files, no fork;
- max_turns: the tools of the reply that reaches the limit run (as in Claude Code), then
  the result is ``error_max_turns`` with is_error true and exit 1; a Stop-hook block at
  the limit ends the same way;
- an API error (HTTP status >= 400, an SSE ``error`` event, a broken stream, no connection)
  ends the run: ``error_during_execution``, is_error true, exit 1;
- the transcript is ``$HOME/.fakeloop/sessions/<session_id>.jsonl``, one message a line.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import time
import urllib.parse
import uuid
from pathlib import Path
from typing import Any

SOCKET_TIMEOUT = 60.0
TOOL_TIMEOUT = 30.0
HOOK_TIMEOUT = 30.0
MAX_TOKENS = 4096
TOOLS: dict[str, dict[str, Any]] = {
    "Read": {"description": "Read a file from the local filesystem.",
             "input_schema": {"type": "object", "required": ["file_path"],
                              "properties": {"file_path": {"type": "string"}}}},
    "Bash": {"description": "Run a shell command.",
             "input_schema": {"type": "object", "required": ["command"],
                              "properties": {"command": {"type": "string"}}}},
    "Write": {"description": "Write a file to the local filesystem.",
              "input_schema": {"type": "object", "required": ["file_path", "content"],
                               "properties": {"file_path": {"type": "string"},
                                              "content": {"type": "string"}}}},
}


class ApiError(Exception):
    pass


def emit(event: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


# ---- the Messages API --------------------------------------------------------------------

def _sse_events(response: http.client.HTTPResponse) -> Any:
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


def _assemble(response: http.client.HTTPResponse) -> dict[str, Any]:
    """The assistant message a stream carries; raises ApiError on an error event or a cut."""
    blocks: dict[int, dict[str, Any]] = {}
    partial: dict[int, str] = {}
    stop_reason = None
    for event in _sse_events(response):
        kind = event.get("type")
        if kind == "error":
            raise ApiError(f"{response.status} {json.dumps(event)}")
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
            content = [blocks[i] for i in sorted(blocks)]
            return {"role": "assistant", "content": content, "stop_reason": stop_reason}
    raise ApiError(f"{response.status} the stream ended before message_stop")


def request_message(spec: dict[str, Any], messages: list[dict[str, Any]],
                    tools: list[str]) -> dict[str, Any]:
    base = urllib.parse.urlsplit(os.environ["ANTHROPIC_BASE_URL"])
    # http.client reads no proxy variables: the mock on loopback is reached directly
    connection = http.client.HTTPConnection(base.hostname or "127.0.0.1", base.port or 80,
                                            timeout=SOCKET_TIMEOUT)
    body: dict[str, Any] = {"model": spec["model"], "max_tokens": MAX_TOKENS, "stream": True,
                            "messages": messages}
    if tools:
        body["tools"] = [{"name": name, **TOOLS[name]} for name in tools]
    headers = {"x-api-key": os.environ.get("ANTHROPIC_API_KEY", ""),
               "anthropic-version": "2023-06-01", "content-type": "application/json"}
    try:
        connection.request("POST", base.path.rstrip("/") + "/v1/messages",
                           body=json.dumps(body).encode(), headers=headers)
        response = connection.getresponse()
        if response.status >= 400:
            raise ApiError(f"{response.status} {response.read().decode('utf-8', 'replace')}")
        return _assemble(response)
    except (OSError, http.client.HTTPException, ValueError, KeyError) as error:
        raise ApiError(f"{type(error).__name__}: {error}") from None
    finally:
        connection.close()


# ---- tools and hooks ---------------------------------------------------------------------

def run_tool(name: str, tool_input: dict[str, Any]) -> tuple[str, bool]:
    """The tool's result text and whether it is an error."""
    try:
        if name == "Read":
            return Path(tool_input["file_path"]).read_text(), False
        if name == "Write":
            path = Path(tool_input["file_path"])
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(tool_input["content"])
            return f"File written: {path}", False
        if name == "Bash":
            done = subprocess.run(["/bin/sh", "-c", tool_input["command"]], capture_output=True,
                                  text=True, timeout=TOOL_TIMEOUT, stdin=subprocess.DEVNULL)
            return done.stdout + done.stderr, done.returncode != 0
    except subprocess.TimeoutExpired:
        return f"Command timed out after {TOOL_TIMEOUT:.0f}s", True
    except (OSError, KeyError, TypeError) as error:
        return f"{type(error).__name__}: {error}", True
    return f"No such tool available: {name}", True


def run_hook(spec: dict[str, Any], event: str, payload: dict[str, Any]) -> dict[str, Any]:
    """The hook's decision (empty: none, or no hook for this event)."""
    hooks = spec.get("hooks")
    if not hooks or event not in hooks["events"]:
        return {}
    payload = {k: v for k, v in payload.items() if k not in spec.get("hook_input_without", ())}
    stdin = json.dumps({"hook_event_name": event, **payload})
    try:
        done = subprocess.run(["/bin/sh", "-c", hooks["command"]], input=stdin,
                              capture_output=True, text=True, timeout=HOOK_TIMEOUT)
        decision = json.loads(done.stdout) if done.stdout.strip() else {}
    except (subprocess.TimeoutExpired, ValueError):
        return {}
    return decision if isinstance(decision, dict) else {}


# ---- the session transcript --------------------------------------------------------------

class Transcript:
    def __init__(self, session_id: str):
        self.session_id = session_id
        self.path = Path.home() / ".fakeloop" / "sessions" / f"{session_id}.jsonl"

    def load(self) -> list[dict[str, Any]]:
        lines = self.path.read_text().splitlines() if self.path.is_file() else []
        return [json.loads(line)["message"] for line in lines if line.strip()]

    def append(self, message: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as out:
            out.write(json.dumps({"session_id": self.session_id, "type": message["role"],
                                  "message": message}) + "\n")


# ---- the loop ----------------------------------------------------------------------------

def _egress(target: str) -> None:
    proxy = urllib.parse.urlsplit(os.environ.get("HTTPS_PROXY", ""))
    try:
        with socket.create_connection((proxy.hostname or "127.0.0.1", proxy.port or 80),
                                      timeout=SOCKET_TIMEOUT) as sock:
            sock.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
            sock.recv(1024)
    except OSError:
        pass


def _hang() -> None:
    # a child in the run's process group: the harness must take it down too
    subprocess.Popen(["/bin/sh", "-c", "sleep 3600"], stdin=subprocess.DEVNULL,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(3600)


def _tool_results(spec: dict[str, Any], session_id: str, offered: list[str],
                  uses: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], bool]:
    """The tool_result blocks of one reply's tool_uses, in order; True if a hook said stop."""
    results: list[dict[str, Any]] = []
    for use in uses:
        base = {"session_id": session_id, "cwd": os.getcwd(), "tool_name": use["name"],
                "tool_input": use["input"], "tool_use_id": use["id"]}
        if use["name"] not in offered:
            text, is_error = f"No such tool available: {use['name']}", True
        else:
            decision = run_hook(spec, "PreToolUse", base)
            if decision.get("continue") is False:
                return results, True
            specific = decision.get("hookSpecificOutput") or {}
            if specific.get("permissionDecision") == "deny":
                text = specific.get("permissionDecisionReason") or "denied by a hook"
                is_error = True
            else:
                tool_input = specific.get("updatedInput") or use["input"]
                text, is_error = run_tool(use["name"], tool_input)
                decision = run_hook(spec, "PostToolUse", {
                    **base, "tool_input": tool_input,
                    "tool_response": {"content": text, "is_error": is_error}})
                if decision.get("continue") is False:
                    return results, True
        result = {"type": "tool_result", "tool_use_id": use["id"], "content": text}
        if is_error:
            result["is_error"] = True
        results.append(result)
    return results, False


def run(spec: dict[str, Any]) -> int:
    started = time.monotonic()
    session_id = spec.get("resume") or spec.get("session_id") or str(uuid.uuid4())
    transcript = Transcript(session_id)
    messages = transcript.load() if spec.get("resume") else []
    wanted = spec.get("tools")
    # each tool once, as real clients offer them: the API refuses two tools of one name
    offered = list(dict.fromkeys(name for name in (TOOLS if wanted is None else wanted)
                                 if name in TOOLS))
    emit({"type": "system", "subtype": "init", "session_id": session_id, "cwd": os.getcwd(),
          "model": spec["model"], "tools": offered})
    if spec.get("egress"):
        _egress(spec["egress"])
    if spec.get("hang"):
        _hang()
    turns, last_text, stop_active = 0, "", False

    def finish(subtype: str, reason: str, text: str, code: int) -> int:
        emit({"type": "result", "subtype": subtype, "is_error": subtype != "success",
              "result": text, "session_id": session_id, "num_turns": turns,
              "terminal_reason": reason,
              "duration_ms": int((time.monotonic() - started) * 1000)})
        return code

    def add(message: dict[str, Any]) -> None:
        messages.append(message)
        transcript.append(message)

    add({"role": "user", "content": [{"type": "text", "text": spec["prompt"]}]})
    while True:
        try:
            reply = request_message(spec, messages, offered)
        except ApiError as error:
            return finish("error_during_execution", "api_error", f"API Error: {error}", 1)
        turns += 1
        stop_reason = reply.pop("stop_reason")
        emit({"type": "assistant", "session_id": session_id,
              "message": {**reply, "stop_reason": stop_reason}})
        add(reply)
        texts = [b["text"] for b in reply["content"] if b.get("type") == "text"]
        last_text = texts[-1] if texts else last_text
        uses = [b for b in reply["content"] if b.get("type") == "tool_use"]
        if uses and stop_reason != "end_turn":
            results, stopped = _tool_results(spec, session_id, offered, uses)
            if results:
                emit({"type": "user", "session_id": session_id,
                      "message": {"role": "user", "content": results}})
                add({"role": "user", "content": results})
            if stopped:
                return finish("success", "completed", last_text, 0)
        else:
            decision = run_hook(spec, "Stop", {"session_id": session_id, "cwd": os.getcwd(),
                                               "stop_hook_active": stop_active})
            if decision.get("continue") is False or decision.get("decision") != "block":
                return finish("success", "completed", last_text, 0)
            stop_active = True
            add({"role": "user", "content": [{"type": "text",
                                              "text": str(decision.get("reason", ""))}]})
        if spec.get("max_turns") is not None and turns >= spec["max_turns"]:
            return finish("error_max_turns", "max_turns",
                          f"Reached the maximum number of turns ({spec['max_turns']})", 1)


if __name__ == "__main__":
    sys.exit(run(json.loads(sys.argv[1])))
