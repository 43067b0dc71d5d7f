"""What a newcomer to the mock runs into first: requests that are their own, misspelled keys,
the scenario endpoint's body, where the journal goes, a real client against `serve`, and
replies that were never used."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from mockapi import Rule, Scenario, ScenarioError, parse_scenario, read_journal, text
from mockapi.script.scenario import load_scenario
from tests.mock_process import read_line

ROOT = Path(__file__).resolve().parent.parent
MOCK_PAGE = (ROOT / "docs" / "mock.md").read_text()  # where the README's mock sections went
HEADERS = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
TIMEOUT = 10


def _body(content: str = "hello", **extra: Any) -> dict[str, Any]:
    return {"model": "claude-sonnet-4-5", "max_tokens": 50,
            "messages": [{"role": "user", "content": content}], **extra}


def _post(url: str, body: dict[str, Any], path: str = "/v1/messages") -> httpx.Response:
    return httpx.post(f"{url}{path}", headers=HEADERS, json=body, timeout=TIMEOUT)


# ---- 1. a request is the user's own unless a scenario says it talks to Claude Code ----------


def test_a_request_without_tools_gets_the_scripted_reply_by_default(mock_api: Any) -> None:
    """No tools, no classifier named: the user's own request, answered by their rule (it used
    to be taken for a Claude Code side request and answered "OK")."""
    mock = mock_api(Scenario(rules=[Rule(id="mine", reply=text("scripted"))]))
    answer = _post(mock.url, _body())
    assert answer.json()["content"] == [{"type": "text", "text": "scripted"}]
    (record,) = mock.requests()
    assert (record["kind"], record["rule"]) == ("main", "mine")
    assert "builtin_reply" not in record


def test_a_scenario_file_without_a_classifier_is_plain() -> None:
    scenario = parse_scenario({"rules": [{"reply": {"text": "x"}}]})
    assert scenario.classifier == "plain"
    assert parse_scenario({"classifier": "claude-code", "rules": []}).classifier == "claude-code"


def test_a_builtin_reply_says_so_in_the_journal_and_the_state(mock_api: Any) -> None:
    """A Claude Code scenario opts in to side replies; each built-in answer is marked."""
    mock = mock_api(Scenario(classifier="claude-code", rules=[
        Rule(id="main", reply=text("scripted"))]))
    side = _post(mock.url, _body("write a title"))  # no tools: a side request
    assert side.json()["content"] == [{"type": "text", "text": "OK"}]
    counted = _post(mock.url, _body(), path="/v1/messages/count_tokens")
    assert counted.status_code == 200
    records = mock.requests()
    assert [(r["rule"], r.get("builtin_reply")) for r in records] == [
        ("builtin:side", "side-request"), ("builtin:count_tokens", "count-tokens")]
    state = mock.admin("GET", "state").json()
    assert state["builtin_replies"] == {
        "total": 2, "by_reply": {"side-request": 1, "count-tokens": 1},
        "requests": [{"seq": records[0]["seq"], "builtin_reply": "side-request"},
                     {"seq": records[1]["seq"], "builtin_reply": "count-tokens"}]}
    mock.reset()
    assert mock.admin("GET", "state").json()["builtin_replies"]["total"] == 0


def test_journals_with_and_without_builtin_reply_validate(mock_api: Any, tmp_path: Path) -> None:
    """The journal-line schema knows the field, and older lines (without it) still pass."""
    from probes.report.schemas import schema, validate_path
    properties = schema("journal-line")["$defs"]["RequestRecord"]["properties"]
    assert "builtin_reply" in properties
    mock = mock_api(Scenario(classifier="claude-code"), journal_path=tmp_path / "j.jsonl")
    _post(mock.url, _body("a title"))
    lines = (tmp_path / "j.jsonl").read_text().splitlines()
    assert '"builtin_reply":"side-request"' in lines[0]
    older = tmp_path / "older.jsonl"
    older.write_text("\n".join(re.sub(r',"builtin_reply":"[a-z-]+"', "", line)
                               for line in lines) + "\n")
    for path in (tmp_path / "j.jsonl", older):
        assert validate_path(path) == (1, []), path
        assert read_journal(path).requests()[0]["rule"] == "builtin:side"


def test_the_harness_opts_its_claude_code_probes_in_and_reports_keep_their_shape() -> None:
    """Claude Code probes are served with the claude-code classifier; a probe that names its
    own (the tool runner's plain) keeps it; every probe gets sequential reply ids; the
    report shows the scenario as it always has."""
    from probes.catalog import REPORTS
    from probes.catalog.tool_runner import REPORTS as TOOL_RUNNER_REPORTS
    from probes.core.probe import served_scenario, shown_scenario
    folders = [(ROOT / "reports" / "2.1.235", REPORTS),
               (ROOT / "reports" / "anthropic-tool-runner-2.16.0", TOOL_RUNNER_REPORTS)]
    seen = 0
    for folder, specs in folders:
        for spec in specs:
            committed = json.loads((folder / f"{spec.name}.json").read_text())
            scenarios = {p["name"]: p["scenario"] for p in committed["probes"]}
            for probe in spec.probes:
                served = served_scenario(probe.scenario)
                expected = "plain" if folder.name.startswith("anthropic") else "claude-code"
                assert served.classifier == expected, probe.name
                # reply ids as the committed evidence holds them (msg_loopprobe_<seq>)
                assert served.message_ids == "sequential", probe.name
                shown = shown_scenario(served)
                assert shown.get("classifier") == scenarios[probe.name].get("classifier")
                assert set(shown) == set(scenarios[probe.name]), probe.name
                seen += 1
    assert seen > 20


# ---- 2. did you mean ------------------------------------------------------------------------


@pytest.mark.parametrize("data, problem", [
    ({"rulez": []},
     'rulez: unknown key "rulez" in the scenario; expected one of schema_version, name, '
     'description, classifier, side_replies, validation, thread_idle_seconds, message_ids, models, rules; '
     'did you mean "rules"? (found {"rulez": []})'),
    ({"rules": [{"replys": [{"text": "a"}]}]},
     'rules[0].replys: unknown key "replys" in rules[0]; expected one of id, match, reply, '
     'replies, repeat; did you mean "reply" or "replies"? (found {"replys": [{"text": "a"}]})'),
    ({"rules": [{"match": {"turns": 1}, "reply": {"text": "a"}}]},
     'rules[0].match.turns: unknown key "turns" in rules[0].match; expected one of kind, turn, '
     'attempt, last_user_text_contains, tool_result_for, declares_tool, declares_tool_input, '
     'system_contains, model, stream, path; did you mean "turn"? (found {"turns": 1})'),
    ({"rules": [{"reply": {"txt": "a"}}]},
     'rules[0].reply.txt: unknown key "txt" in rules[0].reply; expected one of'),
])
def test_a_misspelled_key_is_named_with_its_place_and_the_close_match(
        data: dict[str, Any], problem: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(data, "bad.yaml")
    assert len(caught.value.problems) == 1, caught.value.problems
    assert caught.value.problems[0].startswith(problem), caught.value.problems[0]


def test_a_misspelled_key_in_a_file_is_one_located_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("name: x\nrules:\n  - id: a\n    replys:\n      - text: hi\n")
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    assert str(caught.value).splitlines() == [
        f"invalid scenario {path}: 1 problem(s)",
        '  - rules[0].replys: unknown key "replys" in rules[0]; expected one of id, match, '
        'reply, replies, repeat; did you mean "reply" or "replies"? '
        '(found {"replys": [{"text": "hi"}]})']


# ---- 3. POST /_mock/scenario --------------------------------------------------------------


@pytest.mark.parametrize("content, content_type, found", [
    (b"not json at all", "application/json", "not valid JSON"),
    (b'{"rules": [{"reply": {"text": "x"}}]}', "application/json",
     'found a bare scenario (keys: rules)'),
    (b"- a\n- list\n", "application/yaml", "found a list"),
])
def test_a_bad_scenario_body_names_what_was_expected(mock_api: Any, content: bytes,
                                                     content_type: str, found: str) -> None:
    mock = mock_api(Scenario())
    refused = mock.admin("POST", "scenario", content=content,
                         headers={"content-type": content_type})
    assert refused.status_code == 400
    (problem,) = refused.json()["problems"]
    assert "Content-Type: application/json" in problem and '{"scenario":' in problem
    assert "Content-Type: application/yaml" in problem
    assert found in problem, problem


def _blocks(text: str, info: str) -> list[str]:
    """The fenced blocks of ``text`` whose info string is ``info``."""
    blocks, current, shown = [], None, ""
    for line in text.splitlines(keepends=True):
        if line.startswith("```"):
            if current is None:
                current, shown = [], line[3:].strip()
            else:
                if shown == info:
                    blocks.append("".join(current))
                current = None
        elif current is not None:
            current.append(line)
    return blocks


def _fence(command: str) -> str:
    """The mock page's shell block that holds ``command``."""
    return next(b for b in _blocks(MOCK_PAGE, "sh") if command in b)


def test_the_mock_page_documents_the_scenario_endpoint_with_a_curl_that_works(
        mock_api: Any) -> None:
    section = MOCK_PAGE[MOCK_PAGE.index("## Changing the scenario of a running mock"):]
    assert "application/yaml" in section and "application/json" in section
    block = _fence("/_mock/scenario")
    curls = [c for c in block.split("\n\n") if "curl" in c and "/_mock/scenario" in c]
    assert len(curls) >= 2
    mock = mock_api(Scenario())
    for curl in curls:
        words = shlex.split(curl.replace("\\\n", " "))
        body = words[words.index("--data-binary") + 1]
        content_type = next(w for w in words if w.lower().startswith("content-type"))
        installed = mock.admin("POST", "scenario", content=body.encode(), headers={
            "content-type": content_type.split(":", 1)[1].strip()})
        assert installed.json()["installed"] is True, installed.text


# ---- 4 and 5. serve: where its journal goes, a real client against it ------------------------


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Any]:
    started: list[subprocess.Popen[bytes]] = []

    def start(*args: str, cwd: Path, env: dict[str, str]) -> tuple[str, str]:
        process = subprocess.Popen([sys.executable, "-m", "mockapi", "--admin-open", *args],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   start_new_session=True, cwd=cwd,
                                   env={**os.environ, "PYTHONPATH": str(ROOT), **env})
        started.append(process)
        return read_line(process, 30), ""

    yield start
    for process in started:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
        process.wait(10)


