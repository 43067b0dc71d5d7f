"""Scenario files: loading, validation messages that name every problem, placeholders."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from mockapi.script.matching import Match
from mockapi.script.replies import ApiError, Message, Raw, TextBlock, ToolUseBlock, raw, text, tool_use
from mockapi.script.scenario import Rule, Scenario, ScenarioError, load_scenario, parse_scenario

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "scenarios" / "tool-then-text.yaml"


def problems_of(data: Any, source: str = "s.yaml") -> list[str]:
    with pytest.raises(ScenarioError) as raised:
        parse_scenario(data, source)
    assert raised.value.source == source
    return raised.value.problems


# ---- the shipped example ---------------------------------------------------------------


def test_the_shipped_example_loads() -> None:
    scenario = load_scenario(EXAMPLE)
    assert scenario.name == "tool-then-text"
    assert scenario.classifier == "claude-code"
    assert scenario.side_replies == "auto"
    assert scenario.rule_ids() == ["ask-to-read", "final-answer"]
    first, second = scenario.rules
    assert first.match == Match(kind="main", turn=1)
    assert first.repeat == "once"
    assert isinstance(first.reply, Message)
    assert first.reply.blocks() == [ToolUseBlock(
        id="toolu_example_read", name="Read",
        input={"file_path": "{workspace}/probe-fixture.txt"})]
    assert second.match == Match(kind="main", tool_result_for="toolu_example_read")
    assert isinstance(second.reply, Message)
    assert second.reply.blocks() == [TextBlock(text="DONE")]
    assert scenario.placeholders() == {"workspace"}


def test_the_shipped_example_renders_the_workspace() -> None:
    rendered = load_scenario(EXAMPLE).render({"workspace": "/tmp/ws"})
    reply = rendered.rules[0].reply
    assert isinstance(reply, Message)
    assert reply.blocks()[0] == ToolUseBlock(
        id="toolu_example_read", name="Read", input={"file_path": "/tmp/ws/probe-fixture.txt"})
    assert rendered.placeholders() == set()
    assert rendered.rule_ids() == ["ask-to-read", "final-answer"]


def test_the_shipped_example_without_a_workspace_is_refused() -> None:
    with pytest.raises(ScenarioError) as raised:
        load_scenario(EXAMPLE).render({})
    assert raised.value.problems == [
        "placeholder {workspace} has no value; the run provides: nothing"]


# ---- YAML and JSON files ------------------------------------------------------------------

SCENARIO_DATA: dict[str, Any] = {
    "name": "from-file",
    "classifier": "plain",
    "side_replies": "none",
    "models": ["m-1"],
    "rules": [
        {"id": "first", "match": {"turn": 1}, "reply": {"text": "one"}},
        {"match": {"kind": ["main", "subagent"]}, "repeat": "always",
         "replies": [{"error": {"status": 529, "message": "Overloaded"}},
                     {"raw": {"chunks": [{"data": "event: ping\n\n"}]}},
                     {"content": [{"type": "tool_use", "name": "Read", "input": {"a": 1}}]}]},
    ],
}


@pytest.mark.parametrize(("suffix", "dump"), [
    (".yaml", lambda d: yaml.safe_dump(d)),
    (".yml", lambda d: yaml.safe_dump(d)),
    (".json", lambda d: json.dumps(d)),
])
def test_yaml_and_json_files(tmp_path: Path, suffix: str, dump: Any) -> None:
    path = tmp_path / f"scenario{suffix}"
    path.write_text(dump(SCENARIO_DATA))
    scenario = load_scenario(path)
    assert scenario.name == "from-file"
    assert scenario.classifier == "plain"
    assert scenario.side_replies == "none"
    assert scenario.models == ["m-1"]
    assert scenario.rule_ids() == ["first", "rule-2"]
    assert scenario.rules[1].repeat == "always"
    assert scenario.rules[1].match.kind == ["main", "subagent"]
    replies = scenario.rules[1].reply_list()
    assert [type(r) for r in replies] == [ApiError, Raw, Message]
    assert scenario == load_scenario(str(path))


def test_json_file_is_parsed_as_json_not_yaml(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text("name: x\nrules: []\n")  # valid YAML, invalid JSON
    with pytest.raises(ScenarioError) as raised:
        load_scenario(path)
    assert len(raised.value.problems) == 1
    assert raised.value.problems[0].startswith("not valid JSON: ")
    assert str(path) in str(raised.value)


# ---- problems, all of them, with file name, path, expected and found ------------------------

MALFORMED = """\
name: broken
rules:
  - id: good
    match: {kind: main, turn: 1}
    reply: {text: hi}
  - id: bad-match
    match: {kind: mian, turn: zero}
    reply:
      content:
        - {type: tool_use, name: "", input: []}
        - {type: video, url: x}
  - match: {turn: 0}
    reply: {text: hi, content: [{text: x}]}
  - reply: {error: {status: 200}}
  - {}
  - reply: {text: 5, bogus: 1}
    repeat: sometimes
