"""Every check of every probe can fail: fed real evidence altered to break its property.

The evidence comes from one run of the real client (the session fixture ``real_suite``,
shared with the reproducibility test of tests/test_client_runs.py). The
alterations in ALTERATIONS each break one property of the published probes and
name the checks that must then fail; GENERIC alterations break whole kinds of
evidence (results, hooks, requests, files, timings) of every probe. The last
test proves that together they make every claim check fail at least once.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from probes.catalog import REPORTS
from probes.core.evidence import Evidence, blocks_of_type, messages
from probes.core.outcome import ProbeOutcome
from probes.core.verdicts import check_evidence, decide_claim
from tests.fixtures.suite_without_clock import CLOCKED

pytestmark = pytest.mark.client

# every probe once on the real client, but the /loop one, which waits a minute or more on the
# client's clock (its checks are shown able to fail by its counterfactual on 2.1.332)
PROBES = {p.name: p for spec in REPORTS for p in spec.probes if p.name != CLOCKED}
PUBLISHED = ("agent-loop-tool-result-resume", "runtime-controls", "subagent-loop")


def recheck(outcome: ProbeOutcome, alter: Callable[[Evidence], Any]) -> dict[str, Any]:
    evidence = copy.deepcopy(outcome.evidence)
    assert evidence is not None
    alter(evidence)
    results, _ = check_evidence(outcome.probe, evidence)
    return {c.id.removeprefix(f"{outcome.probe.name}."): c for c in results}


# ---- alterations ------------------------------------------------------------

def _request(ev: Evidence, run: str, index: int, kind: str = "main") -> dict[str, Any]:
    return ev.requests(run, kind=kind)[index]


def _append_user_text(record: dict[str, Any], text: str) -> None:
    last = messages(record)[-1]
    if isinstance(last["content"], str):
        last["content"] = [{"type": "text", "text": last["content"]}]
    last["content"].append({"type": "text", "text": text})


def _set_tool_result_id(ev: Evidence) -> None:
    for _, block in blocks_of_type(_request(ev, "initial", 1), "tool_result"):
        block["tool_use_id"] = "toolu_someone_else"


def _file_in_first_request(ev: Evidence) -> None:
    _append_user_text(_request(ev, "initial", 0), "AGENT_LOOP_FILE_MARKER")


def _file_as_plain_text(ev: Evidence) -> None:
    record = _request(ev, "initial", 1)
    for _, block in blocks_of_type(record, "tool_result"):
        block["content"] = "nothing here"
    _append_user_text(record, "AGENT_LOOP_FILE_MARKER")


def _drop_tool_use(ev: Evidence) -> None:
    record = _request(ev, "initial", 1)
    for message in messages(record):
        if isinstance(message["content"], list):
            message["content"] = [b for b in message["content"] if b.get("type") != "tool_use"]


def _change_tool_input(ev: Evidence) -> None:
    for _, block in blocks_of_type(_request(ev, "initial", 1), "tool_use"):
        block["input"] = {"file_path": "/etc/passwd"}


def _drop_first_request_prompt_and_tools(ev: Evidence) -> None:
    record = _request(ev, "initial", 0)
    record["body"]["tools"] = [{"name": "Bash"}]
    for message in messages(record):
        if isinstance(message["content"], list):
            for block in message["content"]:
                if block.get("type") == "text":
                    block["text"] = block["text"].replace("AGENT_LOOP_INITIAL_MARKER", "")


def _extra_request(run: str) -> Callable[[Evidence], None]:
    def alter(ev: Evidence) -> None:
        extra = copy.deepcopy(ev.requests(run)[-1])
        extra["seq"] = ev.runs[run].seqs[1] + 1
        ev.runs[run].seqs = (ev.runs[run].seqs[0], extra["seq"])
        ev.journal.append(extra)
    return alter


def _result(run: str, **changes: Any) -> Callable[[Evidence], None]:
    def alter(ev: Evidence) -> None:
        result = ev.runs[run].output.result
        assert result is not None
        result.update(changes)
    return alter


def _exit(run: str, code: int | None) -> Callable[[Evidence], None]:
    def alter(ev: Evidence) -> None:
        ev.runs[run].exit_code = code
    return alter


def _no_tool_result_events(run: str) -> Callable[[Evidence], None]:
    def alter(ev: Evidence) -> None:
        ev.runs[run].output.events = [e for e in ev.runs[run].output.events
                                      if e.get("type") != "user"]
    return alter


def _resume_forgets(ev: Evidence) -> None:
    record = _request(ev, "resume", 0)
    body = record["body"]
    body["messages"] = body["messages"][-1:]
    for block in body["messages"][0]["content"]:
        if isinstance(block, dict) and block.get("type") == "text":
            block["text"] = block["text"].replace("AGENT_LOOP_RESUME_MARKER", "")


def _no_compact_boundary(ev: Evidence) -> None:
    run = ev.runs["compact"]
    run.output.events = [e for e in run.output.events if e.get("subtype") != "compact_boundary"]
    ev.journal[:] = [r for r in ev.journal if r.get("kind") != "compaction"]
    ev.session_files = {path: "\n".join(line for line in text.splitlines()
                                        if "compact_boundary" not in line)
                        for path, text in ev.session_files.items()}


def _auto_trigger(ev: Evidence) -> None:
    for event in ev.runs["compact"].output.events:
        if event.get("subtype") == "compact_boundary":
            event["compact_metadata"]["trigger"] = "auto"
            event["compact_metadata"]["pre_tokens"] = None


def _fork_reuses_session(ev: Evidence) -> None:
    fork, initial = ev.runs["fork"], ev.runs["initial"]
    assert fork.result is not None
    fork.result["session_id"] = initial.session_id
    fork.files_changed = {f"home/.claude/projects/x/{initial.session_id}.jsonl":
                          {"before": "a", "after": "b"}}


def _fork_keeps_history(ev: Evidence) -> None:
    record = _request(ev, "fork", 0)
    record["body"]["messages"] = [*messages(_request(ev, "resume", 0)),
                                  {"role": "user", "content": "no marker here"}]


def _stop_hook_never_reenters(ev: Evidence) -> None:
    calls = ev.hooks("Stop")
    calls[0]["input"]["stop_hook_active"] = True
    calls[0]["decision"] = None
    calls[1]["input"]["stop_hook_active"] = False
    calls[1]["decision"] = {"decision": "block"}


def _stop_hook_once(ev: Evidence) -> None:
    first = ev.hooks("Stop")[0]
    ev.hook_calls = [h for h in ev.hook_calls if h.get("event") != "Stop" or h is first]


def _stop_ended_at_block(ev: Evidence) -> None:
    """The client ended at the blocking Stop: no request arrived after it."""
    started = ev.hooks("Stop")[0]["started"]
    ev.journal[:] = [r for r in ev.journal if r.get("type") != "request"
                     or r.get("time", 0) <= started]


def _stop_request_after_allow(ev: Evidence) -> None:
    """The loop went on after the second Stop call: one more request arrived after it."""
    extra = copy.deepcopy(ev.requests("stop")[-1])
    extra["seq"] = ev.runs["stop"].seqs[1] + 1
    extra["time"] = ev.hooks("Stop")[1]["started"] + 1
    ev.runs["stop"].seqs = (ev.runs["stop"].seqs[0], extra["seq"])
    ev.journal.append(extra)


def _stop_feedback_lost(ev: Evidence) -> None:
    record = _request(ev, "stop", 1)
    record["rule"] = "other"
    record["body"]["messages"] = [{"role": "user", "content": "STOP_HOOK_PROMPT_MARKER"},
                                  {"role": "user", "content": "continue"}]
    _request(ev, "stop", 0)["rule"] = "other"


def _one_turn_compacted(ev: Evidence) -> None:
    """The runs with a single tool turn were compacted after all."""
    for run in ("reactive-1", "auto-1"):
        ev.runs[run].output.events.append(
            {"type": "system", "subtype": "compact_boundary", "compact_metadata": {"trigger": "auto"}})


def _no_post_tool_use(ev: Evidence) -> None:
    ev.hook_calls = [h for h in ev.hook_calls if h.get("event") != "PostToolUse"]


def _max_turns_ignored(ev: Evidence) -> None:
    _extra_request("max-turns")(ev)
    _result("max-turns", subtype="success", is_error=False, terminal_reason="completed")(ev)
    ev.runs["max-turns"].exit_code = 0


def _child_shares_parent(ev: Evidence) -> None:
    child = _request(ev, "parent", 0, kind="subagent")
    parent = _request(ev, "parent", 0)
    child["body"]["system"] = parent["body"]["system"]
    child["body"]["tools"] = parent["body"]["tools"]
    child["body"]["messages"] = messages(parent)


def _no_child(ev: Evidence) -> None:
    ev.journal[:] = [r for r in ev.journal
                     if "SUBAGENT_CHILD_SYSTEM_MARKER" not in str((r.get("body") or {}).get("system"))]


def _child_result_in_ack(ev: Evidence) -> None:
    for _, block in blocks_of_type(_request(ev, "parent", 1), "tool_result"):
        block["content"] = "SUBAGENT_CHILD_RESULT_MARKER"


def _notification_without_result(ev: Evidence) -> None:
    for message in messages(_request(ev, "parent", 2)):
        if isinstance(message["content"], list):
            for block in message["content"]:
                if block.get("type") == "text":
                    block["text"] = block["text"].replace("SUBAGENT_CHILD_RESULT_MARKER", "")


def _timed_out(run: str) -> Callable[[Evidence], None]:
    def alter(ev: Evidence) -> None:
        ev.runs[run].timed_out = True
    return alter


def _client_never_mentions(ev: Evidence) -> None:
    """The static lookup found none of the strings the probe named in the client's files."""
    found = ev.client_mentions.get("found") or {}
    ev.client_mentions = {**ev.client_mentions, "found": dict.fromkeys(found, False)}