def test_serve_keeps_its_journal_out_of_the_working_directory(serve: Any,
                                                              tmp_path: Path) -> None:
    checkout, state = tmp_path / "checkout", tmp_path / "state"
    checkout.mkdir()
    line, _ = serve(cwd=checkout, env={"XDG_STATE_HOME": str(state)})
    url = line.split()[3]
    journal = Path(re.search(r"journal: (\S+?)\)", line).group(1))  # type: ignore[union-attr]
    port = url.rsplit(":", 1)[1]
    assert journal.parent == state / "loopprobe" / "journals", line
    assert journal.name.endswith(f"-{port}.jsonl")
    assert _post(url, _body()).status_code == 400  # no rules: recorded all the same
    assert read_journal(journal).requests()
    assert list(checkout.iterdir()) == []


def test_serve_journal_option_still_wins(serve: Any, tmp_path: Path) -> None:
    line, _ = serve("--journal", "mine.jsonl", cwd=tmp_path,
                    env={"XDG_STATE_HOME": str(tmp_path / "state")})
    assert f"journal: {tmp_path / 'mine.jsonl'})" in line
    assert not (tmp_path / "state").exists()


def test_the_mock_page_client_section_serves_its_scenarios(serve: Any, tmp_path: Path,
                                                            mock_api: Any) -> None:
    """The mock page's standalone examples: the SDK lines get the scripted text from `serve`
    with hello.yaml; claude.yaml answers Claude Code's main loop from its rule and a side
    request with the built-in reply; the Claude Code line sets what the harness sets."""
    section = MOCK_PAGE[MOCK_PAGE.index("## Pointing a real client at the mock"):]
    section = section[:section.index("\n## ", 4)]
    hello_text, claude_text = _blocks(section, "yaml")
    hello = parse_scenario(yaml.safe_load(hello_text), "docs/mock.md")
    claude = parse_scenario(yaml.safe_load(claude_text), "docs/mock.md")
    assert (hello.classifier, claude.classifier) == ("plain", "claude-code")
    commands = _fence("claude -p")
    assert "loopprobe serve --scenario claude.yaml" in commands
    from probes.clients.claude_code import ClaudeCode
    from probes.sandbox.folders import Sandbox
    harness = ClaudeCode(tmp_path / "cache").environment(
        Sandbox.create(tmp_path / "box", "docs"), "http://mock")
    for name in ("ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY",
                 "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "DISABLE_AUTOUPDATER",
                 "DISABLE_TELEMETRY", "DISABLE_ERROR_REPORTING"):
        assert name in harness and f"{name}=" in commands, name
    # claude.yaml as Claude Code meets it: its loop declares tools, a title request none
    mock = mock_api(claude)
    loop = _post(mock.url, _body(tools=[{"name": "Read", "input_schema": {"type": "object"}}]))
    title = _post(mock.url, _body("a title for this"))
    assert loop.json()["content"][0]["text"] == "Hello from the mock"
    assert title.json()["content"][0]["text"] == "OK"
    assert [r.get("builtin_reply") for r in mock.requests()] == [None, "side-request"]
    # hello.yaml served, the SDK lines as written
    (tmp_path / "hello.yaml").write_text(hello_text)
    assert "loopprobe serve --scenario hello.yaml" in _fence("--scenario hello.yaml")
    line, _ = serve("--scenario", "hello.yaml", "--port", "0", cwd=tmp_path,
                    env={"XDG_STATE_HOME": str(tmp_path / "state")})
    url = line.split()[3]
    (sdk,) = _blocks(section, "py")
    namespace: dict[str, Any] = {}
    exec(compile(sdk.replace("http://127.0.0.1:8080", url), "docs/mock.md", "exec"), namespace)
    assert namespace["reply"].content[0].text == "Hello from the mock"


