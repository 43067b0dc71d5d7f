"""Probes of the Anthropic SDK's tool runner (``client.beta.messages.tool_runner``), the default
catalog of the ``anthropic-tool-runner`` client kind.

The runner is given the driver's tools (``add``, ``fail``, ``read_file``; see
``probes.clients.tool_runner_driver``). Expectations come from the SDK's own source
(anthropics/anthropic-sdk-python, ``src/anthropic/lib/tools/_beta_runner.py``) and the
Messages API docs page "Message threads"; each claim cites its passage. Every check
compares with fixed ids and texts of the script, so a counterfactual in which the
behaviour cannot happen fails it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from mockapi import (
    ApiError,
    Match,
    Message,
    Raw,
    Rule,
    Scenario,
    ToolUseBlock,
    api_error,
    text,
)
from probes.catalog.common import check_ended
from probes.core.checks import Checks
from probes.core.evidence import Evidence, blocks_of_type, messages
from probes.core.probe import Claim, Counterfactual, Invocation, Probe, ReportSpec
from probes.core.provenance import project_expectation

__all__ = [
    "CALLS",
    "ERROR",
    "ERROR_PROBE",
    "FAIL_ID",
    "ITERATIONS",
    "ITERATIONS_PROBE",
    "LIMIT",
    "PAIRING",
    "PARALLEL",
    "PARALLEL_PROBE",
    "PROBES",
    "REPLAY",
    "REPORTS",
    "RETRY",
    "RETRY_ID",
    "RETRY_PROBE",
    "RUN",
    "RUNNER_SOURCE",
    "SDK_README",
    "THREADS_DOCS",
    "THREADS_PROBE",
    "THREAD_CONTINUE",
    "check_error",
    "check_iterations",
    "check_parallel",
    "check_retry",
    "check_threads",
]

SDK_README = ("anthropics/anthropic-sdk-python, README.md, “Retries” (anthropic 2.16.0 on "
              "PyPI)")
RUNNER_SOURCE = ("anthropics/anthropic-sdk-python, src/anthropic/lib/tools/_beta_runner.py "
                 "(anthropic 2.16.0)")
THREADS_DOCS = ("Messages API docs, “Message threads” "
                "(platform.claude.com/docs/en/build-with-claude/message-threads)")

PAIRING = "tool-runner.tool-result-pairing"
PARALLEL = "tool-runner.parallel-results-one-message"
ERROR = "tool-runner.tool-error-result"
ITERATIONS = "tool-runner.max-iterations"
THREAD_CONTINUE = "tool-runner.thread-continue"
RETRY = "tool-runner.retry-overloaded"
REPLAY = "tool-runner.thread-replay-after-404"

CALLS = ("toolu_tr_a", "toolu_tr_b")
RUN = "loop"


def _invocation(prompt: str, **fields: Any) -> Invocation:
    return Invocation(name=RUN, prompt=prompt, session="none", tools=None, timeout=60, **fields)


def _tool_results(record: Any) -> list[dict[str, Any]]:
    """The tool_result blocks of a request's last message (what the runner just sent)."""
    sent = messages(record)
    if not sent:
        return []
    return [b for _, b in blocks_of_type({"body": {"messages": sent[-1:]}}, "tool_result")]


def _text(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, list):
        return "".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return str(content or "")


# ---- parallel calls and pairing ------------------------------------------------------------

def check_parallel(ev: Evidence, c: Checks) -> None:
    second = ev.request(RUN, 1, kind=None)
    results = _tool_results(second) if second else []
    c.equal("results.ids", PAIRING,
            "the request after the tool_use reply answers each call with a tool_result "
            "carrying its id, and nothing else",
            expected=sorted(CALLS), observed=sorted(str(r.get("tool_use_id")) for r in results)
            if second else None, evidence=f"run {RUN}: the second request's last message")
    c.equal("results.ran", PAIRING, "each result is its tool's output (add: 2+3, 4+5)",
            expected={"toolu_tr_a": "5", "toolu_tr_b": "9"},
            observed={str(r.get("tool_use_id")): _text(r) for r in results} if second else None,
            evidence=f"run {RUN}: the tool_result contents")
    last = messages(second)[-1] if second and messages(second) else {}
    c.equal("results.one-message", PARALLEL,
            "both results travel in the one user message that follows the reply, in call order",
            expected={"role": "user", "tool_use_ids": list(CALLS)},
            observed={"role": last.get("role"),
                      "tool_use_ids": [str(r.get("tool_use_id")) for r in results]}
            if second else None, evidence=f"run {RUN}: the second request's last message")
    check_ended(c, PAIRING, ev, RUN, final_text="TR_PAIRED_DONE", prefix="result")