def _no_terminal_reason(run: str) -> Callable[[Evidence], None]:
    def alter(ev: Evidence) -> None:
        result = ev.runs[run].output.result
        assert result is not None
        result.pop("terminal_reason", None)
    return alter


def _goal_unlisted(ev: Evidence) -> None:
    """The client lists no /goal among its slash commands and says it does not know it."""
    for run in ev.runs.values():
        for event in run.output.of_type("system", "init"):
            event["slash_commands"] = [c for c in event.get("slash_commands", []) if c != "goal"]
        if run.output.result is not None:
            run.output.result["result"] = "Unknown skill: goal"


def _impossible_not_offered(ev: Evidence) -> None:
    """The evaluator is offered only ok and reason (as 2.1.139-2.1.142 offer it)."""
    for record in ev.requests("impossible", kind=None):
        body = record.get("body") or {}
        schema = ((body.get("output_config") or {}).get("format") or {}).get("schema") or {}
        (schema.get("properties") or {}).pop("impossible", None)
        for block in body.get("system") or []:
            if isinstance(block, dict) and isinstance(block.get("text"), str):
                block["text"] = block["text"].replace('"impossible"', '"unlisted"')


def _client_declares_cancel(ev: Evidence) -> None:
    """The client's files declare a cancel tool: which one Bash is, they do not say."""
    found = dict(ev.client_mentions.get("found") or {})
    found.update({needle: True for needle in found if '"cancel"' in needle})
    ev.client_mentions = {**ev.client_mentions, "found": found}


