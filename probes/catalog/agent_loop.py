"""The generic agent-loop catalog: what every loop that calls the Messages API owes it.

Any client kind that runs its loop with the driver's three tools (``add``, ``fail``,
``read_file``; capability ``loop_tools``, which every invocation here asks for) runs these
probes: the Anthropic SDK's tool runner (Python and TypeScript), pydantic-ai, the Vercel AI
SDK, LangGraph, and the clients built on the Claude Code CLI (Claude Code, the Agent SDKs),
which are given the tools as an MCP server (``probes.core.loop_tools``) under their own
names for them; a fake loop in the tests. Each claim
cites the Messages API documentation (its page title, its address and a short quote) or,
for the step limit, the client's own documented option; nothing here is tuned to what one
client did. Every check compares with fixed ids and texts of the script, and each probe
has a counterfactual in which the behaviour cannot happen, so each check can fail on a
conforming loop; ``tests/fakeloop/toolloop.py`` plants each violation for the fast tests.

What a loop's driver prints is the tool runner driver's protocol (``assistant`` events, one
``result`` event with ``subtype``, ``is_error``, ``result``): the checks read the wire first
(the journal) and the result event only for how the run ended.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from mockapi import (
    Match,
    Message,
    Raw,
    Rule,
    Scenario,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
    api_error,
    text,
)
from mockapi.replies import EventCount, RawChunk, RawSpec
from probes.catalog.common import check_ended
from probes.core.checks import Checks
from probes.core.evidence import Evidence, blocks_of_type, messages
from probes.core.probe import Claim, Counterfactual, Invocation, Probe, ReportSpec
from probes.core.provenance import Source, project_expectation

__all__ = [
    "CALLS",
    "CLAIMS",
    "CUT",
    "DOCS",
    "ERROR",
    "ERROR_PROBE",
    "FAIL_ID",
    "LIMIT",
    "PAIRING",
    "PARALLEL",
    "PARALLEL_PROBE",
    "PARTIAL",
    "PAUSE",
    "PAUSED",
    "PAUSE_PROBE",
    "PROBES",
    "REPORT",
    "REPORTS",
    "RETRY",
    "RETRY_AFTER_S",
    "RETRY_ID",
    "RETRY_PROBE",
    "RUN",
    "STEP_LIMIT",
    "STEP_PROBE",
    "STILL_CALLING",
    "STREAM_PROBE",
    "THINKING",
    "THINKING_PROBE",
    "THINKING_SETTINGS",
    "WHOLE_JSON",
    "check_cut",
    "check_error",
    "check_parallel",
    "check_pause",
    "check_retry",
    "check_steps",
    "check_thinking",
    "docs",
]

REPORT = "agent-loop-conformance"
RUN = "loop"
DOCS = "platform.claude.com/docs/en"

PAIRING = "loop.tool-result-pairing"
PARALLEL = "loop.parallel-results-one-message"
ERROR = "loop.tool-error-result"
STEP_LIMIT = "loop.step-limit"
RETRY = "loop.retry-overloaded"
CUT = "loop.stream-cut-not-truncated"
THINKING = "loop.thinking-passback"
PAUSE = "loop.pause-turn-continue"
CLAIMS = (PAIRING, PARALLEL, ERROR, STEP_LIMIT, RETRY, CUT, THINKING, PAUSE)

CALLS = ("toolu_lp_a", "toolu_lp_b")
# budget_tokens must stay below max_tokens, or the API (and the mock) refuses the request
THINKING_SETTINGS = {"max_tokens": 2048, "thinking": {"type": "enabled", "budget_tokens": 1024}}


def docs(title: str, path: str, quote: str) -> Source:
    """A claim's source: a Messages API documentation page, by title, address and quote."""
    return project_expectation(f"“{quote}”", f"Messages API docs, “{title}” ({DOCS}/{path})")


def _invocation(prompt: str, **fields: Any) -> Invocation:
    return Invocation(name=RUN, prompt=prompt, session="none", tools=None, timeout=60,
                      loop_tools=True, **fields)


def _last_message(record: Any) -> dict[str, Any]:
    sent = messages(record) if record else []
    return sent[-1] if sent else {}


def _results(record: Any) -> list[dict[str, Any]]:
    """The tool_result blocks of a request's last message (what the loop just sent)."""
    last = _last_message(record)
    return [b for _, b in blocks_of_type({"body": {"messages": [last]}}, "tool_result")] \
        if last else []


