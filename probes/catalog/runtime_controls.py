"""Runtime controls: a blocking Stop hook re-enters the loop; --max-turns ends it after the tools."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mockapi import Match, Rule, Scenario, text, tool_use
from mockapi.journal.records import RequestRecord
from probes.catalog.common import body_text, check_ended, last_user_locations
from probes.catalog.premises import hook_tool_ids
from probes.catalog.variants import recording_hooks, with_runs
from probes.core.checks import Checks
from probes.core.evidence import Evidence
from probes.core.premises import Premise
from probes.core.probe import Claim, Counterfactual, Hooks, Invocation, Probe
from probes.core.provenance import from_analysis

__all__ = ["FIRST_ANSWER", "MAX_CLAIM", "MAX_FILE_MARKER", "MAX_PROMPT", "MAX_TOOL_ID", "MAX_TURNS_PROBE",
           "REENTER", "REENTRY_OK", "STOP_CLAIM", "STOP_PROBE", "STOP_PROMPT", "check_max_turns",
           "check_stop_hook"]

STOP_PROMPT = "STOP_HOOK_PROMPT_MARKER"
FIRST_ANSWER = "STOP_HOOK_FIRST_ANSWER"
REENTER = "STOP_HOOK_REENTER_MARKER"
REENTRY_OK = "STOP_REENTRY_OK"
STOP_CLAIM = "probe.stop-hook-reentry"

MAX_PROMPT = "MAX_TURNS_PROMPT_MARKER"
MAX_FILE_MARKER = "MAX_TURNS_FILE_MARKER"
MAX_TOOL_ID = "toolu_max_turns_probe"
MAX_CLAIM = "probe.max-turns-terminal"


def _requests_after(requests: Sequence[RequestRecord], call: Mapping[str, Any]) -> int:
    """How many of ``requests`` arrived after the hook ``call`` started (0 without a call)."""
    started = call.get("started")
    if not isinstance(started, float | int):
        return 0
    return sum(1 for r in requests if r.get("time", 0) > started)


def _after_call(requests: Sequence[RequestRecord], call: Mapping[str, Any], name: str) -> str:
    if not call:
        return f"no {name} call"
    return f"{_requests_after(requests, call)} model request(s) after {name}"


def check_stop_hook(ev: Evidence, c: Checks) -> None:
    requests = ev.requests("stop")
    first, second = ev.request("stop", 0), ev.request("stop", 1)
    c.equal("request-count", STOP_CLAIM, "the blocked stop leads to exactly one more model request",
            expected=2, observed=len(requests), evidence="journal: main requests")
    c.equal("first-answer-rule", STOP_CLAIM,
            "the first request got the scripted end_turn answer",
            expected="first-answer", observed=first.get("rule"),
            evidence=f"request #{first.get('seq')} rule")
    calls = ev.hooks("Stop")
    c.equal("hook-calls", STOP_CLAIM, "the Stop hook ran twice (block, then allow)",
            expected=2, observed=len(calls), evidence="hook log: Stop")
    first_call = calls[0] if calls else {}
    c.equal("first-call-inactive", STOP_CLAIM,
            "the first Stop call is not a re-entry (stop_hook_active false)",
            expected=False, observed=(first_call.get("input") or {}).get("stop_hook_active"),
            evidence="hook log: Stop #1 input.stop_hook_active")
    # what the client did with each decision, not what the recorder answered: whether a
    # model request arrived after the call
    c.that("reentered-after-block", STOP_CLAIM,
           "after the blocking Stop call the client asks the model again instead of ending",
           passed=_requests_after(requests, first_call) > 0,
           expected="a model request after Stop #1",
           observed=_after_call(requests, first_call, "Stop #1"),
           evidence="timeline in <report>.timing.json: hook_start of Stop #1 vs the "
                    "requests after it")
    second_call = calls[1] if len(calls) > 1 else {}
    c.equal("second-call-active", STOP_CLAIM,
            "the second Stop call is marked as a re-entry (stop_hook_active true)",
            expected=True, observed=(second_call.get("input") or {}).get("stop_hook_active"),
            evidence="hook log: Stop #2 input.stop_hook_active")
    c.that("ended-after-allow", STOP_CLAIM,
           "after the second Stop call the loop ends: no model request follows it",
           passed=bool(second_call) and _requests_after(requests, second_call) == 0,
           expected="no model request after Stop #2",
           observed=_after_call(requests, second_call, "Stop #2"),
           evidence="timeline in <report>.timing.json: hook_start of Stop #2 vs the "
                    "requests after it")
    c.that("feedback-in-request-2", STOP_CLAIM,
           "the hook's reason is the last user turn of the second request",
           passed=bool(last_user_locations(second, REENTER)),
           expected=f"{REENTER} in the last user message",
           observed=last_user_locations(second, REENTER) or body_text(second),
           evidence=f"request #{second.get('seq')} messages")
    c.contains("first-answer-kept", STOP_CLAIM,
               "the second request keeps the first answer in the history",
               needle=FIRST_ANSWER, haystack=body_text(second),
               evidence=f"request #{second.get('seq')} messages")
    check_ended(c, STOP_CLAIM, ev, "stop", final_text=REENTRY_OK, prefix="result")


def check_max_turns(ev: Evidence, c: Checks) -> None:
    c.equal("request-count", MAX_CLAIM, "exactly one model request reached the mock",
            expected=1, observed=len(ev.requests("max-turns")), evidence="journal: main requests")
    run = ev.run("max-turns")
    results = run.output.tool_results() if run else []
    c.that("tool-ran", MAX_CLAIM, "the Read of the only model turn still ran",
           passed=any(MAX_FILE_MARKER in str(b.get("content")) for b in results),
           expected=f"a tool_result holding {MAX_FILE_MARKER}",
           observed=[str(b.get("content"))[:80] for b in results] or "no tool_result event",
           evidence="run max-turns: stream-json user events")
    post = [h for h in ev.hooks("PostToolUse")
            if (h.get("input") or {}).get("tool_use_id") == MAX_TOOL_ID]
    c.equal("post-tool-use-ran", MAX_CLAIM, "PostToolUse ran for the tool call",
            expected=1, observed=len(post), evidence="hook log: PostToolUse")
    result = (run.result if run else None) or {}
    c.reports("terminal-reason", MAX_CLAIM, "the terminal reason is max_turns",
              expected="max_turns", observed=result.get("terminal_reason"),
              evidence="run max-turns: result.terminal_reason")
    check_ended(c, MAX_CLAIM, ev, "max-turns", final_text=None, subtype="error_max_turns",
                exit_code=1, is_error=True, prefix="result")


STOP_PROBE = Probe(
    name="stop-hook-reentry",
    premises=(
        Premise("hook_input", "stop_hook_active", "feature",
                "tells the Stop hook whether it runs again after blocking", event="Stop"),
    ),
    revision=2,  # the final text where the result event's is empty
    title="A blocking Stop hook makes the model run again",
    claims=(Claim(STOP_CLAIM,
                  "When a Stop hook blocks an end_turn answer, its reason is sent back to the "
                  "model in a new request; the hook runs again with stop_hook_active true and, "
                  "allowing, lets the run end with success and exit 0.",
                  source=from_analysis(
                      "第二组控制流探针:Stop、maxTurns 与子 Agent",
                      "Stop hook 返回 block 和 STOP_HOOK_REENTER_MARKER 后,CLI 没有直"
                      "接失败,而是把反馈装入第二个 Messages 请求。第二次模型返回 "
                      "STOP_REENTRY_OK,Stop hook 再次运行但不阻止,最终 "
                      "subtype=success、exit 0。", 465)),),
    scenario=Scenario(name="stop-hook-reentry", rules=[
        Rule(id="reentry-answer", match=Match(last_user_text_contains=REENTER),
             reply=text(REENTRY_OK)),
        Rule(id="first-answer", match=Match(last_user_text_contains=STOP_PROMPT),
             reply=text(FIRST_ANSWER, stop_reason="end_turn")),
    ]),
    hooks=Hooks({"Stop": {"action": "block", "unless_active": True,
                    "reason": f"{REENTER}: continue and answer {REENTRY_OK}"}}),
    invocations=(Invocation("stop", STOP_PROMPT),),
    check=check_stop_hook,
    boundaries=("Shows one block followed by an allow; the cap on consecutive blocks is "
                "probed separately (termination report).",),
    counterfactuals=(
        Counterfactual(
            "stop-hook-allows",
            "The Stop hook only records and never blocks, so the first answer ends the run: no "
            "feedback request, no re-entry.",
            (STOP_CLAIM,),
            recording_hooks),
    ),
)

MAX_TURNS_PROBE = Probe(
    name="max-turns-terminal",
    revision=2,  # premises: a version lacking one is absent or not observable, never contradicted
    premises=(
        Premise("flag", "--max-turns", "feature", "limits the run to one model turn"),
        hook_tool_ids("PostToolUse"),
    ),
    title="--max-turns 1 lets the tools of the only turn run, then stops",
    claims=(Claim(MAX_CLAIM,
                  "--max-turns 1 with a tool_use answer: the tool runs and PostToolUse runs, "
                  "but no second model request is made; the result is error_max_turns with "
                  "is_error true (terminal reason max_turns) and exit 1.",
                  source=from_analysis(
                      "第二组控制流探针:Stop、maxTurns 与子 Agent",
                      "探针收到 Read tool_use 后真实执行了工具,PostToolUse 也发生了;"
                      "服务端只收到一个 Messages 请求。CLI 随后输出 "
                      "subtype=error_max_turns、is_error=true、exit 1。", 466)),),
    scenario=Scenario(name="max-turns-terminal", rules=[
        Rule(id="read", match=Match(last_user_text_contains=MAX_PROMPT),
             reply=tool_use("Read", {"file_path": "{workspace}/max-turns.txt"}, id=MAX_TOOL_ID)),
        Rule(id="beyond-the-limit", match=Match(tool_result_for=MAX_TOOL_ID),
             reply=text("THIS_REQUEST_SHOULD_NOT_HAPPEN")),
    ]),
    fixtures={"max-turns.txt": f"{MAX_FILE_MARKER}\n"},
    hooks=Hooks(),
    invocations=(Invocation("max-turns", MAX_PROMPT, max_turns=1),),
    check=check_max_turns,
    boundaries=("N = 1 only; counting over several turns is in the termination report.",),
    counterfactuals=(
        Counterfactual(
            "no-turn-limit",
            "The run has no --max-turns, so after the Read the loop makes its second request and "
            "ends with the scripted answer (success).",
            (MAX_CLAIM,),
            lambda p: with_runs(p, changes={"max-turns": {"max_turns": None}})),
    ),
)

