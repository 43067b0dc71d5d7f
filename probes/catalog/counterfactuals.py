"""Counterfactuals of every catalog probe: variants in which the claimed behaviour cannot happen.

Run on the real client, each variant must make the claims it names fail through their own
checks (the run itself completes normally). That shows the checks can fail on real
behaviour, not only on edited evidence. Variants that concern one run keep only that run,
which keeps them cheap; the claims they do not name are not judged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal

# module imports, not `from probes.catalog import ...`: the package imports this module
import probes.catalog.goal as goal
import probes.catalog.mcp_tools as mcp_tools
import probes.catalog.recovery as recovery
import probes.catalog.runtime_controls as runtime_controls
import probes.catalog.streamed_input as streamed_input
import probes.catalog.subagents as subagents
import probes.catalog.termination as termination
import probes.catalog.tool_pipeline as tool_pipeline
import probes.catalog.tool_result_resume as tool_result_resume
import probes.catalog.tool_scheduling as tool_scheduling
from mockapi import (
    ApiError,
    Match,
    Message,
    Rule,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
    api_error,
    prompt_too_long,
    text,
    tool_use,
)
from mockapi.replies import PROMPT_TOO_LONG, Reply, StreamStall, Usage
from probes.core.mcp import McpReply, McpServer
from probes.core.probe import Counterfactual, Hooks, Probe
from probes.core.streamed import Step, user_message

__all__ = ["COUNTERFACTUALS"]


# ---- building variants (never mutating the catalog's objects) -------------------------------

def _rule(probe: Probe, rule_id: str) -> Rule:
    for rule, found in zip(probe.scenario.rules, probe.scenario.rule_ids(), strict=True):
        if found == rule_id:
            return rule
    raise KeyError(f"probe {probe.name!r} has no rule {rule_id!r}; "
                   f"it has {probe.scenario.rule_ids()}")


def _answering(probe: Probe, rule_id: str, *replies: Reply,
               repeat: Literal["once", "always"] | None = None) -> Rule:
    """The rule ``rule_id`` of ``probe`` (same id and match) answering with other replies."""
    old = _rule(probe, rule_id)
    form: dict[str, Any] = {"reply": replies[0]} if len(replies) == 1 else {"replies": list(replies)}
    return Rule(id=old.id, match=old.match, repeat=repeat or old.repeat, **form)


def _rules(probe: Probe, changed: Sequence[Rule] = (), *, added: Sequence[Rule] = ()) -> Probe:
    """``probe`` with the rules of the same ids replaced by ``changed``, and ``added`` first."""
    by_id = {rule.id: rule for rule in changed}
    ids = probe.scenario.rule_ids()
    unknown = sorted(str(i) for i in set(by_id) - set(ids))
    if unknown:
        raise KeyError(f"probe {probe.name!r} has no rules {unknown}")
    rules = [*added, *(by_id.get(i, rule) for i, rule in zip(ids, probe.scenario.rules, strict=True))]
    return replace(probe, scenario=probe.scenario.model_copy(update={"rules": rules}))


def _runs(probe: Probe, keep: Sequence[str] | None = None,
          changes: Mapping[str, Mapping[str, Any]] | None = None) -> Probe:
    """``probe`` with only the invocations named in ``keep`` (all by default), each changed."""
    names = [i.name for i in probe.invocations]
    unknown = sorted((set(keep or ()) | set(changes or {})) - set(names))
    if unknown:
        raise KeyError(f"probe {probe.name!r} has no invocations {unknown}; it has {names}")
    kept = [i for i in probe.invocations if keep is None or i.name in keep]
    return replace(probe, invocations=tuple(replace(i, **(changes or {}).get(i.name, {}))
                                            for i in kept))


def _without_hook_rules(probe: Probe, event: str, action: str) -> Probe:
    """``probe`` whose hook policy for ``event`` no longer has rules with ``action``."""
    assert probe.hooks is not None, probe.name
    rules = probe.hooks.policy.get(event, [])
    rules = [rules] if isinstance(rules, Mapping) else list(rules)
    if not any(r.get("action") == action for r in rules):
        raise KeyError(f"probe {probe.name!r} has no {event} hook rule with action {action!r}")
    policy = {**probe.hooks.policy, event: [r for r in rules if r.get("action") != action]}
    return replace(probe, hooks=Hooks(policy))


def _recording_hooks(probe: Probe) -> Probe:
    """``probe`` whose hooks only record (every call still logged, nothing decided)."""
    return replace(probe, hooks=Hooks())


# ---- tool feedback, resume, compaction, fork ---------------------------------------------------

_TRR = (
    Counterfactual(
        "text-only-answer",
        "The model answers the first prompt with text only (no tool_use), so no tool runs, no "
        "tool_result returns and the loop makes a single request.",
        (tool_result_resume.FEEDBACK,),
        lambda p: _runs(_rules(p, [_answering(p, "initial-read", text(tool_result_resume.FINAL))]),
                        keep=("initial",))),
    Counterfactual(
        "fresh-session",
        "The resume run starts a new session instead of resuming the first, so its request "
        "cannot hold the first prompt, the tool exchange or the first answer.",
        (tool_result_resume.RESUMED,),
        lambda p: _runs(p, keep=("initial", "resume"),
                        changes={"resume": {"session": "new", "resume_from": None}})),
    Counterfactual(
        "ordinary-prompt-instead-of-compact",
        "The compact run sends an ordinary prompt instead of /compact, so nothing asks for "
        "a summary and no compact boundary can be emitted or recorded.",
        (tool_result_resume.COMPACTED,),
        lambda p: _runs(
            _rules(p, added=[Rule(id="no-compact-answer",
                                  match=Match(last_user_text_contains="AGENT_LOOP_NO_COMPACT"),
                                  reply=text("NOT_COMPACTED"))]),
            keep=("initial", "compact"),
            changes={"compact": {"prompt": "AGENT_LOOP_NO_COMPACT_MARKER"}})),
    Counterfactual(
        "resume-without-fork",
        "The last run resumes the compacted session without --fork-session, so it keeps the "
        "original session id and appends to the original transcript.",
        (tool_result_resume.FORKED,),
        lambda p: _runs(p, changes={"fork": {"fork": False}})),
    Counterfactual(
        "fork-before-compaction",
        "The session is forked without the /compact run before it, so there is no summary to "
        "keep and the fork's request still holds the first prompt, the tool exchange and the "
        "first answer.",
        (tool_result_resume.FORKED,),
        lambda p: _runs(p, keep=("initial", "resume", "fork"))),
)


# ---- runtime controls ---------------------------------------------------------------------------

_STOP = (
    Counterfactual(
        "stop-hook-allows",
        "The Stop hook only records and never blocks, so the first answer ends the run: no "
        "feedback request, no re-entry.",
        (runtime_controls.STOP_CLAIM,),
        _recording_hooks),
)

_MAX_TURNS = (
    Counterfactual(
        "no-turn-limit",
        "The run has no --max-turns, so after the Read the loop makes its second request and "
        "ends with the scripted answer (success).",
        (runtime_controls.MAX_CLAIM,),
        lambda p: _runs(p, changes={"max-turns": {"max_turns": None}})),
)


# ---- subagents ----------------------------------------------------------------------------------


def _foreground(p: Probe) -> Probe:
    launch = {**subagents.LAUNCH_INPUT, "run_in_background": False}
    return _rules(p, [_answering(p, "launch-agent", tool_use("Agent", launch, id=subagents.TOOL_ID)),
                      _answering(p, "launch-task", tool_use("Task", launch, id=subagents.TOOL_ID))])


_SUBAGENT = (
    Counterfactual(
        "no-launch",
        "The parent model answers with text instead of launching the agent, so no child loop "
        "runs and nothing is notified: one parent request.",
        (subagents.ISOLATION, subagents.FEEDBACK),
        lambda p: _rules(p, [_answering(p, "launch-agent", text(subagents.PARENT_OK)),
                             _answering(p, "launch-task", text(subagents.PARENT_OK))])),
    Counterfactual(
        "foreground-agent",
        "The parent launches the agent with run_in_background false, so the child's result "
        "comes back as the Agent call's own tool_result, not as a later task notification.",
        (subagents.FEEDBACK,),
        _foreground),
)


# ---- tool scheduling ----------------------------------------------------------------------------


def _block_held_open(p: Probe) -> Probe:
    held = Message(content=[ToolUseBlock(name="Read", id=tool_scheduling.STREAM_TOOL,
                                         input={"file_path": "{workspace}/early.txt"})],
                   stall=StreamStall(before_event="content_block_stop",
                                     seconds=tool_scheduling.HOLD_SECONDS))
    return _rules(p, [_answering(p, "held-tool-use", held)])


_BATCH_ORDER = ("read_a", "grep", "read_b", "edit", "read_c", "bash")


def _one_call_per_response(p: Probe) -> Probe:
    batch = _rule(p, "batch").reply
    assert isinstance(batch, Message)
    blocks = {b.id: b for b in batch.content if isinstance(b, ToolUseBlock)}
    calls = [blocks[tool_scheduling.IDS[key]] for key in _BATCH_ORDER]
    chain = [Rule(id=f"after-{key}", match=Match(tool_result_for=tool_scheduling.IDS[key]),
                  reply=Message(content=[call]))
             for key, call in zip(_BATCH_ORDER, calls[1:], strict=False)]
    return _rules(p, [_answering(p, "batch", Message(content=[calls[0]]))], added=chain)


def _no_barrier(p: Probe) -> Probe:
    batch = _rule(p, "batch").reply
    assert isinstance(batch, Message)
    safe = ToolUseBlock(name="Read", id=tool_scheduling.IDS["edit"], input={"file_path": "{workspace}/b.txt"})
    content = [safe if isinstance(b, ToolUseBlock) and b.id == tool_scheduling.IDS["edit"] else b
               for b in batch.content]
    return _rules(p, [_answering(p, "batch", Message(content=content))])


def _same_id(p: Probe) -> Probe:
    both = Message(content=[
        ToolUseBlock(name="Read", id=tool_scheduling.SLOW, input={"file_path": "{workspace}/slow.txt"}),
        ToolUseBlock(name="Read", id=tool_scheduling.SLOW, input={"file_path": "{workspace}/fast.txt"})])
    return _rules(p, [_answering(p, "two-reads", both)])


_STREAMING = (
    Counterfactual(
        "block-held-open",
        f"The mock holds the tool_use block itself open for {tool_scheduling.HOLD_SECONDS}s (before its "
        "content_block_stop) and then ends the message at once, so the block is complete only "
        "when the message ends: the tool cannot run while the message still streams.",
        (tool_scheduling.STREAMING,),
        _block_held_open),
)

_BATCH = (
    Counterfactual(
        "one-call-per-response",
        "The six calls come one per response, each after the previous result, so no two of "
        "them can run at the same time.",
        (tool_scheduling.CONCURRENCY,),
        _one_call_per_response),
    Counterfactual(
        "read-instead-of-edit",
        "The Edit is replaced by a Read of the same file (same id): every call before the Bash "
        "is concurrency-safe, so nothing makes the calls around it wait, and nothing edits "
        "the file the Bash shows.",
        (tool_scheduling.BARRIER,),
        _no_barrier),
)

_PAIRING = (
    Counterfactual(
        "same-id-twice",
        "Both Read calls carry the same tool_use id, so their results cannot be told apart by "
        "id: no call has the fast call's id, and one id cannot carry both files' results.",
        (tool_scheduling.PAIRING,),
        _same_id),
    Counterfactual(
        "calls-finish-in-order",
        "The hook delays the second call instead of the first, so the calls finish in the "
        "order they were issued: pairing by id cannot be told from pairing by completion "
        "order, and the setup the claim needs is missing.",
        (tool_scheduling.PAIRING,),
        lambda p: replace(p, hooks=Hooks({"PreToolUse": [
            {"action": "record", "input_contains": "slow.txt", "sleep": 0.1},
            {"action": "record", "input_contains": "fast.txt", "sleep": 2.0}]}))),
)


# ---- tool pipeline ----------------------------------------------------------------------------


def _calls(p: Probe, rule_id: str, **changed: ToolUseBlock) -> Rule:
    """The rule's single message with the calls of the given IDS keys replaced."""
    old = _rule(p, rule_id).reply
    assert isinstance(old, Message)
    blocks = {tool_pipeline.IDS[key]: block for key, block in changed.items()}
    return _answering(p, rule_id, Message(content=[
        blocks.get(b.id or "", b) if isinstance(b, ToolUseBlock) else b for b in old.content]))