def _unscripted_request(ev: Evidence) -> None:
    ev.journal.append({"type": "request", "seq": 999, "path": "/v1/messages", "kind": "main",
                       "outcome": "no_rule", "error": "no scenario rule matched request #999"})


def _loop_request_read_as_side(ev: Evidence) -> None:
    """The mock took the loop's first request for a side request (2.1.31-2.1.45 send a
    temperature) and answered it with its built-in reply."""
    first = next(r for r in ev.journal if r["type"] == "request" and r.get("kind") == "main")
    first.update(kind="side", builtin_reply="side-request", rule="builtin:side")


def _launch_without_background(ev: Evidence) -> None:
    """The version's Agent/Task tool declares no run_in_background."""
    for record in ev.requests("parent", kind=None):
        for tool in record["body"].get("tools", []):
            if tool.get("name") in ("Agent", "Task"):
                tool.get("input_schema", {}).get("properties", {}).pop("run_in_background", None)


def _primary_overloaded_once(ev: Evidence) -> None:
    """The client gave up after one overload: no further request, no fallback model."""
    requests = ev.requests("fallback")
    drop = {r["seq"] for r in requests[2:]}
    ev.journal[:] = [r for r in ev.journal if r.get("seq") not in drop]
    for r in requests[:2]:
        r["model"] = "claude-opus-4-5-20251101"


def _stream_not_broken(ev: Evidence) -> None:
    for run in ("before-content", "after-content"):
        ev.requests(run)[0]["reply_index"] = 1


def _non_streaming_resend(ev: Evidence) -> None:
    for run in ("before-content", "after-content"):
        extra = copy.deepcopy(ev.requests(run)[0])
        first, last = ev.runs[run].seqs
        # after the run's last request; the next run's range starts after it
        extra.update(seq=last + 0.5, stream=False, attempt=2)
        for other in ev.runs.values():
            if other.seqs[0] == last:
                other.seqs = (last + 0.5, other.seqs[1])  # type: ignore[assignment]
        ev.runs[run].seqs = (first, last + 0.5)  # type: ignore[assignment]
        ev.journal.append(extra)