PARALLEL_PROBE = Probe(
    name="tool-runner.parallel-calls",
    revision=2,  # the final text where the result event's is empty
    title="Two tool calls in one reply: both run, both results go back in one message",
    claims=(
        Claim(PAIRING, "The runner runs every tool_use of a reply and answers each, in the "
                       "next request, with a tool_result carrying its id and the tool's output.",
              project_expectation(
                  "generate_tool_call_response: “Generate a MessageParam by calling tool "
                  "functions with any tool use blocks from the last message.”", RUNNER_SOURCE)),
        Claim(PARALLEL, "The results of one reply's calls go back together in one user "
                        "message, in the order of the calls.",
              project_expectation(
                  "the same method builds one MessageParam (one message) from all the tool use "
                  "blocks of the last message, one result per block in their order",
                  RUNNER_SOURCE)),
    ),
    scenario=Scenario(name="tool-runner-parallel", classifier="plain", rules=[
        Rule(id="two-calls", match=Match(turn=1), reply=Message(content=[
            ToolUseBlock(id=CALLS[0], name="add", input={"a": 2, "b": 3}),
            ToolUseBlock(id=CALLS[1], name="add", input={"a": 4, "b": 5})])),
        Rule(id="done", match=Match(tool_result_for=CALLS[0]), reply=text("TR_PAIRED_DONE")),
    ]),
    invocations=(_invocation("Add 2+3 and 4+5."),),
    check=check_parallel,
    requires=("tool_runner",),
    counterfactuals=(Counterfactual(
        "one-call", "the reply has one tool_use only: no second result can travel, so the "
                    "expected pair of results cannot appear",
        (PAIRING, PARALLEL),
        lambda p: replace(p, scenario=Scenario(name="tool-runner-parallel-one-call",
                                               classifier="plain", rules=[
            Rule(id="one-call", match=Match(turn=1),
                 reply=Message(content=[ToolUseBlock(id=CALLS[0], name="add",
                                                     input={"a": 2, "b": 3})])),
            Rule(id="done", match=Match(tool_result_for=CALLS[0]),
                 reply=text("TR_PAIRED_DONE"))]))),),
)

# ---- a failing tool --------------------------------------------------------------------------

FAIL_ID = "toolu_tr_fail"


def check_error(ev: Evidence, c: Checks) -> None:
    second = ev.request(RUN, 1, kind=None)
    found = [r for r in _tool_results(second) if r.get("tool_use_id") == FAIL_ID] \
        if second else []
    result = found[0] if found else {}
    c.that("error.result", ERROR, "the call gets a tool_result with is_error: true naming the "
           "error", passed=result.get("is_error") is True and "TR_BOOM" in _text(result),
           expected={"tool_use_id": FAIL_ID, "is_error": True, "content": "contains TR_BOOM"},
           observed={"tool_use_id": result.get("tool_use_id"), "is_error":
                     result.get("is_error"), "content": _text(result)[:160]}
           if result else "no tool_result for the call",
           evidence=f"run {RUN}: the second request's last message")
    check_ended(c, ERROR, ev, RUN, final_text="TR_ERROR_DONE", prefix="result")


ERROR_PROBE = Probe(
    name="tool-runner.tool-error",
    revision=2,  # the final text where the result event's is empty
    title="A tool that raises: an error result, and the loop goes on",
    claims=(Claim(ERROR, "A tool that raises gives a tool_result with is_error: true carrying "
                         "the error, and the loop goes on to the model's next answer.",
                  project_expectation(
                      "_run_tool: an exception from the tool is caught and returned as a "
                      "tool_result with “is_error”: True and the error as its content",
                      RUNNER_SOURCE)),),
    scenario=Scenario(name="tool-runner-error", classifier="plain", rules=[
        Rule(id="fail", match=Match(turn=1), reply=Message(content=[
            ToolUseBlock(id=FAIL_ID, name="fail", input={"reason": "TR_BOOM"})])),
        Rule(id="done", match=Match(tool_result_for=FAIL_ID), reply=text("TR_ERROR_DONE")),
    ]),
    invocations=(_invocation("Call the failing tool."),),
    check=check_error,
    requires=("tool_runner",),
    counterfactuals=(Counterfactual(
        "tool-succeeds", "the call goes to add, which cannot raise: no error result can appear",
        (ERROR,),
        lambda p: replace(p, scenario=Scenario(name="tool-runner-error-succeeds",
                                               classifier="plain", rules=[
            Rule(id="add", match=Match(turn=1), reply=Message(content=[
                ToolUseBlock(id=FAIL_ID, name="add", input={"a": 1, "b": 1})])),
            Rule(id="done", match=Match(tool_result_for=FAIL_ID),
                 reply=text("TR_ERROR_DONE"))]))),),
)

