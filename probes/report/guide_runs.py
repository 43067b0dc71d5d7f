"""How the evidence guide writes one probe: its runs as commands (the environment and the
arguments most runs share written once), its script, what the client printed and wrote on
stdin, and its requests as journal line references. ``probes.report.guide`` puts these
beside each probe's claims.
"""

from __future__ import annotations

import json
import shlex
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from probes.report.format import Report

__all__ = ["Shared", "assignments", "common_args", "common_env", "common_spec", "journal_line_list",
           "probe_section", "quote", "short"]


def short(value: Any, limit: int = 160) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    text = text.replace("\n", "\\n").replace("|", "\\|")
    return text if len(text) <= limit else text[:limit - 1] + "…"


_SHOWN_LINE = 120  # a literal output line longer than this is cut, pointing at the whole
_STDERR = 2000
_FIELD = 40  # a literal event's field longer than this is shortened
_ID_FIELDS = ("uuid", "session_id", "parent_tool_use_id")


def quote(value: str) -> str:
    return (value if (value.startswith("$") and " " not in value) or value == "$COMMON_ARGS"
            else shlex.quote(value))


def assignments(env: dict[str, str]) -> list[str]:
    return [f"  {name}={quote(value)} \\" for name, value in sorted(env.items())]


def _command(argv: list[str], env: dict[str, str] | None = None,
             common: dict[str, str] | None = None, args: list[str] | None = None,
             spec: dict[str, Any] | None = None) -> str:
    """The run as a shell command: its whole environment (nothing else reached it), then argv;
    the part of it most runs share written ``$COMMON_ENV`` (listed once, at the top), then
    what this run sets otherwise, and what of it this run lacks; its driver's run description
    likewise without what ``$COMMON_SPEC`` says."""
    argv = [str(a) for a in argv]
    described = _spec_index(argv)
    argv = _with_common_args([_unset_left_out(a, (spec or {}) if i == described else {})
                              for i, a in enumerate(argv)], args or [])
    if not env:
        return " ".join(quote(a) for a in argv)
    common = common or {}
    lacks = sorted(k for k in common if k not in env)
    own = " ".join(f"{k}={quote(v)}" for k, v in sorted(env.items()) if common.get(k) != v)
    return ((f"# without {', '.join(lacks)} of $COMMON_ENV\n" if lacks else "")
            + " ".join(["env -i", *(["$COMMON_ENV"] if common else []), *([own] if own else []),
                        *(quote(a) for a in argv)]))


def common_args(reports: list[Report]) -> list[str]:
    """The run of two or more arguments, in order, that saves most when written once:
    its length times the number of runs that have it, when more than half of them do; it
    does not end on an option (which would part it from its value)."""
    argvs = [[str(a) for a in run["argv"]] for report in reports for probe in report["probes"]
             for run in dict(probe).get("runs", []) if run.get("argv")]
    counts: Counter[tuple[str, ...]] = Counter()
    for argv in argvs:
        counts.update({tuple(argv[i:j]) for i in range(len(argv))
                       for j in range(i + 2, len(argv) + 1) if not argv[j - 1].startswith("-")})
    best = max(((sum(len(a) + 1 for a in s) * n, s) for s, n in counts.items()
                if 2 * n > len(argvs)), default=(0, ()))
    return list(best[1])


_UNSET: tuple[Any, ...] = (None, False, [], {})


def _json_object(arg: str) -> dict[str, Any] | None:
    """A JSON object argument (a driver's run description), else None."""
    if not arg.startswith("{"):
        return None
    try:
        value = json.loads(arg)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _unset_left_out(arg: str, common: dict[str, Any]) -> str:
    """A JSON object argument without its keys set to null, false or empty, nor those set as
    in ``common`` (``$COMMON_SPEC``; a key of it this run lacks is shown null): the guide's
    header says so; the report keeps the argument whole."""
    value = _json_object(arg)
    if value is None:
        return arg
    shown = {k: v for k, v in value.items()
             if (v != common[k] if k in common else v not in _UNSET)}
    shown.update({k: None for k in common if k not in value})
    return json.dumps(shown, ensure_ascii=False)


def _spec_index(argv: list[str]) -> int | None:
    """Where a driver's run description is: a JSON object argument that is no option's value."""
    return next((i for i, arg in enumerate(argv) if _json_object(arg) is not None
                 and not (i and argv[i - 1].startswith("-"))), None)


def _spec_of(argv: list[str]) -> dict[str, Any]:
    index = _spec_index(argv)
    return {} if index is None else _json_object(argv[index]) or {}


def common_spec(reports: list[Report]) -> dict[str, Any]:
    """The keys of a driver's run description that more than half of the runs set alike,
    with their values: ``$COMMON_SPEC``, written once."""
    argvs = [[str(a) for a in run["argv"]] for report in reports for probe in report["probes"]
             for run in dict(probe).get("runs", []) if run.get("argv")]
    counts = Counter((k, json.dumps(v, sort_keys=True, ensure_ascii=False)) for argv in argvs
                     for k, v in _spec_of(argv).items() if v not in _UNSET)
    return {k: json.loads(v) for (k, v), n in sorted(counts.items()) if 2 * n > len(argvs)}


