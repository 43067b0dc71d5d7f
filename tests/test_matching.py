"""Request kinds (Claude Code shapes and the plain classifier), facts, and Match.differences."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import pytest
from starlette.datastructures import Headers

from mockapi.script.matching import (
    CLASSIFIERS,
    KINDS,
    Match,
    Miss,
    RequestFacts,
    classify_claude_code,
    classify_plain,
    facts_from_body,
)

COMPACTION_INSTRUCTION = (
    "Your task is to create a detailed summary of the conversation so far, paying close "
    "attention to the user's explicit requests and your previous actions.")
BILLING = "x-anthropic-billing-header: cc_version=2.1.235.a1b; cc_entrypoint=sdk-cli;"
SDK_LINE = "You are a Claude agent, built on Anthropic's Claude Agent SDK."
LONG_PROMPT = "You are an interactive CLI tool that helps users with software engineering tasks."
READ_TOOL = {"name": "Read", "description": "Reads a file",
             "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}}}
TASK_TOOL = {"name": "Task", "description": "Launch an agent", "input_schema": {"type": "object"}}


def main_body(**overrides: Any) -> dict[str, Any]:
    """A 2.1.235 main-loop request, as recorded (abridged)."""
    body: dict[str, Any] = {
        "model": "claude-sonnet-4-5",
        "messages": [{"role": "user", "content": [
            {"type": "text", "text": "<system-reminder>context</system-reminder>"},
            {"type": "text", "text": "Read probe-fixture.txt", "cache_control": {
                "type": "ephemeral"}}]}],
        "system": [{"type": "text", "text": BILLING},
                   {"type": "text", "text": SDK_LINE},
                   {"type": "text", "text": LONG_PROMPT, "cache_control": {"type": "ephemeral"}}],
        "tools": [READ_TOOL, TASK_TOOL],
        "metadata": {"user_id": '{"session_id":"0b9c"}'},
        "max_tokens": 32000,
        "thinking": {"type": "adaptive"},
        "context_management": {"edits": []},
        "stream": True,
    }
    body.update(overrides)
    return body


def with_turns(*user_contents: Any) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for i, content in enumerate(user_contents):
        if i:
            messages.append({"role": "assistant", "content": [{"type": "text", "text": "ok"}]})
        messages.append({"role": "user", "content": content})
    return messages


def facts(body: Mapping[str, Any], headers: Mapping[str, str] | None = None,
          path: str = "/v1/messages") -> RequestFacts:
    return facts_from_body(path, body, headers or {})


def kind_of(body: Mapping[str, Any], headers: Mapping[str, str] | None = None) -> str:
    return classify_claude_code(facts(body, headers))


# ---- bodies shaped like Claude Code's ------------------------------------------------------

def compaction_2_1() -> dict[str, Any]:
    return main_body(messages=with_turns(
        "Read probe-fixture.txt",
        [{"type": "text", "text": "/compact"},
         {"type": "text", "text": COMPACTION_INSTRUCTION}]))


def compaction_2_0() -> dict[str, Any]:
    return {
        "model": "claude-sonnet-4-5", "max_tokens": 20000, "stream": True,
        "system": [{"type": "text", "text": "You are a helpful AI assistant tasked with "
                                            "summarizing conversations."}],
        "tools": [READ_TOOL],
        "messages": with_turns("hello", "Please summarise."),
    }


def warmup_2_0() -> dict[str, Any]:
    return main_body(messages=[{"role": "user", "content": "Warmup"}],
                     system=[{"type": "text", "text": LONG_PROMPT}])


def subagent_by_billing() -> dict[str, Any]:
    body = main_body()
    body["system"][0] = {"type": "text", "text": BILLING + " cc_is_subagent=true;"}
    return body


def subagent_by_system() -> dict[str, Any]:
    return main_body(system=[
        {"type": "text", "text": BILLING},
        {"type": "text", "text": "You are an agent for Claude Code, Anthropic's official CLI. "
                                 "Given the user's message, use the tools available."}])


def title_request() -> dict[str, Any]:
    return {
        "model": "claude-haiku-4-5", "max_tokens": 512, "stream": False,
        "system": [{"type": "text", "text": BILLING},
                   {"type": "text", "text": "Generate a concise title for this session."}],
        "messages": [{"role": "user", "content": "Read probe-fixture.txt"}],
        "thinking": {"type": "disabled"},
        "output_config": {"format": {"type": "json_schema", "schema": {
            "type": "object", "properties": {"title": {"type": "string"}},
            "required": ["title"]}}},
    }


@pytest.mark.parametrize(
    ("body", "headers", "expected"),
    [
        pytest.param(main_body(), None, "main", id="main"),
        pytest.param(main_body(thinking={"type": "enabled", "budget_tokens": 1024}), None,
                     "main", id="main-thinking-enabled"),
        pytest.param({k: v for k, v in main_body().items() if k != "thinking"}, None, "main",
                     id="main-no-thinking-field"),
        pytest.param(main_body(messages=with_turns(
            "Read it", [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "1\tx"}])),
            None, "main", id="main-tool-result-turn"),
        pytest.param(compaction_2_1(), None, "compaction", id="compaction-2.1"),
        pytest.param(main_body(messages=with_turns(COMPACTION_INSTRUCTION)), None,
                     "compaction", id="compaction-2.1-string-content"),
        pytest.param(compaction_2_0(), None, "compaction", id="compaction-2.0.77"),
        pytest.param(main_body(messages=with_turns(COMPACTION_INSTRUCTION, "go on")), None,
                     "main", id="instruction-only-in-an-earlier-turn"),
        pytest.param(warmup_2_0(), None, "warmup", id="warmup"),
        pytest.param(main_body(messages=[{"role": "user", "content": [
            {"type": "text", "text": "Warmup"}]}]), None, "warmup", id="warmup-blocks"),
        pytest.param(main_body(messages=[{"role": "user", "content": " Warmup\n"}]), None,
                     "warmup", id="warmup-whitespace"),
        pytest.param(main_body(messages=[{"role": "user", "content": "Warmup please"}]), None,
                     "main", id="not-warmup"),
        pytest.param(subagent_by_billing(), None, "subagent", id="subagent-billing-flag"),
        pytest.param(main_body(), {"x-claude-code-agent-id": "a1b2"}, "subagent",
                     id="subagent-header"),
        pytest.param(main_body(), Headers(headers={"X-Claude-Code-Agent-Id": "a1b2"}),
                     "subagent", id="subagent-header-any-case"),
        pytest.param(subagent_by_system(), None, "subagent", id="subagent-system"),
        pytest.param(main_body(system="You are an agent for Claude Code."), None, "subagent",
                     id="subagent-system-string"),
        pytest.param(main_body(system=[
            {"type": "text", "text": LONG_PROMPT},
            {"type": "text", "text": "Notes:\n- Agent threads always have their cwd reset "
                                     "between bash calls, as a result please only use "
                                     "absolute file paths."}]), None, "subagent",
            id="subagent-notes-2.0.77"),
        pytest.param(main_body(system=[{"type": "text", "text": BILLING},
                                       {"type": "text", "text": "cc_is_subagent=true"}]),
                     None, "main", id="billing-flag-only-counts-in-system0"),
        pytest.param(title_request(), None, "side", id="side-title"),
        pytest.param({k: v for k, v in main_body().items() if k != "tools"}, None, "side",
                     id="side-no-tools-field"),
        pytest.param(main_body(tools=[]), None, "side", id="side-empty-tools"),
        pytest.param(main_body(thinking={"type": "disabled"}), None, "side",
                     id="side-thinking-disabled"),
        # 2.1.31-2.1.45: temperature 1 on every main request (as side, the loop got "OK")
        pytest.param(main_body(temperature=1), None, "main", id="main-temperature"),
        pytest.param(main_body(temperature=0), None, "main", id="main-temperature-zero"),
        pytest.param({**main_body(tools=[]), "temperature": 1}, None, "side",
                     id="side-temperature-no-tools"),
        # the order of the tests: compaction > warmup > subagent > side > main
        pytest.param(main_body(messages=with_turns("Warmup", COMPACTION_INSTRUCTION)), None,
                     "compaction", id="compaction-before-warmup"),
        pytest.param(dict(warmup_2_0(), system=[{"type": "text", "text": BILLING
                                                 + " cc_is_subagent=true;"}]),
                     {"x-claude-code-agent-id": "a"}, "warmup", id="warmup-before-subagent"),
        pytest.param(dict(subagent_by_system(), tools=[], temperature=1), None, "subagent",
                     id="subagent-before-side"),
        pytest.param(dict(compaction_2_0(), tools=[]), None, "compaction",
                     id="compaction-before-side"),
        pytest.param(main_body(system=[{"type": "text", "text": BILLING.replace(
            "2.1.235.a1b", "2.1.235.ffe")}, {"type": "text", "text": LONG_PROMPT}]), None,
            "main", id="billing-suffix-irrelevant"),
    ],
)
def test_claude_code_classifier(body: dict[str, Any], headers: Mapping[str, str] | None,
                                expected: str) -> None:
    assert kind_of(body, headers) == expected


@pytest.mark.parametrize("body", [
    main_body(), compaction_2_1(), compaction_2_0(), warmup_2_0(), subagent_by_billing(),
    title_request(), {},
])
def test_plain_classifier_says_main(body: dict[str, Any]) -> None:
    assert classify_plain(facts(body, {"x-claude-code-agent-id": "a"})) == "main"


def test_classifier_table() -> None:
    assert CLASSIFIERS == {"claude-code": classify_claude_code, "plain": classify_plain}
    assert KINDS == ("main", "compaction", "subagent", "warmup", "side")


# ---- facts -----------------------------------------------------------------------------------


def test_facts_of_a_main_request() -> None:
    body = main_body(messages=with_turns(
        "first question",
        [{"type": "tool_result", "tool_use_id": "toolu_a", "content": "x"},
         {"type": "tool_result", "tool_use_id": "toolu_b", "content": [
             {"type": "text", "text": "nested is not user text"}]},
         {"type": "text", "text": "line one"}, {"type": "text", "text": "line two"},
         {"type": "image", "source": {}}]))
    headers = {"x-app": "cli"}
    got = facts(body, headers, path="/v1/messages")
    assert got == RequestFacts(
        path="/v1/messages", model="claude-sonnet-4-5", stream=True,
        tool_names=("Read", "Task"), tool_inputs=frozenset({"Read.file_path"}),
        first_user_text="first question",
        last_user_text="line one\nline two",
        last_user_tool_result_ids=frozenset({"toolu_a", "toolu_b"}),
        system_text=f"{BILLING}\n{SDK_LINE}\n{LONG_PROMPT}", system_first=BILLING,
        has_temperature=False, thinking_type="adaptive", headers=headers)


@pytest.mark.parametrize(
    ("body", "field", "expected"),
    [
        ({"system": "one string"}, "system_text", "one string"),
        ({"system": "one string"}, "system_first", "one string"),
        ({"system": [{"type": "text", "text": "a"}, "junk", {"type": "text"},
                     {"type": "text", "text": 5}, {"type": "text", "text": "b"}]},
         "system_text", "a\n\nb"),
        ({"system": None}, "system_text", ""),
        ({}, "system_first", ""),
        ({"stream": "true"}, "stream", False),
        ({"stream": 1}, "stream", False),
        ({"stream": False}, "stream", False),
        ({}, "stream", False),
        ({"model": 5}, "model", None),
        ({}, "model", None),
        ({"messages": "nope"}, "last_user_text", ""),
        ({"messages": [None, {"role": "user", "content": 7}]}, "last_user_text", ""),
        ({"messages": [{"role": "assistant", "content": "a"}]}, "first_user_text", ""),
        ({"tools": [{"name": "A"}, {"type": "web_search_20250305", "name": "web_search"},
                    {"type": "bash"}, "x"]}, "tool_names", ("A", "web_search")),
        ({"tools": {"name": "A"}}, "tool_names", ()),
        ({"temperature": None}, "has_temperature", True),
        ({"thinking": {"type": "enabled"}}, "thinking_type", "enabled"),
        ({"thinking": "enabled"}, "thinking_type", None),
        ({"messages": [{"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": 5}, {"type": "tool_result"}]}]},
         "last_user_tool_result_ids", frozenset()),
    ],
)
def test_facts_tolerate_odd_bodies(body: dict[str, Any], field: str, expected: Any) -> None:
    assert getattr(facts(body), field) == expected


# ---- Match.differences -----------------------------------------------------------------------

BASE_FACTS = facts(main_body(messages=with_turns(
    "hi", [{"type": "tool_result", "tool_use_id": "toolu_b", "content": "x"},
           {"type": "tool_result", "tool_use_id": "toolu_a", "content": "y"},
           {"type": "text", "text": "Stop hook feedback:\nkeep going"}])))


def diff(match: Match, kind: str = "main", turn: int = 2, attempt: int = 1,
         request: RequestFacts = BASE_FACTS) -> list[Miss]:
    return match.differences(request, kind, turn, attempt)


@pytest.mark.parametrize(
    ("match", "kind", "turn", "attempt", "expected"),
    [
        pytest.param(Match(), "main", 2, 1, [], id="default-matches-main"),
        pytest.param(Match(), "side", 1, 1, [Miss("kind", "main", "side")], id="default-kind"),
        pytest.param(Match(kind="any"), "warmup", 1, 1, [], id="any"),
        pytest.param(Match(kind=["side", "warmup"]), "warmup", 1, 1, [], id="kind-list-hit"),
        pytest.param(Match(kind=["side", "warmup"]), "main", 1, 1,
                     [Miss("kind", ["side", "warmup"], "main")], id="kind-list-miss"),
        pytest.param(Match(turn=2), "main", 2, 1, [], id="turn-hit"),
        pytest.param(Match(turn=1), "main", 2, 1, [Miss("turn", 1, 2)], id="turn-miss"),
        pytest.param(Match(attempt=2), "main", 1, 2, [], id="attempt-hit"),
        pytest.param(Match(attempt=2), "main", 1, 1, [Miss("attempt", 2, 1)],
                     id="attempt-miss"),
        pytest.param(Match(last_user_text_contains="Stop hook feedback"), "main", 1, 1, [],
                     id="text-hit"),
        pytest.param(Match(last_user_text_contains=["Stop hook", "nope", "keep", "absent"]),
                     "main", 1, 1,
                     [Miss("last_user_text_contains", "nope", "Stop hook feedback:\nkeep going"),
                      Miss("last_user_text_contains", "absent",
                           "Stop hook feedback:\nkeep going")], id="text-list-each-needle"),
        pytest.param(Match(tool_result_for="toolu_a"), "main", 1, 1, [], id="tool-result-hit"),
        pytest.param(Match(tool_result_for="toolu_c"), "main", 1, 1,
                     [Miss("tool_result_for", "toolu_c", ["toolu_a", "toolu_b"])],
                     id="tool-result-miss"),
        pytest.param(Match(declares_tool="Task"), "main", 1, 1, [], id="declares-hit"),
        pytest.param(Match(declares_tool="Agent"), "main", 1, 1,
                     [Miss("declares_tool", "Agent", ["Read", "Task"])], id="declares-miss"),
        pytest.param(Match(declares_tool_input="Read.file_path"), "main", 1, 1, [],
                     id="declares-input-hit"),
        pytest.param(Match(declares_tool_input="Read.noop"), "main", 1, 1,
                     [Miss("declares_tool_input", "Read.noop", ["Read.file_path"])],
                     id="declares-input-miss"),
        pytest.param(Match(system_contains="interactive CLI tool"), "main", 1, 1, [],
                     id="system-hit"),
        pytest.param(Match(model="claude-sonnet-4-5"), "main", 1, 1, [], id="model-hit"),
        pytest.param(Match(model="claude-opus-4-1"), "main", 1, 1,
                     [Miss("model", "claude-opus-4-1", "claude-sonnet-4-5")], id="model-miss"),
        pytest.param(Match(stream=True), "main", 1, 1, [], id="stream-hit"),
        pytest.param(Match(stream=False), "main", 1, 1, [Miss("stream", False, True)],
                     id="stream-miss"),
        pytest.param(Match(path="/v1/messages/count_tokens"), "main", 1, 1,
                     [Miss("path", "/v1/messages/count_tokens", "/v1/messages")],
                     id="path-miss"),
        pytest.param(Match(kind="side", turn=1, attempt=1, model="m", stream=False,
                           declares_tool="X", tool_result_for="t", system_contains="zzz",
                           last_user_text_contains="q", path="/p"),
                     "main", 3, 2,
                     [Miss("path", "/p", "/v1/messages"), Miss("kind", "side", "main"),
                      Miss("turn", 1, 3), Miss("attempt", 1, 2),
                      Miss("last_user_text_contains", "q", "Stop hook feedback:\nkeep going"),
                      Miss("tool_result_for", "t", ["toolu_a", "toolu_b"]),
                      Miss("declares_tool", "X", ["Read", "Task"]),
                      Miss("system_contains", "zzz",
                           f"{BILLING}\n{SDK_LINE}\n{LONG_PROMPT}"[:120]
                           + f"… ({len(BILLING) + len(SDK_LINE) + len(LONG_PROMPT) + 2} chars)"),
                      Miss("model", "m", "claude-sonnet-4-5"), Miss("stream", False, True)],
                     id="every-field-in-order"),
    ],
)
def test_differences(match: Match, kind: str, turn: int, attempt: int,
                     expected: list[Miss]) -> None:
    assert diff(match, kind, turn, attempt) == expected


def test_long_text_is_excerpted_in_misses() -> None:
    long_text = "x" * 500
    request = facts({"messages": [{"role": "user", "content": long_text}], "tools": [READ_TOOL]})
    (miss,) = Match(last_user_text_contains="y").differences(request, "main", 1, 1)
    assert miss.actual == "x" * 120 + "… (500 chars)"
    short = facts({"messages": [{"role": "user", "content": "x" * 120}]})
    (miss_short,) = Match(last_user_text_contains="y").differences(short, "main", 1, 1)
    assert miss_short.actual == "x" * 120


def test_model_miss_with_no_model() -> None:
    request = facts({"messages": []})
    assert Match(model="m").differences(request, "main", 1, 1) == [Miss("model", "m", None)]


@pytest.mark.parametrize(("miss", "shown"), [
    (Miss("turn", 1, 2), "turn: expected 1, got 2"),
    (Miss("kind", ["side", "warmup"], "main"), "kind: expected ['side', 'warmup'], got 'main'"),
    (Miss("tool_result_for", "toolu_1", []), "tool_result_for: expected 'toolu_1', got []"),
    (Miss("stream", False, True), "stream: expected False, got True"),
])
def test_miss_text(miss: Miss, shown: str) -> None:
    assert str(miss) == shown


@pytest.mark.parametrize("fields", [{"turn": 0}, {"attempt": 0}, {"kind": "Main"},
                                    {"kind": ["main", "x"]}, {"unknown": 1}])
def test_match_refuses_bad_conditions(fields: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        Match(**fields)


def test_facts_keep_headers_as_given() -> None:
    headers = Headers(headers={"X-Claude-Code-Agent-Id": "a"})
    got = facts(copy.deepcopy(main_body()), headers)
    assert got.headers is headers
