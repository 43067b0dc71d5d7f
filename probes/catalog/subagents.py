"""Subagents: a child loop with its own prompt, tools and requests, reporting back by notification."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mockapi import Match, Rule, Scenario, text, tool_use
from probes.catalog.common import body_text, check_ended, last_user_locations
from probes.catalog.variants import answering, with_rules
from probes.core.checks import Checks
from probes.core.evidence import Evidence, Location, block_text, blocks_of_type, locate, messages
from probes.core.probe import Claim, Counterfactual, Invocation, Probe
from probes.core.provenance import from_analysis

__all__ = ["CHILD_AGENT", "CHILD_DEFINITION", "CHILD_PROMPT", "CHILD_RESULT", "CHILD_SYSTEM", "FEEDBACK",
           "ISOLATION", "LAUNCH_INPUT", "NOTIFICATION", "PARENT_OK", "PARENT_PROMPT", "PROBE", "TOOL_ID",
           "WAITING", "check"]

PARENT_PROMPT = "SUBAGENT_PARENT_PROMPT_MARKER"
CHILD_PROMPT = "SUBAGENT_CHILD_PROMPT_MARKER"
CHILD_RESULT = "SUBAGENT_CHILD_RESULT_MARKER"
WAITING = "SUBAGENT_PARENT_WAITING"
PARENT_OK = "SUBAGENT_PARENT_OK"
TOOL_ID = "toolu_subagent_probe"
NOTIFICATION = "<task-notification>"

ISOLATION = "probe.subagent-isolation"
FEEDBACK = "probe.subagent-notification-feedback"

CHILD_SYSTEM = "SUBAGENT_CHILD_SYSTEM_MARKER"
CHILD_AGENT = "loopprobe-child"
CHILD_DEFINITION = f"""---
name: {CHILD_AGENT}
description: The loopprobe child agent; use it when asked to launch the probe child.
tools: Read
---
You are the loopprobe child agent ({CHILD_SYSTEM}). Answer the task in one line.
"""
LAUNCH_INPUT = {"description": "loopprobe child", "prompt": f"{CHILD_PROMPT}: answer at once.",
                "subagent_type": CHILD_AGENT, "run_in_background": True}


def _system_text(record: Mapping[str, Any]) -> str:
    body = record.get("body") if record else None
    return str(body.get("system")) if isinstance(body, dict) else ""


def _tools(record: Mapping[str, Any]) -> list[str] | None:
    body = record.get("body") if record else None
    return [t.get("name") for t in body.get("tools", [])] if isinstance(body, dict) else None


def _launch_properties(record: Mapping[str, Any]) -> dict[str, list[str]]:
    """The input properties the request declares for its Agent / Task tool, by tool name."""
    body = record.get("body") if record else None
    return {t.get("name"): sorted((t.get("input_schema") or {}).get("properties") or {})
            for t in (body.get("tools", []) if isinstance(body, dict) else [])
            if t.get("name") in ("Agent", "Task")}


def check(ev: Evidence, c: Checks) -> None:
    # told apart by the child definition's marker, not by the mock's kind heuristics
    everything = ev.requests("parent", kind=None)
    children = [r for r in everything if CHILD_SYSTEM in _system_text(r)]
    parents = [r for r in everything if r.get("kind") == "main" and r not in children]
    parent: Mapping[str, Any] = parents[0] if parents else {}
    child: Mapping[str, Any] = children[0] if children else {}
    c.that("child-requests", ISOLATION, "the child made its own model requests",
           passed=len(children) >= 1, expected="at least one subagent request",
           observed=len(children), evidence="journal: requests whose system holds the child marker")
    c.that("child-own-system", ISOLATION,
           "the child's system prompt is its definition's, not the parent's",
           passed=CHILD_SYSTEM in _system_text(child) and CHILD_SYSTEM not in _system_text(parent),
           expected=f"{CHILD_SYSTEM} in the child's system prompt only",
           observed={"parent": CHILD_SYSTEM in _system_text(parent),
                     "child": CHILD_SYSTEM in _system_text(child)},
           evidence="body.system of parent request 1 and child request 1 (contains the marker?)")
    c.equal("child-own-tools", ISOLATION, "the child's tool list is its definition's (Read only)",
            expected=["Read"], observed=_tools(child),
            evidence=f"request #{child.get('seq')} body.tools")
    c.contains("child-gets-task", ISOLATION, "the child's conversation starts from the task prompt",
               needle=CHILD_PROMPT, haystack=body_text(child),
               evidence=f"request #{child.get('seq')} messages")
    c.absent("child-without-parent-history", ISOLATION,
             "the child does not see the parent's conversation",
             needle=PARENT_PROMPT, haystack=body_text(child),
             evidence=f"request #{child.get('seq')} messages")

    declared = _launch_properties(parent)
    c.reach("background-declared", FEEDBACK,
            "the version's Agent/Task tool declares run_in_background, which the launch sets",
            held=any("run_in_background" in props for props in declared.values()),
            absent=True, expected="run_in_background among the Agent/Task input properties",
            observed=declared or "no Agent or Task tool declared",
            evidence=f"request #{parent.get('seq')} body.tools input_schema.properties")
    c.equal("parent-request-count", FEEDBACK,
            "the parent made three requests: launch, after the acknowledgement, after the notification",
            expected=3, observed=len(parents), evidence="journal: main requests")
    second: Mapping[str, Any] = parents[1] if len(parents) > 1 else {}
    acks = [b for _, b in blocks_of_type(second, "tool_result") if b.get("tool_use_id") == TOOL_ID]
    ack_text = body_text({"body": {"messages": [{"role": "user", "content": acks}]}}) if acks else None
    c.that("immediate-result-is-ack", FEEDBACK,
           "the parent's immediate tool_result is a launch acknowledgement, not the child's result",
           passed=bool(acks) and CHILD_RESULT not in (ack_text or ""),
           expected=f"a tool_result for {TOOL_ID} without {CHILD_RESULT}",
           # the first line only: the rest holds a random agent id
           observed=(ack_text or "no tool_result for the launch").splitlines()[0][:160],
           evidence=f"request #{second.get('seq')} tool_result")
    later = parents[2:]
    notified = [r for r in later if last_user_locations(r, NOTIFICATION)]
    c.that("notification-carries-result", FEEDBACK,
           "a later parent request's last user turn is a task notification holding the child's result",
           passed=any(last_user_locations(r, CHILD_RESULT) for r in notified),
           expected=f"{NOTIFICATION} with {CHILD_RESULT} in the last user message",
           observed=[last_user_locations(r, CHILD_RESULT) for r in later] or "no later request",
           evidence="parent requests after the acknowledgement")
    leaks = [f"#{r.get('seq')} {loc}" for r in parents for loc in locate(r, CHILD_RESULT)
             if loc.type != "text" or NOTIFICATION not in _block_text_at(r, loc)]
    c.equal("result-only-by-notification", FEEDBACK,
            "the child's result reaches the parent only inside the task notification",
            expected=[], observed=leaks, evidence="every parent request")
    check_ended(c, FEEDBACK, ev, "parent", final_text=PARENT_OK, prefix="result")


def _block_text_at(record: Mapping[str, Any], loc: Location) -> str:
    content = messages(record)[loc.message].get("content")
    block = content[loc.block] if isinstance(content, list) else content
    return block_text(block)


def _foreground(p: Probe) -> Probe:
    launch = {**LAUNCH_INPUT, "run_in_background": False}
    return with_rules(p, [answering(p, "launch-agent", tool_use("Agent", launch, id=TOOL_ID)),
                          answering(p, "launch-task", tool_use("Task", launch, id=TOOL_ID))])


PROBE = Probe(
    name="subagent-loop",
    revision=2,  # the final text where the result event's is empty
    title="A subagent runs its own loop and reports back by notification",
    claims=(
        Claim(ISOLATION, "The subagent runs a separate agent loop: its own system prompt and "
                         "tool list (from its definition), its own model requests, without the "
                         "parent's conversation.",
              source=from_analysis(
                  "第二组控制流探针:Stop、maxTurns 与子 Agent",
                  "子 Agent 使用独立 prompt、独立工具表和独立 Messages 请求", 467),
              beyond_source=("'Without the parent's conversation' and 'a system prompt from its "
                            "definition' read the analysis' 'own prompt, own tools, own Messages "
                            "requests' as the system prompt; the analysis does not say which prompt.")),
        Claim(FEEDBACK, "The parent's immediate tool_result for the Agent call is a launch "
                        "acknowledgement; the child's result reaches the parent only through a "
                        "<task-notification> in a later parent request; the parent makes three "
                        "requests and ends with its final answer.",
              source=from_analysis(
                  "第二组控制流探针:Stop、maxTurns 与子 Agent",
                  "CLI 立即返回配对 tool_result,其语义是 async_launched,不是子任"
                  "务结论。子 Agent 使用独立 prompt、独立工具表和独立 Messages 请"
                  "求,完成后通过 <task-notification> 把 "
                  "SUBAGENT_CHILD_RESULT_MARKER 入父队列。父循环共发出三个请求:启"
                  "动、等待、消费完成通知并输出 SUBAGENT_PARENT_OK。", 467),
              beyond_source=('The analysis says the result reaches the parent through a '
                            "<task-notification>; 'only' (not also in the launch's tool_result) is our "
                            'expectation of a background agent.')),
    ),
    scenario=Scenario(name="subagent-loop", rules=[
        Rule(id="child-answer", match=Match(kind="any", system_contains=CHILD_SYSTEM),
             reply=text(CHILD_RESULT)),
        Rule(id="parent-after-notification",
             match=Match(last_user_text_contains=[NOTIFICATION, CHILD_RESULT]),
             reply=text(PARENT_OK)),
        Rule(id="parent-after-launch", match=Match(tool_result_for=TOOL_ID), reply=text(WAITING)),
        # The subagent tool is "Agent" in 2.1.x and "Task" in 2.0.x: answer with the one declared.
        Rule(id="launch-agent", match=Match(last_user_text_contains=PARENT_PROMPT,
                                            declares_tool="Agent"),
             reply=tool_use("Agent", LAUNCH_INPUT, id=TOOL_ID)),
        Rule(id="launch-task", match=Match(last_user_text_contains=PARENT_PROMPT,
                                           declares_tool="Task"),
             reply=tool_use("Task", LAUNCH_INPUT, id=TOOL_ID)),
    ]),
    fixtures={f".claude/agents/{CHILD_AGENT}.md": CHILD_DEFINITION},
    invocations=(Invocation("parent", PARENT_PROMPT, tools=("Read", "Task"), timeout=120),),
    check=check,
    boundaries=(
        "The child is a project agent defined in the workspace (.claude/agents) with a one-step "
        "answer; built-in agents, worktrees and nested subagents are not exercised.",
        "The launch asks for run_in_background: true (the analysis' async_launched is a "
        "background agent); a version whose Agent/Task schema lacks the field is reported "
        "absent, from the tools its own requests declare.",
    ),
    counterfactuals=(
        Counterfactual(
            "no-launch",
            "The parent model answers with text instead of launching the agent, so no child loop "
            "runs and nothing is notified: one parent request.",
            (ISOLATION, FEEDBACK),
            lambda p: with_rules(p, [answering(p, "launch-agent", text(PARENT_OK)),
                                     answering(p, "launch-task", text(PARENT_OK))])),
        Counterfactual(
            "foreground-agent",
            "The parent launches the agent with run_in_background false, so the child's result "
            "comes back as the Agent call's own tool_result, not as a later task notification.",
            (FEEDBACK,),
            _foreground),
    ),
)