def _text(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, list):
        return "".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return str(content or "")


def _output(block: dict[str, Any]) -> str:
    """A tool_result's output: the first line of its text. A loop may add its own notes
    after the tool's output (Claude Code appends a ``<system-reminder>`` block); the claim is
    that the result carries its call's output, not that it carries nothing else."""
    lines = _text(block).strip().splitlines()
    return lines[0].strip() if lines else ""


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


def _started(ev: Evidence, c: Checks) -> None:
    """The harness's own check: the loop sent its first request. A run that never did (the
    driver could not import the client, or the client could not build its first request
    with its dependencies of today) shows nothing about any claim: its verdicts are harness
    errors, never contradictions."""
    run = ev.run(RUN)
    result = (run.result if run else None) or {}
    sent = len(_requests(ev))
    c.that("harness.loop-started", None, "the loop sent its first request", passed=sent > 0,
           expected="at least one request",
           observed=f"{sent} requests" if sent else "no request; " + (
               f"the driver said: {str(result.get('result'))[:300]}" if result else
               f"stderr ends: {run.stderr[-300:] if run else ''}"),
           evidence=f"run {RUN}: the journal and the driver's output")


def _ended(c: Checks, claim: str, ev: Evidence, final_text: str) -> None:
    check_ended(c, claim, ev, RUN, final_text=final_text, prefix="result")


def _requests(ev: Evidence) -> list[Any]:
    # the loop's own requests: a client's side requests and warmups are told apart when it
    # names its classifier (Capabilities.classifier); for the others every request is main
    return ev.requests(RUN, kind="main")


# ---- parallel calls: pairing, one message ---------------------------------------------------

def check_parallel(ev: Evidence, c: Checks) -> None:
    _started(ev, c)
    second = ev.request(RUN, 1, kind="main")
    results = _results(second)
    where = f"run {RUN}: the second request's last message"
    c.equal("results.ids", PAIRING, "the request after the tool_use reply answers each call "
            "with a tool_result carrying its id", expected=sorted(CALLS),
            observed=sorted(str(r.get("tool_use_id")) for r in results) if second else None,
            evidence=where)
    c.equal("results.ran", PAIRING, "each result carries its own call's output (add: 2+3, "
            "4+5), as its first line", expected={CALLS[0]: "5", CALLS[1]: "9"},
            observed={str(r.get("tool_use_id")): _output(r) for r in results}
            if second else None, evidence=f"{where}: the tool_result contents")
    last = _last_message(second)
    c.equal("results.one-message", PARALLEL, "both results travel in the one user message "
            "that follows the reply", expected={"role": "user", "tool_use_ids": sorted(CALLS)},
            observed={"role": last.get("role"), "tool_use_ids": sorted(
                str(r.get("tool_use_id")) for r in results)} if second else None,
            evidence=where)
    _ended(c, PAIRING, ev, "LP_PAIRED_DONE")


def _two_calls(*calls: ToolUseBlock) -> Scenario:
    return Scenario(name="loop-parallel", classifier="plain", rules=[
        Rule(id="calls", match=Match(turn=1), reply=Message(content=list(calls))),
        Rule(id="done", reply=text("LP_PAIRED_DONE"))])


PARALLEL_PROBE = Probe(
    name="loop.parallel-calls",
    revision=2,  # the final text where the result event's is empty
    title="Two tool calls in one reply: each answered by its id, both in the next user message",
    claims=(
        Claim(PAIRING, "The loop runs every tool_use of a reply and answers each, in the next "
                       "request, with a tool_result carrying its id and the tool's output.",
              docs("Handle tool calls", "agents-and-tools/tool-use/handle-tool-calls",
                   "tool_use_id: The id of the tool use request this is a result for.")),
        Claim(PARALLEL, "The results of one reply's calls go back together in the one user "
                        "message that follows it.",
              docs("Parallel tool use", "agents-and-tools/tool-use/parallel-tool-use",
                   "无论您使用哪种策略，都要为每个 tool_use 块返回一个 tool_result，并将它们全部"
                   "放在下一条用户消息中 (zh-CN page; in English: whatever strategy you use, "
                   "return one tool_result per tool_use block and put them all in the next "
                   "user message)")),
    ),
    scenario=_two_calls(ToolUseBlock(id=CALLS[0], name="add", input={"a": 2, "b": 3}),
                        ToolUseBlock(id=CALLS[1], name="add", input={"a": 4, "b": 5})),
    invocations=(_invocation("Add 2+3 and 4+5."),),
    check=check_parallel,
    counterfactuals=(Counterfactual(
        "one-call", "the reply has one tool_use only: the second result, and the pair in one "
                    "message, cannot appear", (PAIRING, PARALLEL),
        lambda p: replace(p, scenario=_two_calls(
            ToolUseBlock(id=CALLS[0], name="add", input={"a": 2, "b": 3})))),),
)

