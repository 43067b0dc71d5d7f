"""Terminal reasons hooks cause: a PreToolUse or Stop hook's continue:false, a PreToolUse
defer.
"""

from __future__ import annotations

from typing import Any

from mockapi import Match, Rule, Scenario, text, tool_use
from probes.catalog.common import check_mentioned, check_terminal
from probes.catalog.variants import recording_hooks
from probes.core.checks import Checks
from probes.core.evidence import Evidence
from probes.core.probe import Claim, Counterfactual, Hooks, Invocation, Probe
from probes.core.provenance import Source, from_analysis

__all__ = ["DEFERRED", "DEFERRED_PROBE", "HOOK_STOPPED", "HOOK_STOPPED_PROBE", "STOP_PREVENTED",
           "STOP_PREVENTED_PROBE"]


HOOK_STOPPED = "probe.hook-stopped-terminal"
STOP_PREVENTED = "probe.stop-hook-prevented-terminal"
DEFERRED = "probe.tool-deferred-terminal"


def _hook_probe(name: str, claim: str, statement: str, hooks: dict[str, Any], terminal: str,
                title: str, *, source: Source,
                counterfactuals: tuple[Counterfactual, ...] = (),
                mentions: tuple[tuple[str, str], ...] = ()) -> Probe:
    """``mentions``: (string, what it is) the installed client must mention for the hook's
    answer to be known to it (static evidence, where no run can tell)."""
    def check(ev: Evidence, c: Checks) -> None:
        for needle, what in mentions:
            check_mentioned(c, claim, ev, needle, what)
        check_terminal(c, claim, ev, "run", terminal)
        c.equal("requests", claim, "no model request after the hook's decision",
                expected=1, observed=len(ev.requests("run")), evidence="journal: main requests")
    return Probe(
        name=name, title=title, claims=(Claim(claim, statement, source=source),),
        scenario=Scenario(name=name, rules=[
            Rule(id="read", match=Match(last_user_text_contains="HOOK_TERMINAL_PROMPT"),
                 reply=tool_use("Read", {"file_path": "{workspace}/hook.txt"})),
            Rule(id="after", match=Match(), reply=text("AFTER_THE_HOOK"), repeat="always"),
        ]),
        fixtures={"hook.txt": "HOOK\n"}, hooks=Hooks(hooks),
        invocations=(Invocation("run", "HOOK_TERMINAL_PROMPT"),), check=check,
        counterfactuals=counterfactuals, client_mentions=tuple(n for n, _ in mentions))


HOOK_STOPPED_PROBE = _hook_probe(
    "hook-stopped", HOOK_STOPPED,
    "A PreToolUse hook answering continue:false stops the loop after the tool batch "
    "(terminal reason hook_stopped), without another model request.",
    {"PreToolUse": {"action": "output",
                    "output": {"continue": False, "stopReason": "HOOK_STOPPED_MARKER"}}},
    "hook_stopped", "A hook's continue:false ends the loop after the tool batch",
    source=from_analysis("有工具调用时的后半程",
                         "hook stopped continuation?\n-> hook_stopped", 297),
    counterfactuals=(
        Counterfactual(
            "hook-records-only",
            "The PreToolUse hook only records (no continue:false), so the loop goes on to the next "
            "request and completes.",
            (HOOK_STOPPED,),
            recording_hooks),
    ))


def _check_single_stop(ev: Evidence, c: Checks, claim: str, terminal: str) -> None:
    check_terminal(c, claim, ev, "run", terminal)
    c.equal("requests", claim, "one model request", expected=1,
            observed=len(ev.requests("run")), evidence="journal: main requests")


STOP_PREVENTED_PROBE = Probe(
    name="stop-hook-prevented",
    title="A Stop hook's continue:false ends the loop as stop_hook_prevented",
    claims=(Claim(STOP_PREVENTED, "A Stop hook answering continue:false ends the loop with "
                                  "terminal reason stop_hook_prevented.",
                  source=from_analysis(
                      "终止状态字典",
                      "stop_hook_prevented |\nStop hook 明确阻止 continuation", 356)),),
    scenario=Scenario(name="stop-hook-prevented", rules=[
        Rule(id="answer", match=Match(), reply=text("ANSWERED"), repeat="always")]),
    hooks=Hooks({"Stop": {"action": "output",
                    "output": {"continue": False, "stopReason": "STOP_PREVENTED_MARKER"}}}),
    invocations=(Invocation("run", "STOP_PREVENTED_PROMPT"),),
    check=lambda ev, c: _check_single_stop(ev, c, STOP_PREVENTED, "stop_hook_prevented"),
    counterfactuals=(
        Counterfactual(
            "stop-hook-records-only",
            "The Stop hook only records (no continue:false), so the run ends as completed.",
            (STOP_PREVENTED,),
            recording_hooks),
    ),
)


DEFERRED_PROBE = _hook_probe(
    "tool-deferred", DEFERRED,
    "In print mode a PreToolUse hook can defer a single tool call: the loop ends with "
    "terminal reason tool_deferred, without running the tool or asking the model again.",
    {"PreToolUse": {"action": "output", "output": {"hookSpecificOutput": {
        "hookEventName": "PreToolUse", "permissionDecision": "defer"}}}},
    "tool_deferred", "A PreToolUse defer suspends the only tool call",
    source=from_analysis("有工具调用时的后半程",
                         "PreToolUse defer?\n-> tool_deferred", 295),
    # a version without defer ignores the decision silently and runs the tool, as one that
    # knows it and runs the tool anyway would: only its files tell them apart
    mentions=(("tool_deferred", "the terminal reason a PreToolUse defer ends the loop with"),),
    counterfactuals=(
        Counterfactual(
            "hook-records-only",
            "The PreToolUse hook only records (no defer), so the tool runs and the loop goes on to "
            "the next request and completes.",
            (DEFERRED,),
            recording_hooks),
    ))
