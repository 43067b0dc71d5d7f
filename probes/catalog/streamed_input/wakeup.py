"""/loop: a wake-up the session schedules for itself, and the turn it starts on its own.
"""

from __future__ import annotations

from typing import Any

from mockapi import Match, Rule, Scenario, text, tool_use
from probes.catalog.common import body_text, last_user_locations
from probes.catalog.streamed_input.common import (
    _events,
    _stdin,
    _tool_results_printed,
    check_lifecycle_emitted,
)
from probes.catalog.variants import with_steps
from probes.core.checks import Checks
from probes.core.evidence import Evidence
from probes.core.premises import Premise
from probes.core.probe import Claim, Counterfactual, Invocation, Probe
from probes.core.provenance import from_analysis, project_expectation
from probes.core.streamed import StreamedInput

__all__ = ["LIFECYCLE_CLAIM", "LOOP_DELAY", "LOOP_DOCS", "LOOP_HORIZON", "LOOP_PROBE",
           "LOOP_PROMPT", "LOOP_TOOL", "LOOP_WAITING", "LOOP_WOKE", "NOT_SCHEDULED",
           "WAKEUP_CLAIM", "check_loop", "check_wakeup_reached"]


LOOP_PROMPT = "/loop LOOP_WAKE_MARKER"
LOOP_TOOL = "toolu_loop_schedule_wakeup"
LOOP_WAITING, LOOP_WOKE = "LOOP_WAITING_FOR_WAKEUP", "LOOP_WOKE_UP_ANSWER"
LOOP_DELAY = 60  # the least the client accepts (ScheduleWakeup clamps to [60, 3600])
# the wake-up is due within its delay plus the client's rounding up to its next minute
LOOP_HORIZON = LOOP_DELAY + 60 + 15
WAKEUP_CLAIM = "probe.loop-wakeup-fires"
LIFECYCLE_CLAIM = "probe.command-lifecycle-wakeup"
LOOP_DOCS = "https://code.claude.com/docs/en/scheduled-tasks"
# how ScheduleWakeup says it did not schedule (its runtime gate off, the loop at its end)
NOT_SCHEDULED = "Wakeup not scheduled"
_INPUT = {"delaySeconds": LOOP_DELAY, "prompt": LOOP_PROMPT,
          "reason": "loopprobe: the least delay"}


def _result_text(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, list):
        return " ".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return str(content)


def check_wakeup_reached(ev: Evidence, c: Checks, claim: str, prefix: str = "") -> bool:
    """That this version has ScheduleWakeup (declared in its first request: else the claim
    is absent) and scheduled the probe's wake-up (else not reached, in the tool's words: the
    /loop runtime gate off, or the probe's input refused by this version's schema)."""
    first = ev.request("loop", 0)
    declared = [t.get("name") for t in (first.get("body") or {}).get("tools") or []
                if isinstance(t, dict)] if first else None
    run = ev.run("loop")
    said = (run.result or {}).get("result") if run else None
    c.reach(f"{prefix}tool-declared", claim,
            "this version declares the ScheduleWakeup tool in its first model request",
            held=bool(declared) and "ScheduleWakeup" in (declared or []), absent=True,
            expected="ScheduleWakeup among the tools of the first main request",
            observed=(f"the first main request declares {declared}" if declared is not None
                      else f"no main request; the client answered {said!r}"),
            evidence=f"request #{first.get('seq')} body.tools" if first else
            "journal: main requests; run loop: result")
    answers = [b for b in _tool_results_printed(ev, "loop") if b.get("tool_use_id") == LOOP_TOOL]
    answer = _result_text(answers[0]) if answers else None
    scheduled = answer is not None and answers[0].get("is_error") is not True \
        and not answer.startswith(NOT_SCHEDULED)
    return c.reach(f"{prefix}wakeup-scheduled", claim,
                   "ScheduleWakeup took the probe's input and scheduled the wake-up (its "
                   "result is neither an error nor 'Wakeup not scheduled')",
                   held=scheduled, absent=False,
                   expected="a tool_result that schedules the wake-up",
                   # the scheduled time is in the answer: the same words on every run
                   observed=("scheduled" if scheduled else
                             "no tool_result for the ScheduleWakeup call" if answer is None
                             else {"is_error": answers[0].get("is_error"), "content": answer}),
                   evidence="run loop: the printed tool_result of the ScheduleWakeup call")