# ---- 6. every scripted reply used ---------------------------------------------------------


def test_assert_all_used_passes_when_every_reply_was_served(mock_api: Any) -> None:
    mock = mock_api(Scenario(rules=[
        Rule(id="first", reply=text("one")),
        Rule(id="rest", replies=[text("two"), text("three")], repeat="always")]))
    for _ in range(4):
        assert _post(mock.url, _body()).status_code == 200
    mock.assert_all_used()
    assert mock.mock.script.reply_uses() == [("first", 0, 1), ("rest", 0, 1), ("rest", 1, 2)]


def test_assert_all_used_names_each_unused_reply_and_counts(mock_api: Any) -> None:
    mock = mock_api(Scenario(rules=[
        Rule(id="first", reply=text("one")),
        Rule(id="pair", replies=[text("two"), text("three")]),
        Rule(id="never", reply=text("four"), repeat="always")]))
    _post(mock.url, _body())
    _post(mock.url, _body("again"))
    with pytest.raises(AssertionError) as caught:
        mock.assert_all_used()
    message = str(caught.value)
    assert message.splitlines() == [
        "2 of 4 scripted replies never used:",
        "  - rule 'pair' reply 1",
        "  - rule 'never' reply 0",
        "used: rule 'first' reply 0: 1 time; rule 'pair' reply 0: 1 time",
    ]
    mock.reset()
    with pytest.raises(AssertionError, match="4 of 4 scripted replies never used"):
        mock.assert_all_used()


