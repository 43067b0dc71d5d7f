"""The limits a caller sets: the Stop-hook block cap, what --max-turns counts, the budget.
"""

from __future__ import annotations

from mockapi import Match, Message, Rule, Scenario, ToolUseBlock, api_error, text, tool_use
from mockapi.script.replies import Usage
from probes.catalog.common import check_ended, check_mentioned, check_terminal, result_of
from probes.catalog.premises import RETRIES_ENV
from probes.catalog.variants import answering, recording_hooks, with_rules, with_runs
from probes.core.checks import Checks
from probes.core.evidence import Evidence
from probes.core.premises import Premise
from probes.core.probe import Claim, Counterfactual, Hooks, Invocation, Probe
from probes.core.provenance import from_analysis

__all__ = ["BUDGET", "BUDGET_PROBE", "CAP", "CAP_PROBE", "CAP_WARNING", "TURNS", "TURNS_PROBE",
           "TURN_RUNS", "check_budget", "check_cap", "check_turns"]


CAP = "probe.stop-hook-block-cap"
TURNS = "probe.max-turns-counts-model-turns"
BUDGET = "probe.max-budget-usd"

def _post_tool_uses(ev: Evidence, run: str) -> int:
    record = ev.run(run)
    session = record.session_id if record else None
    return sum(1 for h in ev.hooks("PostToolUse") if (h.get("input") or {}).get("session_id") == session)


# ---- Stop hook block cap -------------------------------------------------------------

CAP_WARNING = "overriding"

def check_cap(ev: Evidence, c: Checks) -> None:
    # a version without the cap ignores the variable silently and honours every block, as
    # one with a cap that failed would: only its files tell them apart
    check_mentioned(c, CAP, ev, "CLAUDE_CODE_STOP_HOOK_BLOCK_CAP",
                    "the variable that sets the Stop-hook block cap")
    for run, cap in (("cap-3", 3), ("cap-default", 8)):
        record = ev.run(run)
        session = record.session_id if record else None
        calls = [h for h in ev.hooks("Stop") if (h.get("input") or {}).get("session_id") == session]
        c.equal(f"{run}.requests", CAP,
                f"with a cap of {cap}, {cap} blocks are honoured: {cap + 1} model requests",
                expected=cap + 1, observed=len(ev.requests(run)), evidence="journal: main requests")
        c.equal(f"{run}.hook-calls", CAP,
                f"the hook is asked {cap + 1} times; the last block is overridden",
                expected=cap + 1, observed=len(calls), evidence="hook log: Stop calls of the run")
        # the feedback messages mention the Stop hook too; the override's own wording is
        # "A hook blocked the turn from ending N consecutive times — overriding and ending turn."
        # 2.1.235 emits it as a system informational message, which print mode never prints;
        # its --debug log (--debug-file, CLAUDE_CODE_DEBUG_LOGS_DIR) and
        # CLAUDE_CODE_DIAGNOSTICS_FILE do not carry it either
        seen = ((record.stdout + record.stderr) if record else "") + "".join(
            ev.session_files.values())
        c.visible(f"{run}.warning", CAP, "the override is reported as a warning",
                  seen=CAP_WARNING in seen, expected=f"a warning containing {CAP_WARNING!r}",
                  looked_in=f"run {run}: stream-json events on stdout, stderr, the session "
                            "transcripts",
                  hidden_because="print mode does not print the client's system informational "
                                 "messages, the kind of message the warning is")
        check_terminal(c, CAP, ev, run, "completed")