_PIPELINE = (
    Counterfactual(
        "known-tool",
        "The call names Read, a tool that exists, with valid input, so there is no unknown "
        "tool to report: it runs and succeeds.",
        (tool_pipeline.UNKNOWN,),
        lambda p: _runs(_rules(p, [_calls(p, "unknown_tool_prompt-calls", unknown=ToolUseBlock(
            name="Read", id=tool_pipeline.IDS["unknown"], input={"file_path": "{workspace}/kept.txt"}))]),
            keep=("unknown",))),
    Counterfactual(
        "valid-input",
        "The Read's file_path is a string naming a fixture, so the input fits the schema: no "
        "validation error, and the call passes through the hooks to the tool.",
        (tool_pipeline.INVALID,),
        lambda p: _runs(_rules(p, [_calls(p, "invalid_input_prompt-calls", invalid=ToolUseBlock(
            name="Read", id=tool_pipeline.IDS["invalid"], input={"file_path": "{workspace}/kept.txt"}))]),
            keep=("invalid",))),
    Counterfactual(
        "nothing-denies",
        "No PreToolUse hook denies the Write and no settings rule denies the Bash, so both run: "
        "no error results, and both files are created.",
        (tool_pipeline.DENIED,),
        lambda p: _runs(_without_hook_rules(p, "PreToolUse", "deny"), keep=("denied",),
                        changes={"denied": {"settings": None}})),
    Counterfactual(
        "bash-succeeds",
        "The Bash after the Edit exits 0, so no tool fails and no error result is given.",
        (tool_pipeline.FAILED,),
        lambda p: _runs(_rules(p, [_calls(p, "failing_tool_prompt-calls", failing=ToolUseBlock(
            name="Bash", id=tool_pipeline.IDS["failing"],
            input={"command": "echo failing; exit 0", "description": "succeed"}))]),
            keep=("failing",))),
    Counterfactual(
        "edit-does-not-apply",
        "The Edit's old_string is not in the file, so the Edit itself fails: there is no "
        "earlier side effect for the failing Bash to leave in place.",
        (tool_pipeline.FAILED,),
        lambda p: _runs(_rules(p, [_calls(p, "failing_tool_prompt-calls", edit=ToolUseBlock(
            name="Edit", id=tool_pipeline.IDS["edit"],
            input={"file_path": "{workspace}/kept.txt", "old_string": "NOT_IN_THE_FILE",
                   "new_string": "EDITED_BEFORE_FAILURE"}))]),
            keep=("failing",))),
    Counterfactual(
        "no-input-rewrite",
        "No PreToolUse hook rewrites the Read's input, so the tool reads the file the model "
        "asked for.",
        (tool_pipeline.REWRITTEN,),
        lambda p: _runs(_without_hook_rules(p, "PreToolUse", "update_input"),
                        keep=("rewritten",))),
)