def _with_common_args(argv: list[str], common: list[str]) -> list[str]:
    for i in range(len(argv) - len(common) + 1) if common else ():
        if argv[i:i + len(common)] == common:
            return [*argv[:i], "$COMMON_ARGS", *argv[i + len(common):]]
    return argv


def common_env(reports: list[Report]) -> dict[str, str]:
    """The environment most runs of these reports share: each variable whose value more than
    half of them have."""
    envs = [env for report in reports for probe in report["probes"]
            for run in dict(probe).get("runs", []) if (env := run.get("env"))]
    counts = Counter((k, v) for env in envs for k, v in env.items())
    return {k: v for (k, v), n in sorted(counts.items()) if 2 * n > len(envs)}


def _cut(text: str, limit: int = _SHOWN_LINE) -> str:
    """A long line cut, saying how much is left out."""
    return text if len(text) <= limit else f"{text[:limit]}… (+{len(text) - limit} chars)"


def _compact(event: dict[str, Any]) -> dict[str, Any]:
    """An event as a reader scans it (subtype, terminal_reason, is_error, result): fields of no
    value here (null, empty, ``$VOLATILE``, ids) left out, long texts cut and long tables
    (usage) named only; the whole event is in the report."""
    kept: dict[str, Any] = {}
    omitted = []
    for key, value in event.items():
        if value in (None, "", [], {}, "$VOLATILE") or key in _ID_FIELDS:
            continue
        if isinstance(value, str):
            kept[key] = value if len(value) <= _FIELD else value[:_FIELD] + "…"
        elif len(json.dumps(value, sort_keys=True, ensure_ascii=False)) <= _FIELD:
            kept[key] = value
        else:
            omitted.append(key)
    if omitted:
        kept["…"] = sorted(omitted)
    return kept


def journal_line_list(numbers: list[int] | None) -> str:
    """``[3, 4, 5, 9]`` -> ``3–5, 9``."""
    if not numbers:
        return "—"
    spans: list[list[int]] = []
    for n in sorted(set(numbers)):
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ", ".join(f"{a}–{b}" if b > a else str(a) for a, b in spans)


_RULE = 48  # characters of a rule's match and of each reply (the report has the scenario whole)


def _rule_lines(scenario: dict[str, Any]) -> list[str]:
    lines = []
    for position, rule in enumerate(scenario.get("rules", []), start=1):
        match = {k: v for k, v in (rule.get("match") or {}).items()
                 if v is not None and k != "path" and (k, v) != ("kind", "main")}
        replies = [rule["reply"]] if rule.get("reply") else rule.get("replies") or []
        rule_id = rule.get("id") or f"rule-{position}"
        lines.append(f"- `{rule_id}` when {short(match, _RULE) if match else 'any main request'} → "
                     + "; then ".join(short(_reply_view(r), _RULE) for r in replies)
                     + (f" (repeat: {rule['repeat']})" if rule.get("repeat") == "always" else ""))
    return lines


def _reply_view(reply: dict[str, Any]) -> Any:
    keep = {k: v for k, v in reply.items()
            if (v not in (None, [], {}, False) and k not in ("usage", "ping", "headers"))
            or (k == "stop_reason" and v is not None)}
    if "content" in keep:
        keep["content"] = [{k: v for k, v in b.items() if k not in ("chunk_size",) and v is not None}
                           for b in keep["content"]]
    return keep


# the printed events quoted in the guide (assistant and user events are in the requests, each
# run's result in the table of how every run ended)
_LITERAL_EVENTS = ("system", "control_request", "control_response", "command_lifecycle")


def _stdin_lines(runs: list[dict[str, Any]]) -> list[str]:
    """What the caller wrote to a streamed run's stdin, in order, and why then."""
    out: list[str] = []
    for run in runs:
        if "stdin" not in run:
            continue
        out += [f"**What the caller wrote to `{run['name']}`** (stream-json on stdin):", ""]
        for entry in run["stdin"]:
            if entry.get("close"):
                out.append(f"- *{entry['why']}*")
                continue
            line = json.dumps(entry.get("line"), sort_keys=True, ensure_ascii=False)
            out.append(f"- `{short(line, 100)}` — {entry.get('why')}")
        for step in run.get("stdin_never_written") or []:
            out.append(f"- never written (its moment did not come): "
                       f"`{short(json.dumps(step.get('line'), sort_keys=True), 120)}` — "
                       f"{step.get('when')}")
        out.append("")
    return out


@dataclass(frozen=True)
class Shared:
    """What most runs of a folder share, written once at the top."""
    env: dict[str, str]
    args: list[str]
    spec: dict[str, Any] = field(default_factory=dict)


def _request_kind(r: dict[str, Any]) -> tuple[Any, ...]:
    return (r["kind"], r["rule"], r["outcome"], r.get("status"), bool(r.get("stream")))


