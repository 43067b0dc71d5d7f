"""The gate as Markdown for a CI job summary ($GITHUB_STEP_SUMMARY).

A table of cases × versions (each cell the worst outcome with counts), then every row that
did not pass with what was expected, what was observed and why, and apart from those the
harness's problems: they are loopprobe's to fix, never the case file owner's failures.
Every text of a case file, a baseline, a report or the client's output goes through
``probes.report.github_ci.markdown_inline``: it shows as written and renders as nothing else.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from probes.gate.gate import OUTCOMES, GateResult, GateRow
from probes.report.github_ci import append_summary, markdown_inline

__all__ = ["LABELS", "append_gate_summary", "summary_markdown"]

LABELS = {"passed": "✅ passed", "failed": "❌ failed", "stale": "⚠️ stale",
          "expected_failure": "☑️ expected failure", "skipped": "⏭️ skipped",
          "harness_problem": "🛠️ harness problem"}
_cell = markdown_inline


def _counts_cell(rows: list[GateRow]) -> str:
    if not rows:
        return "—"
    counts = Counter(row.outcome for row in rows)
    worst = next(outcome for outcome in OUTCOMES if counts[outcome])
    parts = ", ".join(f"{counts[o]} {o.replace('_', ' ')}" for o in OUTCOMES if counts[o])
    return f"{LABELS[worst].split()[0]} {parts}"


def _verdict_line(result: GateResult) -> str:
    if result.exit_code == 2:
        return "**Nothing could be judged**: every run was a harness problem (exit 2)."
    if result.failed:
        failed, stale = len(result.of("failed")), len(result.of("stale"))
        first = f"; first bad version **{_cell(result.first_bad_version)}**" \
            if result.first_bad_version else ""
        regressed = " A regression: it passed on an older version." if result.regressed else ""
        return f"**Failed**: {failed} failed, {stale} stale baseline entr" \
               f"{'y' if stale == 1 else 'ies'}{first}.{regressed}"
    return "**Passed**: every expectation passed or is a listed expected failure."


def summary_markdown(result: GateResult, title: str = "loopprobe check") -> str:
    lines = [f"## {_cell(title)}", "", _verdict_line(result), ""]
    if result.rows:
        lines += ["| case | " + " | ".join(map(_cell, result.versions)) + " |",
                  "|---|" + "---|" * len(result.versions)]
        for case in result.cases():
            cells = [_counts_cell([r for r in result.rows if r.case == case and r.version == v])
                     for v in result.versions]
            lines.append(f"| {_cell(case)} | " + " | ".join(cells) + " |")
        lines.append("")
    problems = [r for r in result.rows if r.outcome not in ("passed", "harness_problem")]
    if problems:
        lines += ["### Not passed", "", "| version | case | expectation | outcome | expected | "
                  "observed | reason |", "|---|---|---|---|---|---|---|"]
        for row in sorted(problems, key=lambda r: OUTCOMES.index(r.outcome)):
            reason = row.reason + (f" (baseline: {row.baseline_reason})"
                                   if row.baseline_reason else "")
            if row.outcome == "stale":
                reason = f"listed in the baseline but passed: remove the entry. {reason}"
            lines.append(f"| {_cell(row.version)} | {_cell(row.case)} | "
                         f"{_cell(row.expectation)} | {LABELS[row.outcome]} | "
                         f"{_cell(row.expected)} | {_cell(row.observed)} | {_cell(reason)} |")
        lines.append("")
    harness = result.of("harness_problem")
    if harness or result.unreadable:
        lines += ["### Harness problems (loopprobe's, not your cases')", ""]
        lines += [f"- {_cell(u.version)}: report folder {_cell(u.folder)} unreadable: "
                  f"{_cell(u.error)}" for u in result.unreadable]
        lines += [f"- {_cell(r.version)} {_cell(r.claim)}: {_cell(r.reason)}" for r in harness]
        lines.append("")
    if result.notes:
        lines += ["### What the harness answered or refused (notes, not verdicts)", ""]
        lines += [f"- {_cell(n.version)} {_cell(n.case)}: {_cell(n.detail)}"
                  for n in result.notes]
        lines.append("")
    if result.unused_baseline:
        lines += ["### Baseline entries that listed nothing judged", ""]
        lines += [f"- {_cell(e.case)} {_cell(e.expectation)} ({_cell(e.versions)}): "
                  f"{_cell(e.reason)}" for e in result.unused_baseline]
        lines.append("")
    return "\n".join(lines)


def append_gate_summary(path: Path, result: GateResult) -> Path:
    """Append the gate's summary to the job summary file (``--summary``)."""
    return append_summary(path, summary_markdown(result))