# ---- recovery ---------------------------------------------------------------------------------


def _well_formed_tool_use(p: Probe) -> Probe:
    changed = _rules(p, [_answering(
        p, "no-block", tool_use("Read", {"file_path": "{workspace}/malformed.txt"}),
        text("WELL_FORMED_DONE"), repeat="once")])
    return replace(changed, fixtures={**p.fixtures, "malformed.txt": "MALFORMED_FIXTURE\n"})


def _other_400(p: Probe) -> Probe:
    too_long = PROMPT_TOO_LONG.split(":")[0]
    turns = _rule(p, "turns").reply_list()
    others = [api_error(400, "loopprobe: an ordinary invalid request")
              if isinstance(r, ApiError) and too_long in r.error.message else r for r in turns]
    assert others != turns, "the prompt-too-long reply was not found"
    return _rules(p, [_answering(p, "turns", *others)])


_MAX_TOKENS = (
    Counterfactual(
        "complete-answer",
        "Every answer ends with end_turn instead of max_tokens, so nothing is truncated: no "
        "recovery request, no surfaced error.",
        (recovery.MAX_TOKENS,),
        lambda p: _rules(p, [_answering(p, "always-truncated", text("COMPLETE_ANSWER"))])),
)

_MALFORMED = (
    Counterfactual(
        "well-formed-tool-use",
        "The stop_reason tool_use comes with a complete tool_use block (a Read), so the "
        "response is well formed: the tool runs and the turn completes.",
        (recovery.MALFORMED,),
        _well_formed_tool_use),
)

