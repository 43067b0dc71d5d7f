"""Script.decide: which rule answers a request, turns and attempts, replays, side replies."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson
import pytest

from mockapi.script.decide import Decision, Script
from mockapi.script.events import PreparedError, PreparedMessage
from mockapi.script.matching import Match, facts_from_body
from mockapi.script.replies import (
    Message,
    TextBlock,
    ToolUseBlock,
    api_error,
    message,
    text,
    tool_use,
)
from mockapi.script.scenario import Rule, Scenario, load_scenario

EXAMPLE = (Path(__file__).resolve().parent.parent
           / "examples" / "scenarios" / "tool-then-text.yaml")
TOOLS = [{"name": "Read", "input_schema": {"type": "object"}}]


def body_for(*user_texts: str, stream: bool = True, **extra: Any) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    for i, content in enumerate(user_texts):
        if i:
            messages.append({"role": "assistant", "content": "ok"})
        messages.append({"role": "user", "content": content})
    body: dict[str, Any] = {"model": "claude-sonnet-4-5", "max_tokens": 100,
                            "messages": messages, "tools": TOOLS, "stream": stream}
    body.update(extra)
    return body


def warmup_body() -> dict[str, Any]:
    return body_for("Warmup")


def title_body() -> dict[str, Any]:
    body = body_for("Read the file", stream=False, thinking={"type": "disabled"},
                    output_config={"format": {"type": "json_schema", "schema": {
                        "type": "object",
                        "properties": {"title": {"type": "string"}, "emoji": {"type": "string"}},
                        "required": ["title"]}}})
    del body["tools"]
    return body


class Player:
    """Feeds bodies to a Script with increasing sequence numbers, as the app does."""

    def __init__(self, scenario: Scenario):
        self.script = Script(scenario)
        self.seq = 0

    def send(self, body: dict[str, Any], headers: Mapping[str, str] | None = None,
             path: str = "/v1/messages") -> Decision:
        self.seq += 1
        facts = facts_from_body(path, body, headers or {})
        return self.script.decide(facts, body, orjson.dumps(body), self.seq)

    def served(self) -> dict[str, int]:
        return {s["id"]: s["served"] for s in self.script.state()}


def reply_text(decision: Decision) -> str:
    prepared = decision.prepared
    assert isinstance(prepared, PreparedMessage)
    (block,) = prepared.content
    assert block["type"] == "text"
    text_value: str = block["text"]
    return text_value


def summary(decision: Decision) -> tuple[str, int, int, str | None, int | None]:
    return (decision.kind, decision.turn, decision.attempt, decision.rule, decision.reply_index)


# ---- rule order and spending -----------------------------------------------------------------


def test_rules_are_tried_in_order_and_once_spends_a_rule() -> None:
    player = Player(Scenario(rules=[Rule(id="a", reply=text("A")),
                                    Rule(id="b", reply=text("B"))]))
    first = player.send(body_for("one"))
    second = player.send(body_for("one", "two"))
    third = player.send(body_for("one", "two", "three"))
    assert (summary(first), reply_text(first)) == (("main", 1, 1, "a", 0), "A")
    assert (summary(second), reply_text(second)) == (("main", 2, 1, "b", 0), "B")
    assert summary(third) == ("main", 3, 1, None, None)
    assert third.prepared is None
    assert player.served() == {"a": 1, "b": 1}


def test_a_later_rule_is_used_when_an_earlier_one_does_not_match() -> None:
    player = Player(Scenario(rules=[Rule(id="second-turn", match=Match(turn=2), reply=text("2")),
                                    Rule(id="any-turn", reply=text("x"), repeat="always")]))
    assert player.send(body_for("one")).rule == "any-turn"
    assert player.send(body_for("one", "two")).rule == "second-turn"
    assert player.send(body_for("one", "two", "3")).rule == "any-turn"


def test_replies_are_served_in_order_then_the_rule_is_spent() -> None:
    player = Player(Scenario(rules=[Rule(id="seq", replies=[text("1"), text("2"), text("3")])]))
    decisions = [player.send(body_for(*[f"m{i}" for i in range(n)])) for n in range(1, 5)]
    assert [d.reply_index for d in decisions] == [0, 1, 2, None]
    assert [reply_text(d) for d in decisions[:3]] == ["1", "2", "3"]
    assert player.script.state() == [
        {"id": "seq", "replies": 3, "served": 3, "repeat": "once", "spent": True}]


def test_always_repeats_the_last_reply() -> None:
    player = Player(Scenario(rules=[Rule(id="r", replies=[text("first"), text("rest")],
                                         repeat="always")]))
    decisions = [player.send(body_for(*[f"m{i}" for i in range(n)])) for n in range(1, 6)]
    assert [d.reply_index for d in decisions] == [0, 1, 1, 1, 1]
    assert [reply_text(d) for d in decisions] == ["first", "rest", "rest", "rest", "rest"]
    assert decisions[2].prepared is decisions[4].prepared
    state = player.script.state()[0]
    assert (state["served"], state["spent"]) == (5, False)


def tool_ids(decision: Decision) -> list[str]:
    assert isinstance(decision.prepared, PreparedMessage)
    return [b["id"] for b in decision.prepared.content if b["type"] == "tool_use"]


def test_always_gives_each_repetition_tool_ids_of_its_own() -> None:
    reply = message(TextBlock(text="again"), ToolUseBlock(name="Read"), ToolUseBlock(name="Bash"))
    player = Player(Scenario(rules=[Rule(id="loop", replies=[text("first"), reply],
                                         repeat="always")]))
    decisions = [player.send(body_for(*[f"m{i}" for i in range(n)])) for n in range(1, 5)]
    assert [d.reply_index for d in decisions] == [0, 1, 1, 1]
    assert [tool_ids(d) for d in decisions[1:]] == [
        ["toolu_loop_1_1", "toolu_loop_1_2"],
        ["toolu_loop_1_3_1", "toolu_loop_1_3_2"],
        ["toolu_loop_1_4_1", "toolu_loop_1_4_2"],
    ]
    every = [i for d in decisions[1:] for i in tool_ids(d)]
    assert len(every) == len(set(every))
    # the same play gives the same ids
    again = Player(Scenario(rules=[Rule(id="loop", replies=[text("first"), reply],
                                        repeat="always")]))
    replayed = [again.send(body_for(*[f"m{i}" for i in range(n)])) for n in range(1, 5)]
    assert [tool_ids(d) for d in replayed] == [tool_ids(d) for d in decisions]


def test_always_keeps_explicit_tool_ids() -> None:
    player = Player(Scenario(rules=[Rule(id="r", reply=tool_use("Read", id="toolu_fixed"),
                                         repeat="always")]))
    decisions = [player.send(body_for(*[f"m{i}" for i in range(n)])) for n in range(1, 4)]
    assert [tool_ids(d) for d in decisions] == [["toolu_fixed"]] * 3
    assert decisions[1].prepared is decisions[2].prepared


def test_replay_of_a_repetition_keeps_its_tool_ids() -> None:
    player = Player(Scenario(rules=[Rule(id="r", reply=tool_use("Read"), repeat="always")]))
    player.send(body_for("a", stream=True))
    repeated = player.send(body_for("a", "b", stream=True))
    fallback = player.send(body_for("a", "b", stream=False))
    assert tool_ids(repeated) == ["toolu_r_0_2_0"]
    assert fallback.replay_of == 2
    assert fallback.prepared is repeated.prepared
    assert player.script.state()[0]["served"] == 2


def test_default_rule_ids_and_prepared_ids() -> None:
    player = Player(Scenario(rules=[Rule(reply=tool_use("Read", {"file_path": "/a"})),
                                    Rule(id="named", reply=text("x"))]))
    decision = player.send(body_for("go"))
    assert decision.rule == "rule-1"
    assert isinstance(decision.prepared, PreparedMessage)
    assert decision.prepared.content[0]["id"] == "toolu_rule_1_0_0"
    assert [s["id"] for s in player.script.state()] == ["rule-1", "named"]


# ---- turns and attempts ------------------------------------------------------------------------


def test_turns_count_distinct_conversations_and_resends_are_attempts() -> None:
    player = Player(Scenario(classifier="plain",
                             rules=[Rule(reply=text("x"), repeat="always")]))
    seen = [
        player.send(body_for("a")),
        player.send(body_for("a")),            # same messages again: attempt 2 of turn 1
        player.send(body_for("a", "b")),
        player.send(body_for("a")),            # back to turn 1: attempt 3
        player.send(body_for("a", "b", "c")),
        player.send(body_for("a", "b")),
    ]
    assert [(d.turn, d.attempt) for d in seen] == [(1, 1), (1, 2), (2, 1), (1, 3), (3, 1), (2, 2)]


def test_only_messages_decide_the_turn() -> None:
    player = Player(Scenario(rules=[Rule(reply=text("x"), repeat="always")]))
    first = player.send(body_for("a", max_tokens=100))
    again = player.send(body_for("a", max_tokens=5, metadata={"user_id": "other"}))
    assert (again.turn, again.attempt) == (first.turn, 2)


def test_turns_are_counted_per_kind_and_per_path() -> None:
    player = Player(Scenario(classifier="claude-code", side_replies="auto", rules=[
        Rule(match=Match(kind="any"), reply=text("x"), repeat="always"),
        Rule(match=Match(kind="any", path="/v1/messages/count_tokens"), reply=text("c"),
             repeat="always")]))
    main_1 = player.send(body_for("a"))
    side_1 = player.send(body_for("a", thinking={"type": "disabled"}))
    main_2 = player.send(body_for("a", "b"))
    counted = player.send(body_for("a", "b"), path="/v1/messages/count_tokens")
    side_2 = player.send(body_for("a", "b", tools=[], temperature=0))
    assert [(d.kind, d.turn, d.attempt) for d in (main_1, side_1, main_2, counted, side_2)] == [
        ("main", 1, 1), ("side", 1, 1), ("main", 2, 1), ("main", 1, 1), ("side", 2, 1)]


def test_attempt_conditions_script_a_retry() -> None:
    player = Player(Scenario(rules=[
        Rule(id="fail", match=Match(turn=1, attempt=1), reply=api_error(529, "Overloaded")),
        Rule(id="ok", match=Match(turn=1, attempt=2), reply=text("recovered"))]))
    first = player.send(body_for("hi"))
    retry = player.send(body_for("hi"))
    assert isinstance(first.prepared, PreparedError)
    assert summary(first) == ("main", 1, 1, "fail", 0)
    assert summary(retry) == ("main", 1, 2, "ok", 0)
    assert reply_text(retry) == "recovered"


# ---- non-streaming fallback ----------------------------------------------------------------------


def test_non_streaming_resend_after_a_streamed_message_replays_it() -> None:
    player = Player(Scenario(rules=[Rule(id="a", reply=tool_use("Read", {"file_path": "/x"})),
                                    Rule(id="b", reply=text("B"))]))
    streamed = player.send(body_for("hi", stream=True))
    fallback = player.send(body_for("hi", stream=False))
    assert summary(streamed) == ("main", 1, 1, "a", 0)
    assert streamed.replay_of is None
    assert summary(fallback) == ("main", 1, 2, "a", 0)
    assert fallback.prepared is streamed.prepared
    assert fallback.replay_of == 1
    assert player.served() == {"a": 1, "b": 0}
    # the next turn gets the next rule: nothing was consumed by the replay
    assert player.send(body_for("hi", "more")).rule == "b"


def test_replay_happens_once_per_streamed_send() -> None:
    player = Player(Scenario(rules=[Rule(id="a", reply=text("A")),
                                    Rule(id="b", reply=text("B"))]))
    player.send(body_for("hi", stream=True))
    replay = player.send(body_for("hi", stream=False))
    second_plain = player.send(body_for("hi", stream=False))
    assert replay.replay_of == 1
    assert (second_plain.rule, second_plain.replay_of, second_plain.attempt) == ("b", None, 3)


def test_non_streaming_resend_after_a_streamed_error_consumes() -> None:
    player = Player(Scenario(rules=[Rule(id="err", reply=api_error(500)),
                                    Rule(id="ok", reply=text("fine"))]))
    player.send(body_for("hi", stream=True))
    fallback = player.send(body_for("hi", stream=False))
    assert (fallback.rule, fallback.replay_of) == ("ok", None)
    assert player.served() == {"err": 1, "ok": 1}


def test_streamed_resend_is_not_a_replay() -> None:
    player = Player(Scenario(rules=[Rule(id="a", reply=text("A")),
                                    Rule(id="b", reply=text("B"))]))
    player.send(body_for("hi", stream=True))
    again = player.send(body_for("hi", stream=True))
    assert (again.rule, again.replay_of, again.attempt) == ("b", None, 2)


def test_non_streaming_first_send_is_not_a_replay() -> None:
    player = Player(Scenario(rules=[Rule(id="a", reply=text("A")),
                                    Rule(id="b", reply=text("B"))]))
    player.send(body_for("hi", stream=False))
    again = player.send(body_for("hi", stream=False))
    assert (again.rule, again.replay_of) == ("b", None)


def test_replay_is_per_turn() -> None:
    player = Player(Scenario(rules=[Rule(id="a", reply=text("A")),
                                    Rule(id="b", reply=text("B")),
                                    Rule(id="c", reply=text("C"))]))
    player.send(body_for("one", stream=True))          # seq 1 -> a
    player.send(body_for("one", "two", stream=True))   # seq 2 -> b
    replay_one = player.send(body_for("one", stream=False))
    assert (replay_one.rule, replay_one.replay_of, replay_one.turn) == ("a", 1, 1)
    assert player.served() == {"a": 1, "b": 1, "c": 0}


# ---- side requests and builtin replies -----------------------------------------------------------


def test_warmup_and_side_requests_never_consume_a_main_rule() -> None:
    player = Player(Scenario(classifier="claude-code",
                             rules=[Rule(id="main-1", match=Match(turn=1), reply=text("M1"))]))
    warmups = [player.send(warmup_body()) for _ in range(3)]
    side = player.send(body_for("summarise", thinking={"type": "disabled"}))
    for decision in warmups:
        assert (decision.kind, decision.rule, decision.reply_index) == (
            "warmup", "builtin:warmup", 0)
        assert reply_text(decision) == "OK"
        assert isinstance(decision.prepared, PreparedMessage)
        assert decision.prepared.stop_reason == "end_turn"
    assert [(d.turn, d.attempt) for d in warmups] == [(1, 1), (1, 2), (1, 3)]
    assert (side.kind, side.rule) == ("side", "builtin:side")
    assert reply_text(side) == "OK"
    assert player.served() == {"main-1": 0}
    main = player.send(body_for("real prompt"))
    assert summary(main) == ("main", 1, 1, "main-1", 0)
    assert reply_text(main) == "M1"


def test_title_request_gets_a_json_object_with_the_schema_properties() -> None:
    player = Player(Scenario(classifier="claude-code", rules=[Rule(reply=text("main"))]))
    decision = player.send(title_body())
    assert (decision.kind, decision.rule) == ("side", "builtin:side")
    answer = json.loads(reply_text(decision))
    assert isinstance(answer, dict)
    assert sorted(answer) == ["emoji", "title"]
    assert all(isinstance(v, str) and v for v in answer.values())
    assert player.served() == {"rule-1": 0}


def test_a_side_rule_wins_over_the_builtin_reply() -> None:
    player = Player(Scenario(classifier="claude-code", rules=[Rule(id="side", match=Match(kind="side"),
                                         reply=text("scripted side"))]))
    decision = player.send(body_for("x", thinking={"type": "disabled"}))
    assert (decision.rule, reply_text(decision)) == ("side", "scripted side")
    after = player.send(body_for("x", "y", thinking={"type": "disabled"}))
    assert after.rule == "builtin:side"


def test_main_requests_get_no_builtin_reply() -> None:
    player = Player(Scenario(rules=[]))
    decision = player.send(body_for("x"))
    assert (decision.rule, decision.prepared) == (None, None)


@pytest.mark.parametrize("kind", ["compaction", "subagent"])
def test_compaction_and_subagent_get_no_builtin_reply(kind: str) -> None:
    player = Player(Scenario(classifier="claude-code", rules=[]))
    body = body_for("x", system="You are an agent for Claude Code") if kind == "subagent" else \
        body_for("Your task is to create a detailed summary of the conversation")
    decision = player.send(body)
    assert (decision.kind, decision.prepared) == (kind, None)


def test_side_replies_none_sends_side_requests_to_the_script() -> None:
    player = Player(Scenario(classifier="claude-code", side_replies="none",
                             rules=[Rule(id="m", match=Match(kind="main"), reply=text("M"))]))
    decision = player.send(warmup_body())
    assert summary(decision) == ("warmup", 1, 1, None, None)
    assert decision.prepared is None
    assert decision.nearest == [{"rule": "m", "misses": ["kind: expected 'main', got 'warmup'"]}]
    assert decision.no_rule_message(1) == (
        "loopprobe mock: no scenario rule matched request #1 (kind=warmup, turn=1, attempt=1); "
        "nearest rule 'm': kind: expected 'main', got 'warmup'")


def test_builtin_side_replies_only_on_the_messages_path() -> None:
    player = Player(Scenario(classifier="claude-code", rules=[]))
    decision = player.send(warmup_body(), path="/v1/messages/count_tokens")
    assert (decision.kind, decision.prepared) == ("warmup", None)


# ---- the decision when no rule matches -----------------------------------------------------------


def test_no_rule_names_kind_turn_attempt_and_the_nearest_rules_misses() -> None:
    player = Player(Scenario(rules=[
        Rule(id="far", match=Match(kind="subagent", turn=5, model="x"), reply=text("1")),
        Rule(id="near", match=Match(turn=3), reply=text("2")),
        Rule(id="mid", match=Match(turn=1, declares_tool="Task"), reply=text("3")),
        Rule(id="also-near", match=Match(stream=False), reply=text("4")),
    ]))
    assert player.send(body_for("a")).prepared is None  # turn 1: no rule matches either
    player.send(body_for("a", "b"))
    decision = player.send(body_for("a", "b"))
    assert summary(decision) == ("main", 2, 2, None, None)
    assert decision.nearest == [
        {"rule": "near", "misses": ["turn: expected 3, got 2"]},
        {"rule": "also-near", "misses": ["stream: expected False, got True"]},
        {"rule": "mid", "misses": ["turn: expected 1, got 2",
                                   "declares_tool: expected 'Task', got ['Read']"]},
    ]
    assert decision.no_rule_message(3) == (
        "loopprobe mock: no scenario rule matched request #3 (kind=main, turn=2, attempt=2); "
        "nearest rule 'near': turn: expected 3, got 2")


def test_no_rule_names_a_spent_rule() -> None:
    player = Player(Scenario(rules=[Rule(id="only", reply=text("x"))]))
    player.send(body_for("a"))
    decision = player.send(body_for("a", "b"))
    assert decision.nearest == [
        {"rule": "only", "misses": ["spent: served its 1 reply(ies) (repeat: once)"]}]
    assert decision.no_rule_message(2) == (
        "loopprobe mock: no scenario rule matched request #2 (kind=main, turn=2, attempt=1); "
        "nearest rule 'only': spent: served its 1 reply(ies) (repeat: once)")


def test_no_rule_in_an_empty_scenario() -> None:
    decision = Player(Scenario(rules=[])).send(body_for("a"))
    assert decision.no_rule_message(7) == (
        "loopprobe mock: no scenario rule matched request #7 (kind=main, turn=1, attempt=1); "
        "the scenario has no rules")


# ---- the shipped example end to end --------------------------------------------------------------


def test_the_example_scenario_plays_tool_then_text() -> None:
    scenario = load_scenario(EXAMPLE).render({"workspace": "/tmp/ws"})
    player = Player(scenario)
    warm = player.send(warmup_body())
    first = player.send(body_for("Read the fixture"))
    assert warm.rule == "builtin:warmup"
    assert summary(first) == ("main", 1, 1, "ask-to-read", 0)
    assert isinstance(first.prepared, PreparedMessage)
    assert list(first.prepared.content) == [{
        "type": "tool_use", "id": "toolu_example_read", "name": "Read",
        "input": {"file_path": "/tmp/ws/probe-fixture.txt"}}]
    second_body = body_for("Read the fixture")
    second_body["messages"] += [
        {"role": "assistant", "content": list(first.prepared.content)},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_example_read",
                                      "content": "1\tTOOL_EXECUTION_OK"}]}]
    second = player.send(second_body)
    assert summary(second) == ("main", 2, 1, "final-answer", 0)
    assert reply_text(second) == "DONE"
    assert [s["spent"] for s in player.script.state()] == [True, True]


def test_explicit_stop_reason_none_survives_into_the_script() -> None:
    scenario = Scenario(rules=[Rule(reply=Message.model_validate(
        {"text": "x", "stop_reason": None}))]).render({})
    decision = Player(scenario).send(body_for("a"))
    assert isinstance(decision.prepared, PreparedMessage)
    assert decision.prepared.stop_reason is None


def test_a_non_streaming_fallback_keeps_the_kind_of_the_streamed_turn() -> None:
    # a fallback re-sends the conversation non-streaming, changed (2.0.x adds a temperature and
    # a smaller max_tokens): here in a way that alone would read as a side request
    player = Player(Scenario(classifier="claude-code", rules=[Rule(id="main", reply=text("answer"))]))
    streamed = player.send(body_for("hi"))
    fallback = player.send(body_for("hi", stream=False, temperature=1, max_tokens=50,
                                    thinking={"type": "disabled"}))
    assert summary(streamed) == ("main", 1, 1, "main", 0)
    assert summary(fallback) == ("main", 1, 2, "main", 0)
    assert fallback.replay_of == 1  # the streamed request's seq
    side = player.send(body_for("hi", thinking={"type": "disabled"}))  # streamed: as it reads
    assert side.kind == "side"
