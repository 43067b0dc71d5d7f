"""The evidence guide: every claim of every report in a directory, readable on its own.

Kept small enough to read: the environment every run shares is written once, each probe's
runs, script, output and requests once (its claims link to them), long output lines cut and
request bodies left in the journal, each request linked to its line.
"""

from __future__ import annotations

import json
import shlex
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from probes.core.files import write_text
from probes.report.counterfactuals import claim_counterfactuals, load_counterfactuals
from probes.report.format import ClaimEntry, Report, load_folder, read_journal_lines

__all__ = ["render_guide", "write_guide"]


def _short(value: Any, limit: int = 160) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    text = text.replace("\n", "\\n").replace("|", "\\|")
    return text if len(text) <= limit else text[:limit - 1] + "…"


_SHOWN_LINE = 240  # a literal output line longer than this is cut, pointing at the whole
_STDERR = 2000
_FIELD = 40  # a literal event's field longer than this is shortened
_ID_FIELDS = ("uuid", "session_id", "parent_tool_use_id")


def _quote(value: str) -> str:
    return (value if (value.startswith("$") and " " not in value) or value == "$COMMON_ARGS"
            else shlex.quote(value))


def _assignments(env: dict[str, str]) -> list[str]:
    return [f"  {name}={_quote(value)} \\" for name, value in sorted(env.items())]


def _command(argv: list[str], env: dict[str, str] | None = None,
             common: dict[str, str] | None = None, args: list[str] | None = None) -> str:
    """The run as a shell command: its whole environment (nothing else reached it), then argv;
    the part of it most runs share written ``$COMMON_ENV`` (listed once, at the top), then
    what this run sets otherwise, and what of it this run lacks."""
    argv = _with_common_args([str(a) for a in argv], args or [])
    if not env:
        return " ".join(_quote(a) for a in argv)
    common = common or {}
    lacks = sorted(k for k in common if k not in env)
    own = " ".join(f"{k}={_quote(v)}" for k, v in sorted(env.items()) if common.get(k) != v)
    return ((f"# without {', '.join(lacks)} of $COMMON_ENV\n" if lacks else "")
            + " ".join(["env -i", *(["$COMMON_ENV"] if common else []), *([own] if own else []),
                        *(_quote(a) for a in argv)]))


def _common_args(reports: list[Report]) -> list[str]:
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


def _with_common_args(argv: list[str], common: list[str]) -> list[str]:
    for i in range(len(argv) - len(common) + 1) if common else ():
        if argv[i:i + len(common)] == common:
            return [*argv[:i], "$COMMON_ARGS", *argv[i + len(common):]]
    return argv


def _common_env(reports: list[Report]) -> dict[str, str]:
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


def _lines(numbers: list[int] | None) -> str:
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


