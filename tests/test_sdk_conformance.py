"""The official ``anthropic`` Python SDK, 2.x and 0.x lines, against the mock.

Each test scripts one reply, runs tests/sdk_conformance_client.py with the python of
one SDK line (venvs from ``python -m tests.sdk_lines install``) and checks that the SDK
assembled exactly the scripted message (streamed and not), or raised the exception
class that SDK line maps the scripted HTTP status to.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mockapi import Rule, Scenario, api_error, message
from mockapi.script.replies import Message, RedactedThinkingBlock, TextBlock, ThinkingBlock, ToolUseBlock
from mockapi.serve.server import MockServer
from tests import sdk_lines
from tests.conftest import missing_install

pytestmark = pytest.mark.sdk

CLIENT = Path(__file__).with_name("sdk_conformance_client.py")
CLIENT_TIMEOUT = 60
MODES = ("create", "stream")

USAGE = {"input_tokens": 17, "output_tokens": 9,
         "cache_creation_input_tokens": 5, "cache_read_input_tokens": 3}

# ---- scripted messages and what the SDK must assemble from them ----------------------

TEXT = ("Plain ASCII, then ünïcødé «quotes», an emoji 🚀 and CJK 文字;\n"
        "a second line\twith a tab, \"double quotes\" and a backslash \\ at the end.")

READ_INPUT: dict[str, Any] = {
    "file_path": "/tmp/wörk/文件 \"one\".txt",
    "options": {"offset": 0, "limit": 2000, "encodings": ["utf-8", "latin-1"],
                "follow": {"symlinks": True, "depth": None}},
}
SEARCH_INPUT: dict[str, Any] = {
    "pattern": "def \\w+\\(.*\\):\n",
    "paths": [["src", "🚀"], [], [{"glob": "**/*.py", "exclude": [".venv", "é"]}]],
    "limits": {"max": 3.5, "nested": {"deeper": {"deepest": [1, -2, 3e-7, False, None, {}]}}},
    "empty": "",
}

THOUGHT = "Let me think… step 1: ünïcødé; step 2: 6 * 7 = 42. Done thinking."
THINKING = ThinkingBlock(thinking=THOUGHT, chunk_size=5)
REDACTED_DATA = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP+loopprobe=="


class Case:
    def __init__(self, reply: Message, content: list[dict[str, Any]], stop_reason: str,
                 stop_sequence: str | None, deltas: Callable[[dict[str, int]], None]):
        self.reply, self.content = reply, content
        self.stop_reason, self.stop_sequence = stop_reason, stop_sequence
        self.check_deltas = deltas


def _compact_len(value: dict[str, Any]) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def _text_deltas(seen: dict[str, int]) -> None:
    assert seen == {"text_delta": math.ceil(len(TEXT) / 3)}


def _tool_deltas(seen: dict[str, int]) -> None:
    assert set(seen) == {"text_delta", "input_json_delta"}
    assert seen["text_delta"] == math.ceil(len("Reading both.") / 3)
    # chunk_size 2: at least one delta per two characters of each input's JSON
    minimum = sum(math.ceil(_compact_len(i) / 2) for i in (READ_INPUT, SEARCH_INPUT))
    assert seen["input_json_delta"] >= minimum


def _thinking_deltas(seen: dict[str, int]) -> None:
    assert seen == {"thinking_delta": math.ceil(len(THOUGHT) / 5), "signature_delta": 1,
                    "text_delta": math.ceil(len("The answer is 42.") / 3)}


def _redacted_deltas(seen: dict[str, int]) -> None:
    assert seen == {"text_delta": math.ceil(len("Answered.") / 3)}


CASES = {
    "text": Case(
        message(TextBlock(text=TEXT, chunk_size=3), id="msg_conformance_text", usage=USAGE,
                stop_reason="stop_sequence", stop_sequence="\n\nHuman:"),
        [{"type": "text", "text": TEXT}], "stop_sequence", "\n\nHuman:", _text_deltas),
    "tool_use": Case(
        message(TextBlock(text="Reading both.", chunk_size=3),
                ToolUseBlock(id="toolu_conformance_read", name="Read", input=READ_INPUT,
                             chunk_size=2),
                ToolUseBlock(id="toolu_conformance_search", name="Search", input=SEARCH_INPUT,
                             chunk_size=2),
                id="msg_conformance_tool_use", usage=USAGE),
        [{"type": "text", "text": "Reading both."},
         {"type": "tool_use", "id": "toolu_conformance_read", "name": "Read",
          "input": READ_INPUT},
         {"type": "tool_use", "id": "toolu_conformance_search", "name": "Search",
          "input": SEARCH_INPUT}],
        "tool_use", None, _tool_deltas),
    "thinking": Case(
        message(THINKING, TextBlock(text="The answer is 42.", chunk_size=3),
                id="msg_conformance_thinking", usage=USAGE),
        [{"type": "thinking", "thinking": THOUGHT, "signature": THINKING.resolved_signature()},
         {"type": "text", "text": "The answer is 42."}],
        "end_turn", None, _thinking_deltas),
    "redacted_thinking": Case(
        message(RedactedThinkingBlock(data=REDACTED_DATA),
                TextBlock(text="Answered.", chunk_size=3),
                id="msg_conformance_redacted_thinking", usage=USAGE),
        [{"type": "redacted_thinking", "data": REDACTED_DATA},
         {"type": "text", "text": "Answered."}],
        "end_turn", None, _redacted_deltas),
}

# ---- scripted errors and the exception each SDK line documents for the status ----------

ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error",
               403: "permission_error", 404: "not_found_error", 413: "request_too_large",
               429: "rate_limit_error", 500: "api_error", 529: "overloaded_error"}

# 2.x: anthropic/_error_classes.py ERROR_CLASSES[(status, None)], else InternalServerError
#      for >= 500 (RequestTooLargeError is a deprecated alias of ContentTooLargeError).
# 0.x: anthropic/_client.py Anthropic._make_status_error.
EXCEPTIONS = {
    "2.x": {400: "BadRequestError", 401: "AuthenticationError", 403: "PermissionDeniedError",
            404: "NotFoundError", 413: "ContentTooLargeError", 429: "RateLimitError",
            500: "InternalServerError", 529: "OverloadedError"},
    "0.x": {400: "BadRequestError", 401: "AuthenticationError", 403: "PermissionDeniedError",
            404: "NotFoundError", 413: "RequestTooLargeError", 429: "RateLimitError",
            500: "InternalServerError", 529: "OverloadedError"},
}


# ---- running the client ----------------------------------------------------------------


def _python_for(line: str) -> Path:
    try:
        return sdk_lines.python_for(line)
    except sdk_lines.SdkLineMissing:
        missing_install(f"anthropic=={sdk_lines.LINES[line]} (SDK line {line})",
                        sdk_lines.INSTALL_COMMAND)
    raise AssertionError("unreachable: missing_install skips or fails")


def _run_client(line: str, url: str, case: str, mode: str) -> dict[str, Any]:
    python = _python_for(line)
    # the SDKs honour proxy variables; the mock is on loopback
    env = {**os.environ, "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
    done = subprocess.run([str(python), str(CLIENT), url, case, mode], capture_output=True,
                          text=True, timeout=CLIENT_TIMEOUT, env=env)
    assert done.returncode == 0, f"client failed ({done.returncode}):\n{done.stderr}"
    result: dict[str, Any] = json.loads(done.stdout)
    assert result["sdk"] == sdk_lines.LINES[line]
    return result


def _only_request(mock: MockServer, mode: str) -> dict[str, Any]:
    requests = mock.requests()
    assert len(requests) == 1, "max_retries=0: exactly one request"
    request = requests[0]
    assert (request["kind"], request["rule"], request["stream"]) == (
        "main", "rule-1", mode == "stream")
    return request


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("line", list(sdk_lines.LINES))
def test_sdk_assembles_the_scripted_message(
        mock_api: Callable[..., MockServer], line: str, case: str, mode: str) -> None:
    scripted = CASES[case]
    mock = mock_api(Scenario(classifier="plain", rules=[Rule(reply=scripted.reply)]))

    result = _run_client(line, mock.url, case, mode)

    assert "error" not in result, result
    request = _only_request(mock, mode)
    assert result["message"] == {
        "id": f"msg_conformance_{case}", "type": "message", "role": "assistant",
        "model": request["body"]["model"], "content": scripted.content,
        "stop_reason": scripted.stop_reason, "stop_sequence": scripted.stop_sequence,
        "usage": USAGE,
    }
    if mode == "stream":
        scripted.check_deltas(result["deltas"])


def test_thinking_signature_is_the_derived_one() -> None:
    signature = THINKING.resolved_signature()
    assert THINKING.signature is None and signature
    assert CASES["thinking"].content[0]["signature"] == signature


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("status", list(ERROR_TYPES))
@pytest.mark.parametrize("line", list(sdk_lines.LINES))
def test_sdk_raises_the_documented_exception(
        mock_api: Callable[..., MockServer], line: str, status: int, mode: str) -> None:
    text = f"scripted {status} for the conformance test"
    mock = mock_api(Scenario(classifier="plain", rules=[Rule(reply=api_error(status, text))]))

    result = _run_client(line, mock.url, f"error-{status}", mode)

    assert "message" not in result, result
    _only_request(mock, mode)
    assert (result["error"], result["status_code"]) == (EXCEPTIONS[line][status], status)
    assert result["body"]["error"] == {"type": ERROR_TYPES[status], "message": text}
    assert result["request_id"] == result["body"]["request_id"]