def test_require_all_used_fails_the_test_at_its_end(tmp_path: Path) -> None:
    (tmp_path / "test_uses.py").write_text(
        "import httpx\n"
        "from mockapi import Rule, Scenario, text\n"
        "def _ask(url):\n"
        "    return httpx.post(url + '/v1/messages', headers={'x-api-key': 'k',\n"
        "        'anthropic-version': '2023-06-01'}, json={'model': 'm', 'max_tokens': 5,\n"
        "        'messages': [{'role': 'user', 'content': 'x'}]})\n"
        "SCENARIO = Scenario(rules=[Rule(id='a', reply=text('1')),\n"
        "                           Rule(id='b', reply=text('2'))])\n"
        "def test_uses_both(mock_api):\n"
        "    mock = mock_api(SCENARIO, require_all_used=True)\n"
        "    _ask(mock.url); _ask(mock.url)\n"
        "def test_uses_one(mock_api):\n"
        "    mock = mock_api(SCENARIO, require_all_used=True)\n"
        "    _ask(mock.url)\n")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-p", "no:randomly", "test_uses.py"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert "2 passed, 1 error" in done.stdout, done.stdout[-3000:]
    assert "ERROR at teardown of test_uses_one" in done.stdout
    assert "1 of 2 scripted replies never used:" in done.stdout
    assert "  - rule 'b' reply 0" in done.stdout