def _rule_lines(scenario: dict[str, Any]) -> list[str]:
    lines = []
    for position, rule in enumerate(scenario.get("rules", []), start=1):
        match = {k: v for k, v in (rule.get("match") or {}).items()
                 if v is not None and k != "path" and (k, v) != ("kind", "main")}
        replies = [rule["reply"]] if rule.get("reply") else rule.get("replies") or []
        rule_id = rule.get("id") or f"rule-{position}"
        lines.append(f"- `{rule_id}` when {_short(match, 60) if match else 'any main request'} → "
                     + "; then ".join(_short(_reply_view(r), 60) for r in replies)
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
            out.append(f"- `{_short(line, 100)}` — {entry.get('why')}")
        for step in run.get("stdin_never_written") or []:
            out.append(f"- never written (its moment did not come): "
                       f"`{_short(json.dumps(step.get('line'), sort_keys=True), 120)}` — "
                       f"{step.get('when')}")
        out.append("")
    return out


@dataclass(frozen=True)
class _Shared:
    """What most runs of a folder share, written once at the top."""
    env: dict[str, str]
    args: list[str]


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


def _probe_section(report: Report, probe: dict[str, Any], shared: _Shared,
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
        out += [f"# {run['name']}\n{_command(run['argv'], run.get('env'), shared.env, shared.args)}"
                for run in runs]
        out += ["```", ""]
    if probe.get("scenario"):
        out += ["**Script:**", "", *_rule_lines(probe["scenario"]), ""]
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
    if probe.get("boundaries"):
        out += ["**Boundaries** (what this does not prove):", ""]
        out += [f"- {b}" for b in probe["boundaries"]] + [""]
    return out


def _counterfactual_lines(shown: dict[str, Any]) -> list[str]:
    """Able to fail only where counterfactuals.json shows it on this binary."""
    if shown["run"]:
        out = ["**Counterfactuals run here:**", ""]
        out += [f"- {'able to fail' if r['able_to_fail'] else 'did NOT make it fail'}: "
                f"{r['description']} — {r['verdict'].replace('_', ' ')}: "
                f"{_short(r['deciding'], 200)}" for r in shown["results"]]
        return [*out, ""]
    if shown["declared"]:
        return ["**Counterfactuals** (not run here): " + "; ".join(shown["declared"]), ""]
    return ["**No counterfactual** for this claim.", ""]


def _claim_section(report: Report, claim: ClaimEntry,
                   record: dict[str, Any] | None = None) -> list[str]:
    checks = {c["id"]: c for c in report["checks"]}
    out = [f"### `{claim['id']}` — {claim['status'].replace('_', ' ').upper()}", "",
           f"**Claim.** {claim['statement']}", "",
           f"**Source.** {claim['source']['citation']}", "",
           *([f"**Beyond the source.** {claim['beyond_source']}", ""]
             if claim.get("beyond_source") else []),
           f"**Verdict.** {claim['reason']}", ""]
    out += _counterfactual_lines(claim_counterfactuals(record, claim))
    read = [n for check_id in claim["checks"] for n in checks[check_id].get("journal_lines", [])]
    prefix = f"{claim['probe']}."
    shared = all(check_id.startswith(prefix) for check_id in claim["checks"])
    out += [f"**Checks**{f' `{prefix}*`' if shared else ''} (journal lines {_lines(read)}):",
            "",
            "| check | result | expected | observed |", "|---|---|---|---|"]
    for check_id in claim["checks"]:
        c = checks[check_id]
        status = str(c.get("status") or ("passed" if c["passed"] else "failed"))
        result = {"passed": "pass", "failed": "**FAIL**", "not_observable": "not observable",
                  "absent": "absent (reach)", "not_reached": "not reached (reach)",
                  }.get(status, status)
        if c.get("role") and status == "passed":
            result += f" ({c['role']})"
        observed = ("= expected" if c["observed"] == c["expected"]
                    else _short(c["observed"], 70))
        shown = check_id[len(prefix):] if shared else check_id
        out.append(f"| `{shown}` | {result} | {_short(c['expected'], 50)} | {observed} |")
    out.append("")
    return out


def _report_sections(report: Report, shared: _Shared, lines: dict[tuple[str, int], int],
                     record: dict[str, Any] | None) -> list[str]:
    """Each probe once, then its claims; claims of no probe in the report last."""
    out: list[str] = []
    shown: set[str] = set()
    for probe in report["probes"]:
        out += _probe_section(report, dict(probe), shared, lines)
        for claim in report["claims"]:
            if claim["probe"] == probe["name"]:
                out += _claim_section(report, claim, record)
                shown.add(claim["id"])
    for claim in report["claims"]:
        if claim["id"] not in shown:
            out += _claim_section(report, claim, record)
    return out


def render_guide(reports: list[Report],
                 journal_lines: dict[str, dict[tuple[str, int], int]] | None = None,
                 counterfactuals: dict[str, Any] | None = None) -> str:
    """EVIDENCE.md of a folder's reports; ``journal_lines`` per report maps each request
    (probe, seq) to its journal line, which the request list links to; ``counterfactuals``
    is the folder's counterfactuals.json (None: not run on this binary)."""
    if not reports:
        return "# Evidence guide\n\nNo reports in this directory.\n"
    client = reports[0]["client"]
    out = [f"# Evidence guide: {client['name']} {client['version']}", "",
           f"Binary `{client['entry']}` ({client['platform']}), SHA-256 "
           f"`{client['binary_sha256']}`. Generated by loopprobe "
           f"{reports[0]['generator']['version']} from the JSON reports in this directory; "
           "each report's `.journal.jsonl` holds every recorded request in full, and its "
           "`.timing.json` a timeline per client run (each request's arrival and its "
           "response's end with when every body write went out, each hook call's start and "
           "end per tool_use_id, each refused egress attempt; `t_ms` from the start of the "
           "run's client process, the only part of the evidence that differs between runs). "
           "A check that compares times names the timeline entries it compares. A claim's "
           "counterfactuals (its probe changed so that the behaviour cannot happen) are "
           "\"run here\" when `counterfactuals.json` in this folder records what each did on "
           "this binary; \"not run here\" otherwise: declared, not shown on this binary.", "",
           "| report | status | claims confirmed |", "|---|---|---|"]
    for report in reports:
        passed = sum(1 for c in report["claims"] if c["passed"])
        out.append(f"| [{report['report']}]({report['report']}.json) | {report['status']} | "
                   f"{passed}/{len(report['claims'])} |")
    out.append("")
    refused = sorted({h for r in reports for h in r.get("trust", {}).get("egress_refused", [])})
    out += ["**Egress:** " + (f"the client tried to reach {', '.join(refused)}; the egress guard "
                              "refused every attempt (see each probe's `egress_attempts`)."
                              if refused else "the client connected to nothing but the mock."), ""]
    out += ["## How every run ended", "",
            "The final `result` of every client run in these reports (terminal reasons the "
            "loop reached in print mode):", "",
            "| report | probe | run | terminal_reason | subtype | is_error | exit | result |",
            "|---|---|---|---|---|---|---|---|"]
    results = {(report["report"], probe["name"], run["name"]): (run.get("result") or {}).get(
        "result") for report in reports for probe in report["probes"]
        for run in dict(probe).get("runs", [])}
    for report in reports:
        for row in report.get("terminal_reasons", []):
            exit_code = "timeout" if row.get("timed_out") else row.get("exit_code")
            out.append(f"| {report['report']} | {row['probe']} | {row['run']} | "
                       f"{row.get('terminal_reason') or '—'} | {row.get('subtype') or '—'} | "
                       f"{row.get('is_error')} | {exit_code} | "
                       f"{_short(results.get((report['report'], row['probe'], row['run'])), 50)} |")
    out.append("")
    shared = _Shared(_common_env(reports), _common_args(reports))
    if shared.env or shared.args:
        out += ["## What most runs share", "",
                "Each command below is written `env -i $COMMON_ENV`, the variables most runs "
                "share (placeholders as in the reports), then what that run sets otherwise "
                "(a run without one of them says so), then its arguments, `$COMMON_ARGS` "
                "standing for the ones most runs share. A script's rules answer main requests "
                "unless they name another kind. Each request's body is whole in the report's "
                "journal at the line given as `#seq@line kind turn.attempt → rule status`; "
                "each check's evidence, and each run's whole output, in the report.",
                "", "```", *(["COMMON_ENV=", *_assignments(shared.env)] if shared.env else []),
                *([f"COMMON_ARGS={' '.join(_quote(a) for a in shared.args)}"]
                  if shared.args else []), "```", ""]
    for report in reports:
        journal = report["journal"]
        out += [f"## {report['title']}", "", report.get("summary", ""), "",
                f"Report [`{report['report']}.json`]({report['report']}.json), journal "
                f"[`{journal}`]({journal}) (the lines below are its lines).", ""]
        if "partial" in report:
            out += [f"**Partial:** only {', '.join(report['partial']['probes_run'])} ran; "
                    f"not run: {', '.join(report['partial']['probes_not_run'])}.", ""]
        if "merged" in report:
            out += [f"**Merged:** {', '.join(report['merged']['probes_run_now'])} run later "
                    "into this report of the same binary; from the earlier run: "
                    f"{', '.join(report['merged']['probes_from_earlier_run']) or 'none'}.", ""]
        out += _report_sections(report, shared, (journal_lines or {}).get(report["report"], {}),
                                counterfactuals)
    return "\n".join(out) + "\n"


def _request_lines(path: Path) -> dict[tuple[str, int], int]:
    """(probe, seq) -> the line of a report's journal recording that request."""
    found: dict[tuple[str, int], int] = {}
    if not path.is_file():
        return found
    for number, line in enumerate(read_journal_lines(path), 1):
        record = json.loads(line)
        if record.get("type") == "request":
            found[(str(record.get("probe")), int(record.get("seq") or 0))] = number
    return found


def write_guide(directory: Path) -> Path:
    reports = list(load_folder(directory, require_reports=False).reports.values())
    lines = {r["report"]: _request_lines(directory / r["journal"]) for r in reports}
    return write_text(directory / "EVIDENCE.md",
                      render_guide(reports, lines, load_counterfactuals(directory)))