_THINKING = (
    Counterfactual(
        "thinking-with-answer",
        "The thinking block comes with a visible text answer, so there is nothing to nudge "
        "for: one request.",
        (recovery.THINKING,),
        lambda p: _rules(p, [_answering(p, "thinking-only", Message(content=[
            ThinkingBlock(thinking="THINKING_WITH_ANSWER"), TextBlock(text="VISIBLE_ANSWER")]))])),
)

_PTL = (
    Counterfactual(
        "ordinary-400",
        "The rejected request gets an ordinary 400 invalid_request_error instead of 'prompt is "
        "too long', so compacting cannot help and the client has no reason to.",
        (recovery.PTL_RECOVERED,),
        _other_400),
    Counterfactual(
        "compaction-too-long",
        "The summary request is itself rejected as too long, so reactive compaction cannot "
        "succeed: no boundary, no retry from a summary, and the error is surfaced.",
        (recovery.PTL_RECOVERED,),
        lambda p: _rules(p, [_answering(p, "summary", prompt_too_long(), repeat="always")])),
)

_PTL_FAIL = (
    Counterfactual(
        "answered",
        "Every request is answered normally, so there is no prompt-too-long error to surface.",
        (recovery.PTL_SURFACED,),
        lambda p: _rules(p, [_answering(p, "always-too-long", text("ANSWERED_NORMALLY"))])),
)

