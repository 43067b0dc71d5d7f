"""Recovery paths: max_tokens continuation, malformed tool use, thinking-only answers,
prompt-too-long compaction, auto-compaction, API retries and the fallback model.

Retries and stalls are kept short with the client's own knobs
(CLAUDE_CODE_MAX_RETRIES, retry-after values of a second or two).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mockapi import (
    Match,
    Message,
    Rule,
    Scenario,
    TextBlock,
    ThinkingBlock,
    api_error,
    prompt_too_long,
    text,
    tool_use,
)
from mockapi.replies import StreamError, Usage
from probes.catalog.common import body_text, check_ended, check_terminal, last_user_locations, result_of
from probes.checks import Checks
from probes.evidence import Evidence, messages
from probes.model import Claim, Hooks, Invocation, Probe

__all__ = ["AUTO_COMPACT", "AUTO_COMPACT_PROBE", "FALLBACK", "FALLBACK_PROBE", "FILLER_FILE", "GROUPS",
           "MALFORMED", "MALFORMED_PROBE", "MAX_TOKENS", "MAX_TOKENS_PROBE", "PROBES", "PTL_FAIL_PROBE",
           "PTL_PROBE", "PTL_RECOVERED", "PTL_SURFACED", "RETRIES", "RETRIES_PROBE", "RETRY_AFTER",
           "SUMMARY", "THINKING", "THINKING_PROBE", "check_auto_compact", "check_fallback",
           "check_malformed", "check_max_tokens", "check_ptl_recovered", "check_ptl_surfaced",
           "check_retries", "check_thinking"]

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
                              "error is surfaced."),),
    scenario=Scenario(name="max-tokens-recovery", rules=[
        Rule(id="always-truncated", match=Match(),
             reply=text("PARTIAL_ANSWER_", stop_reason="max_tokens"), repeat="always"),
    ]),
    invocations=(Invocation("max-tokens", "MAX_TOKENS_PROMPT"),),
    check=check_max_tokens,
    boundaries=("Every answer is truncated; a recovery that succeeds is not shown here.",
                "The incomplete-thinking resumption path is behind a server-side gate."),
)


# ---- malformed tool use -----------------------------------------------------------------

def check_malformed(ev: Evidence, c: Checks) -> None:
    c.equal("request-count", MALFORMED, "one retry after the malformed answer",
            expected=2, observed=len(ev.requests("malformed")), evidence="journal: main requests")
    check_terminal(c, MALFORMED, ev, "malformed", "malformed_tool_use_exhausted")
    c.equal("is-error", MALFORMED, "the exhausted retry is an error",
            expected=True, observed=result_of(ev, "malformed").get("is_error"),
            evidence="run malformed: result.is_error")
    c.equal("no-tool-ran", MALFORMED, "no tool ran", expected=0,
            observed=len(ev.hooks("PreToolUse")), evidence="hook log PreToolUse")


MALFORMED_PROBE = Probe(
    name="malformed-tool-use",
    title="stop_reason tool_use without a tool_use block: one retry, then exhausted",
    claims=(Claim(MALFORMED, "A response with stop_reason tool_use but no complete tool_use "
                             "block is retried once; a second such response ends the loop "
                             "with malformed_tool_use_exhausted; no tool runs."),),
    scenario=Scenario(name="malformed-tool-use", rules=[
        Rule(id="no-block", match=Match(), repeat="always",
             reply=text("NO_TOOL_BLOCK_HERE", stop_reason="tool_use")),
    ]),
    hooks=Hooks(),
    invocations=(Invocation("malformed", "MALFORMED_PROMPT"),),
    check=check_malformed,
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
                            "answer is accepted (success)."),),
    scenario=Scenario(name="thinking-only-nudge", rules=[
        Rule(id="thinking-only", match=Match(), repeat="always",
             reply=Message(content=[ThinkingBlock(thinking="THINKING_WITHOUT_ANSWER")])),
    ]),
    invocations=(Invocation("thinking", "THINKING_ONLY_PROMPT"),),
    check=check_thinking,
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


GROUPS = 4  # the client refuses to compact a history of too few message groups

# ---- prompt too long ---------------------------------------------------------------------

SUMMARY = "<summary>PTL_SUMMARY_MARKER</summary>"


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
    record = ev.run("ptl")
    printed = record.stdout if record else ""
    c.absent("error-not-surfaced", PTL_RECOVERED,
             "the prompt-too-long error never reaches the output", needle="prompt is too long",
             haystack=printed if record else None, evidence="run ptl: stdout")
    check_ended(c, PTL_RECOVERED, ev, "ptl", final_text="PTL_RECOVERED", prefix="result")


PTL_PROBE = Probe(
    name="prompt-too-long-recovered",
    title="400 prompt-too-long: reactive compaction and a retry; the error is not surfaced",
    claims=(Claim(PTL_RECOVERED, "A 400 'prompt is too long' makes the client compact "
                                 "reactively (compact_boundary trigger auto) and retry the "
                                 "turn; when that succeeds the error is not surfaced."),),
    scenario=Scenario(name="prompt-too-long-recovered", rules=[
        Rule(id="summary", match=Match(kind="compaction"), reply=text(SUMMARY)),
        Rule(id="turns", match=Match(),
             replies=[*_reads("ptl", GROUPS), prompt_too_long(), text("PTL_RECOVERED")]),
    ]),
    fixtures={f"ptl{i}.txt": FILLER_FILE for i in range(1, GROUPS + 1)},
    invocations=(Invocation("ptl", "PTL_PROMPT"),),
    check=check_ptl_recovered,
)


def check_ptl_surfaced(ev: Evidence, c: Checks) -> None:
    check_terminal(c, PTL_SURFACED, ev, "ptl-fails", "prompt_too_long")
    c.equal("is-error", PTL_SURFACED, "the error is surfaced",
            expected=True, observed=result_of(ev, "ptl-fails").get("is_error"),
            evidence="run ptl-fails: result.is_error")
    c.contains("error-text", PTL_SURFACED, "the result carries the prompt-too-long error",
               needle="too long", haystack=str(result_of(ev, "ptl-fails").get("result", ""))
               if ev.run("ptl-fails") else None, evidence="run ptl-fails: result.result")


PTL_FAIL_PROBE = Probe(
    name="prompt-too-long-surfaced",
    title="400 prompt-too-long when compaction cannot help: the error is surfaced",
    claims=(Claim(PTL_SURFACED, "When reactive compaction fails, the prompt-too-long error is "
                                "surfaced with terminal reason prompt_too_long."),),
    scenario=Scenario(name="prompt-too-long-surfaced", rules=[
        Rule(id="always-too-long", match=Match(kind=["main", "compaction"]),
             reply=prompt_too_long(), repeat="always"),
    ]),
    invocations=(Invocation("ptl-fails", "PTL_FAIL_PROMPT"),),
    check=check_ptl_surfaced,
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
                                "compaction (trigger auto) before the next model request."),),
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
                f"The history holds {GROUPS} tool turns: with fewer the client's compaction "
                "gives up (compact_error too_few_groups), which is a gate of its own."),
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
    c.equal("api-retry-events", RETRIES, "each retry is announced with an api_retry event",
            expected=3, observed=len(retries), evidence="run retries: stream-json system/api_retry")
    c.equal("streamed-retries", RETRIES, "every retry is again a streaming request",
            expected=[True] * 4, observed=[r.get("stream") for r in attempts],
            evidence="journal: stream flag of each attempt (false = non-streaming fallback)")
    gap = (attempts[1]["time"] - attempts[0]["time"]) if len(attempts) > 1 else None
    c.that("retry-after-honoured", RETRIES,
           f"the retry after the 529 with retry-after: {RETRY_AFTER} waits at least that long",
           passed=gap is not None and gap >= RETRY_AFTER,
           expected=f">= {RETRY_AFTER}s between attempt 1 and 2",
           observed=None if gap is None else (f">= {RETRY_AFTER}s" if gap >= RETRY_AFTER
                                              else f"< {RETRY_AFTER}s"),
           evidence="journal: arrival times of attempts 1 and 2")
    check_ended(c, RETRIES, ev, "retries", final_text="RETRIED_OK", prefix="result")


RETRIES_PROBE = Probe(
    name="api-retries",
    title="HTTP 529/500 and a mid-stream overloaded error are retried with api_retry events",
    claims=(Claim(RETRIES, "529 overloaded, 500 and a mid-stream overloaded_error are retried "
                           "(each retry announced by an api_retry event), honouring a "
                           "retry-after longer than the backoff; the turn then succeeds."),),
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
)


# ---- fallback model -------------------------------------------------------------------------

PRIMARY, FALLBACK_MODEL = "claude-sonnet-4-5", "claude-haiku-4-5"


def check_fallback(ev: Evidence, c: Checks) -> None:
    requests = ev.requests("fallback")
    models = [r.get("model") for r in requests]
    c.that("switched-model", FALLBACK, "after repeated overload the client asks the fallback model",
           passed=FALLBACK_MODEL in models and models[0] == PRIMARY,
           expected=f"first {PRIMARY}, later {FALLBACK_MODEL}", observed=models,
           evidence="journal: model of each main request")
    switched: Mapping[str, Any] = next(
        (r for r in requests if r.get("model") == FALLBACK_MODEL), {})
    c.absent("abandoned-not-reused", FALLBACK,
             "the abandoned partial response is not part of the fallback request",
             needle="ABANDONED_PARTIAL", haystack=body_text(switched) if switched else None,
             evidence="first request to the fallback model")
    check_ended(c, FALLBACK, ev, "fallback", final_text="FALLBACK_OK", prefix="result")


FALLBACK_PROBE = Probe(
    name="fallback-model",
    title="--fallback-model takes over after repeated overload; the abandoned response is dropped",
    claims=(Claim(FALLBACK, "With --fallback-model, repeated overload of the primary model "
                            "switches the turn to the fallback model; the abandoned partial "
                            "response is not reused."),),
    scenario=Scenario(name="fallback-model", rules=[
        Rule(id="fallback-answers", match=Match(model=FALLBACK_MODEL), reply=text("FALLBACK_OK")),
        Rule(id="primary-overloaded", match=Match(model=PRIMARY), repeat="always", replies=[
            Message(content=[TextBlock(text="ABANDONED_PARTIAL")],
                    stream_error=StreamError(after_events=4), replay_to_fallback=False),
            api_error(529, "Overloaded", type="overloaded_error"),
        ]),
    ]),
    invocations=(Invocation("fallback", "FALLBACK_PROMPT", model=PRIMARY,
                            extra_args=("--fallback-model", FALLBACK_MODEL),
                            env={"CLAUDE_CODE_MAX_RETRIES": "4"}),),
    check=check_fallback,
    requires=("fallback_model",),
    boundaries=("The primary model first streams a partial text (ABANDONED_PARTIAL) and breaks "
                "with overloaded_error, then answers every request with 529.",),
)

PROBES = (MAX_TOKENS_PROBE, MALFORMED_PROBE, THINKING_PROBE, PTL_PROBE, PTL_FAIL_PROBE,
          AUTO_COMPACT_PROBE, RETRIES_PROBE, FALLBACK_PROBE)
