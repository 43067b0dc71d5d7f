"""The loop ends itself when going on cannot help: the context past the blocking line (with
compaction off), structured output still invalid after its retries.
"""

from __future__ import annotations

from mockapi import Match, Rule, Scenario, api_error, text, tool_use
from mockapi.script.replies import Usage
from probes.catalog.common import check_terminal, result_of
from probes.catalog.variants import answering, with_rules
from probes.core.checks import Checks
from probes.core.evidence import Evidence, blocks_of_type
from probes.core.premises import Premise
from probes.core.probe import Claim, Counterfactual, Invocation, Probe
from probes.core.provenance import from_analysis

__all__ = ["BLOCKING", "BLOCKING_PROBE", "STRUCTURED", "STRUCTURED_PROBE", "STRUCTURED_SCHEMA",
           "check_blocking", "check_structured"]


BLOCKING = "probe.blocking-limit-terminal"


def check_blocking(ev: Evidence, c: Checks) -> None:
    c.equal("requests", BLOCKING, "the request known to be too large is never sent",
            expected=1, observed=len(ev.requests("blocked")), evidence="journal: main requests")
    check_terminal(c, BLOCKING, ev, "blocked", "blocking_limit")
    c.equal("is-error", BLOCKING, "the run ends as an error", expected=True,
            observed=result_of(ev, "blocked").get("is_error"), evidence="run blocked: result")


def _small_context(p: Probe) -> Probe:
    return with_rules(p, [answering(
        p, "huge-turn", tool_use("Read", {"file_path": "{workspace}/blocking.txt"}))])


BLOCKING_PROBE = Probe(
    name="blocking-limit",
    premises=(
        Premise("env", "CLAUDE_CODE_AUTO_COMPACT_WINDOW", "instrument",
                "sets the context window the blocking line is taken from"),
        Premise("env", "DISABLE_AUTO_COMPACT", "instrument",
                "keeps the automatic compaction from moving the context below the line"),
    ),
    title="Past the blocking line with compaction off, the loop stops before the next call",
    claims=(Claim(BLOCKING, "When the context is already past the blocking line before a "
                            "model call and no compaction succeeded, the loop ends with "
                            "blocking_limit instead of sending a request known to be too "
                            "large.",
                  source=from_analysis(
                      "3. 每次模型调用前都检查上下文治理",
                      "如果在调用前已经达到 blocked line 且本轮没有成功 compact,则返"
                      "回 blocking_limit,不会继续发送一个已知超限的请求。", 159)),),
    scenario=Scenario(name="blocking-limit", rules=[
        Rule(id="huge-turn", match=Match(last_user_text_contains="BLOCKING_PROMPT"),
             reply=tool_use("Read", {"file_path": "{workspace}/blocking.txt"},
                            usage=Usage(input_tokens=190000))),
        # "no compaction succeeded" holds by construction: a client that compacts although
        # DISABLE_AUTO_COMPACT is set (2.0.53-2.0.76 do, at the blocking line) is refused
        # (400, not retried) instead of left without a scripted answer
        Rule(id="compaction-fails", match=Match(kind="compaction"),
             reply=api_error(400, "Scripted: this compaction fails",
                             type="invalid_request_error"), repeat="always"),
        Rule(id="after", match=Match(), reply=text("SHOULD_NOT_BE_ASKED"), repeat="always"),
    ]),
    fixtures={"blocking.txt": "BLOCKING\n"},
    invocations=(Invocation("blocked", "BLOCKING_PROMPT",
                            env={"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "100000",
                                 "DISABLE_AUTO_COMPACT": "1"}),),
    check=check_blocking,
    boundaries=("The context size is the scripted usage (190000 input tokens) against a "
                "100000 window; automatic compaction is switched off with DISABLE_AUTO_COMPACT, "
                "and a compaction the client tries all the same is answered with a 400 error, "
                "so none succeeds.",),
    revision=3,  # premises: a version lacking one is absent or not observable, never contradicted
    counterfactuals=(
        Counterfactual(
            "small-context",
            "The large turn reports 100 input tokens instead of 190000, so the context is far "
            "below the blocking line and the next request is sent.",
            (BLOCKING,),
            _small_context),
    ),
)

STRUCTURED = "probe.structured-output-retry-exhausted"
STRUCTURED_SCHEMA = '{"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"]}'


def check_structured(ev: Evidence, c: Checks) -> None:
    requests = ev.requests("structured")
    results = [[b.get("is_error") for _, b in blocks_of_type(r, "tool_result")][-1:]
               for r in requests[1:]]
    c.that("retried", STRUCTURED,
           "each invalid StructuredOutput call is answered with an error result and the "
           "model is asked again, more than once",
           passed=len(requests) > 2 and all(r == [True] for r in results),
           expected="3 or more requests, each after the first carrying an error tool_result",
           observed={"requests": len(requests), "last_tool_result_is_error": results},
           evidence="journal: main requests")
    check_terminal(c, STRUCTURED, ev, "structured", "structured_output_retry_exhausted")
    result = result_of(ev, "structured")
    c.equal("is-error", STRUCTURED, "the run ends as an error", expected=True,
            observed=result.get("is_error"), evidence="run structured: result")
    run = ev.run("structured")
    c.that("exit-nonzero", STRUCTURED, "the process exits with a failure status",
           passed=run is not None and run.exit_code not in (0, None),
           expected="a nonzero exit status", observed=run.exit_code if run else None,
           evidence="run structured: exit status")


STRUCTURED_PROBE = Probe(
    name="structured-output-retry-exhausted",
    revision=2,  # premises: a version lacking one is absent or not observable, never contradicted
    premises=(
        Premise("flag", "--json-schema", "feature", "asks for output of the given schema"),
        Premise("tool", "StructuredOutput", "feature",
                "the tool the model answers the schema with"),
    ),
    title="--json-schema: a model that keeps giving invalid structured output ends the loop",
    claims=(Claim(STRUCTURED, "With --json-schema, a model whose every StructuredOutput call "
                              "fails the schema is told so and asked again until the client "
                              "gives up: the loop ends with terminal reason "
                              "structured_output_retry_exhausted, an error.",
                  source=from_analysis("终止状态字典",
                                       "structured_output_retry_exhausted |\n结构化输出修复耗尽 | "
                                       "是 |", 379),
                  beyond_source="The analysis names the reason and counts it as an error; "
                                "that invalid calls are answered with error results and "
                                "retried is what 'repair exhausted' implies. The number of "
                                "attempts is not claimed."),),
    scenario=Scenario(name="structured-output-retry-exhausted", rules=[
        Rule(id="invalid-output", match=Match(last_user_text_contains="STRUCTURED_PROMPT"),
             reply=tool_use("StructuredOutput", {"not_the_answer": 1}), repeat="always"),
        Rule(id="invalid-again", match=Match(), reply=tool_use("StructuredOutput",
                                                               {"not_the_answer": 1}),
             repeat="always"),
    ]),
    invocations=(Invocation("structured", "STRUCTURED_PROMPT",
                            extra_args=("--json-schema", STRUCTURED_SCHEMA)),),
    check=check_structured,
    fingerprinted=False,
    boundaries=("The schema asks for one string field; every call gives another field.",),
    counterfactuals=(Counterfactual(
        "valid-second-time",
        "The model's second StructuredOutput call fits the schema: nothing is exhausted.",
        (STRUCTURED,),
        lambda p: with_rules(p, [answering(p, "invalid-again", tool_use(
            "StructuredOutput", {"answer": "VALID"}))])),),
)
