"""Replies that fail inside the loop: an overloaded error retried after its retry-after, and
a reply cut short never taken as the whole answer."""

from __future__ import annotations

from dataclasses import replace

from mockapi import Match, Message, Raw, Rule, Scenario, TextBlock, ToolUseBlock, api_error, text
from mockapi.script.replies import EventCount, RawChunk, RawSpec
from probes.catalog.agent_loop.common import (
    CUT,
    RETRY,
    RUN,
    _ended,
    _invocation,
    _requests,
    _started,
    docs,
)
from probes.core.checks import Checks
from probes.core.evidence import Evidence, messages
from probes.core.probe import Claim, Counterfactual, Probe

__all__ = ["PARTIAL", "RETRY_AFTER_S", "RETRY_ID", "RETRY_PROBE", "STREAM_PROBE", "WHOLE_JSON",
           "check_cut", "check_retry"]

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