_AUTO_COMPACT = (
    Counterfactual(
        "default-window",
        "No context window is configured, so the 99000 reported input tokens stay far below "
        "the model's own auto-compaction threshold: nothing is compacted.",
        (recovery.AUTO_COMPACT,),
        lambda p: _runs(p, changes={"auto": {"env": {}}})),
)

_RETRIES = (
    Counterfactual(
        "no-failure",
        "The first attempt succeeds, so there is nothing to retry and no retry-after to honour.",
        (recovery.RETRIES,),
        lambda p: _rules(p, [_answering(p, "flaky", text("RETRIED_OK"))])),
)

_GATE = (
    Counterfactual(
        "summary-rejected",
        "Every summary request is itself rejected as too long, so no history, of any length, "
        "can be compacted.",
        (recovery.COMPACTION_GATE,),
        lambda p: _rules(p, [_answering(p, "summary", prompt_too_long(), repeat="always")])),
)

_NO_STREAM_FALLBACK = (
    Counterfactual(
        "variable-unset",
        "CLAUDE_CODE_DISABLE_NONSTREAMING_FALLBACK is not set, so the client may fall back to "
        "a non-streaming re-send of the broken stream.",
        (recovery.NO_STREAM_FALLBACK,),
        lambda p: _runs(p, changes={run: {"env": {"CLAUDE_CODE_MAX_RETRIES": "3"}}
                                    for run in recovery.BREAK_AFTER})),
)

_FALLBACK = (
    Counterfactual(
        "primary-answers",
        "The primary model answers at once, so there is no overload to switch models on.",
        (recovery.FALLBACK,),
        lambda p: _rules(p, [_answering(p, "primary-overloaded", text("PRIMARY_OK"))])),
)


# ---- termination --------------------------------------------------------------------------------


def _text_only_turns(p: Probe) -> Probe:
    return _rules(p, [_answering(p, "two-tools", text("TURNS_DONE")),
                      _answering(p, "one-tool", text("TURNS_DONE"))])


def _cheap_turns(p: Probe) -> Probe:
    return _rules(p, [_answering(
        p, "expensive", tool_use("Read", {"file_path": "{workspace}/budget.txt"}, usage=Usage()),
        text("BUDGET_DONE"))])


def _small_context(p: Probe) -> Probe:
    return _rules(p, [_answering(
        p, "huge-turn", tool_use("Read", {"file_path": "{workspace}/blocking.txt"}))])


_CAP = (
    Counterfactual(
        "stop-hook-never-blocks",
        "The Stop hook only records and never blocks, so each run ends after its first answer: "
        "there is no block to cap and nothing to override.",
        (termination.CAP,),
        _recording_hooks),
)