CAP_PROBE = Probe(
    name="stop-hook-block-cap",
    premises=(
        Premise("hook_input", "session_id", "instrument",
                "tells the Stop hook calls of each run apart", event="Stop", static=False),
    ),
    title="A Stop hook that always blocks is overridden at the cap",
    claims=(Claim(CAP, "Consecutive Stop-hook blocks are capped (8 by default, "
                       "CLAUDE_CODE_STOP_HOOK_BLOCK_CAP to change it): past the cap the client "
                       "overrides the hook and ends the loop (completed) with a warning.",
                  source=from_analysis(
                      "Stop hook 为什么会让模型再次运行",
                      "CLAUDE_CODE_STOP_HOOK_BLOCK_CAP默认是 8,连续超过时客户端覆盖 "
                      "hook 并以 warning 结束。", 288)),),
    scenario=Scenario(name="stop-hook-block-cap", rules=[
        Rule(id="answer", match=Match(), reply=text("STILL_ANSWERING"), repeat="always"),
    ]),
    # 15 blocks in all cover both runs (4 + 9 calls with a cap); a client without a cap is let
    # go after them instead of looping until the timeout
    hooks=Hooks({"Stop": {"action": "block", "reason": "STOP_CAP_MARKER: keep going",
                    "times": 15}}),
    invocations=(
        # a client without a cap loops until the timeout: keep it short
        Invocation("cap-3", "STOP_CAP_PROMPT", env={"CLAUDE_CODE_STOP_HOOK_BLOCK_CAP": "3"},
                   timeout=30),
        Invocation("cap-default", "STOP_CAP_PROMPT", timeout=30),
    ),
    check=check_cap,
    client_mentions=("CLAUDE_CODE_STOP_HOOK_BLOCK_CAP",),
    boundaries=("The hook blocks its first 15 calls only (both runs together need 13 with a "
                "cap), so a client without a cap ends instead of looping: its counts then "
                "show 16 requests, not a cap.",),
    counterfactuals=(
        Counterfactual(
            "stop-hook-never-blocks",
            "The Stop hook only records and never blocks, so each run ends after its first answer: "
            "there is no block to cap and nothing to override.",
            (CAP,),
            recording_hooks),
    ),
)


# ---- what --max-turns counts ------------------------------------------------------------

# run, --max-turns, tool calls run, requests: a retried request (a 529) or a max_tokens
# recovery inside a turn is one request more, not one turn more
TURN_RUNS = (("turns-1", 1, 1, 1), ("turns-2", 2, 2, 2), ("turns-3", 3, 3, 3),
             ("two-tools", 2, 3, 2), ("retry-in-turn", 2, 2, 3), ("recovery-in-turn", 1, 1, 2))


def check_turns(ev: Evidence, c: Checks) -> None:
    for run, limit, tools, requests in TURN_RUNS:
        c.equal(f"{run}.requests", TURNS,
                f"--max-turns {limit} allows {limit} model turn(s): {requests} request(s)",
                expected=requests, observed=len(ev.requests(run)), evidence="journal: main requests")
        c.equal(f"{run}.tools-run", TURNS, f"all {tools} tool calls of those turns ran",
                expected=tools, observed=_post_tool_uses(ev, run),
                evidence="hook log: PostToolUse calls of the run")
        c.equal(f"{run}.subtype", TURNS, "the run ends with error_max_turns",
                expected="error_max_turns", observed=result_of(ev, run).get("subtype"),
                evidence=f"run {run}: result.subtype")


def _text_only_turns(p: Probe) -> Probe:
    return with_rules(p, [answering(p, "two-tools", text("TURNS_DONE")),
                          answering(p, "one-tool", text("TURNS_DONE"))])


