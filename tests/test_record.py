"""`loopprobe record`: a recording proxy in front of an upstream (here always a local mock),
whose scenario, loaded into a fresh mock, answers the same client the same way."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest
import yaml

from mockapi import (
    Match,
    Rule,
    Scenario,
    api_error,
    load_scenario,
    message,
    read_journal,
    text,
    tool_use,
)
from mockapi.record import RecordingProxy, reply_from_exchange
from mockapi.script.replies import EventCount, TextBlock, ThinkingBlock, ToolUseBlock, Usage
from mockapi.serve.server import MockServer
from probes.report.schemas import validate_path

ROOT = Path(__file__).resolve().parent.parent
API_KEY = "sk-ant-loopprobe-canary-0123456789"
MODEL = "claude-sonnet-4-5"
TOOLS = [{"name": name, "description": f"the {name} tool",
          "input_schema": {"type": "object", "properties": {}}} for name in ("Bash", "Read")]

UPSTREAM = Scenario(name="upstream", rules=[
    Rule(id="look", match=Match(turn=1), reply=message(
        ThinkingBlock(thinking="The user wants a listing."), TextBlock(text="Let me look."),
        ToolUseBlock(name="Bash", input={"command": "ls -la"}, id="toolu_rec_bash"),
        usage=Usage(input_tokens=321, output_tokens=45, cache_read_input_tokens=7))),
    Rule(id="read", match=Match(tool_result_for="toolu_rec_bash"),
         reply=tool_use("Read", {"file_path": "/etc/hostname"}, id="toolu_rec_read")),
    Rule(id="busy", match=Match(tool_result_for="toolu_rec_read", attempt=1),
         reply=api_error(529, "Overloaded", type="overloaded_error")),
    # the recorded text holds what reads as placeholders: they must come back as they were
    Rule(id="done", match=Match(tool_result_for="toolu_rec_read", attempt=2),
         reply=text("DONE in {{workspace}} and {{{{literal}}}}")),
])


def _blocks(content: Any) -> list[dict[str, Any]]:
    return [b.model_dump(exclude_none=True) for b in content]


def _exchange(base_url: str, date: str, path: str) -> list[dict[str, Any]]:
    """Three model turns as an agent loop sends them: streamed, then JSON, then streamed
    through a 529 the SDK retries. What the model answered, whole."""
    client = anthropic.Anthropic(base_url=base_url, api_key=API_KEY, max_retries=1,
                                 timeout=30)
    messages: list[dict[str, Any]] = [{"role": "user", "content": (
        f"Today's date is {date}. The working directory is {path}. List the files.")}]
    answers = []
    with client.messages.stream(model=MODEL, max_tokens=1024, tools=TOOLS,  # type: ignore[arg-type]
                                messages=messages) as stream:  # type: ignore[arg-type]
        first = stream.get_final_message()
    answers.append(first.model_dump())
    messages += [{"role": "assistant", "content": _blocks(first.content)},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id":
                                               first.content[-1].id, "content": f"{path}/a"}]}]
    second = client.messages.create(model=MODEL, max_tokens=1024, tools=TOOLS,  # type: ignore[arg-type]
                                    messages=messages)  # type: ignore[arg-type]
    answers.append(second.model_dump())
    messages += [{"role": "assistant", "content": _blocks(second.content)},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id":
                                               second.content[-1].id, "content": "box"}]}]
    with client.messages.stream(model=MODEL, max_tokens=1024, tools=TOOLS,  # type: ignore[arg-type]
                                messages=messages) as stream:  # type: ignore[arg-type]
        answers.append(stream.get_final_message().model_dump())
    return answers


def _all_text(folder: Path) -> str:
    return "\n".join(p.read_bytes().decode("utf-8", "replace")
                     for p in sorted(folder.rglob("*")) if p.is_file())


def test_a_recorded_exchange_replays_the_same(tmp_path: Path) -> None:
    out = tmp_path / "recording"
    with MockServer(UPSTREAM, tmp_path / "upstream.jsonl") as upstream, \
            RecordingProxy(upstream.url, out / "scenario.yaml", out / "journal.jsonl") as proxy:
        recorded = _exchange(proxy.url, "2026-12-04", "/tmp/session-7f3a9c/work")
        upstream_requests = upstream.requests()
    assert [r["rule"] for r in upstream_requests] == ["look", "read", "busy", "done"]
    assert recorded[0]["content"][0]["type"] == "thinking"
    assert recorded[2]["content"][0]["text"] == "DONE in {workspace} and {{{literal}}}"

    # replay: a fresh mock on the recorded scenario, the same client, other volatile text
    with MockServer(load_scenario(out / "scenario.yaml"), tmp_path / "replay.jsonl") as mock:
        replayed = _exchange(mock.url, "2027-01-31", "/var/tmp/session-00000/elsewhere")
        served = mock.requests()
    assert replayed == recorded  # the client got the same answers, whole
    assert [(r["rule"], r["status"]) for r in served] == [
        ("main-turn1-attempt1", 200), ("main-turn2-attempt1", 200),
        ("main-turn3-attempt1", 529), ("main-turn3-attempt2", 200)]

    # the scenario: one rule per exchange, keyed on what the mock computes, replies as sent
    scenario = load_scenario(out / "scenario.yaml")
    assert scenario.validation == "lenient"
    assert [(r.id, r.match.model_dump(exclude_defaults=True)) for r in scenario.rules] == [
        ("main-turn1-attempt1", {"turn": 1, "attempt": 1}),
        ("main-turn2-attempt1", {"turn": 2, "attempt": 1}),
        ("main-turn3-attempt1", {"turn": 3, "attempt": 1}),
        ("main-turn3-attempt2", {"turn": 3, "attempt": 2})]
    replies = [r.reply_list()[0] for r in scenario.rules]
    assert [type(r).__name__ for r in replies] == ["Message", "Message", "ApiError", "Message"]
    assert [b.type for b in replies[0].content] == ["thinking", "text", "tool_use"]
    busy = replies[2]
    assert (busy.error.status, busy.error.type, busy.error.message) == (
        529, "overloaded_error", "Overloaded")
    matchers = json.dumps([r.match.model_dump() for r in scenario.rules])
    for volatile in ("2026-12-04", "session-7f3a9c", "List the files"):
        assert volatile not in matchers
        assert volatile not in (out / "scenario.yaml").read_text()

    assert not (out / "journal.jsonl.pid").exists()  # the journal was closed
    # the journal: the mock's format, each request with the kind and turn the mock gives it
    checked, problems = validate_path(out)
    assert (checked, [str(p) for p in problems]) == (2, [])
    lines = [json.loads(line) for line in (out / "journal.jsonl").read_text().splitlines()]
    requests = [r for r in lines if r["type"] == "request"]
    assert [(r["kind"], r["turn"], r["attempt"], r["status"]) for r in requests] == [
        ("main", 1, 1, 200), ("main", 2, 1, 200), ("main", 3, 1, 529), ("main", 3, 2, 200)]
    secret = {k: v for k, v in requests[0]["headers"].items() if k in ("x-api-key", "authorization")}
    assert secret and set(secret.values()) == {"[redacted]"}
    assert "2026-12-04" in requests[0]["body"]["messages"][0]["content"]
    assert API_KEY not in _all_text(tmp_path)



def test_a_broken_stream_and_an_unknown_block_are_kept_as_bytes() -> None:
    stream = (b'event: message_start\ndata: {"type":"message_start","message":{"id":"m",'
              b'"type":"message","role":"assistant","model":"x","content":[],'
              b'"usage":{"input_tokens":1,"output_tokens":1}}}\n\n')
    headers = httpx.Headers({"content-type": "text/event-stream"})
    cut = reply_from_exchange(200, headers, [stream], complete=False)
    assert cut["raw"]["disconnect"] is True
    assert cut["raw"]["chunks"][0]["data_base64"]
    unknown = {"id": "m", "type": "message", "role": "assistant", "model": "x",
               "content": [{"type": "server_tool_use", "id": "s", "name": "web_search",
                            "input": {}}], "stop_reason": "end_turn", "usage": {}}
    kept = reply_from_exchange(200, httpx.Headers({"content-type": "application/json"}),
                               [json.dumps(unknown).encode()], complete=True)
    assert kept["raw"]["status"] == 200 and "disconnect" not in kept["raw"]
    error = reply_from_exchange(
        429, httpx.Headers({"content-type": "application/json", "retry-after": "3"}),
        [b'{"type":"error","error":{"type":"rate_limit_error","message":"slow {down}"}}'],
        complete=True)
    assert error == {"error": {"status": 429, "type": "rate_limit_error",
                               "message": "slow {{down}}", "headers": {"retry-after": "3"}}}


def _read_until_broken(url: str) -> tuple[bytes, str]:
    """The bytes of a streamed answer and how it ended (``complete``, or the error)."""
    got = b""
    request = {"model": MODEL, "max_tokens": 100, "stream": True, "tools": TOOLS,
               "messages": [{"role": "user", "content": "tell me"}]}
    try:
        with httpx.stream("POST", f"{url}/v1/messages", json=request, timeout=30, headers={
                "x-api-key": API_KEY, "anthropic-version": "2023-06-01"}) as response:
            for chunk in response.iter_bytes():
                got += chunk
    except httpx.HTTPError as error:
        return got, type(error).__name__
    return got, "complete"


def test_a_stream_the_upstream_breaks_off_replays_broken_off(tmp_path: Path) -> None:
    upstream = Scenario(rules=[Rule(match=Match(turn=1), reply=text(
        "a long answer that never ends " * 4, disconnect=EventCount(after_events=5)))])
    with MockServer(upstream, tmp_path / "upstream.jsonl") as mock, \
            RecordingProxy(mock.url, tmp_path / "s.yaml", tmp_path / "j.jsonl") as proxy:
        recorded, ended = _read_until_broken(proxy.url)
    assert ended == "RemoteProtocolError" and b"message_start" in recorded
    assert b"message_stop" not in recorded
    scenario = load_scenario(tmp_path / "s.yaml")
    (rule,) = scenario.rules
    assert rule.reply_list()[0].raw.disconnect is True
    ends = [json.loads(line) for line in (tmp_path / "j.jsonl").read_text().splitlines()]
    assert [e["reason"] for e in ends if e["type"] == "response_end"] == [
        "disconnected_by_script"]
    with MockServer(scenario, tmp_path / "replay.jsonl") as replay:
        assert _read_until_broken(replay.url) == (recorded, ended)


def _start_record(out: Path, upstream: str) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "probes", "record", "--upstream", upstream, "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        start_new_session=True)
    assert process.stdout is not None
    line = process.stdout.readline()  # bounded: the process prints it at once or exits
    if "listening on " not in line:
        process.kill()
        raise AssertionError(line + process.communicate(timeout=10)[1])
    return process, line.split("listening on ", 1)[1].split(",", 1)[0]


def _one_request(url: str) -> httpx.Response:
    return httpx.post(f"{url}/v1/messages", timeout=30, headers={
        "x-api-key": API_KEY, "anthropic-version": "2023-06-01"}, json={
        "model": MODEL, "max_tokens": 10, "tools": TOOLS,
        "messages": [{"role": "user", "content": "hi"}]})


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_the_cli_writes_the_scenario_when_stopped_or_killed(tmp_path: Path, stop: int) -> None:
    out = tmp_path / "rec"
    scenario = Scenario(rules=[Rule(match=Match(turn=1), reply=text("hello"))])
    with MockServer(scenario, tmp_path / "upstream.jsonl") as upstream:
        process, url = _start_record(out, upstream.url)
        try:
            answer = _one_request(url)
            assert answer.status_code == 200 and answer.json()["content"][0]["text"] == "hello"
            os.killpg(process.pid, stop)
            process.wait(timeout=30)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
    data = yaml.safe_load((out / "scenario.yaml").read_text())
    assert [r["id"] for r in data["rules"]] == ["main-turn1-attempt1"]
    assert data["rules"][0]["reply"]["content"] == [{"type": "text", "text": "hello"}]
    assert validate_path(out)[1] == []
    assert API_KEY not in _all_text(out)
    if stop != signal.SIGKILL:
        assert process.returncode == 0
        assert "1 rule(s)" in (process.stdout.read() if process.stdout else "")


def test_a_bad_upstream_is_one_line_and_exit_2(tmp_path: Path) -> None:
    for bad in ("api.anthropic.com", "ftp://example.com", "http://",
                "https://user:sk-secret@example.com"):
        done = subprocess.run(
            [sys.executable, "-m", "probes", "record", "--upstream", bad, "--out",
             str(tmp_path / "r")], capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert done.returncode == 2, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert done.stderr.startswith("loopprobe record: --upstream"), done.stderr
        assert not (tmp_path / "r").exists()
        assert "sk-secret" not in done.stderr


def test_an_unreachable_upstream_is_a_502_and_no_rule(tmp_path: Path) -> None:
    with MockServer(Scenario(), tmp_path / "gone.jsonl") as gone:
        dead = gone.url
    started = time.monotonic()
    with RecordingProxy(dead, tmp_path / "s.yaml", tmp_path / "j.jsonl") as proxy:
        answer = _one_request(proxy.url)
    assert time.monotonic() - started < 30
    assert answer.status_code == 502 and answer.json()["error"]["type"] == "api_error"
    assert load_scenario(tmp_path / "s.yaml").rules == []
    assert validate_path(tmp_path / "j.jsonl")[1] == []


# ---- a real Claude Code in front ----------------------------------------------------------


class _RecordedUpstream:
    """For ``run_probe(serve=...)``: the probe's scenario on a mock of its own on the host
    (the upstream), and the recording proxy in front of it where the runs reach their mock."""

    def __init__(self, place: Any, scenario: Scenario, journal_path: Path,
                 context: Any, out: Path):
        self.upstream = MockServer(scenario, out / "upstream.jsonl", context=context)
        self.proxy = RecordingProxy(self.upstream.url, out / "scenario.yaml", journal_path,
                                    **place.listen())
        self.url, self.journal = self.proxy.url, self.proxy.journal

    def __enter__(self) -> _RecordedUpstream:
        self.upstream.start()
        self.proxy.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.proxy.stop()
        self.upstream.stop()


def _loop_of(evidence: Any) -> list[dict[str, Any]]:
    """What the client sent, per Messages API request: its kind, the tool calls it answers
    (name, input, id) and the tool results it pairs with them."""
    seen = []
    for request in evidence.requests(kind=None):
        messages = request["body"]["messages"]
        blocks = [b for m in messages if isinstance(m["content"], list) for b in m["content"]]
        seen.append({
            "kind": request["kind"],
            "tool_uses": [(b["name"], b["input"], b["id"]) for b in blocks
                          if b.get("type") == "tool_use"],
            "tool_results": [b["tool_use_id"] for b in blocks if b.get("type") == "tool_result"],
        })
    return seen


@pytest.mark.client
def test_a_real_client_recorded_then_replayed(claude_code_binary, tmp_path: Path) -> None:
    from dataclasses import replace

    from probes.clients.claude_code import ClaudeCode
    from probes.core.probe import Invocation, Probe
    from probes.run.runner import run_probe

    upstream = Scenario(name="read-then-answer", rules=[
        Rule(id="read", match=Match(kind="main", turn=1), reply=message(
            TextBlock(text="Reading it."),
            ToolUseBlock(name="Read", input={"file_path": "{workspace}/notes.txt"},
                         id="toolu_record_read"))),
        Rule(id="answer", match=Match(kind="main", tool_result_for="toolu_record_read"),
             reply=text("The notes say: RECORDED-ANSWER")),
    ])
    probe = Probe(name="record", title="record", claims=(), check=lambda ev, c: None,
                  scenario=upstream, fixtures={"notes.txt": "NOTES_CONTENT_42\n"},
                  invocations=(Invocation("run", "Read notes.txt and tell me what it says.",
                                          timeout=120),))
    out = tmp_path / "recording"
    recorded = run_probe(probe, ClaudeCode(), claude_code_binary, tmp_path / "a",
                         serve=lambda place, scenario, journal, context: _RecordedUpstream(
                             place, scenario, journal, context, out))
    assert recorded.error is None, recorded.error
    first = recorded.evidence
    assert first is not None
    run = first.runs["run"]
    assert (run.exit_code, (run.result or {}).get("result")) == (
        0, "The notes say: RECORDED-ANSWER"), run.stderr[-2000:]

    scenario = load_scenario(out / "scenario.yaml")
    journal = recorded.sandbox / "evidence" / "journal.jsonl"  # type: ignore[operator]
    assert [str(p) for p in validate_path(out)[1] + validate_path(journal)[1]] == []
    assert API_KEY not in _all_text(out)
    main_rules = [r for r in scenario.rules if r.match.kind == "main"]
    assert [r.id for r in main_rules] == ["main-turn1-attempt1", "main-turn2-attempt1"]
    for rule in scenario.rules:  # keyed on the mock's vocabulary, never on the request's text
        assert set(rule.match.model_dump(exclude_defaults=True)) <= {"kind", "turn", "attempt"}

    replayed = run_probe(replace(probe, name="replay", scenario=scenario), ClaudeCode(),
                         claude_code_binary, tmp_path / "b")
    assert replayed.error is None, replayed.error
    second = replayed.evidence
    assert second is not None
    again = second.runs["run"]
    assert (again.exit_code, (again.result or {}).get("result")) == (
        0, (run.result or {}).get("result")), again.stderr[-2000:]
    loop = _loop_of(first)
    assert _loop_of(second) == loop
    mains = [step for step in loop if step["kind"] == "main"]
    assert mains[-1]["tool_uses"] == [
        ("Read", {"file_path": "/sandbox/workspace/notes.txt"}, "toolu_record_read")]
    assert mains[-1]["tool_results"] == ["toolu_record_read"]
    served = [r["rule"] for r in second.requests()]
    assert served == ["main-turn1-attempt1", "main-turn2-attempt1"]
    results = [b for m in second.requests()[-1]["body"]["messages"]
               if isinstance(m["content"], list) for b in m["content"]
               if b.get("type") == "tool_result"]
    assert "NOTES_CONTENT_42" in json.dumps(results)


def test_an_exchange_open_when_the_proxy_stops_is_kept_cut_off(tmp_path: Path) -> None:
    import threading

    from mockapi.script.replies import StreamStall
    upstream = Scenario(rules=[Rule(match=Match(turn=1), reply=text(
        "half of it, then a long pause", stall=StreamStall(after_events=3, seconds=60)))])
    ended: list[tuple[bytes, str]] = []
    with MockServer(upstream, tmp_path / "upstream.jsonl") as mock:
        proxy = RecordingProxy(mock.url, tmp_path / "s.yaml", tmp_path / "j.jsonl").start()
        reader = threading.Thread(target=lambda: ended.append(_read_until_broken(proxy.url)),
                                  daemon=True)
        reader.start()
        deadline = time.monotonic() + 20
        while not proxy.recorder.open and time.monotonic() < deadline:
            time.sleep(0.02)
        assert proxy.recorder.open, "the stream never started"
        time.sleep(0.3)  # its first events are through
        proxy.stop()
        reader.join(30)
    assert not reader.is_alive() and ended and ended[0][1] != "complete"
    (rule,) = load_scenario(tmp_path / "s.yaml").rules
    kept = rule.reply_list()[0]
    assert kept.raw.disconnect is True
    assert b"message_start" in b"".join(c.to_bytes() for c in kept.raw.chunks)


def test_other_routes_are_relayed_and_journaled_without_rules(tmp_path: Path) -> None:
    with MockServer(Scenario(), tmp_path / "upstream.jsonl") as mock, \
            RecordingProxy(mock.url, tmp_path / "s.yaml", tmp_path / "j.jsonl") as proxy:
        models = httpx.get(f"{proxy.url}/v1/models", timeout=30, headers={"x-api-key": API_KEY})
        missing = httpx.get(f"{proxy.url}/v1/nothing", timeout=30)
        counted = httpx.post(f"{proxy.url}/v1/messages/count_tokens?beta=true", timeout=30,
                             headers={"x-api-key": API_KEY, "anthropic-version": "2023-06-01"},
                             json={"model": MODEL, "messages": [{"role": "user", "content": "x"}]})
        refused = httpx.get(f"{proxy.url}/v1/models", timeout=30,
                            headers={"origin": "https://evil.example"})
    assert models.status_code == 200 and models.json()["data"]
    assert missing.status_code == 404 and missing.json()["error"]["type"] == "not_found_error"
    assert counted.status_code == 200 and counted.json()["input_tokens"] > 0
    assert refused.status_code == 403
    lines = [json.loads(line) for line in (tmp_path / "j.jsonl").read_text().splitlines()]
    assert [(r["path"], r["query"], r["outcome"], r["status"]) for r in lines] == [
        ("/v1/models", "", "models", 200), ("/v1/nothing", "", "not_found", 404),
        ("/v1/messages/count_tokens", "beta=true", "replied", 200),
        ("/v1/models", "", "refused", 403)]
    assert load_scenario(tmp_path / "s.yaml").rules == []
    assert validate_path(tmp_path / "j.jsonl")[1] == []
    # the refused request never reached the upstream
    assert [r["path"] for r in mock.requests()] == [
        "/v1/models", "/v1/nothing", "/v1/messages/count_tokens"]


def test_a_client_leaving_early_closes_the_upstream_and_keeps_what_came(tmp_path: Path) -> None:
    """Issue 27: the upstream was read to its end after the client left (tokens paid for
    nobody); now its response is closed at once, and the rule is what came, cut off."""
    from mockapi.script.replies import StreamStall
    upstream = Scenario(rules=[Rule(match=Match(turn=1), reply=text(
        "all of it, after a pause", stall=StreamStall(after_events=2, seconds=30)))])
    with MockServer(upstream, tmp_path / "upstream.jsonl") as mock, \
            RecordingProxy(mock.url, tmp_path / "s.yaml", tmp_path / "j.jsonl") as proxy:
        request = {"model": MODEL, "max_tokens": 100, "stream": True, "tools": TOOLS,
                   "messages": [{"role": "user", "content": "tell me"}]}
        with httpx.stream("POST", f"{proxy.url}/v1/messages", json=request, timeout=30,
                          headers={"x-api-key": API_KEY, "anthropic-version": "2023-06-01"}
                          ) as response:
            first = next(response.iter_bytes())
        assert b"message_start" in first  # and the client is gone before the pause ends
        deadline = time.monotonic() + 20
        while not proxy.recorder.rules and time.monotonic() < deadline:
            time.sleep(0.05)
        ends = [r for r in mock.read().records if r.get("type") == "response_end"]
        while not ends and time.monotonic() < deadline:
            time.sleep(0.05)
            ends = [r for r in mock.read().records if r.get("type") == "response_end"]
    # the upstream saw its client (the recorder) leave long before the 30 s pause ended
    assert [e["reason"] for e in ends] == ["client_disconnected"]
    (rule,) = load_scenario(tmp_path / "s.yaml").rules
    kept = rule.reply_list()[0]
    assert kept.raw.disconnect is True
    assert b"message_start" in b"".join(c.to_bytes() for c in kept.raw.chunks)
    recorded = [r for r in read_journal(tmp_path / "j.jsonl").records
                if r.get("type") == "response_end"]
    assert [r["reason"] for r in recorded] == ["client_disconnected"]
