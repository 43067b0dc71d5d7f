"""Message threads in the mock: the protocol on its own (fast), and the official SDKs' tool
runners, which thread by default, run against it (sdk tier): Python ``anthropic`` 2.16.0
(``client.beta.messages.tool_runner``) and TypeScript ``@anthropic-ai/sdk`` 1.16.0
(``client.beta.messages.toolRunner``), each from its own install.

Before threads were understood, a continue request (only the new messages, no ``system``
or ``tools``) was classified ``side`` and got the built-in "OK", or — with validation — a
400 for a ``tool_result`` whose ``tool_use`` was in the part of the conversation the
client did not send again.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mockapi import Match, MockServer, Rule, Scenario, api_error, message, text, tool_use
from mockapi.journal.records import RequestRecord
from mockapi.script.replies import TextBlock, ThinkingBlock, ToolUseBlock
from mockapi.serve.threads import THREADS_BETA
from probes.clients.npm import cache_root
from tests import sdk_lines
from tests.conftest import missing_install
from tests.test_records import _misfits as misfits

TS_SDK_VERSION = "1.16.0"  # scripts/test installs it
TS_SDK = cache_root() / "tools" / "anthropic-sdk-ts" / "node_modules"
RUNNERS = ("python", "typescript")
HEADERS = {"x-api-key": "k", "anthropic-version": "2023-06-01", "anthropic-beta": THREADS_BETA}
TIMEOUT = 20.0
TOOL = {"name": "add", "description": "Add.", "input_schema": {"type": "object"}}
FIRST = {"model": "m", "max_tokens": 50, "system": "You add numbers.", "tools": [TOOL],
         "messages": [{"role": "user", "content": "add 2 and 3"}], "thread": {"type": "create"}}
USE_THEN_DONE = Scenario(rules=[Rule(id="use", reply=tool_use("add", {"a": 2, "b": 3}, id="toolu_1")),
                                Rule(id="done", repeat="always", reply=text("5"))])


def answer(result: str = "5") -> list[dict[str, Any]]:
    return [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": result}]}]


def continue_from(previous: str, messages: list[dict[str, Any]] | None = None,
                  **extra: Any) -> dict[str, Any]:
    return {"model": "m", "max_tokens": 50, "messages": messages or answer(),
            "thread": {"type": "continue", "previous_message_id": previous}, **extra}


@pytest.fixture
def mock(tmp_path: Path) -> Iterator[MockServer]:
    with MockServer(USE_THEN_DONE, tmp_path / "j.jsonl") as server:
        yield server


def post(mock: MockServer, body: dict[str, Any], **headers: str) -> httpx.Response:
    return httpx.post(f"{mock.url}/v1/messages", headers={**HEADERS, **headers}, json=body,
                      timeout=TIMEOUT)


# ---- the protocol --------------------------------------------------------------------------


def test_a_continue_is_answered_from_the_rebuilt_conversation(mock: MockServer) -> None:
    first = post(mock, FIRST).json()
    assert first["content"][0]["type"] == "tool_use"
    second = post(mock, continue_from(first["id"]))
    assert second.status_code == 200, second.text
    assert second.json()["content"] == [{"type": "text", "text": "5"}]
    records = mock.requests()
    # the default classifier sees the tools the thread keeps: both are the main loop
    assert [(r["kind"], r["turn"], r["rule"]) for r in records] == [
        ("main", 1, "use"), ("main", 2, "done")]
    assert records[0]["thread"] == {"type": "create"}
    assert records[1]["thread"] == {
        "type": "continue", "previous_message_id": first["id"], "thread": 1, "stored_by_seq": 1,
        "messages_stored": 2, "messages_sent": 1, "from_thread": ["system", "tools"]}
    # the journal keeps the body as sent, not the rebuilt one
    assert records[1]["body"] == continue_from(first["id"])
    for record in records:
        assert misfits(dict(record), RequestRecord) == []
    state = mock.admin("GET", "state").json()["threads"]
    assert [(t["thread"], t["latest"], t["turns"], t["messages"]) for t in state] == [
        (1, second.json()["id"], 2, 4)]
    assert 0 < state[0]["expires_in"] <= 300


def test_thread_refusals_carry_the_error_codes_the_sdks_read(mock: MockServer) -> None:
    unknown = post(mock, continue_from("msg_nowhere"))
    assert unknown.status_code == 404
    error = unknown.json()["error"]
    assert (error["type"], error["details"]) == ("not_found_error",
                                                 {"error_code": "thread_not_found"})
    assert mock.requests()[0]["thread"] == {
        "type": "continue", "previous_message_id": "msg_nowhere", "messages_sent": 1}
    first = post(mock, FIRST).json()
    assert post(mock, continue_from(first["id"])).status_code == 200
    again = post(mock, continue_from(first["id"]))
    assert again.status_code == 400
    assert again.json()["error"]["details"] == {"error_code": "thread_already_continued"}
    no_beta = post(mock, FIRST, **{"anthropic-beta": "other-2025-01-01"})
    assert no_beta.status_code == 400 and THREADS_BETA in no_beta.json()["error"]["message"]
    with_system = post(mock, continue_from("msg_x", system="changed"))
    assert with_system.status_code == 400
    assert with_system.json()["error"]["message"].startswith("system: not allowed with thread")
    malformed = post(mock, {**FIRST, "thread": {"type": "resume"}})
    assert malformed.status_code == 400
    records = mock.requests()
    assert [(r["outcome"], r["status"]) for r in records] == [
        ("thread_not_found", 404), ("replied", 200), ("replied", 200),
        ("invalid_request", 400), ("invalid_request", 400), ("invalid_request", 400),
        ("invalid_request", 400)]
    assert mock.mock.script.state()[1]["served"] == 1  # refusals use nothing


def test_a_continue_is_validated_whole(mock: MockServer) -> None:
    """A tool_result pairs with the tool_use the thread holds, and only with it."""
    first = post(mock, FIRST).json()
    wrong = post(mock, continue_from(first["id"], [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_other", "content": "5"}]}]))
    assert wrong.status_code == 400
    # messages.1 is the thread's tool_use: the fragment sent has one message only
    assert wrong.json()["error"]["message"].startswith(
        "messages.1: `tool_use` ids were found without `tool_result` blocks")
    # the refused continue used nothing: the reply can still be continued
    assert post(mock, continue_from(first["id"])).status_code == 200


def test_a_reply_being_answered_cannot_be_continued_twice(tmp_path: Path) -> None:
    slow = Scenario(rules=[Rule(id="use", reply=tool_use("add", {}, id="toolu_1")),
                           Rule(id="slow", reply=message(TextBlock(text="5"), stall_before=1.0)),
                           Rule(id="other", repeat="always", reply=text("6"))])
    with MockServer(slow, tmp_path / "j.jsonl") as server:
        first = post(server, FIRST).json()
        answers: list[httpx.Response] = []
        worker = threading.Thread(target=lambda: answers.append(
            post(server, continue_from(first["id"]))))
        worker.start()
        deadline = time.monotonic() + TIMEOUT
        while len(server.requests()) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        racing = post(server, continue_from(first["id"]))
        worker.join(TIMEOUT)
    assert racing.status_code == 400
    assert racing.json()["error"]["details"] == {"error_code": "thread_continue_in_flight"}
    assert answers[0].status_code == 200


def test_expiry_by_idle_time_and_by_script_answers_404(tmp_path: Path) -> None:
    clock = [0.0]
    with MockServer(USE_THEN_DONE.model_copy(update={"thread_idle_seconds": 10}),
                    tmp_path / "j.jsonl") as server:
        server.mock.threads.clock = lambda: clock[0]
        first = post(server, FIRST).json()
        clock[0] = 10.5
        expired = post(server, continue_from(first["id"]))
        assert expired.json()["error"]["details"] == {"error_code": "thread_not_found"}
        assert server.admin("GET", "state").json()["threads"] == []
    scripted = Scenario(rules=[
        Rule(id="use", reply=tool_use("add", {}, id="toolu_1", expire_thread=True)),
        Rule(id="done", repeat="always", reply=text("5"))])
    with MockServer(scripted, tmp_path / "k.jsonl") as server:
        first = post(server, FIRST).json()
        gone = post(server, continue_from(first["id"]))
        assert gone.status_code == 404


def test_a_reset_drops_every_thread(mock: MockServer) -> None:
    first = post(mock, FIRST).json()
    mock.reset()
    assert post(mock, continue_from(first["id"])).status_code == 404


# ---- the official tool runner (anthropic 2.16.0) --------------------------------------------


def run_tool_runner(runner: str, url: str, **spec: Any) -> dict[str, Any]:
    """Run one SDK's tool runner against ``url``: its messages and tool calls."""
    argument = json.dumps({"url": url, "prompt": "add 2 and 3", **spec})
    env = dict(os.environ)
    if runner == "python":
        try:
            python = sdk_lines.python_for("2.x")
        except sdk_lines.SdkLineMissing:
            missing_install("the anthropic 2.x SDK line", sdk_lines.INSTALL_COMMAND)
        command = [str(python), str(Path(__file__).with_name("tool_runner_client.py")), argument]
    else:
        node = shutil.which("node")
        if node is None or not (TS_SDK / "@anthropic-ai" / "sdk").is_dir():
            missing_install("@anthropic-ai/sdk (npm)", f"npm install --prefix {TS_SDK.parent} "
                            f"@anthropic-ai/sdk@{TS_SDK_VERSION}")
        command = [str(node), str(Path(__file__).with_name("ts_tool_runner_client.cjs")),
                   argument]
        env["NODE_PATH"] = str(TS_SDK)
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def sent(record: dict[str, Any]) -> tuple[str | None, int, bool, bool]:
    """What a request sent: its thread type, how many messages, and system/tools or not."""
    body = record["body"]
    thread = body.get("thread")
    return (thread["type"] if thread else None, len(body["messages"]), "system" in body,
            "tools" in body)