"""

MALFORMED_PROBLEMS = [
    "rules[1].match.kind: Value error, unknown kind 'mian'; expected one of main, compaction, "
    "subagent, warmup, side or 'any' (found \"mian\")",
    "rules[1].match.turn: Input should be a valid integer, unable to parse string as an integer "
    "(found \"zero\")",
    "rules[1].reply.content[0].name: String should have at least 1 character (found \"\")",
    "rules[1].reply.content[0].input: Input should be a valid dictionary (found [])",
    "rules[1].reply.content[1]: expected a content block with type text, tool_use, thinking or "
    "redacted_thinking (found {\"type\": \"video\", \"url\": \"x\"})",
    "rules[2].match.turn: Input should be greater than or equal to 1 (found 0)",
    "rules[2].reply: Value error, give either `text` or `content`, not both "
    "(found {\"text\": \"hi\", \"content\": [{\"text\": \"x\"}]})",
    "rules[3].reply.error.status: Input should be greater than or equal to 400 (found 200)",
    "rules[4]: Value error, give exactly one of `reply` or `replies` (found {})",
    "rules[5].reply.text: Input should be a valid string (found 5)",
    "rules[5].reply.bogus: unknown key \"bogus\" in rules[5].reply; expected one of text, "
    "content, stop_reason, stop_sequence, usage, model, id, headers, ping, stall_before, stall, "
    "stream_error, disconnect, truncate, replay_to_fallback, expire_thread (found {\"bogus\": 1})",
    "rules[5].repeat: Input should be 'once' or 'always' (found \"sometimes\")",
]


def test_a_malformed_file_lists_every_problem(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(MALFORMED)
    with pytest.raises(ScenarioError) as raised:
        load_scenario(path)
    error = raised.value
    assert error.source == str(path)
    assert error.problems == MALFORMED_PROBLEMS
    assert str(error) == (f"invalid scenario {path}: 12 problem(s)\n"
                          + "\n".join(f"  - {p}" for p in MALFORMED_PROBLEMS))


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        pytest.param([1], ["(top level): expected a mapping with `rules`, found list"],
                     id="top-level-list"),
        pytest.param(None, ["(top level): expected a mapping with `rules`, found NoneType"],
                     id="empty-file"),
        pytest.param({"rules": {}}, ["rules: Input should be a valid list (found {})"],
                     id="rules-not-list"),
        pytest.param({"schema_version": 2, "rulez": []},
                     ["schema_version: Input should be 1 (found 2)",
                      "rulez: unknown key \"rulez\" in the scenario; expected one of "
                      "schema_version, name, description, classifier, side_replies, "
                      "validation, thread_idle_seconds, message_ids, models, rules; did you mean "
                      "\"rules\"? (found {\"rulez\": []})"],
                     id="version-and-unknown-key"),
        pytest.param({"classifier": "x", "side_replies": "some"},
                     ["classifier: Input should be 'claude-code' or 'plain' (found \"x\")",
                      "side_replies: Input should be 'auto' or 'none' (found \"some\")"],
                     id="enums"),
        pytest.param({"rules": [{"replies": []}]},
                     ["rules[0].replies: List should have at least 1 item after validation, "
                      "not 0 (found [])"], id="empty-replies"),
        pytest.param({"rules": [{"reply": {"content": [{"type": "text"}]}}]},
                     ['rules[0].reply.content[0].text: Field required (found {"type": "text"})'],
                     id="block-missing-field"),
        pytest.param({"rules": [{"replies": [{"text": "a"}, {"error": {"status": "x"}}]}]},
                     ["rules[0].replies[1].error.status: Input should be a valid integer, "
                      "unable to parse string as an integer (found \"x\")"],
                     id="second-reply"),
        pytest.param({"rules": [{"reply": {"raw": {"chunks": []}}}]},
                     ["rules[0].reply.raw.chunks: List should have at least 1 item after "
                      "validation, not 0 (found [])"], id="raw-no-chunks"),
        pytest.param({"rules": [{"match": {"kind": ["main", "sidechain"]},
                                 "reply": {"text": "a"}}]},
                     ["rules[0].match.kind: Value error, unknown kind 'sidechain'; expected one "
                      "of main, compaction, subagent, warmup, side or 'any' "
                      "(found [\"main\", \"sidechain\"])"], id="unknown-kind-in-list"),
        pytest.param({"rules": [{"match": {"knd": "main"}, "reply": {"text": "a"}}]},
                     ["rules[0].match.knd: unknown key \"knd\" in rules[0].match; expected "
                      "one of kind, turn, attempt, last_user_text_contains, tool_result_for, "
                      "declares_tool, declares_tool_input, system_contains, model, stream, "
                      "path; did you mean "
                      "\"kind\"? (found {\"knd\": \"main\"})"],
                     id="misspelt-match-field"),
    ],
)
def test_problems(data: Any, expected: list[str]) -> None:
    assert problems_of(data) == expected


def test_long_found_values_are_shortened() -> None:
    (problem,) = problems_of({"rules": [{"reply": {"text": "x" * 200, "content": []},
                                         "repeat": "x" * 200}]})
    assert problem.startswith("rules[0].repeat: Input should be 'once' or 'always' (found \"xxx")
    assert problem.endswith('...)')
    shown = problem[problem.index("(found ") + len("(found "):-1]
    assert len(shown) == 80


def test_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown kind 'mian'"):
        Match(kind="mian")
    assert Match(kind="any").kind == "any"
    assert Match(kind=["warmup", "side"]).kind == ["warmup", "side"]


def test_duplicate_rule_ids_are_refused_with_their_place() -> None:
    problems = problems_of({"rules": [{"id": "x", "reply": {"text": "a"}},
                                      {"id": "y", "reply": {"text": "b"}},
                                      {"id": "x", "reply": {"text": "c"}}]})
    assert len(problems) == 1
    assert "rule id 'x' is used twice" in problems[0]
    assert problems[0].startswith("rules[2].id: ")


def test_an_explicit_id_may_not_collide_with_a_default_id() -> None:
    problems = problems_of({"rules": [{"reply": {"text": "a"}},
                                      {"id": "rule-1", "reply": {"text": "b"}}]})
    assert len(problems) == 1
    assert "rule id 'rule-1' is used twice" in problems[0]


def test_duplicate_ids_are_listed_with_the_other_problems() -> None:
    problems = problems_of({"rules": [{"id": "x", "reply": {"text": "a"}},
                                      {"id": "x", "reply": {"text": "b"}},
                                      {"match": {"turn": 0}, "reply": {"text": "c"}}]})
    assert "rules[2].match.turn: Input should be greater than or equal to 1 (found 0)" in problems
    assert any("rule id 'x' is used twice" in p for p in problems), problems
    assert len(problems) == 2


def test_duplicate_ids_from_python() -> None:
    with pytest.raises(ValueError, match="rule id 'a' is used twice"):
        Scenario(rules=[Rule(id="a", reply=text("1")), Rule(id="a", reply=text("2"))])


def test_invalid_yaml(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("rules: [\n  - {")
    with pytest.raises(ScenarioError) as raised:
        load_scenario(path)
    assert raised.value.source == str(path)
    (problem,) = raised.value.problems
    assert problem.startswith("not valid YAML: ")
    assert "line 2, column 3" in problem
    assert str(raised.value).startswith(
        f"invalid scenario {path}: 1 problem(s)\n  - not valid YAML")


def test_invalid_json(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"rules": [}')
    with pytest.raises(ScenarioError) as raised:
        load_scenario(path)
    assert raised.value.problems == [
        "not valid JSON: Expecting value: line 1 column 12 (char 11)"]


@pytest.mark.parametrize(("make", "reason"), [
    (lambda tmp: tmp / "missing.yaml", "No such file or directory"),
    (lambda tmp: tmp, "Is a directory"),
])
def test_unreadable_file(tmp_path: Path, make: Any, reason: str) -> None:
    path = make(tmp_path)
    with pytest.raises(ScenarioError) as raised:
        load_scenario(path)
    assert raised.value.problems == [f"cannot read the file: {reason}"]
    assert str(raised.value) == (
        f"invalid scenario {path}: 1 problem(s)\n  - cannot read the file: {reason}")


def test_blocks_may_leave_out_their_type() -> None:
    scenario = parse_scenario({"rules": [{"reply": {"content": [
        {"text": "a"}, {"name": "Read", "input": {}}, {"thinking": "t"}, {"data": "d"}]}}]})
    reply = scenario.rules[0].reply
    assert isinstance(reply, Message)
    assert [b.type for b in reply.blocks()] == ["text", "tool_use", "thinking",
                                                "redacted_thinking"]


def test_defaults() -> None:
    scenario = parse_scenario({})
    assert scenario.schema_version == 1
    assert scenario.name == "unnamed"
    assert scenario.rules == []
    assert scenario.models == ["claude-sonnet-4-5", "claude-opus-4-1", "claude-haiku-4-5"]
    rule = parse_scenario({"rules": [{"reply": {"text": "x"}}]}).rules[0]
    assert rule.match == Match(kind="main", path="/v1/messages")
    assert rule.repeat == "once"


# ---- placeholders ------------------------------------------------------------------------------


def placeholder_scenario() -> Scenario:
    return Scenario(name="ph", rules=[
        Rule(id="a", reply=tool_use("Read", {"file_path": "{workspace}/a.txt",
                                             "nested": ["{workspace}", {"k": "{token}"}]})),
        Rule(id="b", replies=[
            text("in {workspace}: {{workspace}} and {{literal}}"),
            Message(content=[TextBlock(text="{token}")], stop_reason=None),
        ]),
        Rule(id="c", reply=raw("data: {token}\n\n")),
    ])


def test_placeholders_are_collected_from_replies() -> None:
    assert placeholder_scenario().placeholders() == {"workspace", "token"}


def test_render_fills_placeholders_and_keeps_double_braces_literal() -> None:
    rendered = placeholder_scenario().render({"workspace": "/w", "token": "T", "unused": "u"})
    reply_a = rendered.rules[0].reply
    assert isinstance(reply_a, Message)
    assert reply_a.blocks()[0] == ToolUseBlock(
        name="Read", input={"file_path": "/w/a.txt", "nested": ["/w", {"k": "T"}]})
    first, second = rendered.rules[1].reply_list()
    assert isinstance(first, Message) and isinstance(second, Message)
    assert first.blocks() == [TextBlock(text="in /w: {workspace} and {literal}")]
    assert second.blocks() == [TextBlock(text="T")]
    # an explicit stop_reason: null survives rendering (it differs from the default)
    assert second.resolved_stop_reason() is None
    assert first.resolved_stop_reason() == "end_turn"
    reply_c = rendered.rules[2].reply
    assert isinstance(reply_c, Raw)
    assert reply_c.raw.chunks[0].to_bytes() == b"data: T\n\n"
    assert rendered.rule_ids() == ["a", "b", "c"]
    assert rendered.name == "ph"


def test_render_does_not_rescan_filled_values() -> None:
    scenario = Scenario(rules=[Rule(reply=text("{a}"))])
    rendered = scenario.render({"a": "{b}"})
    reply = rendered.rules[0].reply
    assert isinstance(reply, Message)
    assert reply.blocks() == [TextBlock(text="{b}")]


def test_double_braces_need_no_value() -> None:
    scenario = Scenario(rules=[Rule(reply=text("{{workspace}} {not a placeholder} {1x}"))])
    assert scenario.placeholders() == set()
    reply = scenario.render({}).rules[0].reply
    assert isinstance(reply, Message)
    assert reply.blocks() == [TextBlock(text="{workspace} {not a placeholder} {1x}")]


def test_missing_placeholder_values_are_reported_by_name() -> None:
    with pytest.raises(ScenarioError) as raised:
        placeholder_scenario().render({"other": "x", "another": "y"})
    assert raised.value.source == "ph"
    assert raised.value.problems == [
        "placeholder {token} has no value; the run provides: another, other",
        "placeholder {workspace} has no value; the run provides: another, other",
    ]
    with pytest.raises(ScenarioError) as raised_one:
        placeholder_scenario().render({"workspace": "/w"})
    assert raised_one.value.problems == [
        "placeholder {token} has no value; the run provides: workspace"]
