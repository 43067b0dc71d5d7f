"""The evidence guide: every claim of every report in a directory, readable on its own.

Kept small enough to read: the environment every run shares is written once, each probe's
runs, script, output and requests once (its claims link to them), long output lines cut and
request bodies left in the journal, each request linked to its line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from probes.core.files import write_text
from probes.core.safe_read import loads
from probes.report.counterfactuals import claim_counterfactuals, load_counterfactuals
from probes.report.format import (
    ClaimEntry,
    Report,
    journal_path,
    load_folder,
    read_journal_lines,
)
from probes.report.guide_runs import (
    Shared,
    assignments,
    common_args,
    common_env,
    common_spec,
    journal_line_list,
    probe_section,
    quote,
    short,
)

__all__ = ["render_guide", "write_guide"]


def _shown_deciding(result: dict[str, Any]) -> int:
    return _DECIDING if result["able_to_fail"] else 2 * _DECIDING


def _counterfactual_lines(shown: dict[str, Any], probe: str = "") -> list[str]:
    """Able to fail only where counterfactuals.json shows it on this binary (check ids
    without their probe's name, which the claim's section gives)."""
    if shown["run"]:
        said = [f"{'able to fail' if r['able_to_fail'] else 'did NOT make it fail'}: "
                f"{short(r['description'], _DECLARED // 2)} — {r['verdict'].replace('_', ' ')}: "
                f"{short(r['deciding'].removeprefix(f'{probe}.'), _shown_deciding(r))}"
                for r in shown["results"]]
        if len(said) == 1:  # one line: the guide stays within its bound (tests/test_guide.py)
            return [f"**Counterfactual run here** (whole in `counterfactuals.json`): {said[0]}",
                    ""]
        return ["**Counterfactuals run here** (each whole in `counterfactuals.json`):", "",
                *(f"- {line}" for line in said), ""]
    if shown["declared"]:
        return ["**Counterfactuals** (not run here): " + "; ".join(
            short(d, _DECLARED) for d in shown["declared"]), ""]
    return ["**No counterfactual** for this claim.", ""]


_DECLARED = 100  # characters of a counterfactual not run here (the report has it whole)
_DECIDING = 50  # characters of what decided a counterfactual's verdict (twice that when
# it did not make the claim fail: the reader needs to see why)
_QUOTED = 80  # characters of an analysis quote shown (the report keeps it whole)


def _analysis(reports: list[Report]) -> tuple[str, str] | None:
    """The one analysis (title, version) the folder's claims cite, if exactly one: named
    once at the top, then "the analysis" (each claim still gives section, line and quote)."""
    cited = {(str(c["source"].get("title")), str(c["source"].get("version")))
             for r in reports for c in r["claims"] if c["source"].get("kind") == "analysis"}
    return next(iter(cited)) if len(cited) == 1 else None


def _citation(claim: ClaimEntry, analysis: tuple[str, str] | None) -> str:
    source = claim["source"]
    citation = str(source["citation"])
    if analysis and source.get("kind") == "analysis" and source.get("quote"):
        # the whole quote is in the report; here, enough of it to find the line
        return (f"the analysis, section “{source.get('section')}”, line {source.get('line')}: "
                f"“{short(source['quote'], _QUOTED)}”")
    return citation


def _claim_section(report: Report, claim: ClaimEntry,
                   record: dict[str, Any] | None = None,
                   analysis: tuple[str, str] | None = None) -> list[str]:
    checks = {c["id"]: c for c in report["checks"]}
    out = [f"### `{claim['id']}` — {claim['status'].replace('_', ' ').upper()}", "",
           f"**Claim.** {claim['statement']}", "",
           f"**Source.** {_citation(claim, analysis)}", "",
           *([f"**Beyond the source.** {claim['beyond_source']}", ""]
             if claim.get("beyond_source") else []),
           f"**Verdict.** {claim['reason']}", ""]
    out += _counterfactual_lines(claim_counterfactuals(record, claim), claim["probe"])
    read = [n for check_id in claim["checks"] for n in checks[check_id].get("journal_lines", [])]
    prefix = f"{claim['probe']}."
    shared = all(check_id.startswith(prefix) for check_id in claim["checks"])
    out += [f"**Checks**{f' `{prefix}*`' if shared else ''} (journal lines {journal_line_list(read)}):",
            ""]
    # a check that passed with exactly the value expected is listed in one line; the table
    # keeps every other (its observed value is the evidence to read)
    as_expected = [check_id for check_id in claim["checks"]
                   if checks[check_id]["passed"] and not checks[check_id].get("role")
                   and checks[check_id]["observed"] == checks[check_id]["expected"]
                   and str(checks[check_id].get("status") or "passed") == "passed"]
    if as_expected:
        out += ["Passed as expected: " + ", ".join(
            f"`{check_id[len(prefix):] if shared else check_id}` "
            f"({short(checks[check_id]['expected'], 20)})" for check_id in as_expected) + ".",
            ""]
    # premises that held are named once, in the probe's section (what established each is in
    # the report); one missing or not established stays in the table, with what was observed
    held = [check_id for check_id in claim["checks"] if checks[check_id].get("role") == "premise"
            and checks[check_id]["passed"]]
    table = [check_id for check_id in claim["checks"]
             if check_id not in as_expected and check_id not in held]
    if table:
        out += ["| check | result | expected | observed |", "|---|---|---|---|"]
    for check_id in table:
        c = checks[check_id]
        status = str(c.get("status") or ("passed" if c["passed"] else "failed"))
        result = {"passed": "pass", "failed": "**FAIL**", "not_observable": "not observable",
                  "absent": "absent (reach)", "not_reached": "not reached (reach)",
                  }.get(status, status)
        if c.get("role") and status == "passed":
            result += f" ({c['role']})"
        observed = ("= expected" if c["observed"] == c["expected"]
                    else short(c["observed"], 48))
        shown = check_id[len(prefix):] if shared else check_id
        out.append(f"| `{shown}` | {result} | {short(c['expected'], 40)} | {observed} |")
    out.append("")
    return out


def _report_sections(report: Report, shared: Shared, lines: dict[tuple[str, int], int],
                     record: dict[str, Any] | None,
                     analysis: tuple[str, str] | None) -> list[str]:
    """Each probe once, then its claims; claims of no probe in the report last."""
    out: list[str] = []
    shown: set[str] = set()
    for probe in report["probes"]:
        out += probe_section(report, dict(probe), shared, lines)
        for claim in report["claims"]:
            if claim["probe"] == probe["name"]:
                out += _claim_section(report, claim, record, analysis)
                shown.add(claim["id"])
    for claim in report["claims"]:
        if claim["id"] not in shown:
            out += _claim_section(report, claim, record, analysis)
    return out


def render_guide(reports: list[Report],
                 journal_lines: dict[str, dict[tuple[str, int], int]] | None = None,
                 counterfactuals: dict[str, Any] | None = None) -> str:
    """EVIDENCE.md of a folder's reports; ``journal_lines`` per report maps each request
    (probe, seq) to its journal line, which the request list links to; ``counterfactuals``
    is the folder's counterfactuals.json (None: not run on this binary)."""
    if not reports:
        return "# Evidence guide\n\nNo reports in this directory.\n"
    analysis = _analysis(reports)
    shared = Shared(common_env(reports), common_args(reports), common_spec(reports))
    out = [*_heading(reports), *_sources(analysis), *_egress(reports), *_not_kept(reports),
           *_endings(reports), *_shared(shared)]
    for report in reports:
        out += _report_part(report, shared, (journal_lines or {}).get(report["report"], {}),
                            counterfactuals, analysis)
    return "\n".join(out) + "\n"