ALTERATIONS: list[tuple[str, str, Callable[[Evidence], Any], set[str]]] = [
    ("tool-result-resume", "tool_result id differs from the tool_use id", _set_tool_result_id,
     {"request-2.tool-result-id", "request-2.pairing"}),
    ("tool-result-resume", "file content already in request 1", _file_in_first_request,
     {"request-1.no-file-content"}),
    ("tool-result-resume", "file content as plain user text", _file_as_plain_text,
     {"request-2.file-marker-via-tool-result"}),
    ("tool-result-resume", "tool_use dropped from request 2", _drop_tool_use,
     {"request-2.tool-use-id", "request-2.tool-use-input", "request-2.pairing"}),
    ("tool-result-resume", "tool_use input changed", _change_tool_input,
     {"request-2.tool-use-input"}),
    ("tool-result-resume", "no Read tool, no prompt in request 1",
     _drop_first_request_prompt_and_tools,
     {"request-1.declares-read", "request-1.holds-prompt"}),
    ("tool-result-resume", "a third request in the initial run", _extra_request("initial"),
     {"initial.request-count"}),
    ("tool-result-resume", "the tool never ran", _no_tool_result_events("initial"),
     {"initial.tool-ran"}),
    ("tool-result-resume", "the initial run failed",
     _result("initial", result="oops", subtype="error_during_execution", is_error=True,
             num_turns=1),
     {"initial.final-text", "initial.subtype", "initial.is-error", "initial.num-turns"}),
    ("tool-result-resume", "initial exit status 1", _exit("initial", 1), {"initial.exit-code"}),
    ("tool-result-resume", "resume forgot the history", _resume_forgets,
     {"resume.holds-first-prompt", "resume.holds-first-answer", "resume.holds-tool-exchange",
      "resume.new-prompt-last"}),
    ("tool-result-resume", "resume made two requests", _extra_request("resume"),
     {"resume.request-count"}),
    ("tool-result-resume", "resume in another session",
     _result("resume", session_id="00000000-0000-4000-8000-000000000000", result="x",
             subtype="error_during_execution", is_error=True),
     {"resume.same-session", "resume.final-text", "resume.subtype", "resume.is-error"}),
    ("tool-result-resume", "resume exit 1", _exit("resume", 1), {"resume.exit-code"}),
    ("tool-result-resume", "no compact boundary anywhere", _no_compact_boundary,
     {"compact.boundary-event", "compact.trigger", "compact.pre-tokens", "compact.summary-request",
      "compact.transcript-boundary"}),
    ("tool-result-resume", "boundary triggered automatically", _auto_trigger,
     {"compact.trigger", "compact.pre-tokens"}),
    ("tool-result-resume", "/compact failed",
     _result("compact", subtype="error_during_execution", is_error=True),
     {"compact.subtype", "compact.is-error"}),
    ("tool-result-resume", "/compact exit 1", _exit("compact", 1), {"compact.exit-code"}),
    ("tool-result-resume", "fork reuses the session and rewrites it", _fork_reuses_session,
     {"fork.new-session", "fork.original-transcript-unchanged", "fork.own-transcript"}),
    ("tool-result-resume", "fork keeps the pre-compaction history", _fork_keeps_history,
     {"fork.keeps-summary", "fork.current-prompt-last", "fork.drops-initial-prompt",
      "fork.drops-tool-use-id", "fork.drops-old-result"}),
    ("tool-result-resume", "fork failed",
     _result("fork", result="x", subtype="error_during_execution", is_error=True),
     {"fork.final-text", "fork.subtype", "fork.is-error"}),
    ("tool-result-resume", "fork exit 1", _exit("fork", 1), {"fork.exit-code"}),
    ("tool-result-resume", "a run timed out", _timed_out("initial"), {"harness.initial.finished"}),
    ("tool-result-resume", "a request found no rule", _unscripted_request,
     {"harness.script-covered"}),
    ("tool-result-resume", "the loop's request read as a side request",
     _loop_request_read_as_side, {"harness.side-replies-offered-no-tools"}),
    ("stop-hook-reentry", "the hook's calls are swapped", _stop_hook_never_reenters,
     {"first-call-inactive", "second-call-active"}),
    ("stop-hook-reentry", "the hook ran once", _stop_hook_once,
     {"hook-calls", "second-call-active", "ended-after-allow"}),
    ("stop-hook-reentry", "the client ended at the blocking Stop", _stop_ended_at_block,
     {"request-count", "reentered-after-block", "feedback-in-request-2", "first-answer-kept"}),
    ("stop-hook-reentry", "a request after the second Stop", _stop_request_after_allow,
     {"request-count", "ended-after-allow"}),
    ("stop-hook-reentry", "the feedback never reached the model", _stop_feedback_lost,
     {"first-answer-rule", "feedback-in-request-2", "first-answer-kept"}),
    ("stop-hook-reentry", "a third request", _extra_request("stop"), {"request-count"}),
    ("stop-hook-reentry", "the run failed",
     _result("stop", result="x", subtype="error_during_execution", is_error=True),
     {"result.final-text", "result.subtype", "result.is-error"}),
    ("stop-hook-reentry", "exit 1", _exit("stop", 1), {"result.exit-code"}),
    ("compaction-gate", "a single tool turn was compacted", _one_turn_compacted,
     {"reactive-1.compacted", "auto-1.compacted"}),
    ("max-turns-terminal", "the limit was ignored", _max_turns_ignored,
     {"request-count", "terminal-reason", "result.subtype", "result.is-error",
      "result.exit-code"}),
    ("max-turns-terminal", "no PostToolUse", _no_post_tool_use, {"post-tool-use-ran"}),
    ("max-turns-terminal", "the tool never ran", _no_tool_result_events("max-turns"),
     {"tool-ran"}),
    ("subagent-loop", "the child shares the parent's loop", _child_shares_parent,
     {"child-own-system", "child-own-tools", "child-gets-task", "child-without-parent-history"}),
    ("subagent-loop", "no child request", _no_child, {"child-requests"}),
    ("subagent-loop", "a fourth parent request", _extra_request("parent"),
     {"parent-request-count"}),
    ("subagent-loop", "the child's result is the immediate tool_result", _child_result_in_ack,
     {"immediate-result-is-ack", "result-only-by-notification"}),
    ("subagent-loop", "the notification lacks the child's result", _notification_without_result,
     {"notification-carries-result"}),
    ("subagent-loop", "the parent failed",
     _result("parent", result="x", subtype="error_during_execution", is_error=True),
     {"result.final-text", "result.subtype", "result.is-error"}),
    ("subagent-loop", "exit 1", _exit("parent", 1), {"result.exit-code"}),
    ("posttooluse-rewrite", "the client never mentions updatedToolOutput",
     _client_never_mentions,
     {"good.client-mentions.updatedToolOutput", "bad.client-mentions.updatedToolOutput"}),
    ("stop-hook-block-cap", "the client never mentions the cap variable",
     _client_never_mentions, {"client-mentions.CLAUDE_CODE_STOP_HOOK_BLOCK_CAP"}),
    ("tool-deferred", "the client never mentions tool_deferred", _client_never_mentions,
     {"client-mentions.tool_deferred"}),
    ("tool-deferred", "the result reports no terminal_reason", _no_terminal_reason("run"),
     {"run.terminal-reason"}),
    ("subagent-loop", "the Agent tool has no run_in_background", _launch_without_background,
     {"background-declared"}),
    ("fallback-model", "the primary was overloaded once", _primary_overloaded_once,
     {"primary-overloaded"}),
    ("nonstreaming-fallback-disabled", "the first attempt was answered whole",
     _stream_not_broken, {"before-content.stream-broken", "after-content.stream-broken"}),
    ("nonstreaming-fallback-disabled", "a non-streaming re-send", _non_streaming_resend,
     {"before-content.no-non-streaming-resend", "after-content.no-non-streaming-resend"}),
    ("goal-evaluator", "the client does not know /goal", _goal_unlisted,
     {"achieved.goal-accepted", "impossible.goal-accepted"}),
    ("goal-evaluator", "the evaluator is offered no impossible verdict", _impossible_not_offered,
     {"impossible.verdict-offered"}),
    ("interrupt-during-tools", "the client declares a cancel tool", _client_declares_cancel,
     {"bash-is-block"}),
    ("interrupt-during-tools", "the client never mentions interruptBehavior",
     _client_never_mentions, {"client-mentions.interruptBehavior"}),
    ("interrupt-during-tools", "the result reports no terminal_reason",
     _no_terminal_reason("interrupted"), {"terminal-reason"}),
]


