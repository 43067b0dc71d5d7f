"""What of a reply the loop sends back whole: a thinking block with its signature, and a
turn paused by ``pause_turn``; or a message thread that holds the reply continued."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from mockapi import Match, Message, Rule, Scenario, TextBlock, ThinkingBlock, ToolUseBlock, text
from probes.catalog.agent_loop.common import (
    PAUSE,
    RUN,
    THINKING,
    _ended,
    _invocation,
    _last_message,
    _requests,
    _started,
    docs,
)
from probes.core.checks import Checks
from probes.core.evidence import Evidence, messages
from probes.core.probe import Claim, Counterfactual, Probe

__all__ = ["PAUSED", "PAUSE_PROBE", "THINKING_PROBE", "THINKING_SETTINGS", "check_pause",
           "check_thinking"]

# budget_tokens must stay below max_tokens, or the API (and the mock) refuses the request
THINKING_SETTINGS = {"max_tokens": 2048, "thinking": {"type": "enabled", "budget_tokens": 1024}}


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def _continues_thread(record: Any, previous: Any) -> str | None:
    """The reply a request continues as a message thread, when it continues the reply to
    ``previous`` (the request before it): the API then holds that reply whole (its thinking
    blocks, a paused turn) and the request sends only what is new (Messages API docs,
    “Message threads”). The first reply of a probe is ``msg_loopprobe_000001``."""
    thread = ((record or {}).get("body") or {}).get("thread") or {}
    wanted = f"msg_loopprobe_{int((previous or {}).get('seq') or 0):06d}"
    if isinstance(thread, dict) and thread.get("type") == "continue" \
            and thread.get("previous_message_id") == wanted:
        return wanted
    return None


def _scripted(record: Any) -> dict[str, Any]:
    """The reply the mock was scripted to give a request (the journal keeps it)."""
    reply = (record or {}).get("reply")
    return reply if isinstance(reply, dict) else {}


# ---- thinking blocks passed back --------------------------------------------------------------

THOUGHT, SIGNATURE, THINK_ID = "LP_THOUGHT", "LP_SIGNATURE_1", "toolu_lp_think"


def check_thinking(ev: Evidence, c: Checks) -> None:
    _started(ev, c)
    first = ev.request(RUN, 0, kind="main")
    c.reach("thinking.answered", THINKING, "the first request, with thinking on, was answered "
            "with the scripted thinking block and tool call",
            held=first.get("rule") == "think-call", absent=False, expected="rule think-call",
            observed=f"rule {first.get('rule')}: {first.get('error') or first.get('outcome')}"
            if first else None, evidence=f"run {RUN}: the first request's rule")
    second = ev.request(RUN, 1, kind="main")
    sent = messages(second) if second else []
    turn = next((m for m in sent if m.get("role") == "assistant"), {})
    blocks = _blocks(turn)
    kinds = [b.get("type") for b in blocks]
    thinking = [{"thinking": b.get("thinking"), "signature": b.get("signature")}
                for b in blocks if b.get("type") == "thinking"]
    expected = [{"thinking": THOUGHT, "signature": SIGNATURE}]
    # a thread holds the first reply whole: it holds the thinking block if that reply had it
    had = [{"thinking": b.get("thinking"), "signature": b.get("signature")}
           for b in _scripted(first).get("content") or [] if isinstance(b, dict)
           and "thinking" in b]
    held = _continues_thread(second, first) if had == expected else None
    where = f"run {RUN}: the second request's assistant message"
    c.that("thinking.sent", THINKING, "the assistant turn sent back holds the thinking block "
           "unmodified, with its signature (or the request continues the message thread that "
           "holds it)", passed=thinking == expected or held is not None, expected=expected,
           observed=f"held by the thread: continues {held}" if held else thinking
           if second else None, evidence=where)
    c.that("thinking.first", THINKING, "the thinking block comes before the tool_use, as "
           "the model produced them", passed=held is not None
           or (kinds[:1] == ["thinking"] and "tool_use" in kinds),
           expected=["thinking", "…", "tool_use"],
           observed=f"held by the thread: continues {held}" if held else kinds
           if second else None, evidence=f"{where}, block types")
    _ended(c, THINKING, ev, "LP_THINK_DONE")


def _thinking_scenario(*blocks: ThinkingBlock | ToolUseBlock) -> Scenario:
    return Scenario(name="loop-thinking", classifier="plain", rules=[
        Rule(id="think-call", match=Match(turn=1), reply=Message(content=list(blocks))),
        Rule(id="done", reply=text("LP_THINK_DONE"))])


_CALL = ToolUseBlock(id=THINK_ID, name="add", input={"a": 3, "b": 4})

THINKING_PROBE = Probe(
    name="loop.thinking",
    revision=2,  # the final text where the result event's is empty
    title="Extended thinking with a tool call: the thinking block goes back with its signature",
    claims=(Claim(THINKING, "With thinking on, a reply's thinking block goes back unmodified "
                            "(text and signature, first in the assistant turn) in the request "
                            "that carries the tool's result.",
                  docs("Building with extended thinking: Preserving thinking blocks",
                       "build-with-claude/extended-thinking",
                       "During tool use, you must pass thinking and redacted_thinking blocks "
                       "back to the API, and you must include the complete unmodified block "
                       "back to the API.")),),
    scenario=_thinking_scenario(ThinkingBlock(thinking=THOUGHT, signature=SIGNATURE), _CALL),
    invocations=(_invocation("Think, then add 3+4.", settings=dict(THINKING_SETTINGS)),),
    check=check_thinking,
    counterfactuals=(Counterfactual(
        "no-thinking", "the reply has no thinking block: none can be passed back",
        (THINKING,), lambda p: replace(p, scenario=_thinking_scenario(_CALL))),),
)

# ---- pause_turn ---------------------------------------------------------------------------------

PAUSED = "LP_PAUSED_PART"


def check_pause(ev: Evidence, c: Checks) -> None:
    _started(ev, c)
    requests = _requests(ev)
    second = requests[1] if len(requests) > 1 else None
    last = _last_message(second)
    # a thread holds the first reply whole: it holds the paused turn if that reply paused
    paused = _scripted(requests[0]).get("stop_reason") == "pause_turn" if requests else False
    held = _continues_thread(second, requests[0]) if paused else None
    observed = {"role": last.get("role"), "text": "".join(
        str(b.get("text", "")) for b in _blocks(last))}
    expected = {"role": "assistant", "text": PAUSED}
    c.that("continued", PAUSE, "the loop sends the paused assistant content back as the last "
           "message of its next request (or continues the message thread that holds it, "
           "adding nothing)", passed=observed == expected or (held is not None and not last),
           expected=expected,
           observed=(f"continues the thread from {held}, adding "
                     f"{len(messages(second))} message(s)" if held else observed)
           if second else f"{len(requests)} request(s)",
           evidence=f"run {RUN}: the second request's last message")
    run = ev.run(RUN)
    final = str(((run.result if run else None) or {}).get("result") or "")
    c.contains("result.final-text", PAUSE, "the loop ends with the continued turn's answer",
               needle="LP_PAUSE_DONE", haystack=final if run else None,
               evidence=f"run {RUN}: the result event")


def _pause_scenario(stop_reason: str) -> Scenario:
    return Scenario(name="loop-pause-turn", classifier="plain", rules=[
        Rule(id="paused", match=Match(turn=1), reply=Message(
            content=[TextBlock(text=PAUSED)], stop_reason=stop_reason)),
        Rule(id="done", reply=text("LP_PAUSE_DONE"))])


PAUSE_PROBE = Probe(
    name="loop.pause-turn",
    revision=2,  # the final text where the result event's is empty
    title="stop_reason pause_turn: the loop sends the turn back to continue it",
    claims=(Claim(PAUSE, "A reply with stop_reason pause_turn is not the end: the loop sends "
                         "its content back as the last (assistant) message so the model "
                         "continues the turn.",
                  docs("Stop reasons and fallback", "build-with-claude/handling-stop-reasons",
                       "pause_turn | A server-tool loop reached its iteration limit. | Send "
                       "the assistant content back to continue.")),),
    scenario=_pause_scenario("pause_turn"),
    invocations=(_invocation("Search, then answer."),),
    check=check_pause,
    counterfactuals=(Counterfactual(
        "end-turn", "the reply ends with end_turn: the turn is over, nothing is sent back",
        (PAUSE,), lambda p: replace(p, scenario=_pause_scenario("end_turn"))),),
)
