"""Answers the loop cannot take as they are: cut at max_tokens, a tool_use block never closed,
thinking with no visible text; each makes the client send another request for the same turn.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from mockapi import Match, Message, Raw, Rule, Scenario, TextBlock, ThinkingBlock, raw, text, tool_use
from mockapi.script.sse import encode_event
from probes.catalog.common import check_ended, check_terminal, last_user_locations, result_of
from probes.catalog.variants import answering, with_rules
from probes.core.checks import Checks
from probes.core.evidence import Evidence, messages
from probes.core.probe import Claim, Counterfactual, Hooks, Invocation, Probe
from probes.core.provenance import from_analysis

__all__ = ["MALFORMED", "MALFORMED_PROBE", "MALFORMED_TOOL_ID", "MAX_TOKENS", "MAX_TOKENS_PROBE",
           "THINKING", "THINKING_PROBE", "check_malformed", "check_max_tokens", "check_thinking"]


MAX_TOKENS = "probe.max-tokens-recovery"
MALFORMED = "probe.malformed-tool-use-retry"
THINKING = "probe.thinking-only-nudge"


def _texts(record: Mapping[str, Any], role: str) -> list[str]:
    texts = []
    for message in messages(record):
        content = message.get("content")
        if message.get("role") == role and isinstance(content, list):
            texts += [str(b.get("text")).strip() for b in content
                      if isinstance(b, dict) and b.get("type") == "text"]
    return texts


def _user_texts(record: Mapping[str, Any]) -> list[str]:
    return _texts(record, "user")


def _assistant_texts(record: Mapping[str, Any]) -> list[str]:
    return _texts(record, "assistant")


# ---- max_tokens ------------------------------------------------------------------------

def check_max_tokens(ev: Evidence, c: Checks) -> None:
    requests = ev.requests("max-tokens")
    c.equal("request-count", MAX_TOKENS,
            "one request plus three recovery requests, then the loop gives up",
            expected=4, observed=len(requests), evidence="journal: main requests")
    recoveries = requests[1:]
    continued = [bool(_assistant_texts(r)) and "PARTIAL_ANSWER" in " ".join(_assistant_texts(r))
                 and not last_user_locations(r, "MAX_TOKENS_PROMPT") for r in recoveries]
    c.that("recoveries-continue-the-turn", MAX_TOKENS,
           "each recovery request keeps the truncated answer and asks to continue "
           "(a new user turn, not the original prompt again)",
           passed=bool(recoveries) and all(continued), expected=[True] * 3, observed=continued,
           evidence="recovery requests: assistant text and last user turn")
    c.equal("is-error", MAX_TOKENS, "after the last recovery the error is surfaced",
            expected=True, observed=result_of(ev, "max-tokens").get("is_error"),
            evidence="run max-tokens: result.is_error")


MAX_TOKENS_PROBE = Probe(
    name="max-tokens-recovery",
    title="max_tokens: up to three recovery requests, then a surfaced error",
    claims=(Claim(MAX_TOKENS, "A response stopped by max_tokens is followed by at most three "
                              "recovery requests continuing the same turn; after that the "
                              "error is surfaced.",
                  source=from_analysis(
                      "max_tokens 恢复",
                      "本版常量 DGS=3,因此初次截断后最多再发起 3 次恢复请求", 266)),),
    scenario=Scenario(name="max-tokens-recovery", rules=[
        Rule(id="always-truncated", match=Match(),
             reply=text("PARTIAL_ANSWER_", stop_reason="max_tokens"), repeat="always"),
    ]),
    invocations=(Invocation("max-tokens", "MAX_TOKENS_PROMPT"),),
    check=check_max_tokens,
    boundaries=("Every answer is truncated; a recovery that succeeds is not shown here.",
                "The incomplete-thinking resumption path is behind a server-side gate."),
    counterfactuals=(
        Counterfactual(
            "complete-answer",
            "Every answer ends with end_turn instead of max_tokens, so nothing is truncated: no "
            "recovery request, no surfaced error.",
            (MAX_TOKENS,),
            lambda p: with_rules(p, [answering(p, "always-truncated", text("COMPLETE_ANSWER"))])),
    ),
)


# ---- malformed tool use -----------------------------------------------------------------

MALFORMED_TOOL_ID = "toolu_malformed_unterminated"


def _unterminated_tool_use() -> Raw:
    """stop_reason tool_use after a Read call whose block never ends: the call is named, with
    a valid input, but no content_block_stop ever makes it a complete block."""
    call = {"type": "tool_use", "id": MALFORMED_TOOL_ID, "name": "Read", "input": {}}
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {
            "id": "msg_loopprobe_malformed", "type": "message", "role": "assistant",
            "model": "claude-sonnet-4-5", "content": [], "stop_reason": None,
            "stop_sequence": None, "usage": {"input_tokens": 100, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": call},
        {"type": "content_block_delta", "index": 0, "delta": {
            "type": "input_json_delta",
            "partial_json": json.dumps({"file_path": "{workspace}/malformed.txt"})}},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None},
         "usage": {"output_tokens": 20}},
        {"type": "message_stop"},
    ]
    # text chunks, not bytes: the {workspace} placeholder is filled in text only
    return raw(*(encode_event(event).decode() for event in events))


def check_malformed(ev: Evidence, c: Checks) -> None:
    c.equal("request-count", MALFORMED, "one retry after the malformed answer",
            expected=2, observed=len(ev.requests("malformed")), evidence="journal: main requests")
    check_terminal(c, MALFORMED, ev, "malformed", "malformed_tool_use_exhausted")
    c.equal("is-error", MALFORMED, "the exhausted retry is an error",
            expected=True, observed=result_of(ev, "malformed").get("is_error"),
            evidence="run malformed: result.is_error")
    run = ev.run("malformed")
    c.equal("no-tool-ran", MALFORMED,
            "the Read the unterminated block names never runs (no hook call, no result)",
            expected={"PreToolUse calls": 0, "tool_result blocks": 0},
            observed={"PreToolUse calls": len(ev.hooks("PreToolUse")),
                      "tool_result blocks": len(run.output.tool_results())} if run else None,
            evidence="hook log: PreToolUse; run malformed: stream-json tool_result blocks")


def _well_formed_tool_use(p: Probe) -> Probe:
    changed = with_rules(p, [answering(
        p, "no-block", tool_use("Read", {"file_path": "{workspace}/malformed.txt"}),
        text("WELL_FORMED_DONE"), repeat="once")])
    return replace(changed, fixtures={**p.fixtures, "malformed.txt": "MALFORMED_FIXTURE\n"})


MALFORMED_PROBE = Probe(
    name="malformed-tool-use",
    title="stop_reason tool_use without a complete tool_use block: one retry, then exhausted",
    claims=(Claim(MALFORMED, "A response with stop_reason tool_use but no complete tool_use "
                             "block is retried once; a second such response ends the loop "
                             "with malformed_tool_use_exhausted; no tool runs.",
                  source=from_analysis(
                      "malformed tool use",
                      "如果 API 的 stop reason 是 tool_use,但客户端没有得到任何完整可"
                      "执行 block,CLI 会重试一次;第二次仍失败才返回 "
                      "malformed_tool_use_exhausted。第一次没有完整 block,因此不会执"
                      "行工具。", 276)),),
    scenario=Scenario(name="malformed-tool-use", rules=[
        Rule(id="no-block", match=Match(), repeat="always", reply=_unterminated_tool_use()),
    ]),
    fixtures={"malformed.txt": "MALFORMED_FILE_MARKER\n"},
    hooks=Hooks(),
    invocations=(Invocation("malformed", "MALFORMED_PROMPT"),),
    check=check_malformed,
    boundaries=("Both answers name a Read of an existing file with a valid input, but the "
                "tool_use block is never closed (no content_block_stop) before stop_reason "
                "tool_use: a complete block would have run.",),
    counterfactuals=(
        Counterfactual(
            "well-formed-tool-use",
            "The stop_reason tool_use comes with a complete tool_use block (a Read), so the "
            "response is well formed: the tool runs and the turn completes.",
            (MALFORMED,),
            _well_formed_tool_use),
    ),
)


# ---- thinking-only answer ---------------------------------------------------------------

def check_thinking(ev: Evidence, c: Checks) -> None:
    requests = ev.requests("thinking")
    c.equal("request-count", THINKING, "one nudge, then the answer is accepted",
            expected=2, observed=len(requests), evidence="journal: main requests")
    first, nudge = ([*requests, {}, {}])[:2]
    added = [t for t in _user_texts(nudge) if t not in _user_texts(first)]
    c.that("nudge-asks-for-visible-output", THINKING,
           "the second request adds a prompt for a visible answer to the user turn",
           passed=bool(added), expected="text added to the user turn",
           observed=added if nudge else None, evidence="request 2 vs request 1: user texts")
    check_ended(c, THINKING, ev, "thinking", final_text=None, prefix="result")


THINKING_PROBE = Probe(
    name="thinking-only-nudge",
    title="A thinking-only answer gets one nudge for a visible answer, then is accepted",
    claims=(Claim(THINKING, "When the model ends its turn with only a thinking block, the "
                            "client asks once for a visible answer; a second thinking-only "
                            "answer is accepted (success).",
                  source=from_analysis(
                      "thinking-only nudge",
                      "当模型以 end_turn/stop_sequence 结束、只有 thinking 而没有可见"
                      "文本时,CLI 会补一次提示要求给出用户可见结果。只补一次,第二次仍"
                      "如此就接受结束,避免无限 nudge。", 279)),),
    scenario=Scenario(name="thinking-only-nudge", rules=[
        Rule(id="thinking-only", match=Match(), repeat="always",
             reply=Message(content=[ThinkingBlock(thinking="THINKING_WITHOUT_ANSWER")])),
    ]),
    invocations=(Invocation("thinking", "THINKING_ONLY_PROMPT"),),
    check=check_thinking,
    counterfactuals=(
        Counterfactual(
            "thinking-with-answer",
            "The thinking block comes with a visible text answer, so there is nothing to nudge "
            "for: one request.",
            (THINKING,),
            lambda p: with_rules(p, [answering(p, "thinking-only", Message(content=[
                ThinkingBlock(thinking="THINKING_WITH_ANSWER"), TextBlock(text="VISIBLE_ANSWER")]))])),
    ),
)
