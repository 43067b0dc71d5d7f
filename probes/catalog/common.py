"""Check patterns several probes share: how a run ended, where a marker travelled."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probes.core.checks import Checks
from probes.core.evidence import Evidence, RunRecord, block_text, blocks_of_type, locate, messages

__all__ = ["body_text", "check_ended", "check_mentioned", "check_terminal",
           "last_user_locations", "result_of", "tool_pairs"]


def result_of(ev: Evidence, run: str) -> dict[str, Any]:
    """The final result event of a run, or an empty dict."""
    record = ev.run(run)
    return (record.result if record else None) or {}


def check_terminal(c: Checks, claim: str, ev: Evidence, run: str, expected: str) -> None:
    """The result's terminal_reason, a field some versions never report (in the committed
    evidence: none on 2.0.77, not for structured output on 2.1.54-2.1.117): missing is not
    observable, another value fails."""
    c.reports(f"{run}.terminal-reason", claim, f"the terminal reason is {expected}",
              expected=expected, observed=result_of(ev, run).get("terminal_reason"),
              evidence=f"run {run}: result.terminal_reason")


def check_mentioned(c: Checks, claim: str, ev: Evidence, needle: str, what: str, *,
                    prefix: str | None = None) -> bool:
    """Static evidence, for a feature no run can show absent (a hook output field or an
    environment variable the client ignores silently): the installed client's files mention
    ``needle`` (the probe names it in ``client_mentions``); never mentioned, the claim is
    absent. Mentioned, the behaviour checks decide. Not looked up is the probe's mistake:
    the check raises, so the claim is an error."""
    found = ev.mentions(needle)
    if found is None:
        raise LookupError(f"{needle!r} was not looked up in the client's files: name it in "
                          "the probe's client_mentions")
    sha = str((ev.client_mentions or {}).get("binary_sha256") or ev.client.get("binary_sha256"))
    client = f"the installed client (sha256 {sha[:12]}…)"
    check_id = f"client-mentions.{needle}"
    return c.reach(f"{prefix}.{check_id}" if prefix else check_id, claim,
                   f"static evidence: the installed client's package files mention {needle}, {what}",
                   held=found, absent=True,
                   expected=f"{needle} mentioned in the client's files",
                   observed=(f"{client} mentions {needle}" if found else
                             f"{client} never mentions {needle}"),
                   evidence="static: a byte search of the client's installed package files "
                            "(the entry and the package's .js/.cjs/.mjs/.json files)")


def check_ended(checks: Checks, claim: str, ev: Evidence, run_name: str, *,
                final_text: str | None, subtype: str = "success", exit_code: int = 0,
                is_error: bool = False, prefix: str | None = None) -> None:
    """The final result of a run: its text, subtype, is_error and the exit status. The text
    is the result event's; where a version leaves that empty, its last assistant message's
    (the final answer was given, and only its report is missing)."""
    run: RunRecord | None = ev.run(run_name)
    result: dict[str, Any] = (run.result if run else None) or {}
    where = f"run {run_name}: stream-json result event"
    prefix = prefix or run_name
    if final_text is not None:
        said, said_where = result.get("result"), where
        last = _last_assistant_text(run) if said == "" and run is not None else None
        if last is not None:  # the result event left it empty (2.1.83): what the model said
            said, said_where = last, (f"run {run_name}: the last assistant message (the "
                                      "stream-json result event's text is empty)")
        checks.equal(f"{prefix}.final-text", claim, "the final result text is the scripted answer",
                     expected=final_text, observed=said, evidence=said_where)
    checks.equal(f"{prefix}.subtype", claim, "the final result subtype",
                 expected=subtype, observed=result.get("subtype"), evidence=where)
    checks.equal(f"{prefix}.is-error", claim, "the final result's is_error flag",
                 expected=is_error, observed=result.get("is_error"), evidence=where)
    checks.equal(f"{prefix}.exit-code", claim, "the process exit status",
                 expected=exit_code, observed=run.exit_code if run else None,
                 evidence=f"run {run_name}: exit status")


def _last_assistant_text(run: RunRecord) -> str | None:
    """The text of the run's last assistant message (its events share the message's id), or
    None when that message holds no text."""
    events = run.output.of_type("assistant")
    if not events:
        return None
    last_id = (events[-1].get("message") or {}).get("id")
    message = [event for event in events if last_id is not None
               and (event.get("message") or {}).get("id") == last_id] or events[-1:]
    texts = [block.get("text") for event in message
             for block in (event.get("message") or {}).get("content") or []
             if isinstance(block, dict) and block.get("type") == "text"]
    found = [text for text in texts if isinstance(text, str)]
    return "".join(found) if found else None


def body_text(record: Mapping[str, Any]) -> str | None:
    """Everything the model would read in a request's messages, or None if there is no request."""
    if not record:
        return None
    parts = []
    for message in messages(record):
        content = message.get("content")
        blocks = [content] if isinstance(content, str) else content
        if isinstance(blocks, list):
            parts += [block_text(b) for b in blocks]
    for _, block in blocks_of_type(record, "tool_use"):
        parts.append(str(block.get("id")))
    for _, block in blocks_of_type(record, "tool_result"):
        parts.append(str(block.get("tool_use_id")))
    return "\n".join(parts)


def last_user_locations(record: Mapping[str, Any], needle: str) -> list[str]:
    count = len(messages(record))
    return [str(loc) for loc in locate(record, needle) if loc.message == count - 1]


def tool_pairs(record: Mapping[str, Any]) -> dict[str, Any]:
    """tool_use ids, tool_result ids, and whether each use has exactly one later result."""
    uses = [(i, b.get("id")) for i, b in blocks_of_type(record, "tool_use")]
    results = [(i, b.get("tool_use_id")) for i, b in blocks_of_type(record, "tool_result")]
    unpaired = []
    for index, use_id in uses:
        matching = [i for i, rid in results if rid == use_id]
        if len(matching) != 1 or matching[0] != index + 1:
            unpaired.append(use_id)
    orphans = [rid for _, rid in results if rid not in {u for _, u in uses}]
    return {"tool_use_ids": [u for _, u in uses], "tool_result_ids": [r for _, r in results],
            "unpaired_uses": unpaired, "orphan_results": orphans}
