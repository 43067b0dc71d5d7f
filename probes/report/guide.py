"""The evidence guide: every claim of every report in a directory, readable on its own."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from probes.core.files import write_text
from probes.report.format import ClaimEntry, Report, load_folder

__all__ = ["render_guide", "write_guide"]


def _short(value: Any, limit: int = 160) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    text = text.replace("\n", "\\n").replace("|", "\\|")
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _command(argv: list[str], env: dict[str, str] | None = None) -> str:
    """The run as a shell command: its whole environment (nothing else reached it), then argv."""
    def quote(value: str) -> str:
        return value if value.startswith("$") and " " not in value else shlex.quote(value)
    assignments = [f"{name}={quote(value)} \\" for name, value in sorted((env or {}).items())]
    return "\n".join(["env -i \\", *(f"  {a}" for a in assignments),
                      "  " + " ".join(quote(a) for a in argv)] if env else
                     [" ".join(quote(a) for a in argv)])


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
        match = {"kind": "main", **{k: v for k, v in (rule.get("match") or {}).items()
                                    if v is not None and k != "path"}}
        replies = [rule["reply"]] if rule.get("reply") else rule.get("replies") or []
        rule_id = rule.get("id") or f"rule-{position}"
        lines.append(f"- `{rule_id}` when {_short(match, 120)} → "
                     + "; then ".join(_short(_reply_view(r), 200) for r in replies)
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


# the printed events quoted whole in the guide (assistant and user events are in the requests)
_LITERAL_EVENTS = ("result", "system", "control_request", "control_response", "command_lifecycle")


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
            out.append(f"- `{_short(line, 160)}` — {entry.get('why')}")
        for step in run.get("stdin_never_written") or []:
            out.append(f"- never written (its moment did not come): "
                       f"`{_short(json.dumps(step.get('line'), sort_keys=True), 120)}` — "
                       f"{step.get('when')}")
        out.append("")
    return out


def _claim_section(report: Report, claim: ClaimEntry) -> list[str]:
    probe: dict[str, Any] = next(
        (p for p in report["probes"] if p["name"] == claim["probe"]), {})
    checks = {c["id"]: c for c in report["checks"]}
    out = [f"### `{claim['id']}` — {claim['status'].replace('_', ' ').upper()}", "",
           f"**Claim.** {claim['statement']}", "",
           f"**Source.** {claim['source']['citation']}", "",
           *([f"**Beyond the source.** {claim['beyond_source']}", ""]
             if claim.get("beyond_source") else []),
           f"**Verdict.** {claim['reason']}", ""]
    counterfactuals = claim.get("counterfactuals")
    out += [("**Shown able to fail** on the real client when: " + "; ".join(counterfactuals))
            if counterfactuals else "**No counterfactual run yet** for this claim.", ""]
    runs = probe.get("runs", [])
    if runs:
        out += ["**Commands**, each with the whole environment it ran with (cwd `$WORKSPACE`, "
                "isolated `$HOME`, mock at `$MOCK_URL`):", "",
                "```"]
        out += [f"# {run['name']}\n{_command(run['argv'], run.get('env'))}" for run in runs]
        out += ["```", ""]
    if probe.get("scenario"):
        out += ["**Scripted model responses:**", "", *_rule_lines(probe["scenario"]), ""]
    out += _stdin_lines(runs)
    if runs:
        out += ["**What the client did:**", "", "| run | exit | result subtype | result text |",
                "|---|---|---|---|"]
        for run in runs:
            result = run.get("result") or {}
            out.append(f"| {run['name']} | {run['exit_code']}"
                       f"{' (timeout)' if run.get('timed_out') else ''} | "
                       f"{result.get('subtype')} | {_short(result.get('result'), 80)} |")
        out.append("")
        for run in runs:
            literal = [json.dumps(e, sort_keys=True) for e in run.get("stdout", [])
                       if e.get("type") in _LITERAL_EVENTS and e.get("subtype") != "init"]
            if literal or run.get("stderr"):
                out += [f"<details><summary>Literal output of <code>{run['name']}</code> "
                        "(stream-json result, system, control and command_lifecycle events; "
                        "stderr)</summary>", "",
                        "```", *literal, *([run["stderr"].strip()] if run.get("stderr") else []),
                        "```", "</details>", ""]
        requests = [r for r in probe.get("requests", []) if r.get("path") == "/v1/messages"]
        if requests:
            out += ["Requests the mock received:", ""]
            for r in requests:
                mode = "stream" if r.get("stream") else "non-stream"
                out.append(f"- #{r['seq']} run `{r['run']}`: {r['kind']} turn {r['turn']} "
                           f"attempt {r['attempt']} ({mode}) → rule `{r['rule']}`, "
                           f"{r['outcome']} {r.get('status') or ''}".rstrip())
                for line in (r.get("messages") or [])[-2:]:
                    out.append(f"    - {_short(line, 160)}")
            out.append("")
    journal = report["journal"]
    read = [n for check_id in claim["checks"] for n in checks[check_id].get("journal_lines", [])]
    out += [f"**Checks** (they read lines {_lines(read)} of [`{journal}`]({journal})):", "",
            "| check | result | expected | observed | evidence |",
            "|---|---|---|---|---|"]
    for check_id in claim["checks"]:
        c = checks[check_id]
        status = str(c.get("status") or ("passed" if c["passed"] else "failed"))
        result = {"passed": "pass", "failed": "**FAIL**", "not_observable": "not observable",
                  "absent": "absent (reach)", "not_reached": "not reached (reach)",
                  }.get(status, status)
        if c.get("role") and status == "passed":
            result += f" ({c['role']})"
        out.append(f"| `{check_id}` | {result} | "
                   f"{_short(c['expected'], 90)} | {_short(c['observed'], 120)} | "
                   f"{_short(c['evidence'], 60)} |")
    out.append("")
    if probe.get("boundaries"):
        out += ["**Boundaries** (what this does not prove):", ""]
        out += [f"- {b}" for b in probe["boundaries"]] + [""]
    return out


def render_guide(reports: list[Report]) -> str:
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
           "A check that compares times names the timeline entries it compares.", "",
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
            "| report | probe | run | terminal_reason | subtype | is_error | exit |",
            "|---|---|---|---|---|---|---|"]
    for report in reports:
        for row in report.get("terminal_reasons", []):
            exit_code = "timeout" if row.get("timed_out") else row.get("exit_code")
            out.append(f"| {report['report']} | {row['probe']} | {row['run']} | "
                       f"{row.get('terminal_reason') or '—'} | {row.get('subtype') or '—'} | "
                       f"{row.get('is_error')} | {exit_code} |")
    out.append("")
    for report in reports:
        out += [f"## {report['title']}", "", report.get("summary", ""), ""]
        if "partial" in report:
            out += [f"**Partial:** only {', '.join(report['partial']['probes_run'])} ran; "
                    f"not run: {', '.join(report['partial']['probes_not_run'])}.", ""]
        if "merged" in report:
            out += [f"**Merged:** {', '.join(report['merged']['probes_run_now'])} run later "
                    "into this report of the same binary; from the earlier run: "
                    f"{', '.join(report['merged']['probes_from_earlier_run']) or 'none'}.", ""]
        for claim in report["claims"]:
            out += _claim_section(report, claim)
    return "\n".join(out) + "\n"


def write_guide(directory: Path) -> Path:
    reports = list(load_folder(directory, require_reports=False).reports.values())
    return write_text(directory / "EVIDENCE.md", render_guide(reports))
