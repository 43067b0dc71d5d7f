"""One claim on one client version as a self-contained Markdown bug report.

From a report folder alone: the client, its version and the SHA-256 of the file that ran;
the claim, where its expectation comes from, and its verdict; each failing check's expected
and observed values; the scripted exchange (the mock's rules, as YAML-like JSON); every
request the client sent during the probe (its body, as the mock recorded it) and what it was
answered; how the run ended; the command that reproduces it. Something a maintainer can
read without loopprobe, and paste into the client's issue tracker.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from probes.report.format import Report, ReportError, load_folder, verdict
from probes.report.probe_view import journal_requests

__all__ = ["BODY_LIMIT", "explain_claim"]

BODY_LIMIT = 6000  # characters of one request body shown; the journal holds it whole


def _json(value: Any, limit: int = BODY_LIMIT) -> str:
    text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + "\n… (cut; the whole body is in the " \
                                                          "report's journal)"


def _fenced(text: str, language: str = "json") -> list[str]:
    fence = "````" if "```" in text else "```"
    return [f"{fence}{language}", text, fence]


def _find(directory: Path, claim_id: str) -> tuple[Report, Any]:
    folder = load_folder(directory)
    for report in folder.reports.values():
        for claim in report["claims"]:
            if claim["id"] == claim_id:
                return report, claim
    known = sorted(c["id"] for r in folder.reports.values() for c in r["claims"])
    raise ReportError(f"{directory}: no claim {claim_id!r}; known: {', '.join(known)}")


def explain_claim(directory: Path, claim_id: str) -> str:
    """The Markdown bug report of ``claim_id`` in the report folder ``directory``."""
    report, claim = _find(directory, claim_id)
    client = report["client"]
    label = f"{client['name']}@{client['version']}"
    probe = next(p for p in report["probes"] if p["name"] == claim["probe"])
    checks = {c["id"]: c for c in report["checks"]}
    own = [checks[i] for i in claim.get("checks", []) if i in checks]
    status = verdict(claim["status"])
    lines = [f"# {label}: {claim['statement']}", "",
             f"- **Client**: `{client['package']}` {client['version']} ({client['platform']}), "
             f"kind `{client['name']}`",
             f"- **File that ran** (SHA-256): `{client['entry']}` `{client['binary_sha256']}`",
             f"- **Verdict**: {status.replace('_', ' ')}: {claim['reason']}",
             f"- **Expected behaviour, and its source**: {claim['source']['citation']}",
             f"- **Probe**: `{probe['name']}` ({probe['title']}), report `{report['report']}`",
             "", "## Expected and observed", ""]
    failing = [c for c in own if not c.get("passed")] or own
    for check in failing:
        lines += [f"### `{check['id']}`: {check['description']}", "",
                  f"- status: {check.get('status', 'passed' if check.get('passed') else 'failed')}",
                  f"- where: {check['evidence']}", "", "Expected:", "",
                  *_fenced(_json(check.get("expected"))), "", "Observed:", "",
                  *_fenced(_json(check.get("observed"))), ""]
    lines += ["## The scripted exchange", "",
              "The mock of the Messages API answered by these rules, in order (a rule's "
              "`match` selects the request, its `reply` is what was sent):", "",
              *_fenced(_json(probe.get("scenario"))), ""]
    journal, missing = journal_requests(directory, report)
    requests = sorted((seq, record) for (name, seq), (_, record) in journal.items()
                      if name == probe["name"] and isinstance(seq, int))
    lines += ["## What the client sent", ""]
    if missing:
        lines += [f"(the request bodies are not available: {missing})", ""]
    for seq, record in requests:
        lines += [f"### Request {seq}: `{record.get('method')} {record.get('path')}` → "
                  f"{record.get('status')} ({record.get('outcome')}, rule "
                  f"`{record.get('rule')}`, stream {record.get('stream')})", ""]
        if record.get("error"):
            lines += [f"The mock said: {record['error']}", ""]
        lines += [*_fenced(_json(record.get("body", record.get("body_text")))), ""]
    lines += ["## How the run ended", ""]
    for run in probe.get("runs", []):
        shown = {k: run.get(k) for k in ("argv", "exit_code", "timed_out", "result")}
        lines += [*_fenced(_json(shown, 3000)), ""]
        if run.get("stderr"):
            lines += ["stderr (last lines):", "",
                      *_fenced("\n".join(str(run["stderr"]).splitlines()[-15:]), "text"), ""]
    lines += ["## Reproduce", "",
              *_fenced(f"pip install loopprobe  # or a checkout: pip install -e .\n"
                       f"loopprobe run --client {label} --catalog probes.catalog.agent_loop "
                       f"--probe {probe['name']} --out /tmp/repro", "sh"), "",
              "loopprobe starts the scripted mock, runs the client contained (bubblewrap) "
              "against it and writes the same evidence."]
    return "\n".join(lines) + "\n"