@pytest.mark.sdk
@pytest.mark.parametrize("runner", RUNNERS)
@pytest.mark.parametrize("stream", [False, True], ids=["create", "stream"])
@pytest.mark.parametrize("thread", [True, False], ids=["threads", "no-threads"])
def test_the_tool_runner_gets_the_scripted_replies(tmp_path: Path, runner: str, stream: bool,
                                                   thread: bool) -> None:
    with MockServer(USE_THEN_DONE, tmp_path / "j.jsonl") as server:
        result = run_tool_runner(runner, server.url, stream=stream,
                                 **({} if thread else {"thread": False}))
        records = server.requests()
    assert result["calls"] == [["add", 2, 3]]
    assert [m["content"] for m in result["messages"]] == [
        [{"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 2, "b": 3}}],
        [{"type": "text", "text": "5"}]]
    assert [(r["kind"], r["turn"], r["rule"], r["stream"]) for r in records] == [
        ("main", 1, "use", stream), ("main", 2, "done", stream)]
    if thread:
        assert [sent(r) for r in records] == [("create", 1, True, True),
                                              ("continue", 1, False, False)]
        assert THREADS_BETA in records[1]["headers"]["anthropic-beta"]
    else:
        assert [sent(r) for r in records] == [(None, 1, True, True), (None, 3, True, True)]


@pytest.mark.sdk
@pytest.mark.parametrize("runner", RUNNERS)
def test_the_tool_runner_replays_the_whole_conversation_after_a_404(tmp_path: Path,
                                                                    runner: str) -> None:
    scripted = Scenario(rules=[
        Rule(id="use", reply=tool_use("add", {"a": 2, "b": 3}, id="toolu_1", expire_thread=True)),
        Rule(id="done", repeat="always", reply=text("5"))])
    with MockServer(scripted, tmp_path / "j.jsonl") as server:
        result = run_tool_runner(runner, server.url)
        records = server.requests()
    assert result["messages"][-1]["content"] == [{"type": "text", "text": "5"}]
    assert [(r["outcome"], r["status"]) for r in records] == [
        ("replied", 200), ("thread_not_found", 404), ("replied", 200)]
    assert [sent(r) for r in records] == [("create", 1, True, True),
                                          ("continue", 1, False, False),
                                          ("create", 3, True, True)]
    assert (records[2]["turn"], records[2]["rule"]) == (2, "done")


@pytest.mark.sdk
@pytest.mark.parametrize("runner", RUNNERS)
def test_the_tool_runner_outlives_an_idle_expiry(tmp_path: Path, runner: str) -> None:
    idle = USE_THEN_DONE.model_copy(update={"thread_idle_seconds": 0.3})
    with MockServer(idle, tmp_path / "j.jsonl") as server:
        result = run_tool_runner(runner, server.url, tool_seconds=0.8)
        records = server.requests()
    assert result["calls"] == [["add", 2, 3]]
    assert [r["outcome"] for r in records] == ["replied", "thread_not_found", "replied"]


@pytest.mark.sdk
@pytest.mark.parametrize("runner", RUNNERS)
def test_the_tool_runner_retries_a_continue_and_keeps_thinking(tmp_path: Path,
                                                               runner: str) -> None:
    thought = ThinkingBlock(thinking="2 + 3: use the tool.")
    scripted = Scenario(rules=[
        Rule(id="use", reply=message(thought, ToolUseBlock(id="toolu_1", name="add",
                                                           input={"a": 2, "b": 3}))),
        Rule(id="busy", match=Match(turn=2), replies=[
            api_error(529, headers={"retry-after-ms": "20"}),
            api_error(429, headers={"retry-after": "0", "retry-after-ms": "20"})]),
        Rule(id="done", repeat="always", reply=text("5"))])
    with MockServer(scripted, tmp_path / "j.jsonl") as server:
        result = run_tool_runner(runner, server.url, thinking=True, stream=True)
        records = server.requests()
    assert result["messages"][-1]["content"] == [{"type": "text", "text": "5"}]
    assert [(r["status"], r["rule"], r["attempt"]) for r in records] == [
        (200, "use", 1), (529, "busy", 1), (429, "busy", 2), (200, "done", 3)]
    previous = result["messages"][0]["id"]
    # each retry continued from the same reply: a refused attempt keeps nothing
    assert {r["thread"]["previous_message_id"] for r in records[1:]} == {previous}
    assert all(r["thread"]["messages_stored"] == 2 for r in records[1:])
    first_reply = result["messages"][0]["content"]
    assert first_reply[0]["type"] == "thinking" and first_reply[0]["signature"]

