"""Recovery paths: max_tokens continuation, malformed tool use, thinking-only answers,
prompt-too-long compaction, auto-compaction and the history it needs, API retries (also with
the non-streaming fallback switched off) and the fallback model.

Retries and stalls are kept short with the client's own knobs
(CLAUDE_CODE_MAX_RETRIES, retry-after values of a second or two).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from mockapi import (
    ApiError,
    Match,
    Message,
    Raw,
    Rule,
    Scenario,
    TextBlock,
    ThinkingBlock,
    api_error,
    prompt_too_long,
    raw,
    text,
    tool_use,
)
from mockapi.replies import PROMPT_TOO_LONG, EventCount, StreamError, StreamStall, Usage
from mockapi.sse import encode_event
from probes.catalog.common import body_text, check_ended, check_terminal, last_user_locations, result_of
from probes.catalog.variants import answering, scripted_rule, with_rules, with_runs
from probes.core.checks import Checks
from probes.core.evidence import Evidence, messages
from probes.core.probe import Claim, Counterfactual, Hooks, Invocation, Probe
from probes.core.provenance import from_analysis, project_expectation

__all__ = ["ABANDONED", "AUTO_COMPACT", "AUTO_COMPACT_PROBE", "BREAK_AFTER", "COMPACTION_GATE",
           "FALLBACK", "FALLBACK_PROBE", "FILLER_FILE", "GATE_COMPACTS", "GATE_PROBE", "GATE_TURNS",
           "GROUPS", "MALFORMED", "MALFORMED_PROBE", "MALFORMED_TOOL_ID", "MAX_TOKENS",
           "MAX_TOKENS_PROBE", "NO_STREAM_FALLBACK", "NO_STREAM_FALLBACK_PROBE", "PROBES",
           "PTL_FAIL_PROBE", "PTL_FAIL_TURNS", "PTL_PROBE", "PTL_RECOVERED", "PTL_SURFACED",
           "PTL_TEXT", "RETRIES", "RETRIES_PROBE", "RETRY_AFTER", "SUMMARY", "THINKING",
           "THINKING_PROBE", "check_auto_compact", "check_compaction_gate", "check_fallback",
           "check_malformed", "check_max_tokens", "check_no_stream_fallback",
           "check_ptl_recovered", "check_ptl_surfaced", "check_retries", "check_thinking"]

MAX_TOKENS = "probe.max-tokens-recovery"
MALFORMED = "probe.malformed-tool-use-retry"
THINKING = "probe.thinking-only-nudge"
PTL_RECOVERED = "probe.prompt-too-long-reactive-compact"
PTL_SURFACED = "probe.prompt-too-long-surfaced"
AUTO_COMPACT = "probe.auto-compaction-window"
RETRIES = "probe.api-retry-backoff"
FALLBACK = "probe.fallback-model-switch"


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


FILLER_FILE = "".join(f"{i:05d} conversation filler for the history\n" for i in range(20))

def _reads(prefix: str, count: int, last_usage: int | None = None) -> list[Message]:
    """``count`` Read turns (distinct files); the last one may report a large input."""
    turns = []
    for i in range(1, count + 1):
        usage = Usage(input_tokens=last_usage) if last_usage and i == count else Usage()
        turns.append(tool_use("Read", {"file_path": f"{{workspace}}/{prefix}{i}.txt"},
                              id=f"toolu_{prefix}{i}", usage=usage))
    return turns


def _read_chain(prefix: str, count: int, prompt: str, last_usage: int | None = None) -> list[Rule]:
    """Rules answering ``prompt`` with ``count`` Read turns, each after the previous result;
    they match by prompt and tool_result id, so several runs can share one scenario."""
    matches = [Match(last_user_text_contains=prompt),
               *(Match(tool_result_for=f"toolu_{prefix}{i}") for i in range(1, count))]
    return [Rule(id=f"{prefix.rstrip('-')}-read-{i}", match=match, reply=reply) for i, (match, reply)
            in enumerate(zip(matches, _reads(prefix, count, last_usage), strict=True), start=1)]


def _fillers(prefix: str, count: int) -> dict[str, str]:
    return {f"{prefix}{i}.txt": FILLER_FILE for i in range(1, count + 1)}


GROUPS = 4  # more than the client's compaction gate needs (see the compaction-gate probe)

# ---- prompt too long ---------------------------------------------------------------------

SUMMARY = "<summary>PTL_SUMMARY_MARKER</summary>"
# the API's wording; the client prints it capitalised ("Prompt is too long · …")
PTL_TEXT = "prompt is too long"


def _printed(ev: Evidence, run: str) -> str | None:
    """What a run printed (stdout, stderr) and its result text, lower-cased; None without it."""
    record = ev.run(run)
    if record is None:
        return None
    result = str(result_of(ev, run).get("result", ""))
    return "\n".join((record.stdout, record.stderr, result)).lower()


def _compaction_checks(c: Checks, claim: str, ev: Evidence, run: str, trigger: str) -> None:
    compactions = ev.requests(run, kind="compaction")
    c.that("compaction-request", claim, "the client asked for a summary",
           passed=len(compactions) >= 1, expected="at least one compaction request",
           observed=len(compactions), evidence="journal: compaction requests")
    record = ev.run(run)
    boundaries = record.output.of_type("system", "compact_boundary") if record else []
    c.equal("boundary-trigger", claim, f"a compact_boundary with trigger {trigger}",
            expected=[trigger],
            observed=[(b.get("compact_metadata") or {}).get("trigger") for b in boundaries],
            evidence=f"run {run}: stream-json compact_boundary events")


def check_ptl_recovered(ev: Evidence, c: Checks) -> None:
    main = ev.requests("ptl")
    rejected = [r.get("status") for r in main].count(400)
    c.equal("request-rejected", PTL_RECOVERED, "one request got the 400 prompt-too-long",
            expected=1, observed=rejected, evidence="journal: statuses of main requests")
    _compaction_checks(c, PTL_RECOVERED, ev, "ptl", "auto")
    retried: Mapping[str, Any] = main[-1] if main else {}
    c.contains("retry-after-compaction", PTL_RECOVERED,
               "the retried request starts from the summary", needle="PTL_SUMMARY_MARKER",
               haystack=body_text(retried), evidence="the last main request's messages")
    c.absent("error-not-surfaced", PTL_RECOVERED,
             "the prompt-too-long error never reaches the output, in any letter case",
             needle=PTL_TEXT, haystack=_printed(ev, "ptl"),
             evidence="run ptl: stdout, stderr and result.result, lower-cased")
    check_ended(c, PTL_RECOVERED, ev, "ptl", final_text="PTL_RECOVERED", prefix="result")


def _other_400(p: Probe) -> Probe:
    too_long = PROMPT_TOO_LONG.split(":")[0]
    turns = scripted_rule(p, "turns").reply_list()
    others = [api_error(400, "loopprobe: an ordinary invalid request")
              if isinstance(r, ApiError) and too_long in r.error.message else r for r in turns]
    assert others != turns, "the prompt-too-long reply was not found"
    return with_rules(p, [answering(p, "turns", *others)])


PTL_PROBE = Probe(
    name="prompt-too-long-recovered",
    title="400 prompt-too-long: reactive compaction and a retry; the error is not surfaced",
    claims=(Claim(PTL_RECOVERED, "A 400 'prompt is too long' makes the client compact "
                                 "reactively (compact_boundary trigger auto) and retry the "
                                 "turn; when that succeeds the error is not surfaced.",
                  source=from_analysis(
                      "Prompt-too-long 为什么不一定立刻显示",
                      "precomputed_compact_swap或reactive_compact_retry,同一逻辑turn"
                      "再次请求;原PTL不显示。", 261),
                  beyond_source=('The analysis lists gates before a reactive compaction (rapid-refill '
                                'breaker, a legal message group, the auto-compact/abort gate, a prior '
                                'attempt) and does not name the trigger; compaction of an eligible '
                                "history and trigger 'auto' are expected from the recorded behaviour.")),),
    scenario=Scenario(name="prompt-too-long-recovered", rules=[
        Rule(id="summary", match=Match(kind="compaction"), reply=text(SUMMARY)),
        Rule(id="turns", match=Match(),
             replies=[*_reads("ptl", GROUPS), prompt_too_long(), text("PTL_RECOVERED")]),
    ]),
    fixtures={f"ptl{i}.txt": FILLER_FILE for i in range(1, GROUPS + 1)},
    invocations=(Invocation("ptl", "PTL_PROMPT"),),
    check=check_ptl_recovered,
    counterfactuals=(
        Counterfactual(
            "ordinary-400",
            "The rejected request gets an ordinary 400 invalid_request_error instead of 'prompt is "
            "too long', so compacting cannot help and the client has no reason to.",
            (PTL_RECOVERED,),
            _other_400),
        Counterfactual(
            "compaction-too-long",
            "The summary request is itself rejected as too long, so reactive compaction cannot "
            "succeed: no boundary, no retry from a summary, and the error is surfaced.",
            (PTL_RECOVERED,),
            lambda p: with_rules(p, [answering(p, "summary", prompt_too_long(), repeat="always")])),
    ),
)


PTL_FAIL_TURNS = 2  # enough history for the client to try compacting (one turn is too few)


def check_ptl_surfaced(ev: Evidence, c: Checks) -> None:
    main = ev.requests("ptl-fails")
    c.equal("rejected-after-tool-turns", PTL_SURFACED,
            f"the request after {PTL_FAIL_TURNS} tool turns is the one rejected as too long",
            expected=[200] * PTL_FAIL_TURNS + [400], observed=[r.get("status") for r in main],
            evidence="journal: statuses of the main requests")
    compactions = ev.requests("ptl-fails", kind="compaction")
    c.that("compaction-tried-and-failed", PTL_SURFACED,
           "the client tries to compact, and the summary request is itself rejected",
           passed=bool(compactions) and all(r.get("status") == 400 for r in compactions),
           expected="at least one compaction request, each answered 400",
           observed=[r.get("status") for r in compactions] or "no compaction request",
           evidence="journal: compaction requests of run ptl-fails")
    check_terminal(c, PTL_SURFACED, ev, "ptl-fails", "prompt_too_long")
    c.equal("is-error", PTL_SURFACED, "the error is surfaced",
            expected=True, observed=result_of(ev, "ptl-fails").get("is_error"),
            evidence="run ptl-fails: result.is_error")
    result = str(result_of(ev, "ptl-fails").get("result", "")).lower()
    c.contains("error-text", PTL_SURFACED, "the result carries the prompt-too-long error",
               needle=PTL_TEXT, haystack=result if ev.run("ptl-fails") else None,
               evidence="run ptl-fails: result.result, lower-cased")


PTL_FAIL_PROBE = Probe(
    name="prompt-too-long-surfaced",
    title="400 prompt-too-long when compaction cannot help: the error is surfaced",
    claims=(Claim(PTL_SURFACED, "When reactive compaction fails, the prompt-too-long error is "
                                "surfaced with terminal reason prompt_too_long.",
                  source=from_analysis(
                      "Prompt-too-long 为什么不一定立刻显示",
                      "普通失败或不具备资格:才把原错误和可选compact failure detail交"
                      "给上层,terminal reason为\nprompt_too_long。", 261)),),
    scenario=Scenario(name="prompt-too-long-surfaced", rules=[
        *_read_chain("fail", PTL_FAIL_TURNS, "PTL_FAIL_PROMPT"),
        Rule(id="always-too-long", match=Match(kind=["main", "compaction"]),
             reply=prompt_too_long(), repeat="always"),
    ]),
    fixtures=_fillers("fail", PTL_FAIL_TURNS),
    invocations=(Invocation("ptl-fails", "PTL_FAIL_PROMPT"),),
    check=check_ptl_surfaced,
    boundaries=(f"The history holds {PTL_FAIL_TURNS} tool turns, so the client does try to "
                "compact; every later request, the summary request included, is rejected as "
                "too long.",),
    counterfactuals=(
        Counterfactual(
            "answered",
            "Every request is answered normally, so there is no prompt-too-long error to surface.",
            (PTL_SURFACED,),
            lambda p: with_rules(p, [answering(p, "always-too-long", text("ANSWERED_NORMALLY"))])),
    ),
)


# ---- auto-compaction ----------------------------------------------------------------------

def check_auto_compact(ev: Evidence, c: Checks) -> None:
    _compaction_checks(c, AUTO_COMPACT, ev, "auto", "auto")
    requests = ev.requests("auto", kind=None)
    kinds = [r.get("kind") for r in requests if r.get("kind") in ("main", "compaction")]
    expected = ["main"] * GROUPS + ["compaction", "main"]
    c.equal("compaction-before-next-call", AUTO_COMPACT,
            "the compaction happens between the large turn and the next model request",
            expected=expected, observed=kinds, evidence="journal: order of main and compaction requests")
    check_ended(c, AUTO_COMPACT, ev, "auto", final_text="AUTO_COMPACT_DONE", prefix="result")


AUTO_COMPACT_PROBE = Probe(
    name="auto-compaction-window",
    title="Auto-compaction with a configured window runs inside the loop",
    claims=(Claim(AUTO_COMPACT, "With a configured context window, a turn whose reported "
                                "input_tokens exceed the threshold is followed by an automatic "
                                "compaction (trigger auto) before the next model request.",
                  source=from_analysis(
                      "3. 每次模型调用前都检查上下文治理",
                      "Auto-compact 位于 Agent Loop 内部,不是会话结束后的清理任务。每"
                      "次准备调用模型前都会执行", 151),
                  beyond_source=('The analysis says only that auto-compaction runs inside the loop before '
                                'each model call; the configured window '
                                '(CLAUDE_CODE_AUTO_COMPACT_WINDOW), the threshold against the reported '
                                "input_tokens, trigger 'auto' and the message-group gate are expected "
                                "from the client's documented settings and its recorded behaviour on "
                                '2.1.235.')),),
    scenario=Scenario(name="auto-compaction-window", rules=[
        Rule(id="summary", match=Match(kind="compaction"),
             reply=text("<summary>AUTO_SUMMARY_MARKER</summary>")),
        Rule(id="turns", match=Match(),
             replies=[*_reads("auto", GROUPS, last_usage=99000), text("AUTO_COMPACT_DONE")]),
    ]),
    fixtures={f"auto{i}.txt": FILLER_FILE for i in range(1, GROUPS + 1)},
    invocations=(Invocation("auto", "AUTO_COMPACT_PROMPT",
                            env={"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "100000"}),),
    check=check_auto_compact,
    boundaries=("The window is set with CLAUDE_CODE_AUTO_COMPACT_WINDOW=100000 and the "
                "reported input_tokens (99000) are scripted, not real.",
                f"The history holds {GROUPS} tool turns, more than the client's compaction "
                "gate needs: a single tool turn is not compacted at all (compact_error "
                "too_few_groups), two are (measured by the compaction-gate probe)."),
    counterfactuals=(
        Counterfactual(
            "default-window",
            "No context window is configured, so the 99000 reported input tokens stay far below "
            "the model's own auto-compaction threshold: nothing is compacted.",
            (AUTO_COMPACT,),
            lambda p: with_runs(p, changes={"auto": {"env": {}}})),
    ),
)


# ---- the compaction gate ----------------------------------------------------------------------

COMPACTION_GATE = "probe.compaction-group-gate"
GATE_TURNS = (1, 2, 3)
GATE_COMPACTS = {1: False, 2: True, 3: True}  # one tool turn is too few message groups


def _compaction_outcome(ev: Evidence, run: str) -> dict[str, Any] | None:
    record = ev.run(run)
    if record is None:
        return None
    failed = [e.get("compact_error") for e in record.output.of_type("system", "status")
              if e.get("compact_result") == "failed"]
    return {"compacted": bool(record.output.of_type("system", "compact_boundary")),
            "summary_requests": len(ev.requests(run, kind="compaction")),
            "compact_error": failed[0] if failed else None}


def check_compaction_gate(ev: Evidence, c: Checks) -> None:
    for trigger in ("reactive", "auto"):
        for turns in GATE_TURNS:
            run, compacts = f"{trigger}-{turns}", GATE_COMPACTS[turns]
            outcome = _compaction_outcome(ev, run)
            c.that(f"{run}.compacted", COMPACTION_GATE,
                   f"a history of {turns} tool turn(s) is {'' if compacts else 'not '}compacted "
                   f"({trigger})",
                   passed=outcome is not None and outcome["compacted"] == compacts
                   and (outcome["summary_requests"] > 0) == compacts,
                   expected={"compacted": compacts}, observed=outcome,
                   evidence=f"run {run}: stream-json compact_boundary and status events; "
                            "journal: summary requests")
    check_terminal(c, COMPACTION_GATE, ev, "reactive-1", "prompt_too_long")


def _gate_rules() -> list[Rule]:
    rules = [Rule(id="summary", match=Match(kind="compaction"), repeat="always",
                  reply=text("<summary>GATE_SUMMARY_MARKER</summary>"))]
    for turns in GATE_TURNS:
        reactive, auto = f"gate-reactive-{turns}-", f"gate-auto-{turns}-"
        rules += [*_read_chain(reactive, turns, f"GATE_REACTIVE_{turns}_PROMPT"),
                  Rule(id=f"{reactive}end", match=Match(tool_result_for=f"toolu_{reactive}{turns}"),
                       replies=[prompt_too_long(), text(f"GATE_REACTIVE_{turns}_DONE")]),
                  *_read_chain(auto, turns, f"GATE_AUTO_{turns}_PROMPT", last_usage=99000),
                  Rule(id=f"{auto}end", match=Match(tool_result_for=f"toolu_{auto}{turns}"),
                       reply=text(f"GATE_AUTO_{turns}_DONE"))]
    # a client that compacts a history the others refuse retries from the summary alone: answer
    # it, so the gate check (not an unscripted request) tells what happened
    rules.append(Rule(id="after-summary", match=Match(), repeat="always",
                      reply=text("GATE_AFTER_SUMMARY")))
    return rules


GATE_PROBE = Probe(
    name="compaction-gate",
    title="How much history the client compacts: one, two and three tool turns",
    claims=(Claim(COMPACTION_GATE,
                  "Compaction needs at least two message groups: with one tool turn of history "
                  "the client does not compact (compact_error too_few_groups; after a 400 "
                  "prompt-too-long the error is then surfaced with terminal reason "
                  "prompt_too_long); with two or three tool turns it compacts, both reactively "
                  "after a 400 prompt-too-long and automatically past a configured window.",
                  source=project_expectation(
                      "the analysis names a legal message group among the gates before a "
                      "compaction but gives no count; a loopprobe audit of 2.1.235 saw one "
                      "tool turn refused and two and three compacted",
                      "behaviour recorded on claude-code 2.1.235 by loopprobe (recovery "
                      "report, compaction-gate probe)")),),
    scenario=Scenario(name="compaction-gate", rules=_gate_rules()),
    fixtures={name: FILLER_FILE for turns in GATE_TURNS for trigger in ("reactive", "auto")
              for name in _fillers(f"gate-{trigger}-{turns}-", turns)},
    invocations=tuple(
        Invocation(f"{trigger}-{turns}", f"GATE_{trigger.upper()}_{turns}_PROMPT",
                   env={"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "100000"} if trigger == "auto" else {})
        for trigger in ("reactive", "auto") for turns in GATE_TURNS),
    check=check_compaction_gate,
    boundaries=("reactive-N: after N Read turns the next request is rejected as too long; "
                "auto-N: the Nth Read reports 99000 input tokens against a 100000 window "
                "(CLAUDE_CODE_AUTO_COMPACT_WINDOW).",),
    counterfactuals=(
        Counterfactual(
            "summary-rejected",
            "Every summary request is itself rejected as too long, so no history, of any length, "
            "can be compacted.",
            (COMPACTION_GATE,),
            lambda p: with_rules(p, [answering(p, "summary", prompt_too_long(), repeat="always")])),
    ),
)


# ---- API retries ---------------------------------------------------------------------------

RETRY_AFTER = 2


def check_retries(ev: Evidence, c: Checks) -> None:
    attempts = ev.requests("retries")
    c.equal("attempts", RETRIES, "the turn is sent four times (three failures, one success)",
            expected=[1, 2, 3, 4], observed=[r.get("attempt") for r in attempts],
            evidence="journal: attempt numbers of the main requests")
    record = ev.run("retries")
    retries = record.output.of_type("system", "api_retry") if record else []
    c.equal("api-retry-events", RETRIES,
            "the retries of the 529 and the 500 are each announced with an api_retry event",
            expected=[529, 500], observed=[e.get("error_status") for e in retries],
            evidence="run retries: stream-json system/api_retry error_status")
    # the analysis names the stream -> non-stream fallback as the path after a broken stream
    c.equal("retry-paths", RETRIES,
            "the HTTP-error retries stream again; the stream broken by overloaded_error is "
            "re-sent once as a non-streaming request",
            expected=[True, True, True, False], observed=[r.get("stream") for r in attempts],
            evidence="journal: stream flag of each attempt (false = non-streaming fallback)")
    gap = (attempts[1]["time"] - attempts[0]["time"]) if len(attempts) > 1 else None
    c.that("retry-after-honoured", RETRIES,
           f"the retry after the 529 with retry-after: {RETRY_AFTER} waits at least that long",
           passed=gap is not None and gap >= RETRY_AFTER,
           expected=f">= {RETRY_AFTER}s between attempt 1 and 2",
           observed=None if gap is None else (f">= {RETRY_AFTER}s" if gap >= RETRY_AFTER
                                              else f"< {RETRY_AFTER}s"),
           evidence="timeline in <report>.timing.json: t_ms of the run's first two requests "
                    "(attempts 1 and 2)")
    check_ended(c, RETRIES, ev, "retries", final_text="RETRIED_OK", prefix="result")


RETRIES_PROBE = Probe(
    name="api-retries",
    title="HTTP 529/500 are retried with api_retry events; a broken stream is re-sent without "
          "streaming",
    claims=(Claim(RETRIES, "529 overloaded and 500 are retried, each retry announced by an "
                           "api_retry event and honouring a retry-after longer than the backoff; "
                           "a stream broken mid-way by overloaded_error is re-sent once as a "
                           "non-streaming request (the stream to non-stream fallback); the turn "
                           "then succeeds.",
                  source=from_analysis(
                      "先区分四个容易混淆的“轮次”",
                      "同一模型轮次中的网络重试、流转非流、模型 fallback 或拒绝 fallback", 81),
                  beyond_source=(
                      "The analysis lists network retries and the stream to non-stream "
                      "fallback among the API attempts of one model turn; the api_retry "
                      "event and retry-after are expected from the Claude API errors page "
                      "(platform.claude.com/docs/en/api/errors: 529 overloaded_error, "
                      "retry-after) and the client's stream-json output.")),),
    scenario=Scenario(name="api-retries", rules=[
        Rule(id="flaky", match=Match(), replies=[
            api_error(529, "Overloaded", type="overloaded_error",
                      headers={"retry-after": str(RETRY_AFTER)}),
            api_error(500, "Internal server error"),
            Message(content=[TextBlock(text="ABANDONED_STREAM")],
                    stream_error=StreamError(after_events=3), replay_to_fallback=False),
            text("RETRIED_OK"),
        ]),
    ]),
    invocations=(Invocation("retries", "RETRIES_PROMPT",
                            env={"CLAUDE_CODE_MAX_RETRIES": "3"}),),
    check=check_retries,
    boundaries=("Backoff is checked only where retry-after exceeds it; the exponential "
                "schedule itself is not timed.",
                "The reply broken by the mid-stream error is not replayed to a non-streaming "
                "re-send (replay_to_fallback: false): whatever the client sends next gets the "
                "next scripted reply."),
    counterfactuals=(
        Counterfactual(
            "no-failure",
            "The first attempt succeeds, so there is nothing to retry and no retry-after to honour.",
            (RETRIES,),
            lambda p: with_rules(p, [answering(p, "flaky", text("RETRIED_OK"))])),
    ),
)


# ---- the non-streaming fallback switched off --------------------------------------------------

NO_STREAM_FALLBACK = "probe.nonstreaming-fallback-disabled"
# where the stream breaks: after message_start and ping, or after the first block's start too
BREAK_AFTER = {"before-content": 2, "after-content": 3}


def check_no_stream_fallback(ev: Evidence, c: Checks) -> None:
    for run in BREAK_AFTER:
        attempts = ev.requests(run)
        c.equal(f"{run}.no-non-streaming-resend", NO_STREAM_FALLBACK,
                "no attempt is a non-streaming re-send", expected=[True] * len(attempts),
                observed=[r.get("stream") for r in attempts] if ev.run(run) else None,
                evidence="journal: stream flag of each attempt")
        c.that(f"{run}.streamed-retry", NO_STREAM_FALLBACK,
               "the broken stream goes to the retry layer: the turn is sent again, streaming",
               passed=len(attempts) > 1 and attempts[1].get("stream") is True,
               expected="attempt 2 of the turn, streaming",
               observed=[{"attempt": r.get("attempt"), "stream": r.get("stream")}
                         for r in attempts],
               evidence="journal: attempts of the turn")
        check_ended(c, NO_STREAM_FALLBACK, ev, run, final_text="RETRIED_OK",
                    prefix=f"{run}.result")


NO_STREAM_FALLBACK_PROBE = Probe(
    name="nonstreaming-fallback-disabled",
    title="CLAUDE_CODE_DISABLE_NONSTREAMING_FALLBACK: a stream broken by overloaded_error",
    claims=(Claim(NO_STREAM_FALLBACK,
                  "With CLAUDE_CODE_DISABLE_NONSTREAMING_FALLBACK=1, a stream broken by "
                  "overloaded_error (before or after its first content block) is never re-sent "
                  "as a non-streaming request; the error goes to the retry layer, which sends "
                  "the turn again as a streaming request, and the turn succeeds.",
                  source=project_expectation(
                      "the documented meaning of the variable: streaming errors propagate to "
                      "the retry layer instead of a non-streaming fallback",
                      "Claude Code docs, environment variables: "
                      "https://code.claude.com/docs/en/env-vars")),),
    scenario=Scenario(name="nonstreaming-fallback-disabled", rules=[
        Rule(id=f"{run}-broken", match=Match(last_user_text_contains=f"NO_FALLBACK_{after}_PROMPT"),
             replies=[Message(content=[TextBlock(text="BROKEN_STREAM")],
                              stream_error=StreamError(after_events=after),
                              replay_to_fallback=False),
                      text("RETRIED_OK")])
        for run, after in BREAK_AFTER.items()]),
    invocations=tuple(
        Invocation(run, f"NO_FALLBACK_{after}_PROMPT",
                   env={"CLAUDE_CODE_MAX_RETRIES": "3",
                        "CLAUDE_CODE_DISABLE_NONSTREAMING_FALLBACK": "1"})
        for run, after in BREAK_AFTER.items()),
    check=check_no_stream_fallback,
    boundaries=("Each run's first attempt breaks with an overloaded_error event: before-content "
                "after message_start and ping, after-content once the first text block has "
                "started; any further attempt is answered RETRIED_OK.",),
    counterfactuals=(
        Counterfactual(
            "variable-unset",
            "CLAUDE_CODE_DISABLE_NONSTREAMING_FALLBACK is not set, so the client may fall back to "
            "a non-streaming re-send of the broken stream.",
            (NO_STREAM_FALLBACK,),
            lambda p: with_runs(p, changes={run: {"env": {"CLAUDE_CODE_MAX_RETRIES": "3"}}
                                            for run in BREAK_AFTER})),
    ),
)


# ---- fallback model -------------------------------------------------------------------------

PRIMARY, FALLBACK_MODEL = "claude-sonnet-4-5", "claude-haiku-4-5"


ABANDONED = "ABANDONED_PARTIAL"
# A complete, signed thinking block, then the connection drops: the client has the block, retries
# the stream, meets 529s and switches models. (A complete text or tool_use block before the
# break is not abandoned: the client keeps it as a finished, possibly incomplete response.)
_PARTIAL = ThinkingBlock(thinking=f"{ABANDONED} thinking", chunk_size=64)
_THROUGH_PARTIAL = 6  # message_start, ping, the block's start, thinking and signature deltas, stop


def check_fallback(ev: Evidence, c: Checks) -> None:
    requests = ev.requests("fallback")
    models = [r.get("model") for r in requests]
    c.that("switched-model", FALLBACK, "after repeated overload the client asks the fallback model",
           passed=FALLBACK_MODEL in models and models[0] == PRIMARY,
           expected=f"first {PRIMARY}, later {FALLBACK_MODEL}", observed=models,
           evidence="journal: model of each main request")
    record = ev.run("fallback")
    held = [e for e in (record.output.of_type("assistant") if record else [])
            if ABANDONED in json.dumps(e.get("message"))]
    c.visible("partial-held", FALLBACK,
              "the client had the partial response before abandoning it (it printed it)",
              seen=bool(held), expected=f"an assistant event holding {ABANDONED}",
              looked_in="run fallback: stream-json assistant events",
              hidden_because="a client need not print a block of a response it abandons")
    fallback = [r for r in requests if r.get("model") == FALLBACK_MODEL]
    carrying = [r for r in fallback if ABANDONED in (body_text(r) or "")]
    c.that("abandoned-not-reused", FALLBACK,
           "no request to the fallback model carries the abandoned partial response: neither "
           "the switch nor the request after the fallback model's tool call",
           passed=bool(fallback) and not carrying,
           expected=f"{ABANDONED} in none of the fallback model's requests",
           observed=(f"in {len(carrying)} of {len(fallback)} requests" if carrying
                     else f"in none of {len(fallback)} requests") if fallback
           else "no request to the fallback model",
           evidence="journal: messages of every request to the fallback model")
    check_ended(c, FALLBACK, ev, "fallback", final_text="FALLBACK_OK", prefix="result")


FALLBACK_PROBE = Probe(
    name="fallback-model",
    title="--fallback-model takes over after repeated overload; the abandoned response is dropped",
    claims=(Claim(FALLBACK, "With --fallback-model, repeated overload of the primary model "
                            "switches the turn to the fallback model; the abandoned partial "
                            "response is not reused.",
                  source=from_analysis(
                      "模型 fallback 与工具副作用如何交互",
                      "普通 fallback chain | overloaded、server error、model "
                      "unavailable 等 | tombstone 当前 assistant/tool result,abort 执"
                      "行中工具,换下一个模型重新请求", 323)),),
    scenario=Scenario(name="fallback-model", rules=[
        Rule(id="fallback-answers", match=Match(model=FALLBACK_MODEL), replies=[
            tool_use("Read", {"file_path": "{workspace}/fallback.txt"}, id="toolu_fallback_read"),
            text("FALLBACK_OK")]),
        Rule(id="primary-overloaded", match=Match(model=PRIMARY), repeat="always", replies=[
            # the pause lets the client take in the complete block before the connection drops
            Message(content=[_PARTIAL],
                    stall=StreamStall(after_events=_THROUGH_PARTIAL, seconds=0.5),
                    disconnect=EventCount(after_events=_THROUGH_PARTIAL),
                    replay_to_fallback=False),
            api_error(529, "Overloaded", type="overloaded_error"),
        ]),
    ]),
    fixtures={"fallback.txt": "FALLBACK_FILE\n"},
    invocations=(Invocation("fallback", "FALLBACK_PROMPT", model=PRIMARY,
                            extra_args=("--fallback-model", FALLBACK_MODEL),
                            env={"CLAUDE_CODE_MAX_RETRIES": "4"}),),
    check=check_fallback,
    requires=("fallback_model",),
    boundaries=(f"The primary model first streams a complete thinking block ({ABANDONED}), "
                "pauses half a second and drops the connection, then answers every request "
                "with 529; the fallback model answers with a Read, then text, so a later "
                "request shows the kept history.",
                "A complete text or tool_use block before a mid-stream overloaded_error is not "
                "abandoned: 2.1.235 keeps it as a finished response ('… may be incomplete'), "
                "runs a tool in it, and switches models only on a later request."),
    counterfactuals=(
        Counterfactual(
            "primary-answers",
            "The primary model answers at once, so there is no overload to switch models on.",
            (FALLBACK,),
            lambda p: with_rules(p, [answering(p, "primary-overloaded", text("PRIMARY_OK"))])),
    ),
)

PROBES = (MAX_TOKENS_PROBE, MALFORMED_PROBE, THINKING_PROBE, PTL_PROBE, PTL_FAIL_PROBE,
          AUTO_COMPACT_PROBE, GATE_PROBE, RETRIES_PROBE, NO_STREAM_FALLBACK_PROBE, FALLBACK_PROBE)
