"""The mechanisms the published analysis describes, each with the claim that tests it at runtime
(or why none does here). The README's table is rendered from this and the committed reports
(``loopprobe mechanisms``); a test keeps them in step.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MECHANISMS", "Mechanism"]


@dataclass(frozen=True)
class Mechanism:
    description: str
    claim: str | None = None
    unprobed: str | None = None  # why no claim tests it here


MECHANISMS: tuple[Mechanism, ...] = (
    Mechanism('tool_use → client runs the tool → tool_result with the same id in the next request',
              'probe.agent-loop-tool-feedback'),
    Mechanism('`--resume` restores prompt, tool exchange and answer',
              'probe.session-resume'),
    Mechanism('`/compact`: compact_boundary, trigger manual, pre-token count',
              'probe.manual-compaction-boundary'),
    Mechanism('`--fork-session`: new identity, post-compaction message view',
              'probe.session-fork-identity'),
    Mechanism('Stop hook block re-enters the loop; `stop_hook_active` on re-entry',
              'probe.stop-hook-reentry'),
    Mechanism("`--max-turns 1`: the turn's tools run, no second request, error_max_turns",
              'probe.max-turns-terminal'),
    Mechanism('max turns counts model iterations, not requests or tools (N = 1, 2, 3; a 529 '
              'retry and a max_tokens recovery inside a turn do not count)',
              'probe.max-turns-counts-model-turns'),
    Mechanism('subagent = separate loop (own prompt, tools, requests)',
              'probe.subagent-isolation'),
    Mechanism('background subagent: launch ack, result by `<task-notification>`, 3 parent requests',
              'probe.subagent-notification-feedback'),
    Mechanism('a tool starts at its `content_block_stop`, before `message_stop`',
              'probe.streaming-tool-start'),
    Mechanism('concurrency-safe calls overlap',
              'probe.concurrency-safe-overlap'),
    Mechanism('an unsafe call (Edit) is a barrier; Bash after Edit sees the edit',
              'probe.unsafe-tool-barrier'),
    Mechanism('results pair by `tool_use_id`, not completion order',
              'probe.result-pairing-by-id'),
    Mechanism('unknown tool → error tool_result, loop continues',
              'probe.unknown-tool-error-result'),
    Mechanism('schema violation → InputValidationError, tool and hooks not run',
              'probe.input-validation-error'),
    Mechanism('denial (hook, deny rule) → error tool_result, no side effect',
              'probe.permission-denied-no-side-effect'),
    Mechanism('failing tool → is_error result, earlier edits kept',
              'probe.failed-tool-no-rollback'),
    Mechanism('PreToolUse `updatedInput` is what runs',
              'probe.pretooluse-updated-input'),
    Mechanism('`max_tokens`: at most 3 recovery requests, then the error',
              'probe.max-tokens-recovery'),
    Mechanism('`stop_reason: tool_use` without a block: one retry, then '
              '`malformed_tool_use_exhausted`',
              'probe.malformed-tool-use-retry'),
    Mechanism('thinking-only answer: one nudge, then accepted',
              'probe.thinking-only-nudge'),
    Mechanism('400 prompt too long → reactive compaction and retry, error hidden',
              'probe.prompt-too-long-reactive-compact'),
    Mechanism('compaction cannot help → `prompt_too_long` surfaced',
              'probe.prompt-too-long-surfaced'),
    Mechanism('auto-compaction inside the loop with a configured window',
              'probe.auto-compaction-window'),
    Mechanism('529 / 500 retried with `api_retry` events, retry-after honoured; a broken '
              'stream re-sent without streaming',
              'probe.api-retry-backoff'),
    Mechanism('compaction needs two message groups: one tool turn is not compacted, two and '
              'three are (reactive and automatic; baseline of 2.1.235)',
              'probe.compaction-group-gate'),
    Mechanism('`CLAUDE_CODE_DISABLE_NONSTREAMING_FALLBACK=1`: a broken stream is never re-sent '
              'without streaming (public docs, not the analysis)',
              'probe.nonstreaming-fallback-disabled'),
    Mechanism('`--fallback-model` after repeated overload; abandoned response dropped',
              'probe.fallback-model-switch'),
    Mechanism('Stop-hook block cap (8, `CLAUDE_CODE_STOP_HOOK_BLOCK_CAP`) ends the loop with a '
              'warning',
              'probe.stop-hook-block-cap'),
    Mechanism('`--max-budget-usd` → `budget_exhausted` / error_max_budget_usd',
              'probe.max-budget-usd'),
    Mechanism('hook `continue: false` after a tool batch → `hook_stopped`',
              'probe.hook-stopped-terminal'),
    Mechanism('Stop hook `continue: false` → `stop_hook_prevented`',
              'probe.stop-hook-prevented-terminal'),
    Mechanism('PreToolUse `defer` in print mode → `tool_deferred`',
              'probe.tool-deferred-terminal'),
    Mechanism('PostToolUse `updatedToolOutput` replaces what the model receives',
              'probe.posttooluse-updated-output'),
    Mechanism('PostToolUse output that fails the output schema → the original is kept',
              'probe.posttooluse-invalid-output-kept'),
    Mechanism('PostToolUse `updatedMCPToolOutput` replaces an MCP tool\'s output',
              'probe.posttooluse-mcp-output'),
    Mechanism('mid-turn user input queued while a tool runs, absorbed at the next request of '
              'the same turn (a blocking tool is not cancelled)',
              'probe.mid-turn-input-absorbed'),
    Mechanism('interrupt while a tool runs → the turn ends `aborted_tools`, no further request',
              'probe.interrupt-during-tools'),
    Mechanism('interrupt while a block tool runs (no cancel declared) → the tool runs to its end',
              'probe.interrupt-block-tool-completes'),
    Mechanism('an interrupted session resumes with every tool_use answered',
              'probe.interrupted-session-resumable'),
    Mechanism('interrupt while the model streams → `aborted_streaming`',
              'probe.interrupt-during-streaming'),
    Mechanism('permission decisions by the caller: `can_use_tool` per call needing permission',
              'probe.can-use-tool-asked'),
    Mechanism('`can_use_tool` deny → error tool_result with the message, nothing runs',
              'probe.can-use-tool-deny'),
    Mechanism('`can_use_tool` allow with `updatedInput` → the updated input runs',
              'probe.can-use-tool-updated-input'),
    Mechanism('`set_model` between turns → the next request names the new model',
              'probe.set-model-next-request'),
    Mechanism('`set_permission_mode` between turns governs the next tool call',
              'probe.set-permission-mode-next-call'),
    Mechanism('`/goal`: an evaluator request after each turn; "not met" sends the model back',
              'probe.goal-evaluator-loop'),
    Mechanism('`/goal`: an "impossible" verdict ends the loop', 'probe.goal-impossible-ends'),
    Mechanism('`command_lifecycle`: a mid-turn message queued, started when absorbed, completed '
              'with the turn', 'probe.command-lifecycle-absorbed'),
    Mechanism('`command_lifecycle`: an interrupted turn\'s command is cancelled',
              'probe.command-lifecycle-cancelled'),
    Mechanism('`/loop` dynamic wake-up (ScheduleWakeup) starts a turn by itself after its delay',
              'probe.loop-wakeup-fires'),
    Mechanism('`command_lifecycle` of a wake-up: started, completed, no queued',
              'probe.command-lifecycle-wakeup'),
    Mechanism('MCP server announces a changed tool list → listed again, offered at the next turn',
              'probe.mcp-tool-list-refresh'),
    Mechanism('MCP server dies mid-call → error tool_result, the loop goes on',
              'probe.mcp-server-crash-error-result'),
    Mechanism('MCP call never answered → `MCP_TOOL_TIMEOUT` error tool_result',
              'probe.mcp-tool-timeout'),
    Mechanism('refusal fallback, server mid-stream model fallback',
              unprobed='not reachable: decided by the real service'),
    Mechanism('past the blocking line with no compaction → `blocking_limit`, no request sent',
              'probe.blocking-limit-terminal'),
    Mechanism('`--json-schema`: invalid structured output retried until '
              '`structured_output_retry_exhausted`', 'probe.structured-output-retry-exhausted'),
    Mechanism('`rapid_refill_breaker`, `image_error`', unprobed='not probed yet'),
    Mechanism("concurrency-safe tools' context layers, queryChainId/depth, timing marks",
              unprobed='internal state and telemetry, not observable on the wire or in print output'),
)