# ---- a failing tool --------------------------------------------------------------------------

FAIL_ID = "toolu_lp_fail"


def check_error(ev: Evidence, c: Checks) -> None:
    _started(ev, c)
    second = ev.request(RUN, 1, kind="main")
    found = [r for r in _results(second) if r.get("tool_use_id") == FAIL_ID]
    result = found[0] if found else {}
    c.that("error.result", ERROR, "the call gets a tool_result with is_error: true naming "
           "the error", passed=result.get("is_error") is True and "LP_BOOM" in _text(result),
           expected={"tool_use_id": FAIL_ID, "is_error": True, "content": "contains LP_BOOM"},
           observed={"tool_use_id": result.get("tool_use_id"), "is_error":
                     result.get("is_error"), "content": _text(result)[:160]}
           if result else "no tool_result for the call",
           evidence=f"run {RUN}: the second request's last message")
    _ended(c, ERROR, ev, "LP_ERROR_DONE")


def _error_scenario(call: ToolUseBlock) -> Scenario:
    return Scenario(name="loop-tool-error", classifier="plain", rules=[
        Rule(id="call", match=Match(turn=1), reply=Message(content=[call])),
        Rule(id="done", reply=text("LP_ERROR_DONE"))])


ERROR_PROBE = Probe(
    name="loop.tool-error",
    revision=2,  # the final text where the result event's is empty
    title="A tool that raises: an is_error result, and the loop goes on",
    claims=(Claim(ERROR, "A tool that raises gives a tool_result with is_error: true carrying "
                         "the error, and the loop goes on to the model's next answer.",
                  docs("Handle tool calls", "agents-and-tools/tool-use/handle-tool-calls",
                       "Parse tool_use blocks, format tool_result responses, and handle errors "
                       "with is_error.")),),
    scenario=_error_scenario(ToolUseBlock(id=FAIL_ID, name="fail", input={"reason": "LP_BOOM"})),
    invocations=(_invocation("Call the failing tool."),),
    check=check_error,
    counterfactuals=(Counterfactual(
        "tool-succeeds", "the call goes to add, which cannot raise: no error result can appear",
        (ERROR,), lambda p: replace(p, scenario=_error_scenario(
            ToolUseBlock(id=FAIL_ID, name="add", input={"a": 1, "b": 1})))),),
)

# ---- the step limit ----------------------------------------------------------------------------

LIMIT = 3


# a stop reason telling that the last reply still asks for tools: the Messages API's, and the
# Vercel AI SDK's finishReason (what a driver reports of the run, probes.clients.loop_driver)
STILL_CALLING = ("tool_use", "tool-calls")


def check_steps(ev: Evidence, c: Checks) -> None:
    _started(ev, c)
    c.equal("requests", STEP_LIMIT, f"with a step limit of {LIMIT} the loop asks for {LIMIT} "
            "replies, although each asks for another tool call", expected=LIMIT,
            observed=len(_requests(ev)), evidence=f"run {RUN}: the journal")
    run = ev.run(RUN)
    result = (run.result if run else None) or {}
    said = bool(result) and (result.get("is_error") is True
                             or result.get("subtype") not in (None, "success")
                             or result.get("stop_reason") in STILL_CALLING)
    c.that("limit.said", STEP_LIMIT, "the loop says it stopped at its limit: its caller gets "
           "an error, or the last reply still asking for a tool, never a finished answer",
           passed=said, expected={"any of": ["is_error: true", "subtype other than success",
                                             f"stop_reason in {list(STILL_CALLING)}"]},
           observed={k: result.get(k) for k in ("subtype", "is_error", "stop_reason")}
           if result else "no result event", evidence=f"run {RUN}: the result event")