def _heading(reports: list[Report]) -> list[str]:
    """The binary, how to read the folder's files, and each report's status."""
    client = reports[0]["client"]
    plugin = client.get("plugin")
    out = [f"# Evidence guide: {client['name']} {client['version']}", "",
           f"Binary `{client['entry']}` ({client['platform']}), SHA-256 "
           f"`{client['binary_sha256']}`"
           + (f", run by the plugin client kind `{plugin}` ($LOOPPROBE_CLIENTS)" if plugin
              else "") + ". Generated by loopprobe "
           f"{reports[0]['generator']['version']} from the JSON reports in this directory; "
           "each report's `.journal.jsonl` holds every recorded request in full, and its "
           "`.timing.json` a timeline per client run (each request's arrival and its "
           "response's end with when every body write went out, each hook call's start and "
           "end per tool_use_id, each refused egress attempt; `t_ms` from the start of the "
           "run's client process; apart from what a client varies itself, such as the "
           "wall-clock time it prints, the only part of the evidence that differs between "
           "runs). "
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
    return out


def _sources(analysis: tuple[str, str] | None) -> list[str]:
    if not analysis:
        return []
    return [f"**Sources.** \"The analysis\" is “{analysis[0]}”, the published analysis of "
            f"Claude Code {analysis[1]}; each claim citing it gives the section, the line and "
            "the words quoted.", ""]


def _egress(reports: list[Report]) -> list[str]:
    refused = sorted({h for r in reports for h in r.get("trust", {}).get("egress_refused", [])})
    return ["**Egress:** " + (f"the client tried to reach {', '.join(refused)}; the egress guard "
                              "refused every attempt (see each probe's `egress_attempts`)."
                              if refused else "the client connected to nothing but the mock."), ""]


def _not_kept(reports: list[Report]) -> list[str]:
    """A client's flood: the first records are in the report, the rest counted."""
    left_out = [f"{n['probe']} (run {n['run'] or 'none'}): {n['what']}, {n['said']}"
                for r in reports for n in r.get("not_kept", [])]
    if not left_out:
        return []
    return ["**Not kept:** records past their caps (the first ones are kept; see each "
            "probe's `not_kept`): " + "; ".join(left_out) + ".", ""]


def _endings(reports: list[Report]) -> list[str]:
    """How every run ended: its terminal reason and final result."""
    out = ["## How every run ended", "",
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
                       f"{short(results.get((report['report'], row['probe'], row['run'])), 36)} |")
    out.append("")
    return out


def _shared(shared: Shared) -> list[str]:
    """What most runs share, written once: the environment, the arguments, the JSON spec."""
    if not (shared.env or shared.args or shared.spec):
        return []
    return ["## What most runs share", "",
            "Each command below is written `env -i $COMMON_ENV`, the variables most runs "
            "share (placeholders as in the reports), then what that run sets otherwise "
            "(a run without one of them says so), then its arguments, `$COMMON_ARGS` "
            "standing for the ones most runs share. A script's rules answer main requests "
            "unless they name another kind. Each request's body is whole in the report's "
            "journal at the line given as `#seq@line kind turn.attempt → rule status`; "
            "each check's evidence, and each run's whole output, in the report. A JSON "
            "argument is shown without its keys set to null, false or empty (the report "
            "has it whole)" + (
                ", nor those set as in `$COMMON_SPEC`, the keys most runs' JSON arguments "
                "set alike (a key of it a run lacks is shown null)." if shared.spec else "."),
            "", "```", *(["COMMON_ENV=", *assignments(shared.env)] if shared.env else []),
            *([f"COMMON_ARGS={' '.join(quote(a) for a in shared.args)}"]
              if shared.args else []),
            *([f"COMMON_SPEC={json.dumps(shared.spec, ensure_ascii=False)}"]
              if shared.spec else []), "```", ""]


def _report_part(report: Report, shared: Shared, lines: dict[tuple[str, int], int],
                 counterfactuals: dict[str, Any] | None,
                 analysis: tuple[str, str] | None) -> list[str]:
    """One report: its title and files, whether it is partial or merged, then its sections."""
    journal = report["journal"]
    out = [f"## {report['title']}", "", report.get("summary", ""), "",
           f"Report [`{report['report']}.json`]({report['report']}.json), journal "
           f"[`{journal}`]({journal}) (the lines below are its lines).", ""]
    if "partial" in report:
        out += [f"**Partial:** only {', '.join(report['partial']['probes_run'])} ran; "
                f"not run: {', '.join(report['partial']['probes_not_run'])}.", ""]
    if "merged" in report:
        out += [f"**Merged:** {', '.join(report['merged']['probes_run_now'])} run later "
                "into this report of the same binary; from the earlier run: "
                f"{', '.join(report['merged']['probes_from_earlier_run']) or 'none'}.", ""]
    return out + _report_sections(report, shared, lines, counterfactuals, analysis)


def _request_lines(path: Path, folder: Path) -> dict[tuple[str, int], int]:
    """(probe, seq) -> the line of a report's journal recording that request; lines that
    are not request records (a write cut short) are passed over."""
    found: dict[tuple[str, int], int] = {}
    if not path.exists() and not path.is_symlink():
        return found
    for number, line in enumerate(read_journal_lines(path, within=folder), 1):
        try:
            record = loads(line, f"{path}: line {number}")
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("type") == "request" \
                and isinstance(record.get("seq") or 0, int):
            found[(str(record.get("probe")), int(record.get("seq") or 0))] = number
    return found


def write_guide(directory: Path) -> Path:
    reports = list(load_folder(directory, require_reports=False).reports.values())
    lines = {r["report"]: _request_lines(journal_path(directory, r), directory)
             for r in reports}
    return write_text(directory / "EVIDENCE.md",
                      render_guide(reports, lines, load_counterfactuals(directory)))