@pytest.fixture(scope="session")
def real_outcomes(real_suite) -> dict[str, ProbeOutcome]:  # type: ignore[no-untyped-def]
    assert set(real_suite.outcomes) == set(PROBES), sorted(real_suite.outcomes)
    return dict(real_suite.outcomes)


def test_the_published_probes_pass_on_the_real_client(
        real_outcomes: dict[str, ProbeOutcome]) -> None:
    published = [p.name for spec in REPORTS if spec.name in PUBLISHED for p in spec.probes]
    failures = {name: [(c.id, c.expected, c.observed) for c in real_outcomes[name].checks
                       if not c.passed] for name in published}
    assert failures == {name: [] for name in published}


def test_no_probe_has_a_harness_error(real_outcomes: dict[str, ProbeOutcome]) -> None:
    assert {name: o.error for name, o in real_outcomes.items() if o.error} == {}


@pytest.mark.parametrize(("probe", "what", "alter", "must_fail"), ALTERATIONS,
                         ids=[f"{p}:{w}" for p, w, _, _ in ALTERATIONS])
def test_altered_evidence_fails_the_checks(real_outcomes: dict[str, ProbeOutcome], probe: str,
                                           what: str, alter: Callable[[Evidence], Any],
                                           must_fail: set[str]) -> None:
    results = recheck(real_outcomes[probe], alter)
    failed = {name for name, c in results.items() if not c.passed}
    assert must_fail <= failed, f"{what}: expected {sorted(must_fail)} to fail, failed {sorted(failed)}"
    for name in must_fail:
        assert results[name].observed != results[name].expected


