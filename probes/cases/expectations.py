"""Each expectation of a case file as one check on the run's evidence, with the expected and
the observed value: the closed set of ``probes.cases.format.EXPECTATION_KINDS``.

What the client did is read from the journal (the tool calls the model made, the results the
client sent back, what each request held), from the user's hooks as their wrapper recorded
them, from the workspace after the runs, and from the last run's result event.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from probes.cases.format import (
    Expectation,
    FileText,
    HookResultSpec,
    HookSpec,
    RequestSpec,
    ResultSpec,
    ToolResultSpec,
    ToolSpec,
)
from probes.core.checks import Checks
from probes.core.evidence import Evidence, block_text, locate, messages

__all__ = ["ToolRun", "check_expectation", "statement", "tool_runs"]

_SHOWN = 300


def _matches(expected: Any, actual: Any) -> bool:
    """``expected`` is a part of ``actual``: every key of a mapping with a matching value;
    anything else equal."""
    if isinstance(expected, Mapping):
        return isinstance(actual, Mapping) and all(
            k in actual and _matches(v, actual[k]) for k, v in expected.items())
    return bool(expected == actual)


def _short(value: Any) -> Any:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True,
                                                            ensure_ascii=False)
    return value if len(text) <= _SHOWN else text[:_SHOWN] + "…"


class ToolRun(dict[str, Any]):
    """A tool call the model made and what came back for it: name, input, id, and — once a
    request carried its result — result (text) and is_error."""


def tool_runs(evidence: Evidence) -> list[ToolRun]:
    """Every tool call of the model (any request kind), in the order its result came back
    (calls without a result last)."""
    calls: dict[str, ToolRun] = {}
    answered: list[str] = []
    for record in evidence.requests(kind=None):
        for message in messages(record):
            content = message.get("content")
            for block in content if isinstance(content, list) else []:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "tool_use" and isinstance(block.get("id"), str):
                    calls.setdefault(block["id"], ToolRun(
                        id=block["id"], name=block.get("name"), input=block.get("input")))
                elif block.get("type") == "tool_result":
                    call = calls.get(str(block.get("tool_use_id")))
                    if call is not None and "result" not in call:
                        call["result"] = block_text(block)
                        call["is_error"] = bool(block.get("is_error"))
                        answered.append(call["id"])
    rest = [c for key, c in calls.items() if key not in answered]
    return [calls[key] for key in answered] + rest


def _ran(call: ToolRun) -> bool:
    return "result" in call and not call.get("is_error")


def _of(spec: ToolSpec, calls: list[ToolRun]) -> list[ToolRun]:
    return [c for c in calls if c.get("name") == spec.name
            and (spec.input is None or _matches(spec.input, c.get("input")))]


def _seen_calls(calls: list[ToolRun]) -> list[dict[str, Any]]:
    return [{"name": c.get("name"), "input": _short(c.get("input")),
             "result": _short(c["result"]) if "result" in c else "(no result sent back)",
             "is_error": c.get("is_error")} for c in calls]


def _hooks_of(spec: HookSpec | HookResultSpec, evidence: Evidence) -> list[dict[str, Any]]:
    found = [h for h in evidence.hook_runs if h.get("event") == spec.event]
    if isinstance(spec, HookSpec) and spec.input is not None:
        found = [h for h in found if _matches(spec.input, h.get("input"))]
    if isinstance(spec, HookResultSpec) and spec.command_contains is not None:
        found = [h for h in found if spec.command_contains in str(h.get("command"))]
    return found


def _seen_hooks(hooks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"event": h.get("event"), "source": h.get("source"), "exit_code": h.get("exit_code"),
             "stdout": _short(h.get("stdout")), "stderr": _short(h.get("stderr"))}
            for h in hooks]


def statement(expectation: Expectation) -> str:
    """The expectation as a sentence, for the claim it becomes."""
    value = expectation.value
    shown = json.dumps(value.model_dump(exclude_none=True) if hasattr(value, "model_dump")
                       else value, sort_keys=True, ensure_ascii=False)
    words = {
        "tool_called": "the client ran the tool call", "tool_not_called": "the client did not "
        "run the tool call", "tool_order": "the tools ran in the order",
        "tool_result": "the tool call's result is", "request_contains": "the request holds",
        "hook_ran": "a hook command ran for", "hook_not_ran": "no hook command ran for",
        "hook_result": "the hook command's run is", "file_exists": "the workspace holds",
        "file_absent": "the workspace does not hold", "file_contains": "the workspace file "
        "holds", "result": "the run ended with", "max_requests": "main requests at most"}
    return f"{words[expectation.kind]} {shown}"


def check_expectation(expectation: Expectation, check_id: str, claim: str,
                      evidence: Evidence, checks: Checks, context: Mapping[str, str]) -> None:
    """The expectation's check; ``context`` fills ``{workspace}``-style placeholders in the
    expected values with the paths the client saw."""
    kind = expectation.kind
    value = _filled(expectation.value, context)
    _CHECKS[kind](value, check_id, claim, evidence, checks)


def _filled(value: Any, context: Mapping[str, str]) -> Any:
    if hasattr(value, "model_dump"):
        return type(value).model_validate(_filled(value.model_dump(), context))
    if isinstance(value, str):
        for name, shown in context.items():
            value = value.replace("{" + name + "}", shown)
        return value
    if isinstance(value, list):
        return [_filled(v, context) for v in value]
    if isinstance(value, dict):
        return {k: _filled(v, context) for k, v in value.items()}
    return value


_JOURNAL = "journal: the model's tool_use blocks and the tool_result blocks sent back"


def _tool_called(spec: ToolSpec, cid: str, claim: str, ev: Evidence, checks: Checks) -> None:
    matching = _of(spec, tool_runs(ev))
    checks.that(cid, claim, f"the client ran {spec.name} (its result came back, not an error)",
                passed=any(_ran(c) for c in matching),
                expected={"name": spec.name, "input": spec.input, "ran": True},
                observed=_seen_calls(matching) or f"no {spec.name} call with that input",
                evidence=_JOURNAL)


def _tool_not_called(spec: ToolSpec, cid: str, claim: str, ev: Evidence,
                     checks: Checks) -> None:
    matching = _of(spec, tool_runs(ev))
    checks.that(cid, claim, f"the client did not run {spec.name} (no result that is not an "
                "error)", passed=not any(_ran(c) for c in matching),
                expected={"name": spec.name, "input": spec.input, "ran": False},
                observed=_seen_calls(matching) or f"no {spec.name} call with that input",
                evidence=_JOURNAL)


def _tool_order(names: list[str], cid: str, claim: str, ev: Evidence, checks: Checks) -> None:
    ran = [str(c.get("name")) for c in tool_runs(ev) if _ran(c)]
    remaining = iter(ran)
    checks.that(cid, claim, "the tools that ran hold these names in this order",
                passed=all(name in remaining for name in names), expected=names, observed=ran,
                evidence=_JOURNAL)


def _tool_result(spec: ToolResultSpec, cid: str, claim: str, ev: Evidence,
                 checks: Checks) -> None:
    matching = [c for c in _of(spec, tool_runs(ev)) if "result" in c]
    good = [c for c in matching
            if (spec.contains is None or spec.contains in str(c["result"]))
            and (spec.is_error is None or c.get("is_error") == spec.is_error)]
    checks.that(cid, claim, f"a {spec.name} call's result is as expected", passed=bool(good),
                expected=spec.model_dump(exclude_none=True),
                observed=_seen_calls(matching) or f"no {spec.name} call got a result",
                evidence=_JOURNAL)


def _request_contains(spec: RequestSpec, cid: str, claim: str, ev: Evidence,
                      checks: Checks) -> None:
    requests = ev.requests()
    if spec.request is not None:
        chosen = requests[spec.request - 1:spec.request]
        where = f"main request {spec.request}"
    else:
        chosen, where = requests, "any main request"
    found = [r["seq"] for r in chosen if locate(r, spec.text) or spec.text in _system(r)]
    observed: Any = (f"found in request seq {found}" if found else
                     f"the client made {len(requests)} main request(s)" if not chosen else
                     f"not in {where} (seq {[r['seq'] for r in chosen]})")
    checks.that(cid, claim, f"{where} holds the text", passed=bool(found),
                expected=f"{where} contains {spec.text!r}", observed=observed,
                evidence="journal: request bodies (messages and system prompt)")


def _system(record: Mapping[str, Any]) -> str:
    body = record.get("body")
    system = body.get("system") if isinstance(body, dict) else None
    if isinstance(system, str):
        return system
    return "\n".join(block_text(b) for b in system) if isinstance(system, list) else ""


_HOOKS = "the user's hook commands as their wrapper recorded each run (hook_runs)"


def _hook_ran(spec: HookSpec, cid: str, claim: str, ev: Evidence, checks: Checks) -> None:
    found = _hooks_of(spec, ev)
    checks.that(cid, claim, f"a hook command ran for {spec.event}", passed=bool(found),
                expected=spec.model_dump(exclude_none=True),
                observed=_seen_hooks(found) or _hook_events(ev), evidence=_HOOKS)


def _hook_not_ran(spec: HookSpec, cid: str, claim: str, ev: Evidence, checks: Checks) -> None:
    found = _hooks_of(spec, ev)
    checks.that(cid, claim, f"no hook command ran for {spec.event}", passed=not found,
                expected=spec.model_dump(exclude_none=True) | {"ran": False},
                observed=_seen_hooks(found) or _hook_events(ev), evidence=_HOOKS)


def _hook_events(ev: Evidence) -> str:
    events = sorted({str(h.get("event")) for h in ev.hook_runs})
    return f"hook commands ran for: {', '.join(events)}" if events else "no hook command ran"


def _hook_result(spec: HookResultSpec, cid: str, claim: str, ev: Evidence,
                 checks: Checks) -> None:
    found = _hooks_of(spec, ev)
    good = [h for h in found
            if (spec.exit_code is None or h.get("exit_code") == spec.exit_code)
            and (spec.stdout_contains is None or spec.stdout_contains in str(h.get("stdout")))
            and (spec.stderr_contains is None or spec.stderr_contains in str(h.get("stderr")))]
    checks.that(cid, claim, f"a hook command for {spec.event} ran as expected",
                passed=bool(good), expected=spec.model_dump(exclude_none=True),
                observed=_seen_hooks(found) or _hook_events(ev), evidence=_HOOKS)


_FILES = "the workspace's files after the runs"


def _held(ev: Evidence) -> list[str]:
    return sorted({*ev.workspace_files, *ev.workspace_large_files})


def _file_exists(path: str, cid: str, claim: str, ev: Evidence, checks: Checks) -> None:
    there = path in _held(ev)
    checks.that(cid, claim, f"the workspace holds {path}", passed=there,
                expected=f"{path} exists", observed="exists" if there
                else f"missing; the workspace holds {_held(ev)[:20]}", evidence=_FILES)


def _file_absent(path: str, cid: str, claim: str, ev: Evidence, checks: Checks) -> None:
    there = path in _held(ev)
    checks.that(cid, claim, f"the workspace does not hold {path}", passed=not there,
                expected=f"no {path}", observed=f"{path} exists" if there else "absent",
                evidence=_FILES)


def _file_contains(spec: FileText, cid: str, claim: str, ev: Evidence, checks: Checks) -> None:
    if spec.path in ev.workspace_large_files:  # there, but not kept: its text is not seen
        checks.visible(cid, claim, f"the workspace file {spec.path} holds the text", seen=False,
                       expected=f"contains {spec.text!r}", looked_in=_FILES,
                       hidden_because=f"{ev.workspace_large_files[spec.path]} bytes, over "
                                      "the size loopprobe keeps of a workspace file")
        return
    content = ev.workspace_files.get(spec.path)
    checks.contains(cid, claim, f"the workspace file {spec.path} holds the text",
                    needle=spec.text, haystack=content if content is not None else None,
                    evidence=_FILES)


def _result(spec: ResultSpec, cid: str, claim: str, ev: Evidence, checks: Checks) -> None:
    run = list(ev.runs.values())[-1] if ev.runs else None
    result = (run.result if run else None) or {}
    if spec.terminal_reason is not None:  # a field some versions never report
        checks.reports(f"{cid}.terminal-reason", claim, "the result's terminal_reason",
                       expected=spec.terminal_reason, observed=result.get("terminal_reason"),
                       evidence="the last run's result event")
    wanted = {k: v for k, v in (("subtype", spec.subtype), ("is_error", spec.is_error),
                                ("exit_code", spec.exit_code)) if v is not None}
    if wanted or spec.terminal_reason is None:
        seen = {"subtype": result.get("subtype"), "is_error": result.get("is_error"),
                "exit_code": run.exit_code if run else None}
        checks.that(cid, claim, "the run's result event and exit code",
                    passed=bool(run) and all(seen[k] == v for k, v in wanted.items()),
                    expected=wanted, observed={k: seen[k] for k in wanted} if run else
                    "no run", evidence="the last run's result event and exit code")


def _max_requests(limit: int, cid: str, claim: str, ev: Evidence, checks: Checks) -> None:
    made = len(ev.requests())
    checks.that(cid, claim, f"at most {limit} main requests", passed=made <= limit,
                expected=f"at most {limit}", observed=made, evidence="journal: main requests")


_CHECKS: dict[str, Callable[[Any, str, str, Evidence, Checks], None]] = {
    "tool_called": _tool_called, "tool_not_called": _tool_not_called,
    "tool_order": _tool_order, "tool_result": _tool_result,
    "request_contains": _request_contains, "hook_ran": _hook_ran,
    "hook_not_ran": _hook_not_ran, "hook_result": _hook_result,
    "file_exists": _file_exists, "file_absent": _file_absent,
    "file_contains": _file_contains, "result": _result, "max_requests": _max_requests,
}