STEP_PROBE = Probe(
    name="loop.step-limit",
    title="The step limit: the loop stops after N model replies",
    claims=(Claim(STEP_LIMIT, f"Given its step limit N (N={LIMIT}) the loop asks for N replies "
                              "(each step it is given, and no more) and stops, even when the "
                              "last one calls a tool, and says so: its caller gets an error or "
                              "the last reply still asking for a tool, not a finished answer.",
                  project_expectation(
                      "each client documents its limit on model requests: the tool runners' "
                      "max_iterations, the Vercel AI SDK's stopWhen: stepCountIs(N), "
                      "pydantic-ai's UsageLimits(request_limit=N); the driver passes N to it; "
                      "and each tells its caller how the run ended (an error, a result "
                      "subtype, the last reply's stop reason or finishReason)",
                      "the client's own documentation of its step limit")),),
    scenario=Scenario(name="loop-step-limit", classifier="plain", rules=[
        Rule(id="calls", replies=[Message(content=[ToolUseBlock(
            id=f"toolu_lp_step_{i}", name="add", input={"a": i, "b": i})]) for i in range(5)]),
        Rule(id="done", reply=text("LP_STEP_DONE"))]),
    invocations=(_invocation("Keep adding.", max_turns=LIMIT),),
    check=check_steps,
    counterfactuals=(Counterfactual(
        "no-limit", "no step limit is given: the loop follows the script's five calls and its "
                    "answer (six replies), so it cannot stop at three",
        (STEP_LIMIT,), lambda p: replace(p, invocations=(_invocation("Keep adding."),))),),
)

# ---- retries ----------------------------------------------------------------------------------

RETRY_ID = "toolu_lp_retry"
RETRY_AFTER_S = 2


def check_retry(ev: Evidence, c: Checks) -> None:
    _started(ev, c)
    requests = _requests(ev)
    c.equal("statuses", RETRY, "the request after the tool call is answered 529, sent again "
            "and answered", expected=[200, 529, 200],
            observed=[r.get("status") for r in requests], evidence=f"run {RUN}: the journal")
    # the same conversation: a client may re-send it without streaming (Claude Code's
    # fallback changes stream, max_tokens and temperature), but not as a new turn
    same = len(requests) == 3 and messages(requests[1]) == messages(requests[2])
    c.that("same-request", RETRY, "the retry is the same request, not a new turn",
           passed=same, expected="the 2nd and 3rd requests send the same messages",
           observed="the same messages" if same else f"{len(requests)} requests, their "
           "messages differ" if len(requests) == 3 else f"{len(requests)} requests",
           evidence=f"run {RUN}: the second and third requests' messages")
    gap = round(float(requests[2]["elapsed"]) - float(requests[1]["elapsed"]), 2) \
        if len(requests) == 3 else None
    c.that("waited", RETRY, f"the retry waits the {RETRY_AFTER_S} s the 529's retry-after asks",
           passed=gap is not None and gap >= RETRY_AFTER_S - 0.1,
           expected=f">= {RETRY_AFTER_S} s between the 529 and the retry",
           observed=f"{gap} s" if gap is not None else None,
           evidence=f"run {RUN}: the journal's arrival times")
    _ended(c, RETRY, ev, "LP_RETRY_DONE")


RETRY_PROBE = Probe(
    name="loop.retry",
    revision=2,  # the final text where the result event's is empty
    title="An overloaded reply inside the loop: retried after its retry-after, the loop goes on",
    claims=(Claim(RETRY, "A 529 overloaded_error inside the loop is retried (the same request, "
                         "after the retry-after delay) and the loop goes on, with the client's "
                         "retries on.",
                  docs("Errors", "api/errors",
                       "529 - overloaded_error: The API is temporarily overloaded."),
                  beyond_source="that the client retries it, honouring retry-after: the "
                                "official SDKs' documented default (“Certain errors are "
                                "automatically retried 2 times by default … 429 Rate Limit, "
                                "and >=500 Internal errors”, anthropic-sdk-python README, "
                                "“Retries”); the driver sets the client's retries to 2"),),
    scenario=Scenario(name="loop-retry", classifier="plain", rules=[
        Rule(id="call", match=Match(turn=1), reply=Message(content=[
            ToolUseBlock(id=RETRY_ID, name="add", input={"a": 1, "b": 1})])),
        Rule(id="overloaded", match=Match(tool_result_for=RETRY_ID, attempt=1),
             reply=api_error(529, "Overloaded", headers={"retry-after": str(RETRY_AFTER_S)})),
        Rule(id="done", reply=text("LP_RETRY_DONE"))]),
    invocations=(_invocation("Add 1+1.", env={"ANTHROPIC_MAX_RETRIES": "2"}),),
    check=check_retry,
    counterfactuals=(Counterfactual(
        "no-retries", "the client's retries are set to 0: the 529 cannot be retried",
        (RETRY,), lambda p: replace(p, invocations=(
            _invocation("Add 1+1.", env={"ANTHROPIC_MAX_RETRIES": "0"}),))),),
)