def test_static_and_reported_fields_decide_by_their_role(
        real_outcomes: dict[str, ProbeOutcome]) -> None:
    """A string the client never mentions makes its check absent, not failed; a
    terminal_reason the result does not carry is not observable; another value fails."""
    never = recheck(real_outcomes["tool-deferred"], _client_never_mentions)
    assert never["client-mentions.tool_deferred"].status == "absent"
    assert "never mentions tool_deferred" in str(never["client-mentions.tool_deferred"].observed)
    missing = recheck(real_outcomes["tool-deferred"], _no_terminal_reason("run"))
    assert missing["run.terminal-reason"].status == "not_observable"
    other = recheck(real_outcomes["tool-deferred"], _result("run", terminal_reason="completed"))
    assert other["run.terminal-reason"].status == "failed"


def test_reach_decides_by_the_clients_words(real_outcomes: dict[str, ProbeOutcome]) -> None:
    """/goal unknown is absent in the client's answer; a cancel tool declared leaves Bash's
    kind untold (not reached); a run without command_lifecycle is absent for its claims."""
    unknown = recheck(real_outcomes["goal-evaluator"], _goal_unlisted)
    assert unknown["achieved.goal-accepted"].status == "absent"
    assert "Unknown skill: goal" in str(unknown["achieved.goal-accepted"].observed)
    offered = recheck(real_outcomes["goal-evaluator"], lambda ev: None)
    assert offered["impossible.verdict-offered"].status == "passed"
    unoffered = recheck(real_outcomes["goal-evaluator"], _impossible_not_offered)
    assert unoffered["impossible.verdict-offered"].status == "absent"
    assert "['ok', 'reason']" in str(unoffered["impossible.verdict-offered"].observed)
    cancel = recheck(real_outcomes["interrupt-during-tools"], _client_declares_cancel)
    assert cancel["bash-is-block"].status == "not_reached"
    silent = recheck(real_outcomes["mid-turn-input-absorbed"], _events_gone)
    assert silent["queue.lifecycle-emitted"].status == "absent"


def _result_text_empty(ev: Evidence) -> None:
    """The result event's text left empty, the stream as it was (as 2.1.83 reports)."""
    for run in ev.runs.values():
        if run.output.result is not None:
            run.output.result["result"] = ""


def _final_message_without_text(ev: Evidence) -> None:
    """The result's text empty and the last assistant message's text blocks gone."""
    _result_text_empty(ev)
    for run in ev.runs.values():
        for event in run.output.of_type("assistant"):
            message = event.get("message") or {}
            message["content"] = [b for b in message.get("content") or []
                                  if b.get("type") != "text"]


def test_the_final_text_is_the_last_assistant_message_where_the_result_leaves_it_empty(
        real_outcomes: dict[str, ProbeOutcome]) -> None:
    """2.1.83's result events carry an empty text though the final answer was streamed: the
    final-text check reads the answer from the last assistant message, and still fails when
    that message has no text either."""
    empty = recheck(real_outcomes["tool-pipeline"], _result_text_empty)
    final = {name: c for name, c in empty.items() if name.endswith(".final-text")}
    assert final and all(c.passed for c in final.values())
    assert all("result event's text is empty" in c.evidence for c in final.values())
    silent = recheck(real_outcomes["tool-pipeline"], _final_message_without_text)
    assert all(silent[name].status == "failed" and silent[name].observed == ""
               for name in final)


def _results_broken(ev: Evidence) -> None:
    for run in ev.runs.values():
        run.exit_code = 99
        if run.output.result is not None:
            run.output.result.update(result="ALTERED", subtype="altered", num_turns=99,
                                     is_error=not run.output.result.get("is_error"),
                                     terminal_reason="altered", session_id="altered")