_TURNS = (
    Counterfactual(
        "text-answers",
        "The model answers every prompt with text only, so each run ends by itself after one "
        "request, before any turn limit, and no tool runs.",
        (termination.TURNS,),
        _text_only_turns),
    Counterfactual(
        "one-tool-per-response",
        "The TWO_TOOLS prompt is answered with one Read per response, so its two turns run "
        "two tools, not the three that two calls in one response would give.",
        (termination.TURNS,),
        lambda p: _runs(_rules(p, [_answering(
            p, "two-tools", tool_use("Read", {"file_path": "{workspace}/turns.txt"}))]),
            keep=("two-tools",))),
)

_BUDGET = (
    Counterfactual(
        "cheap-turns",
        "The responses report 100 input tokens instead of a million, so the run costs far less "
        "than the budget and ends with the scripted answer.",
        (termination.BUDGET,),
        _cheap_turns),
)

_HOOK_STOPPED = (
    Counterfactual(
        "hook-records-only",
        "The PreToolUse hook only records (no continue:false), so the loop goes on to the next "
        "request and completes.",
        (termination.HOOK_STOPPED,),
        _recording_hooks),
)

_STOP_PREVENTED = (
    Counterfactual(
        "stop-hook-records-only",
        "The Stop hook only records (no continue:false), so the run ends as completed.",
        (termination.STOP_PREVENTED,),
        _recording_hooks),
)

_DEFERRED = (
    Counterfactual(
        "hook-records-only",
        "The PreToolUse hook only records (no defer), so the tool runs and the loop goes on to "
        "the next request and completes.",
        (termination.DEFERRED,),
        _recording_hooks),
)

_BLOCKING = (
    Counterfactual(
        "small-context",
        "The large turn reports 100 input tokens instead of 190000, so the context is far "
        "below the blocking line and the next request is sent.",
        (termination.BLOCKING,),
        _small_context),
)


# ---- streamed input ---------------------------------------------------------------------------

def _streamed(probe: Probe, run: str, *steps: Step, **changes: Any) -> Probe:
    """``probe`` whose streamed run ``run`` writes ``steps`` instead of its own."""
    invocation = next(i for i in probe.invocations if i.name == run)
    assert invocation.streamed is not None, (probe.name, run)
    script = replace(invocation.streamed, steps=steps, **changes)
    return _runs(probe, changes={run: {"streamed": script}})


_QUEUE = (Counterfactual(
    "message-after-the-turn",
    "The user message is written only after the turn's result, when no tool runs and no "
    "request is pending: it cannot join the running turn, so it starts a turn of its own.",
    (streamed_input.QUEUE_CLAIM, streamed_input.ABSORBED_CLAIM),
    lambda p: _rules(_streamed(p, "queue", Step(user_message(streamed_input.QUEUED),
                                                after_event={"type": "result"})),
                     added=[Rule(id="late-message",
                                 match=Match(last_user_text_contains=streamed_input.QUEUED),
                                 reply=text("LATE_MESSAGE_ANSWER"))])),)

_INTERRUPT_TOOLS = (
    Counterfactual(
        "no-interrupt",
        "Nothing is written after the prompt and the tool ends at once: there is nothing to "
        "cancel, so the turn goes on to the next request and completes.",
        (streamed_input.TOOLS_CLAIM, streamed_input.CANCELLED_CLAIM),
        lambda p: _rules(_runs(_streamed(p, "interrupted"), keep=("interrupted",)), [
            _answering(p, "run-tool", tool_use("Bash", {
                "command": f"touch {streamed_input.INTERRUPT_STARTED} "
                           f"{streamed_input.INTERRUPT_FINISHED}",
                "description": "a tool that ends at once"}, id=streamed_input.INTERRUPT_TOOL))])),
    Counterfactual(
        "resume-as-new-session",
        "The second run starts a new session instead of resuming the interrupted one, so "
        "its request cannot hold the interrupted call.",
        (streamed_input.RESUME_CLAIM,),
        lambda p: _runs(p, changes={"resumed": {"session": "new", "resume_from": None}})),
)