# ---- the iteration limit -----------------------------------------------------------------------

LIMIT = 3


def check_iterations(ev: Evidence, c: Checks) -> None:
    requests = ev.requests(RUN, kind=None)
    c.equal("requests", ITERATIONS, f"with max_iterations={LIMIT} the runner asks for "
            f"{LIMIT} replies, although each asks for another tool call",
            expected=LIMIT, observed=len(requests), evidence=f"run {RUN}: the journal")
    run = ev.run(RUN)
    c.equal("exit", ITERATIONS, "the runner stops without an error",
            expected=0, observed=run.exit_code if run else None,
            evidence=f"run {RUN}: exit status")


def _calls(count: int) -> list[Message | ApiError | Raw]:
    return [Message(content=[ToolUseBlock(id=f"toolu_tr_iter_{i}", name="add",
                                          input={"a": i, "b": i})]) for i in range(count)]


ITERATIONS_PROBE = Probe(
    name="tool-runner.max-iterations",
    title="The iteration limit: the runner stops after max_iterations replies",
    claims=(Claim(ITERATIONS, f"With max_iterations N the runner asks for at most N replies "
                              f"and stops, even when the last one calls a tool (N={LIMIT}).",
                  project_expectation("max_iterations: “How many replies the loop asks for at "
                                      "most. There is no limit by default.”", RUNNER_SOURCE)),),
    scenario=Scenario(name="tool-runner-iterations", classifier="plain", rules=[
        Rule(id="calls", replies=_calls(5)),
        Rule(id="done", reply=text("TR_ITER_DONE")),
    ]),
    invocations=(_invocation("Keep adding.", max_turns=LIMIT),),
    check=check_iterations,
    requires=("tool_runner",),
    counterfactuals=(Counterfactual(
        "no-limit", "no max_iterations: the runner follows the script's five calls and its "
                    "answer (six replies), so it cannot stop at three",
        (ITERATIONS,),
        lambda p: replace(p, invocations=(_invocation("Keep adding."),))),),
)

# ---- message threads -----------------------------------------------------------------------------


def _sent(record: Any) -> dict[str, Any]:
    body = record.get("body") or {}
    return {"thread": body.get("thread"), "messages": len(body.get("messages") or []),
            "system": "system" in body, "tools": "tools" in body}


def check_threads(ev: Evidence, c: Checks) -> None:
    requests = ev.requests(RUN, kind=None)
    first_id = "msg_loopprobe_000001"
    second = _sent(requests[1]) if len(requests) > 1 else None
    c.equal("continue.sent", THREAD_CONTINUE,
            "the second request continues the thread from the first reply, sending only the "
            "new message and neither system nor tools",
            expected={"thread": {"type": "continue", "previous_message_id": first_id},
                      "messages": 1, "system": False, "tools": False},
            observed=second, evidence=f"run {RUN}: the second request's body as sent")
    refused = requests[2]["outcome"] if len(requests) > 2 else None
    c.equal("replay.after", REPLAY, "the third request is refused 404 thread_not_found (the "
            "script ended the thread)", expected="thread_not_found", observed=refused,
            evidence=f"run {RUN}: the third request's outcome")
    replay = _sent(requests[3]) if len(requests) > 3 else None
    c.equal("replay.sent", REPLAY, "the runner then sends the whole conversation (5 messages) "
            "with system and tools under a new thread create",
            expected={"thread": {"type": "create"}, "messages": 5, "system": True,
                      "tools": True},
            observed=replay, evidence=f"run {RUN}: the fourth request's body as sent")
    check_ended(c, REPLAY, ev, RUN, final_text="TR_THREAD_DONE", prefix="result")


