"""The probe suite: every report and the probes it groups.

May import: ``probes.core`` only (a catalog is declarations).
"""

from __future__ import annotations

from probes.catalog import (
    goal,
    mcp_failures,
    mcp_tools,
    recovery,
    runtime_controls,
    streamed_input,
    subagents,
    termination,
    tool_pipeline,
    tool_result_resume,
    tool_scheduling,
)
from probes.core.probe import ReportSpec

__all__ = ["REPORTS", "find_report"]


REPORTS: tuple[ReportSpec, ...] = (
    ReportSpec(
        name="agent-loop-tool-result-resume",
        title="Agent loop: tool feedback, resume, manual compaction and fork",
        probes=(tool_result_resume.PROBE,),
        summary="One isolated session: a Read tool_use answered by the client with a paired "
                "tool_result, resumed, compacted by /compact and forked.",
    ),
    ReportSpec(
        name="runtime-controls",
        title="Runtime controls: Stop hook re-entry and max turns",
        probes=(runtime_controls.STOP_PROBE, runtime_controls.MAX_TURNS_PROBE),
        summary="How a blocking Stop hook and --max-turns change when the loop ends.",
    ),
    ReportSpec(
        name="subagent-loop",
        title="Subagents: an isolated child loop and notification feedback",
        probes=(subagents.PROBE,),
        summary="The parent launches a project agent; the child runs its own loop "
                "and its result returns to the parent as a task notification.",
    ),
    ReportSpec(
        name="tool-scheduling",
        title="Tool scheduling: streaming start, concurrency, barriers, pairing",
        probes=(tool_scheduling.STREAMING_PROBE, tool_scheduling.BATCH_PROBE,
                tool_scheduling.PAIRING_PROBE),
        summary="When tools start relative to the stream, which calls overlap, which wait, "
                "and how results find their calls.",
    ),
    ReportSpec(
        name="tool-pipeline",
        title="Tool pipeline: unknown tools, invalid input, denials, failures, rewritten input",
        probes=(tool_pipeline.PROBE,),
        summary="Each way a single call can go wrong, and a hook changing its input.",
    ),
    ReportSpec(
        name="recovery",
        title="Recovery: max_tokens, malformed tool use, thinking-only, prompt too long, "
              "compaction, retries, fallback model",
        probes=recovery.PROBES,
        summary="The loop's branches that send another request for the same turn.",
    ),
    ReportSpec(
        name="termination",
        title="Termination: Stop-hook cap, max turns, budget, hook-made terminal reasons",
        probes=termination.PROBES,
        summary="What ends the loop, and what the final result says about it.",
    ),
    ReportSpec(
        name="streamed-input",
        title="Streamed input: mid-turn messages, interrupts, permission prompts, "
              "model and mode changes",
        probes=streamed_input.PROBES,
        summary="The caller keeps writing stream-json while the loop runs, as the Agent SDK "
                "does: what reaches the model, what an interrupt ends, what the caller's "
                "permission answers do.",
    ),
    ReportSpec(
        name="goal",
        title="/goal: an evaluator request decides whether the loop ends",
        probes=(goal.PROBE,),
        summary="A goal set with /goal is a Stop hook judged by the model: one evaluator "
                "request after each turn, its verdict sends the model back or ends the run.",
    ),
    ReportSpec(
        name="mcp",
        title="MCP tools: output rewriting, tool list refresh, a server that dies or hangs",
        probes=(*mcp_tools.PROBES, mcp_failures.FAILURE_PROBE),
        summary="The harness's own MCP server attached over stdio, with scripted tools; "
                "PostToolUse rewriting on MCP and built-in tools.",
    ),
)


def find_report(name: str) -> ReportSpec:
    for spec in REPORTS:
        if spec.name == name:
            return spec
    raise KeyError(f"no report {name!r}; known: {', '.join(s.name for s in REPORTS)}")
