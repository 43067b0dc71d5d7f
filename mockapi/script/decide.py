"""A scenario being played: which rule answers a request, given everything answered before.

Turns are counted per (path, kind): turn N is the Nth distinct conversation
state (``messages``) of that kind, and sending the same messages again is
another attempt of the same turn. Rules are tried in order; a rule serves its
replies one per matching request. Two things never consume the script:
side requests answered by the built-in side replies (a ``classifier: claude-code`` scenario
only; each is counted in ``builtin_state`` and journaled with ``builtin_reply``), and a
non-streaming
re-send of a turn whose streamed reply was a message (the client's fallback
after a broken stream), which gets that same message again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from mockapi.journal.records import BuiltinReply, NearestRule
from mockapi.script.events import PreparedMessage, PreparedReply, prepare
from mockapi.script.matching import CLASSIFIERS, RequestFacts
from mockapi.script.replies import Message, TextBlock, ToolUseBlock
from mockapi.script.scenario import Rule, Scenario

__all__ = ["BUILTIN_REQUESTS_KEPT", "SIDE_KINDS", "Decision", "Script"]

SIDE_KINDS = ("warmup", "side")
_SIDE_BUILTINS: dict[str, BuiltinReply] = {"warmup": "warmup", "side": "side-request"}
BUILTIN_REQUESTS_KEPT = 100  # the last built-in replies /_mock/state lists by seq


@dataclass(slots=True)
class _RuleState:
    id: str
    rule: Rule
    replies: list[PreparedReply]
    served: int = 0
    repeats_with_new_ids: bool | None = None  # known once the last reply first repeats

    def next_reply(self) -> tuple[int, PreparedReply] | None:
        if self.served < len(self.replies):
            return self.served, self.replies[self.served]
        if self.rule.repeat != "always":
            return None
        last = len(self.replies) - 1
        prepared = self.replies[last]
        if self.repeats_with_new_ids is None:
            self.repeats_with_new_ids = _has_auto_tool_ids(prepared)
        if self.repeats_with_new_ids:
            # as from the real API, every repetition gets tool_use ids of its own
            prepared = prepare(prepared.reply, f"{self.id}_{last}_{self.served + 1}")
        return last, prepared


def _has_auto_tool_ids(prepared: PreparedReply) -> bool:
    return isinstance(prepared, PreparedMessage) and any(
        isinstance(b, ToolUseBlock) and b.id is None for b in prepared.reply.blocks())


@dataclass(slots=True)
class _Turn:
    number: int
    attempts: int = 0
    last_stream: bool = False
    last_seq: int = 0
    last_reply: PreparedReply | None = None
    last_rule: str | None = None
    last_index: int | None = None
    last_builtin: BuiltinReply | None = None


@dataclass(slots=True)
class Decision:
    kind: str
    turn: int
    attempt: int
    rule: str | None = None
    reply_index: int | None = None
    prepared: PreparedReply | None = None
    replay_of: int | None = None
    builtin: BuiltinReply | None = None  # the reply is the mock's own, no rule scripted it
    nearest: list[NearestRule] = field(default_factory=list)
    undo: _Undo | None = field(default=None, repr=False)

    def no_rule_message(self, seq: int) -> str:
        head = (f"loopprobe mock: no scenario rule matched request #{seq} "
                f"(kind={self.kind}, turn={self.turn}, attempt={self.attempt})")
        if not self.nearest:
            return head + "; the scenario has no rules"
        best = self.nearest[0]
        reasons = "; ".join(best["misses"]) or "spent"
        return f"{head}; nearest rule {best['rule']!r}: {reasons}"


@dataclass(slots=True)
class _Undo:
    """What one ``decide`` changed, to take back when its request could not be journaled
    (an unrecorded request must not consume the script)."""

    streamed_key: tuple[str, int]
    streamed_before: str | None
    turn_key: tuple[str, str, int]
    turn_was_new: bool
    turn_before: tuple[bool, int, PreparedReply | None, str | None, int | None,
                       BuiltinReply | None]
    rule: _RuleState | None = None


def _fingerprint(body: dict[str, Any], raw: bytes) -> int:
    try:
        return hash(orjson.dumps(body.get("messages")))
    except orjson.JSONEncodeError:  # nesting deeper than orjson writes
        return hash(raw)


class Script:
    def __init__(self, scenario: Scenario):
        self.scenario = scenario
        self.classify = CLASSIFIERS[scenario.classifier]
        self.rules = [
            _RuleState(rule_id, rule, [
                prepare(reply, f"{rule_id}_{index}") for index, reply in enumerate(rule.reply_list())
            ])
            for rule_id, rule in zip(scenario.rule_ids(), scenario.rules, strict=True)
        ]
        self._turn_counts: dict[tuple[str, str], int] = {}
        self._turns: dict[tuple[str, str, int], _Turn] = {}
        self._streamed_kinds: dict[tuple[str, int], str] = {}
        self._builtin_counts: dict[str, int] = {}
        self._builtin_requests: list[dict[str, Any]] = []

    def decide(self, facts: RequestFacts, body: dict[str, Any], raw: bytes, seq: int) -> Decision:
        fingerprint = _fingerprint(body, raw)
        kind = self.classify(facts)
        streamed = self._streamed_kinds.get((facts.path, fingerprint))
        if not facts.stream and streamed is not None:
            # a non-streaming re-send of a streamed conversation is the client's fallback and
            # keeps its kind (2.0.x's fallback adds a temperature; it is the same turn)
            kind = streamed
        elif facts.stream:
            self._streamed_kinds[(facts.path, fingerprint)] = kind
        key = (facts.path, kind, fingerprint)
        turn = self._turns.get(key)
        undo_streamed = (facts.path, fingerprint), streamed
        new_turn = turn is None
        if turn is None:
            count = self._turn_counts.get(key[:2], 0) + 1
            self._turn_counts[key[:2]] = count
            turn = self._turns[key] = _Turn(count)
        undo = _Undo(*undo_streamed, key, new_turn, (
            turn.last_stream, turn.last_seq, turn.last_reply, turn.last_rule, turn.last_index,
            turn.last_builtin))
        turn.attempts += 1
        decision = Decision(kind, turn.number, turn.attempts, undo=undo)

        if (not facts.stream and turn.last_stream
                and isinstance(turn.last_reply, PreparedMessage)
                and turn.last_reply.reply.replay_to_fallback):
            decision.rule, decision.reply_index = turn.last_rule, turn.last_index
            decision.prepared, decision.replay_of = turn.last_reply, turn.last_seq
            decision.builtin = turn.last_builtin
        else:
            self._choose(decision, facts, body)

        turn.last_stream, turn.last_seq = facts.stream, seq
        turn.last_reply, turn.last_rule = decision.prepared, decision.rule
        turn.last_index, turn.last_builtin = decision.reply_index, decision.builtin
        return decision

    def _choose(self, decision: Decision, facts: RequestFacts, body: dict[str, Any]) -> None:
        scored: list[tuple[int, int, NearestRule]] = []
        for position, state in enumerate(self.rules):
            misses = state.rule.match.differences(
                facts, decision.kind, decision.turn, decision.attempt)
            upcoming = state.next_reply()
            if not misses and upcoming is not None:
                state.served += 1
                if decision.undo is not None:
                    decision.undo.rule = state
                decision.rule = state.id
                decision.reply_index, decision.prepared = upcoming
                return
            reasons = [str(m) for m in misses] + ([] if upcoming else [
                f"spent: served its {len(state.replies)} reply(ies) (repeat: once)"])
            scored.append((len(reasons), position, {"rule": state.id, "misses": reasons}))
        if decision.kind in SIDE_KINDS and self.scenario.side_replies == "auto" \
                and facts.path == "/v1/messages":
            decision.rule = f"builtin:{decision.kind}"
            decision.builtin = _SIDE_BUILTINS[decision.kind]
            decision.reply_index = 0
            decision.prepared = prepare(_side_reply(body), decision.rule)
            return
        decision.nearest = [entry for _, _, entry in sorted(scored, key=lambda s: s[:2])[:3]]

    def undo(self, decision: Decision) -> None:
        """Take back ``decision``, the last one made: as if its request never arrived."""
        undo = decision.undo
        if undo is None:
            return
        decision.undo = None
        if undo.rule is not None:
            undo.rule.served -= 1
        if undo.streamed_before is None:
            self._streamed_kinds.pop(undo.streamed_key, None)
        else:
            self._streamed_kinds[undo.streamed_key] = undo.streamed_before
        turn = self._turns[undo.turn_key]
        if undo.turn_was_new:
            del self._turns[undo.turn_key]
            self._turn_counts[undo.turn_key[:2]] -= 1
            return
        turn.attempts -= 1
        (turn.last_stream, turn.last_seq, turn.last_reply, turn.last_rule,
         turn.last_index, turn.last_builtin) = undo.turn_before

    def builtin_used(self, seq: int, builtin: BuiltinReply) -> None:
        """Count a built-in reply that was journaled (request ``seq``)."""
        self._builtin_counts[builtin] = self._builtin_counts.get(builtin, 0) + 1
        self._builtin_requests.append({"seq": seq, "builtin_reply": builtin})
        del self._builtin_requests[:-BUILTIN_REQUESTS_KEPT]

    def builtin_state(self) -> dict[str, Any]:
        """The replies no rule scripted, this run: how many of each, the last requests'."""
        return {"total": sum(self._builtin_counts.values()),
                "by_reply": dict(self._builtin_counts),
                "requests": list(self._builtin_requests)}

    def reply_uses(self) -> list[tuple[str, int, int]]:
        """Every scripted reply as (rule id, reply index, times served) this run; a
        ``repeat: always`` rule's last reply counts each repetition."""
        uses = []
        for state in self.rules:
            last = len(state.replies) - 1
            for index in range(len(state.replies)):
                if index == last and state.rule.repeat == "always":
                    served = max(0, state.served - last)
                else:
                    served = 1 if state.served > index else 0
                uses.append((state.id, index, served))
        return uses

    def state(self) -> list[dict[str, Any]]:
        return [
            {"id": s.id, "replies": len(s.replies), "served": s.served,
             "repeat": s.rule.repeat, "spent": s.next_reply() is None}
            for s in self.rules
        ]


def _side_reply(body: dict[str, Any]) -> Message:
    """A neutral answer; a JSON object when the request asks for structured output."""
    output = body.get("output_config")
    fmt = output.get("format") if isinstance(output, dict) else None
    schema = fmt.get("schema") if isinstance(fmt, dict) else None
    props = schema.get("properties") if isinstance(schema, dict) else None
    if isinstance(props, dict) and props:
        answer = orjson.dumps({name: "loopprobe" for name in props}).decode()
    else:
        answer = "OK"
    return Message(content=[TextBlock(text=answer)])