THREADS_PROBE = Probe(
    name="tool-runner.threads",
    revision=2,  # the final text where the result event's is empty
    title="Message threads: continue with only the new messages, replay after a 404",
    claims=(
        Claim(THREAD_CONTINUE, "The runner continues a message thread: each later request "
                               "names the previous reply and sends only the new messages, "
                               "without system or tools.",
              project_expectation(
                  "“Continue. Send only the messages since the previous response, and add "
                  "\"thread\": {\"type\": \"continue\", \"previous_message_id\": …}. Leave "
                  "system and tools out of the request.”", THREADS_DOCS)),
        Claim(REPLAY, "When a continue gets 404 thread_not_found, the runner sends the whole "
                      "conversation again under a new thread and the loop goes on.",
              project_expectation(
                  "ThreadNotFoundError: “Replay the full conversation with thread: "
                  "{\"type\": \"create\"} to start a new Thread.”",
                  "anthropics/anthropic-sdk-python, src/anthropic/types/"
                  "thread_not_found_error.py (anthropic 2.16.0), and " + THREADS_DOCS)),
    ),
    scenario=Scenario(name="tool-runner-threads", classifier="plain", rules=[
        Rule(id="first", match=Match(turn=1), reply=Message(content=[
            ToolUseBlock(id="toolu_tr_t1", name="add", input={"a": 1, "b": 2})])),
        Rule(id="second", match=Match(tool_result_for="toolu_tr_t1"), reply=Message(
            content=[ToolUseBlock(id="toolu_tr_t2", name="add", input={"a": 3, "b": 4})],
            expire_thread=True)),
        Rule(id="done", match=Match(tool_result_for="toolu_tr_t2"),
             reply=text("TR_THREAD_DONE")),
    ]),
    invocations=(_invocation("Add 1+2, then 3+4."),),
    check=check_threads,
    requires=("tool_runner", "threads"),
    counterfactuals=(Counterfactual(
        "threads-off", "the runner is made with thread=False: no request can continue a "
                       "thread, so none can be refused as not found or replayed",
        (THREAD_CONTINUE, REPLAY),
        lambda p: replace(p, invocations=(_invocation("Add 1+2, then 3+4.",
                                                      settings={"thread": False}),))),),
)

# ---- retries ------------------------------------------------------------------------------------

RETRY_ID = "toolu_tr_retry"


def check_retry(ev: Evidence, c: Checks) -> None:
    requests = ev.requests(RUN, kind=None)
    c.equal("statuses", RETRY, "the request after the tool call is answered 529, sent again "
            "after the retry-after delay and answered", expected=[200, 529, 200],
            observed=[r.get("status") for r in requests], evidence=f"run {RUN}: the journal")
    same = len(requests) == 3 and requests[1].get("body") == requests[2].get("body")
    c.that("same-request", RETRY, "the retry is the same request, not a new turn",
           passed=same, expected="the 2nd and 3rd request bodies are equal",
           observed="equal" if same else f"{len(requests)} requests, bodies differ",
           evidence=f"run {RUN}: the second and third request bodies")
    check_ended(c, RETRY, ev, RUN, final_text="TR_RETRY_DONE", prefix="result")


RETRY_PROBE = Probe(
    name="tool-runner.retry",
    revision=2,  # the final text where the result event's is empty
    title="An overloaded reply inside the loop: the request is retried, the loop goes on",
    claims=(Claim(RETRY, "A 529 overloaded_error with retry-after inside the loop is retried "
                         "(the same request, once the delay passed) and the loop goes on, with "
                         "the client's max_retries above zero.",
                  project_expectation(
                      "“Certain errors are automatically retried 2 times by default … 429 Rate "
                      "Limit, and >=500 Internal errors are all retried by default”; the "
                      "driver sets max_retries from the invocation (2 here)", SDK_README)),),
    scenario=Scenario(name="tool-runner-retry", classifier="plain", rules=[
        Rule(id="call", match=Match(turn=1), reply=Message(content=[
            ToolUseBlock(id=RETRY_ID, name="add", input={"a": 1, "b": 1})])),
        Rule(id="overloaded", match=Match(tool_result_for=RETRY_ID, attempt=1),
             reply=api_error(529, "Overloaded", headers={"retry-after-ms": "10"})),
        Rule(id="done", match=Match(tool_result_for=RETRY_ID), reply=text("TR_RETRY_DONE")),
    ]),
    invocations=(_invocation("Add 1+1.", env={"ANTHROPIC_MAX_RETRIES": "2"}),),
    check=check_retry,
    requires=("tool_runner",),
    counterfactuals=(Counterfactual(
        "no-retries", "the client is made with max_retries=0: the 529 cannot be retried",
        (RETRY,),
        lambda p: replace(p, invocations=(_invocation("Add 1+1.",
                                                      env={"ANTHROPIC_MAX_RETRIES": "0"}),))),),
)

PROBES = (PARALLEL_PROBE, ERROR_PROBE, ITERATIONS_PROBE, THREADS_PROBE, RETRY_PROBE)

REPORTS: tuple[ReportSpec, ...] = (
    ReportSpec(
        name="tool-runner-loop",
        title="The SDK tool runner's loop: parallel calls, errors, the iteration limit, threads, "
              "retries",
        probes=PROBES,
        summary="The Anthropic SDK's tool runner against the scripted model: what it sends "
                "back after each tool call, when it stops, and how it keeps a thread.",
    ),
)