def check_loop(ev: Evidence, c: Checks) -> None:
    check_wakeup_reached(ev, c, WAKEUP_CLAIM)
    check_wakeup_reached(ev, c, LIFECYCLE_CLAIM, prefix="lifecycle.")
    check_lifecycle_emitted(ev, c, "loop", LIFECYCLE_CLAIM)
    requests = ev.requests("loop")
    c.equal("requests", WAKEUP_CLAIM,
            "two requests for the scheduling turn, then one more: the woken turn",
            expected=3, observed=len(requests), evidence="journal: main requests")
    woken: Any = requests[2] if len(requests) > 2 else {}
    c.that("woken-with-the-loop-prompt", WAKEUP_CLAIM,
           "the woken turn's request has the scheduled /loop prompt as its last user turn",
           passed=bool(last_user_locations(woken, "LOOP_WAKE_MARKER")),
           expected="LOOP_WAKE_MARKER in the last user message of request 3",
           observed=last_user_locations(woken, "LOOP_WAKE_MARKER") or body_text(woken),
           evidence=f"request #{woken.get('seq')} messages")
    waited = (round(woken["time"] - requests[1]["time"], 1)
              if len(requests) > 2 else None)
    c.that("not-before-the-delay", WAKEUP_CLAIM,
           f"the woken turn starts no sooner than the {LOOP_DELAY} s asked for",
           passed=waited is not None and waited >= LOOP_DELAY,
           expected=f">= {LOOP_DELAY} s between request 2 and request 3",
           # the measured wait only when it is too short: a report is the same on every run
           observed=("no request 3" if waited is None else
                     f">= {LOOP_DELAY} s" if waited >= LOOP_DELAY else f"{waited} s"),
           evidence="journal: request times")
    results = [e.get("result") for e in _events(ev, "loop", "result")]
    c.equal("two-results", WAKEUP_CLAIM, "each turn ends with its own result",
            expected=[LOOP_WAITING, LOOP_WOKE], observed=results,
            evidence="run loop: result events")
    written = {str((e.get("line") or {}).get("uuid")) for e in _stdin(ev, "loop")}
    woken = [e for e in _events(ev, "loop", "command_lifecycle")
             if str(e.get("command_uuid")) not in written]
    lifecycle = [{"state": e.get("state"), "command": e.get("command_uuid")} for e in woken]
    c.equal("states", LIFECYCLE_CLAIM,
            "the woken turn's command (one the caller did not write) is reported started, "
            "then completed (an internal command: no queued state before it)",
            expected=["started", "completed"], observed=[e["state"] for e in lifecycle],
            evidence="run loop: command_lifecycle events of uuids the caller did not write")
    c.that("one-command", LIFECYCLE_CLAIM, "both states name the same command",
           passed=len(lifecycle) == 2 and lifecycle[0]["command"] == lifecycle[1]["command"]
           and lifecycle[0]["command"] is not None,
           expected="one command_uuid for started and completed",
           observed=[e["command"] for e in lifecycle] or "no command_lifecycle event",
           evidence="run loop: command_lifecycle events")
    run = ev.run("loop")
    printed = [e.get("type") for e in (run.output.events if run else [])
               if e.get("type") == "result" or (e.get("type") == "command_lifecycle"
                                                and str(e.get("command_uuid")) not in written)]
    c.equal("around-the-woken-turn", LIFECYCLE_CLAIM,
            "started comes before the woken turn's result and completed after it",
            expected=["result", "command_lifecycle", "result", "command_lifecycle"],
            observed=printed, evidence="run loop: order of printed events")