TURNS_PROBE = Probe(
    name="max-turns-counting",
    premises=(
        Premise("flag", "--max-turns", "feature", "limits each run to N model turns"),
        Premise("hook_input", "session_id", "instrument",
                "tells the PostToolUse hook calls of each run apart", event="PostToolUse",
                static=False),
        RETRIES_ENV,
    ),
    title="--max-turns counts model iterations, not requests or tools",
    claims=(Claim(TURNS, "--max-turns N allows N model iterations, not N requests or N "
                         "tools: every tool call of those iterations runs (two tools in one "
                         "response count as one turn), a request retried after a 529 or a "
                         "max_tokens recovery request inside an iteration does not count as "
                         "another, then error_max_turns.",
                  source=from_analysis(
                      "先区分四个容易混淆的“轮次”",
                      "它限制的是 Agent Loop 的模型轮次,不是 HTTP 请求次数,也不是工具"
                      "数量。", 84)),),
    scenario=Scenario(name="max-turns-counting", rules=[
        Rule(id="two-tools", match=Match(last_user_text_contains="TWO_TOOLS_PROMPT"),
             reply=Message(content=[
                 ToolUseBlock(name="Read", input={"file_path": "{workspace}/turns.txt"}),
                 ToolUseBlock(name="Read", input={"file_path": "{workspace}/turns.txt",
                                                  "offset": 1}),
             ])),
        # answered once; the retry of the same request falls through to one-tool
        Rule(id="overloaded-once", match=Match(last_user_text_contains="RETRY_TURNS_PROMPT"),
             reply=api_error(529, "Overloaded", type="overloaded_error")),
        # answered once; the recovery request (a new user turn) falls through to one-tool
        Rule(id="truncated-once", match=Match(last_user_text_contains="RECOVERY_TURNS_PROMPT"),
             reply=text("TRUNCATED_", stop_reason="max_tokens")),
        Rule(id="one-tool", match=Match(), repeat="always",
             reply=tool_use("Read", {"file_path": "{workspace}/turns.txt"})),
    ]),
    fixtures={"turns.txt": "TURNS\n"},
    # the second of the two concurrent Reads finishes last, so they are answered in one order
    hooks=Hooks({"PreToolUse": {"action": "record", "input_contains": "offset", "sleep": 0.3}}),
    invocations=(
        Invocation("turns-1", "TURNS_PROMPT", max_turns=1),
        Invocation("turns-2", "TURNS_PROMPT", max_turns=2),
        Invocation("turns-3", "TURNS_PROMPT", max_turns=3),
        Invocation("two-tools", "TWO_TOOLS_PROMPT", max_turns=2),
        Invocation("retry-in-turn", "RETRY_TURNS_PROMPT", max_turns=2,
                   env={"CLAUDE_CODE_MAX_RETRIES": "1"}),
        Invocation("recovery-in-turn", "RECOVERY_TURNS_PROMPT", max_turns=1),
    ),
    check=check_turns,
    boundaries=("retry-in-turn: the first request of the run gets a 529 and is retried once "
                "(CLAUDE_CODE_MAX_RETRIES=1, the client's own short backoff); recovery-in-turn: "
                "the first answer stops at max_tokens and the client's recovery request gets "
                "the Read.",),
    counterfactuals=(
        Counterfactual(
            "text-answers",
            "The model answers every prompt with text only, so each run ends by itself after one "
            "request, before any turn limit, and no tool runs.",
            (TURNS,),
            _text_only_turns),
        Counterfactual(
            "one-tool-per-response",
            "The TWO_TOOLS prompt is answered with one Read per response, so its two turns run "
            "two tools, not the three that two calls in one response would give.",
            (TURNS,),
            lambda p: with_runs(with_rules(p, [answering(
                p, "two-tools", tool_use("Read", {"file_path": "{workspace}/turns.txt"}))]),
                                keep=("two-tools",))),
    ),
)


# ---- budget --------------------------------------------------------------------------------

def check_budget(ev: Evidence, c: Checks) -> None:
    c.equal("requests", BUDGET, "the loop stops after the request that spent the budget",
            expected=1, observed=len(ev.requests("budget")), evidence="journal: main requests")
    check_terminal(c, BUDGET, ev, "budget", "budget_exhausted")
    check_ended(c, BUDGET, ev, "budget", final_text=None, subtype="error_max_budget_usd",
                exit_code=1, is_error=True, prefix="result")


def _cheap_turns(p: Probe) -> Probe:
    return with_rules(p, [answering(
        p, "expensive", tool_use("Read", {"file_path": "{workspace}/budget.txt"}, usage=Usage()),
        text("BUDGET_DONE"))])


BUDGET_PROBE = Probe(
    name="max-budget-usd",
    premises=(
        Premise("flag", "--max-budget-usd", "feature", "sets the spending budget"),
    ),
    title="--max-budget-usd ends the loop once the scripted usage costs more",
    claims=(Claim(BUDGET, "With --max-budget-usd, a turn whose usage costs more than the "
                          "budget ends the loop: error_max_budget_usd, terminal reason "
                          "budget_exhausted, is_error, exit 1.",
                  source=from_analysis(
                      "终止状态字典",
                      "前者由客户端累计美元成本检查 maxBudgetUsd 后生成,并映射成 "
                      "error_max_budget_usd", 386),
                  beyond_source=('The analysis maps the budget check to error_max_budget_usd and marks it '
                                'an error; exit status 1 and the loop stopping after the request that '
                                "spent the budget are expected from print mode's error results.")),),
    scenario=Scenario(name="max-budget-usd", rules=[
        Rule(id="expensive", match=Match(), repeat="always",
             reply=tool_use("Read", {"file_path": "{workspace}/budget.txt"},
                            usage=Usage(input_tokens=1_000_000, output_tokens=1000))),
    ]),
    fixtures={"budget.txt": "BUDGET\n"},
    invocations=(Invocation("budget", "BUDGET_PROMPT", extra_args=("--max-budget-usd", "0.05")),),
    check=check_budget,
    requires=("max_budget_usd",),
    boundaries=("The cost is the client's own estimate from the scripted usage "
                "(1,000,000 input tokens per response).",),
    counterfactuals=(
        Counterfactual(
            "cheap-turns",
            "The responses report 100 input tokens instead of a million, so the run costs far less "
            "than the budget and ends with the scripted answer.",
            (BUDGET,),
            _cheap_turns),
    ),
)