# ---- a stream cut short -------------------------------------------------------------------------

PARTIAL = "LP_CUT_PARTIAL"
WHOLE_JSON = ('{"id": "msg_lp_cut", "type": "message", "role": "assistant", '
              '"model": "claude-sonnet-4-5", "content": [{"type": "text", "text": "'
              + PARTIAL)


def check_cut(ev: Evidence, c: Checks) -> None:
    _started(ev, c)
    first = ev.request(RUN, 0, kind="main")
    c.reach("cut-sent", CUT, "the first reply was cut before its end (streamed: no "
            "message_stop; JSON: the body stops mid-way)",
            held=first.get("rule") in ("cut-stream", "cut-json"), absent=False,
            expected="rule cut-stream or cut-json",
            observed=f"rule {first.get('rule')}" if first else None,
            evidence=f"run {RUN}: the first request's rule")
    run = ev.run(RUN)
    result = (run.result if run else None) or {}
    success = result.get("subtype") == "success" and not result.get("is_error")
    c.that("not-truncated", CUT, "the loop does not end as a success on the cut reply: it "
           "sends the request again or ends with an error",
           passed=bool(result) and (not success or result.get("result") == "LP_STREAM_DONE"),
           expected="an error, or success with the re-sent request's answer LP_STREAM_DONE",
           observed={"subtype": result.get("subtype"), "is_error": result.get("is_error"),
                     "result": str(result.get("result"))[:120]} if result else None,
           evidence=f"run {RUN}: the result event")


def _cut_scenario(streamed: Message, body: Raw | Message) -> Scenario:
    return Scenario(name="loop-stream-cut", classifier="plain", rules=[
        Rule(id="cut-stream", match=Match(turn=1, attempt=1, stream=True), reply=streamed),
        Rule(id="cut-json", match=Match(turn=1, attempt=1, stream=False), reply=body),
        Rule(id="done", reply=text("LP_STREAM_DONE"))])


STREAM_PROBE = Probe(
    name="loop.stream-cut",
    title="A reply cut short: never taken as the whole answer",
    claims=(Claim(CUT, "A reply that ends before it is whole (a stream without message_stop, "
                       "a JSON body cut mid-way) is not taken as the model's answer: the loop "
                       "sends the request again or ends with an error.",
                  docs("Streaming Messages", "build-with-claude/streaming",
                       "Each stream uses the following event flow: … 4. A final "
                       "message_stop event."),
                  beyond_source="that a loop treats a stream or body without its end as "
                                "incomplete, never as an answer: the API's message shape "
                                "(the flow ends with message_stop) states when a reply is "
                                "whole"),),
    scenario=_cut_scenario(
        # a re-send without streaming (Claude Code's fallback) is a new request, answered by
        # the script's next rule, never this reply again (the mock's default for a fallback)
        Message(content=[TextBlock(text=PARTIAL + "_AND_THE_REST_NEVER_SENT", chunk_size=14)],
                truncate=EventCount(after_events=4), replay_to_fallback=False),
        Raw(raw=RawSpec(content_type="application/json", chunks=[RawChunk(data=WHOLE_JSON)],
                        disconnect=True))),
    invocations=(_invocation("Say something."),),
    check=check_cut,
    counterfactuals=(Counterfactual(
        "reply-whole", f"the first reply is a whole message whose text is {PARTIAL}: taking it "
                       "as the answer is right, so the check cannot pass",
        (CUT,), lambda p: replace(p, scenario=_cut_scenario(text(PARTIAL), text(PARTIAL)))),),
)

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

PROBES = (PARALLEL_PROBE, ERROR_PROBE, STEP_PROBE, RETRY_PROBE, STREAM_PROBE, THINKING_PROBE,
          PAUSE_PROBE)

REPORTS: tuple[ReportSpec, ...] = (
    ReportSpec(
        name=REPORT,
        title="Agent-loop conformance: what every loop owes the Messages API",
        probes=PROBES,
        summary="The obligations every agent loop has towards the Messages API, each cited "
                "from its documentation: tool results by id in one message, failing tools as "
                "is_error, the step limit, retries, cut replies, thinking blocks, pause_turn.",
    ),
)