LOOP_PROBE = Probe(
    name="loop-wakeup",
    premises=(
        Premise("command", "loop", "feature", "schedules the wake-up"),
        Premise("tool", "ScheduleWakeup", "feature", "the tool /loop schedules with",
                claims=(WAKEUP_CLAIM,)),
    ),
    title="/loop in a streamed session: a scheduled wake-up starts a turn by itself",
    claims=(
        Claim(WAKEUP_CLAIM,
              "In a session whose input stays open, /loop's ScheduleWakeup (60 s, the least "
              "it accepts) makes the client start a new turn by itself, no sooner than the "
              "delay, with the scheduled /loop prompt as its user message.",
              source=project_expectation(
                  "/loop without an interval is the dynamic mode: Claude picks the delay to "
                  "the next iteration (a minute to an hour) and the prompt runs again then, in "
                  "the open session", LOOP_DOCS),
              beyond_source="The documentation describes the dynamic interval, not its tool: "
                            "that ScheduleWakeup is what schedules it, the 60 s floor and the "
                            "prompt re-entered as the woken turn's user message are what the "
                            "client's own ScheduleWakeup tool description says. The analysis "
                            "only names the wake-up's telemetry (line 87) and keeps it apart "
                            "from the loop."),
        Claim(LIFECYCLE_CLAIM,
              "The woken turn's command is reported to the stream-json consumer by "
              "command_lifecycle events: started before the turn's result and completed "
              "after it, for one command uuid; an internal command has no queued state.",
              source=from_analysis(
                  "command_lifecycle:队列命令的命运,不是回答完成度",
                  "stream-json/SDK 消费者还会收到 queued -> started -> terminal 的 "
                  "command_lifecycle", 389),
              beyond_source="The analysis adds that internally generated commands can lack "
                            "queued (line 395); that a wake-up is such a command is ours."),
    ),
    scenario=Scenario(name="loop-wakeup", rules=[
        Rule(id="woken", match=Match(last_user_text_contains="LOOP_WAKE_MARKER", turn=3),
             reply=text(LOOP_WOKE)),
        Rule(id="after-schedule", match=Match(tool_result_for=LOOP_TOOL),
             reply=text(LOOP_WAITING)),
        # ScheduleWakeup's input as this version declares it: from 2.1.268 on, noop is
        # required unless stop is true (the tool refuses the call without it)
        Rule(id="schedule-noop", match=Match(last_user_text_contains="LOOP_WAKE_MARKER",
                                             declares_tool_input="ScheduleWakeup.noop"),
             reply=tool_use("ScheduleWakeup", {**_INPUT, "noop": False}, id=LOOP_TOOL)),
        Rule(id="schedule", match=Match(last_user_text_contains="LOOP_WAKE_MARKER"),
             reply=tool_use("ScheduleWakeup", _INPUT, id=LOOP_TOOL)),
    ]),
    invocations=(Invocation(
        "loop", LOOP_PROMPT, tools=("ScheduleWakeup",), timeout=200,
        streamed=StreamedInput(close_on={"type": "result", "result": LOOP_WOKE},
                               close_after=LOOP_HORIZON)),),
    check=check_loop,
    fingerprinted=False,
    boundaries=("The one probe that waits on a clock: the wake-up's own delay (60 s, which "
                "the client may round up to its next minute), the behaviour under test. "
                f"Input stays open until the woken turn's result, or {LOOP_HORIZON} s after "
                "the prompt (the delay, a minute of rounding and 15 s of slack).",
                "ScheduleWakeup's input follows the schema the version declares in its request "
                "(noop: false where it has noop). Its runtime gate (a feature flag of the "
                "client's, no documented setting or variable opens it) is left as the version "
                "has it: where it is off the tool says so and the claims are not reached.",
                "The dynamic mode only (ScheduleWakeup); /loop with an interval schedules a "
                "cron job (CronCreate) whose least period is a minute, not probed."),
    counterfactuals=(Counterfactual(
        "input-closed-after-the-turn",
        "Input is closed at the scheduling turn's result: the session ends before any wake-up "
        "is due, so no turn can start by itself.",
        (WAKEUP_CLAIM, LIFECYCLE_CLAIM),
        lambda p: with_steps(p, "loop", close_on={"type": "result"}, close_after=None)),),
)