_INTERRUPT_STREAM = (Counterfactual(
    "no-interrupt",
    "Nothing is written after the prompt and the stream does not pause: the answer arrives "
    "whole, its tool runs and the turn completes.",
    (streamed_input.STREAM_CLAIM,),
    lambda p: _rules(_streamed(p, "streaming"), [
        _answering(p, "stalled-stream", tool_use("Bash", {"command": "touch never-run",
                                                          "description": "never"},
                                                 id="toolu_interrupt_stream_probe"))],
        added=[Rule(id="after-tool", match=Match(tool_result_for="toolu_interrupt_stream_probe"),
                    reply=text("STREAM_NOT_INTERRUPTED"))])),)

_LOOP = (Counterfactual(
    "input-closed-after-the-turn",
    "Input is closed at the scheduling turn's result: the session ends before any wake-up "
    "is due, so no turn can start by itself.",
    (streamed_input.WAKEUP_CLAIM, streamed_input.LIFECYCLE_CLAIM),
    lambda p: _streamed(p, "loop", close_on={"type": "result"}, close_after=None)),)

_PERMISSIONS = (Counterfactual(
    "permissions-bypassed",
    "The run bypasses permissions (no --permission-prompt-tool): the caller is never asked, "
    "so it cannot deny the command or change the write.",
    (streamed_input.ASKED_CLAIM, streamed_input.DENY_CLAIM, streamed_input.UPDATED_CLAIM),
    lambda p: _streamed(p, "permissions", permissions=None)),)

_SET_MODEL = (Counterfactual(
    "no-set-model",
    "The second turn follows without a set_model request, so nothing can change its model.",
    (streamed_input.MODEL_CLAIM,),
    lambda p: _streamed(p, "model", Step(user_message(streamed_input.MODEL_SECOND),
                                         after_event={"type": "result"}))),)

_SET_MODE = (Counterfactual(
    "no-set-permission-mode",
    "The second turn follows without a set_permission_mode request: the mode stays default, "
    "so its write must be asked for too.",
    (streamed_input.MODE_CLAIM,),
    lambda p: _streamed(p, "mode", Step(user_message(streamed_input.MODE_SECOND),
                                        after_event={"type": "result"}))),)


# ---- /goal ------------------------------------------------------------------------------------

_GOAL = (
    Counterfactual(
        "no-goal",
        "The same prompts without /goal: no stop condition is set, so there is nothing to "
        "evaluate and each run ends after its first answer.",
        (goal.GOAL_CLAIM, goal.IMPOSSIBLE_CLAIM),
        lambda p: _runs(p, changes={i.name: {"prompt": i.prompt.removeprefix("/goal ")}
                                    for i in p.invocations})),
    Counterfactual(
        "met-at-once",
        "The evaluator answers 'met' to the first answer: the model is never sent back.",
        (goal.GOAL_CLAIM,),
        lambda p: _runs(_rules(p, [_answering(p, "not-met", text(
            '{"ok": true, "reason": "met at once"}'))]), keep=("achieved",))),
)


# ---- MCP ----------------------------------------------------------------------------------------

def _server(probe: Probe, tool: str, *replies: McpReply) -> Probe:
    """``probe`` whose MCP server answers ``tool`` with ``replies`` instead."""
    server = mcp_tools.SERVER
    if tool not in [t.name for t in server.tools]:
        raise KeyError(f"the MCP server has no tool {tool!r}")
    changed = McpServer(tuple(replace(t, replies=replies) if t.name == tool else t
                              for t in server.tools), server.name)
    return _runs(probe, changes={i.name: {"mcp": changed} for i in probe.invocations
                                 if i.mcp is not None})


_REWRITE = (
    Counterfactual(
        "hooks-record-only",
        "The PostToolUse hook only records and answers nothing: no output can be replaced.",
        (mcp_tools.UPDATED_CLAIM, mcp_tools.MCP_REWRITE_CLAIM),
        _recording_hooks),
    Counterfactual(
        "valid-output",
        "The hook's output for bad.txt is shaped as Read's output, so it fits the schema and "
        "the original cannot be kept.",
        (mcp_tools.INVALID_CLAIM,),
        lambda p: replace(p, hooks=Hooks({"PostToolUse": [
            {"action": "output", "tools": ["Read"], "input_contains": "bad.txt", "output": {
                "hookSpecificOutput": {"hookEventName": "PostToolUse", "updatedToolOutput": {
                    "type": "text", "file": {"filePath": "{workspace}/bad.txt",
                                             "content": "NOT_A_READ_OUTPUT\n", "numLines": 1,
                                             "startLine": 1, "totalLines": 1}}}}}]}))),
)