def _no_hooks(ev: Evidence) -> None:
    ev.hook_calls = []


def _requests_doubled(ev: Evidence) -> None:
    copies = [dict(copy.deepcopy(r), seq=r["seq"] - 0.5) for r in ev.journal
              if r.get("type") == "request"]
    ev.journal.extend(copies)


def _requests_gone(ev: Evidence) -> None:
    ev.journal[:] = [r for r in ev.journal if r.get("type") != "request"]


def _scramble(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: ("toolu_scrambled" if k in ("id", "tool_use_id") else
                    "SCRAMBLED" if k in ("text", "content", "thinking") else _scramble(v))
                for k, v in value.items()}
    if isinstance(value, list):
        return [_scramble(v) for v in value]
    return value


def _requests_scrambled(ev: Evidence) -> None:
    for record in ev.journal:
        body = record.get("body")
        if isinstance(body, dict):
            body["messages"] = _scramble(body.get("messages"))
            body["system"], body["tools"] = "SCRAMBLED", []
            record.update(status=200, attempt=1, model="altered-model", rule="altered",
                          stream=not record.get("stream"))


def _workspace_changed(ev: Evidence) -> None:
    ev.workspace_files = {**{k: "ALTERED" for k in ev.workspace_files},
                          "hook-denied.txt": "x", "rule-denied.txt": "x", "denied.txt": "x",
                          "interrupt-tool-finished": "x"}


def _workspace_emptied(ev: Evidence) -> None:
    ev.workspace_files = {}


def _exits_clean(ev: Evidence) -> None:
    for run in ev.runs.values():
        run.exit_code = 0


def _served_twice(ev: Evidence) -> None:
    """The MCP server's log and what the caller wrote, every entry twice."""
    ev.mcp_calls = {run: [*events, *copy.deepcopy(events)] for run, events in ev.mcp_calls.items()}
    for run in ev.runs.values():
        run.stdin = [*run.stdin, *copy.deepcopy(run.stdin)]


def _phantom_tool_results(ev: Evidence) -> None:
    """Every run printed a tool_result for every tool_use the model was scripted to ask for."""
    ids = {b.get("id") for r in ev.journal for b in _scripted_blocks(r)}
    for run in ev.runs.values():
        run.output.events.append({"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": i, "content": "PHANTOM"} for i in ids]}})


def _timing_inverted(ev: Evidence) -> None:
    for call in ev.hook_calls:
        if "started" in call:
            call["started"] = -call["started"]
    for record in ev.journal:
        if "time" in record:
            record["time"] = 0.0


def _events_gone(ev: Evidence) -> None:
    for run in ev.runs.values():
        run.output.events = [e for e in run.output.events if e.get("type") == "result"]
        run.stdout = run.stderr = ""
    ev.session_files = {}


def _phantom_hooks(ev: Evidence) -> None:
    """Hook calls for every tool_use the model asked for, as if every call had run."""
    ids = {b.get("id") for r in ev.journal for _, b in blocks_of_type(r, "tool_use")}
    ids |= {b.get("id") for r in ev.journal for b in _scripted_blocks(r)} | {"toolu_phantom"}
    for tool_id in ids:
        for event in ("PreToolUse", "PostToolUse"):
            ev.hook_calls.append({"event": event, "started": 0.0, "input": {
                "tool_use_id": tool_id, "hook_event_name": event}})


def _scripted_blocks(record: dict[str, Any]) -> list[dict[str, Any]]:
    reply = record.get("reply") or {}
    return [b for b in reply.get("content", []) if isinstance(b, dict)]


def _errors_printed(ev: Evidence) -> None:
    """Every scripted API error message shows up in every run's output."""
    messages_ = [str((r.get("reply") or {}).get("error", {}).get("message"))
                 for r in ev.journal if "error" in (r.get("reply") or {})]
    for run in ev.runs.values():
        run.stdout += "\n".join(messages_)


def _hook_inputs_emptied(ev: Evidence) -> None:
    """Every hook call's input as a version that fills none of its fields."""
    for call in ev.hook_calls:
        if isinstance(call.get("input"), dict):
            call["input"] = dict.fromkeys(call["input"])


def _refused_as_unknown(ev: Evidence) -> None:
    """Every run's client said it knows none of its flags and none of its slash command."""
    for run in ev.runs.values():
        flags = [arg for arg in run.argv if arg.startswith("--")]
        run.stderr += "".join(f"error: unknown option '{flag}'\n" for flag in flags)
        prompt = run.invocation.prompt.lstrip()
        if prompt.startswith("/"):
            run.stdout += f"\nUnknown skill: {prompt[1:].split()[0]}"