def _request_span(group: list[dict[str, Any]], lines: list[int | None]) -> str:
    """``#seq@line kind turn.attempt → rule status``; a run of like requests as its first and
    last, with how many."""
    def at(r: dict[str, Any], line: int | None) -> str:
        return f"#{r['seq']}@{line}" if line else f"#{r['seq']}"

    def step(r: dict[str, Any]) -> str:
        return f"{r['turn']}.{r['attempt']}"
    first, last = group[0], group[-1]
    where = (f"{at(first, lines[0])} {first['kind']} {step(first)}" if len(group) == 1 else
             f"{at(first, lines[0])}–{at(last, lines[-1])} {first['kind']} {step(first)}–"
             f"{step(last)} ×{len(group)}")
    outcome = (str(first.get("status") or "") if first["outcome"] == "replied"
               else f"{first['outcome']} {first.get('status') or ''}").strip()
    return (f"{where}{'' if first.get('stream') else ' non-stream'} → `{first['rule']}` "
            f"{outcome}").rstrip()


def _hook_run_lines(probe: dict[str, Any]) -> list[str]:
    """The user's own hook commands as they ran (a setup's, through the wrapper): each with
    its event, exit code and what it printed."""
    runs = probe.get("hook_runs") or []
    if not runs:
        return []
    out = ["**Your hooks** (each command hook of the setup, as it ran):", ""]
    for hook in runs:
        printed = "; ".join(f"{name} {short(str(hook.get(name)).strip(), 120)!r}"
                            for name in ("stdout", "stderr") if str(hook.get(name) or "").strip())
        out.append(f"- {hook.get('event')} `{short(str(hook.get('command')), 80)}` "
                   f"({hook.get('source')}): exit {hook.get('exit_code')}"
                   + (f"; {printed}" if printed else ""))
    return [*out, ""]


def _premise_of(check: str, claim: str) -> str:
    """A premise check's name without the claim it was repeated for."""
    repeated = "." + claim.removeprefix("probe.")
    return check[:-len(repeated)] if claim and check.endswith(repeated) else check


def _premise_line(report: Report, probe: dict[str, Any]) -> list[str]:
    """The probe's premises this version lacks or that nothing established, in one line
    (those that held are in the report, each a check of role premise; the guide keeps within
    its bound)."""
    mark = f"{probe['name']}.premise."
    missing = sorted({_premise_of(str(c["id"])[len(mark):], str(c.get("claim") or ""))
                      for c in report.get("checks", [])
                      if str(c["id"]).startswith(mark) and not c["passed"]})
    if not missing:
        return []
    return [f"**Premises not held** (absent or not established; the claims' tables say what "
            f"was observed): {', '.join(f'`{m}`' for m in missing)}.", ""]


def probe_section(report: Report, probe: dict[str, Any], shared: Shared,
                   lines: dict[tuple[str, int], int]) -> list[str]:
    """What a probe ran and what happened, once for all its claims: the commands (each with
    how its environment differs from the common one), the script, what the caller wrote, how
    each run ended, its literal output (long events cut) and its requests, each linked to its
    journal line."""
    out = [f"### Probe `{probe['name']}`" + (f": {probe['title']}" if probe.get("title") else ""),
           ""]
    runs = probe.get("runs", [])
    if runs:
        out += ["**Commands** (cwd `$WORKSPACE`):", "", "```"]
        out += [f"# {run['name']}\n"
                f"{_command(run['argv'], run.get('env'), shared.env, shared.args, shared.spec)}"
                for run in runs]
        out += ["```", ""]
    if probe.get("scenario"):
        out += ["**Script:**", "", *_rule_lines(probe["scenario"]), ""]
    out += _premise_line(report, probe)
    out += _stdin_lines(runs)
    if not runs:
        return out
    for run in runs:
        literal = [_cut(json.dumps(_compact(e), sort_keys=True, ensure_ascii=False))
                   for e in run.get("stdout", [])
                   if e.get("type") in _LITERAL_EVENTS and e.get("subtype") != "init"]
        stderr = run.get("stderr", "").strip()
        if literal or stderr:
            out += [f"<details><summary>Output of <code>{run['name']}</code></summary>", "",
                    "```", *literal, *([_cut(stderr, _STDERR)] if stderr else []),
                    "```", "</details>", ""]
    requests = [r for r in probe.get("requests", []) if r.get("path") == "/v1/messages"]
    if requests:
        out += ["**Requests:**", ""]
        for run in dict.fromkeys(str(r["run"]) for r in requests):
            groups: list[list[dict[str, Any]]] = []
            for r in (r for r in requests if r["run"] == run):
                if groups and _request_kind(groups[-1][-1]) == _request_kind(r):
                    groups[-1].append(r)  # a run of like requests (warmups, retries) as one
                else:
                    groups.append([r])
            out.append(f"- `{run}`: " + "; ".join(
                _request_span(g, [lines.get((probe["name"], r["seq"])) for r in g])
                for g in groups))
        out.append("")
    out += _hook_run_lines(probe)
    if probe.get("boundaries"):
        out += ["**Boundaries** (what this does not prove):", ""]
        out += [f"- {b}" for b in probe["boundaries"]] + [""]
    return out
