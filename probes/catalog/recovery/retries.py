"""Failed requests sent again: API errors retried after their retry-after, a broken stream
with the non-streaming fallback switched off, and the fallback model after overloads.

Retries and stalls are kept short with the client's own knobs (CLAUDE_CODE_MAX_RETRIES,
retry-after values of a second or two).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from mockapi import Match, Message, Rule, Scenario, TextBlock, ThinkingBlock, api_error, text, tool_use
from mockapi.script.replies import EventCount, StreamError, StreamStall
from probes.catalog.common import body_text, check_ended
from probes.catalog.premises import RETRIES_ENV
from probes.catalog.variants import answering, with_rules, with_runs
from probes.core.checks import Checks
from probes.core.evidence import Evidence
from probes.core.premises import Premise
from probes.core.probe import Claim, Counterfactual, Invocation, Probe
from probes.core.provenance import from_analysis, project_expectation

__all__ = ["ABANDONED", "BREAK_AFTER", "FALLBACK", "FALLBACK_PROBE", "NO_STREAM_FALLBACK",
           "NO_STREAM_FALLBACK_PROBE", "RETRIES", "RETRIES_PROBE", "RETRY_AFTER", "check_fallback",
           "check_no_stream_fallback", "check_retries"]


RETRIES = "probe.api-retry-backoff"
FALLBACK = "probe.fallback-model-switch"
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
    premises=(RETRIES_ENV,),
    revision=2,  # the final text where the result event's is empty
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
        first: Mapping[str, Any] = attempts[0] if attempts else {}
        # the mock broke the first attempt's stream as scripted: the mechanism was met
        c.reach(f"{run}.stream-broken", NO_STREAM_FALLBACK,
                "the run's first attempt was a streaming request, answered by the broken stream",
                held=first.get("stream") is True and first.get("rule") == f"{run}-broken"
                and first.get("reply_index") == 0,
                absent=False, expected={"stream": True, "rule": f"{run}-broken", "reply": 0},
                observed={"stream": first.get("stream"), "rule": first.get("rule"),
                          "reply": first.get("reply_index")} if first else None,
                evidence="journal: the run's first main request")
        c.equal(f"{run}.no-non-streaming-resend", NO_STREAM_FALLBACK,
                "no attempt is a non-streaming re-send", expected=[True] * len(attempts),
                observed=[r.get("stream") for r in attempts] if ev.run(run) else None,
                evidence="journal: stream flag of each attempt")


NO_STREAM_FALLBACK_PROBE = Probe(
    name="nonstreaming-fallback-disabled",
    revision=2,  # premises: a version lacking one is absent or not observable, never contradicted
    premises=(
        Premise("env", "CLAUDE_CODE_DISABLE_NONSTREAMING_FALLBACK", "feature",
                "disables the non-streaming re-send the claim is about"),
        RETRIES_ENV,
    ),
    title="CLAUDE_CODE_DISABLE_NONSTREAMING_FALLBACK: a stream broken by overloaded_error",
    claims=(Claim(NO_STREAM_FALLBACK,
                  "With CLAUDE_CODE_DISABLE_NONSTREAMING_FALLBACK=1, a stream broken by "
                  "overloaded_error (before or after its first content block) is never re-sent "
                  "as a non-streaming request.",
                  source=project_expectation(
                      "the documented meaning of the variable: 'Set to `1` to disable the "
                      "non-streaming fallback when a streaming request fails mid-stream. "
                      "Streaming errors propagate to the retry layer instead.' The docs do not "
                      "say whether the retry layer sends the turn again or surfaces the error, "
                      "so neither is expected; the variable was added in 2.1.83 (changelog: "
                      "'Added CLAUDE_CODE_DISABLE_NONSTREAMING_FALLBACK env var to disable the "
                      "non-streaming fallback when streaming fails')",
                      "Claude Code docs, environment variables: "
                      "https://code.claude.com/docs/en/env-vars; Claude Code changelog 2.1.83: "
                      "https://code.claude.com/docs/en/changelog")),),
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
                "started; any further attempt is answered RETRIED_OK.",
                "What the retry layer then does (a streamed retry, as 2.1.235 does before "
                "content, or the error surfaced, as it does after content) is recorded, not "
                "checked: the docs do not state it.",
                "Versions before 2.1.83 do not know the variable; a non-streaming re-send "
                "there is reported as contradicting the claim.",),
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

# an Opus primary, by its dated id: older clients switch only from an Opus model, and 2.0.77
# compares the id with its list as is (2.1.117 first strips the date)
PRIMARY, FALLBACK_MODEL = "claude-opus-4-5-20251101", "claude-haiku-4-5"
# the overloads that make "repeated overload" (the client switches after three in a row)
_OVERLOADS = 3


ABANDONED = "ABANDONED_PARTIAL"
# A complete, signed thinking block, then the connection drops: the client has the block, retries
# the stream, meets 529s and switches models. (A complete text or tool_use block before the
# break is not abandoned: the client keeps it as a finished, possibly incomplete response.)
_PARTIAL = ThinkingBlock(thinking=f"{ABANDONED} thinking", chunk_size=64)
_THROUGH_PARTIAL = 6  # message_start, ping, the block's start, thinking and signature deltas, stop


def check_fallback(ev: Evidence, c: Checks) -> None:
    requests = ev.requests("fallback")
    models = [r.get("model") for r in requests]
    overloads = [r for r in requests if r.get("rule") == "primary-overloaded"
                 and r.get("reply_index") == 1]
    record = ev.run("fallback")
    said = record.result.get("result") if record and record.result else None
    c.reach("primary-overloaded", FALLBACK,
            f"the primary model was overloaded repeatedly: at least {_OVERLOADS} of its "
            "requests answered 529 (or the client switched before that)",
            held=len(overloads) >= _OVERLOADS or FALLBACK_MODEL in models, absent=False,
            expected=f">= {_OVERLOADS} requests answered 529 overloaded_error",
            observed={"answered_529": len(overloads), "models": models,
                      "client_said": said if FALLBACK_MODEL not in models else None},
            evidence="journal: main requests answered by the primary-overloaded rule's 529; "
                     "run fallback: the result's text")
    c.that("switched-model", FALLBACK, "after repeated overload the client asks the fallback model",
           passed=FALLBACK_MODEL in models and models[0] == PRIMARY,
           expected=f"first {PRIMARY}, later {FALLBACK_MODEL}", observed=models,
           evidence="journal: model of each main request")
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
    premises=(
        Premise("flag", "--fallback-model", "feature", "names the fallback model"),
        RETRIES_ENV,
    ),
    revision=2,  # the final text where the result event's is empty
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
    boundaries=(f"The primary model is {PRIMARY}: older clients switch only from an Opus "
                "primary (the 529 path of 2.0.77 and 2.1.117 checks the model against a list "
                "of Opus ids, 2.0.77 without normalising it: static evidence of the installed "
                "clients), so a Sonnet primary never reached the switch there.",
                "2.0.77 re-sends the broken stream without streaming, and that re-send's "
                "retries carry no fallback model (static evidence of the installed client): "
                "the overloads it meets there cannot switch models, and no run evidence tells "
                "this apart from a client that ignores the flag, so it is reported as "
                "contradicting the claim.",
                f"The primary model first streams a complete thinking block ({ABANDONED}), "
                "pauses half a second and drops the connection, then answers every request "
                "with 529; the fallback model answers with a Read, then text, so a later "
                "request shows the kept history.",
                "A complete text or tool_use block before a mid-stream overloaded_error is not "
                "abandoned: 2.1.235 keeps it as a finished response ('… may be incomplete'), "
                "runs a tool in it, and switches models only on a later request."),
    counterfactuals=(
        # the overloads stay (the mechanism is reached); what is taken away is the switch
        Counterfactual(
            "no-fallback-model",
            "The run is given no --fallback-model: the primary model is overloaded as before, "
            "and there is no model to switch to.",
            (FALLBACK,),
            lambda p: with_runs(p, changes={"fallback": {"extra_args": ()}})),
    ),
)