GENERIC = (_errors_printed, _phantom_hooks, _results_broken, _no_hooks, _requests_doubled,
           _requests_gone, _requests_scrambled, _workspace_changed, _timing_inverted, _events_gone,
           _served_twice, _phantom_tool_results, _workspace_emptied, _exits_clean,
           _client_never_mentions, _refused_as_unknown, _hook_inputs_emptied)


def test_alterations_reach_every_claim_check(real_outcomes: dict[str, ProbeOutcome]) -> None:
    reached = {(p, check) for p, _, _, names in ALTERATIONS for check in names}
    for name, outcome in real_outcomes.items():
        # a check that already fails on the real client has shown that it can fail
        reached |= {(name, c.id.removeprefix(f"{name}.")) for c in outcome.checks if not c.passed}
        for alter in GENERIC:
            results = recheck(outcome, alter)
            reached |= {(name, check) for check, c in results.items() if not c.passed}
    claim_checks = {(name, c.id.removeprefix(f"{name}.")) for name, o in real_outcomes.items()
                    for c in o.checks if c.claim is not None}
    assert sorted(claim_checks - reached) == [], sorted(claim_checks - reached)
    # the harness's own checks are the same code in every probe: one of each kind suffices
    assert {check.rsplit(".", 1)[-1] for _, check in reached if check.startswith("harness.")} \
        == {"finished", "script-covered", "side-replies-offered-no-tools"}


# ---- premises, on the real evidence --------------------------------------------------------

def test_every_premise_holds_on_the_default_version(
        real_outcomes: dict[str, ProbeOutcome]) -> None:
    """2.1.235 has every flag, variable, hook field, tool and command the probes rely on; its
    files or its runs say so (tests/test_premises_client.py shows them missing on 2.0.77)."""
    held = {c.id: (c.status, c.observed) for o in real_outcomes.values() for c in o.checks
            if c.role == "premise"}
    assert len(held) >= 25
    assert {k: v for k, v in held.items() if v[0] != "passed"} == {}


def _no_hook_ids(ev: Evidence) -> None:
    """The hook input as before 2.0.43: no tool_use_id."""
    for call in ev.hook_calls:
        if isinstance(call.get("input"), dict):
            call["input"]["tool_use_id"] = None


def _never_mentioned(needle: str) -> Callable[[Evidence], None]:
    def alter(ev: Evidence) -> None:
        ev.client_mentions["found"][needle] = False
    return alter


def _verdicts_of(outcome: ProbeOutcome, alter: Callable[[Evidence], Any]) -> dict[str, str]:
    evidence = copy.deepcopy(outcome.evidence)
    assert evidence is not None
    alter(evidence)
    results, _ = check_evidence(outcome.probe, evidence)
    every = [c.to_json() for c in results]
    return {claim.id: decide_claim([c for c in every if c["claim"] == claim.id], every)[0]
            for claim in outcome.probe.claims}


def test_without_pairing_ids_the_schedule_is_not_observable_never_contradicted(
        real_outcomes: dict[str, ProbeOutcome]) -> None:
    for name in ("tool-batch-scheduling", "result-pairing", "streaming-tool-start"):
        outcome = real_outcomes[name]
        assert set(_verdicts_of(outcome, lambda ev: None).values()) == {"confirmed"}, name
        assert set(_verdicts_of(outcome, _no_hook_ids).values()) == {"not_observable"}, name
    windows = recheck(real_outcomes["tool-batch-scheduling"], _no_hook_ids)
    overlap = windows["safe-calls-overlap"]
    assert overlap.status == "not_observable"
    assert str(overlap.observed).startswith("not measured: none of the")


@pytest.mark.parametrize(("probe", "needle", "verdict"), [
    ("auto-compaction-window", "CLAUDE_CODE_AUTO_COMPACT_WINDOW", "not_observable"),
    ("nonstreaming-fallback-disabled", "CLAUDE_CODE_DISABLE_NONSTREAMING_FALLBACK", "absent"),
])
def test_a_variable_the_files_never_mention_decides_the_claim(
        real_outcomes: dict[str, ProbeOutcome], probe: str, needle: str, verdict: str) -> None:
    outcome = real_outcomes[probe]
    assert set(_verdicts_of(outcome, lambda ev: None).values()) == {"confirmed"}
    assert set(_verdicts_of(outcome, _never_mentioned(needle)).values()) == {verdict}