_REFRESH = (Counterfactual(
    "list-unchanged",
    "The server answers the call without changing its tool list: there is nothing to refresh.",
    (mcp_tools.REFRESH_CLAIM,),
    lambda p: _server(p, "lookup", McpReply(text="MCP_LOOKUP_RESULT"))),)

_MCP_FAILURES = (
    Counterfactual(
        "crasher-answers",
        "The server answers the call instead of exiting: there is no failure to report.",
        (mcp_tools.CRASH_CLAIM,),
        lambda p: _server(p, "crasher", McpReply(text="CRASHER_ANSWERED"))),
    Counterfactual(
        "hanger-answers",
        "The server answers the call at once: nothing can time out.",
        (mcp_tools.TIMEOUT_CLAIM,),
        lambda p: _server(p, "hanger", McpReply(text="HANGER_ANSWERED"))),
)


_STRUCTURED = (Counterfactual(
    "valid-second-time",
    "The model's second StructuredOutput call fits the schema: nothing is exhausted.",
    (termination.STRUCTURED,),
    lambda p: _rules(p, [_answering(p, "invalid-again", tool_use(
        "StructuredOutput", {"answer": "VALID"}))])),)


COUNTERFACTUALS: dict[str, tuple[Counterfactual, ...]] = {
    tool_result_resume.PROBE.name: _TRR,
    runtime_controls.STOP_PROBE.name: _STOP,
    runtime_controls.MAX_TURNS_PROBE.name: _MAX_TURNS,
    subagents.PROBE.name: _SUBAGENT,
    tool_scheduling.STREAMING_PROBE.name: _STREAMING,
    tool_scheduling.BATCH_PROBE.name: _BATCH,
    tool_scheduling.PAIRING_PROBE.name: _PAIRING,
    tool_pipeline.PROBE.name: _PIPELINE,
    recovery.MAX_TOKENS_PROBE.name: _MAX_TOKENS,
    recovery.MALFORMED_PROBE.name: _MALFORMED,
    recovery.THINKING_PROBE.name: _THINKING,
    recovery.PTL_PROBE.name: _PTL,
    recovery.PTL_FAIL_PROBE.name: _PTL_FAIL,
    recovery.AUTO_COMPACT_PROBE.name: _AUTO_COMPACT,
    recovery.RETRIES_PROBE.name: _RETRIES,
    recovery.FALLBACK_PROBE.name: _FALLBACK,
    recovery.GATE_PROBE.name: _GATE,
    recovery.NO_STREAM_FALLBACK_PROBE.name: _NO_STREAM_FALLBACK,
    termination.CAP_PROBE.name: _CAP,
    termination.TURNS_PROBE.name: _TURNS,
    termination.BUDGET_PROBE.name: _BUDGET,
    termination.HOOK_STOPPED_PROBE.name: _HOOK_STOPPED,
    termination.STOP_PREVENTED_PROBE.name: _STOP_PREVENTED,
    termination.DEFERRED_PROBE.name: _DEFERRED,
    termination.BLOCKING_PROBE.name: _BLOCKING,
    termination.STRUCTURED_PROBE.name: _STRUCTURED,
    streamed_input.QUEUE_PROBE.name: _QUEUE,
    streamed_input.INTERRUPT_TOOLS_PROBE.name: _INTERRUPT_TOOLS,
    streamed_input.INTERRUPT_STREAMING_PROBE.name: _INTERRUPT_STREAM,
    streamed_input.PERMISSIONS_PROBE.name: _PERMISSIONS,
    streamed_input.SET_MODEL_PROBE.name: _SET_MODEL,
    streamed_input.SET_MODE_PROBE.name: _SET_MODE,
    streamed_input.LOOP_PROBE.name: _LOOP,
    goal.PROBE.name: _GOAL,
    mcp_tools.REWRITE_PROBE.name: _REWRITE,
    mcp_tools.REFRESH_PROBE.name: _REFRESH,
    mcp_tools.FAILURE_PROBE.name: _MCP_FAILURES,
}
