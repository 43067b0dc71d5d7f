"""Reports: versioned JSON evidence per client binary, built from probe outcomes, written
atomically.

The report is the same for two runs of the same binary, byte for byte, wherever they
ran: paths of the isolated run appear as placeholders (``$WORKSPACE``, ``$HOME``…),
the mock's address as ``$MOCK_URL``/``$MOCK_HOST``, session ids as ``$SESSION[<run>]``,
other client-made UUIDs, agent and device ids as ``$UUID_<n>``, ``$AGENT_<n>`` and
``$DEVICE_<n>``, the date of the run as ``$RUN_DATE``; durations, timestamps, hashes of
files that hold timestamps and durations the client writes into text are ``$VOLATILE`` in
the report and kept, with the generation time, in ``<report>.timing.json`` beside it: a
timeline per client run (requests, response ends and their body writes, hook calls, egress,
in ms from the run's start), committed with the report but the one file that differs from
run to run. How values are made the same, and the timing file, are
``probes.report.normalise``'s (its names re-exported here).
"""

from __future__ import annotations

import gzip
import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from probes import __version__
from probes.clients.base import ClientBinary
from probes.core.checks import CheckResult
from probes.core.evidence import Evidence, RunRecord, message_outline
from probes.core.files import write_bytes, write_json, write_lines
from probes.core.outcome import ProbeOutcome
from probes.core.probe import ReportSpec
from probes.core.verdicts import EGRESS_CHECK, UPHELD, decide_claim
from probes.report.fingerprint import fingerprint
from probes.report.format import (
    FINGERPRINT_FILE,
    FINGERPRINT_FILE_VERSION,
    REPORT_SCHEMA_VERSION,
    TIMING_SUFFIX,
    ClaimEntry,
    Report,
    ReportStatus,
)
from probes.report.journal_blobs import compact_lines
from probes.report.normalise import (
    JOURNAL_VOLATILE,
    RANDOM_IDS,
    REPORT_JOURNAL_OMITTED,
    SHORT_AGENT_VALUE,
    TEXT_DURATION,
    VOLATILE_KEYS,
    Normaliser,
    journal_line,
    run_timelines,
)
from probes.report.not_kept import report_not_kept

__all__ = ["JOURNAL_VOLATILE", "OUTLINE_HEAD", "OUTLINE_TAIL", "RANDOM_IDS",
           "REPORT_JOURNAL_OMITTED", "SHORT_AGENT_VALUE",
           "TEXT_DURATION", "TRUST_CHECK", "UPHELD", "VOLATILE_KEYS", "build_report",
           "report_outline", "report_status", "write_fingerprint", "write_report"]

TRUST_CHECK = EGRESS_CHECK
# a request's outline in the report lists its first and last messages only: a client that
# loops (2.1.37 asked 906 times, each request one message longer) would otherwise make the
# report grow with the square of its requests (53 MB, past what any reader accepts); the
# journal holds every message
OUTLINE_HEAD, OUTLINE_TAIL = 8, 16


def _request_summary(record: Mapping[str, Any], run: str | None) -> dict[str, Any]:
    body = record.get("body") if isinstance(record.get("body"), dict) else {}
    return {
        "seq": record.get("seq"), "run": run, "method": record.get("method"),
        "path": record.get("path"), "kind": record.get("kind"), "turn": record.get("turn"),
        "attempt": record.get("attempt"), "stream": record.get("stream"),
        "rule": record.get("rule"), "reply_index": record.get("reply_index"),
        "replay_of": record.get("replay_of"), "outcome": record.get("outcome"),
        "status": record.get("status"), "error": record.get("error"),
        "tools": [t.get("name") for t in body.get("tools", []) if isinstance(t, dict)]
        if body else None,
        "messages": report_outline(record) if body else None,
    }


def report_outline(record: Mapping[str, Any]) -> list[str]:
    """The outline of a request's messages a report keeps: all of them, or the first
    OUTLINE_HEAD and the last OUTLINE_TAIL around a line counting the others."""
    outline = message_outline(record)
    left_out = len(outline) - OUTLINE_HEAD - OUTLINE_TAIL
    if left_out <= 1:
        return outline
    return [*outline[:OUTLINE_HEAD],
            f"… {left_out} messages not listed (the journal holds every one)",
            *outline[-OUTLINE_TAIL:]]


def _change_kind(change: dict[str, str | None]) -> str:
    if change.get("before") is None:
        return "created"
    return "deleted" if change.get("after") is None else "modified"


def _hook_calls(evidence: Evidence, norm: Normaliser) -> list[dict[str, Any]]:
    """Each hook call as the client made it, in a stable order: concurrent calls race to the
    recorder, so neither their arrival order nor their arrival index is evidence."""
    calls = [norm({k: v for k, v in h.items() if k not in ("pid", "index")}, volatile=True)
             for h in evidence.hook_calls if "input" in h]
    return sorted(calls, key=lambda call: json.dumps(call, sort_keys=True))


def _hook_runs(evidence: Evidence, norm: Normaliser) -> list[dict[str, Any]]:
    """Each run of the user's own hook commands (``probes.inside.hook_wrapper``), in a stable
    order; its timing (started, duration) goes to the timing file."""
    runs = [norm({k: v for k, v in h.items() if k not in ("pid", "started", "duration")},
                 volatile=True) for h in evidence.hook_runs]
    return sorted(runs, key=lambda run: json.dumps(run, sort_keys=True))


def _probe_section(outcome: ProbeOutcome,
                   norm: Normaliser) -> tuple[dict[str, Any], dict[str, Any]]:
    probe, ev = outcome.probe, outcome.evidence
    section: dict[str, Any] = {
        "name": probe.name, "title": probe.title, "status": outcome.status,
        "not_applicable": outcome.not_applicable, "error": norm(outcome.error),
        **({"absent": outcome.absent} if outcome.absent else {}),
        "claims": [c.id for c in probe.claims],
        "scenario": norm(outcome.scenario), "fixtures": dict(probe.fixtures),
        "hook_policy": dict(probe.hooks.policy) if probe.hooks is not None else None,
        "boundaries": list(probe.boundaries),
        # what it relies on the version having; each run's finding is a check (role premise)
        **({"premises": [p.to_json() for p in probe.premises]} if probe.premises else {}),
        "runs": [], "requests": [], "hook_calls": [],
    }
    timing: dict[str, Any] = {}
    if ev is not None:
        for name, run in ev.runs.items():
            section["runs"].append(norm({
                "name": name, "argv": run.argv, "env": run.env,
                "cwd": ev.path("$WORKSPACE"), "exit_code": run.exit_code,
                "timed_out": run.timed_out, "session_id": run.session_id,
                "result": norm(run.result, volatile=True),
                "stdout": norm(run.output.events, volatile=True),
                "stdout_unparsed": run.output.unparsed, "stderr": run.stderr,
                "requests": [r["seq"] for r in ev.all_requests()
                             if run.seqs[0] < r["seq"] <= run.seqs[1]],
                "files_changed": {path: _change_kind(change)
                                  for path, change in run.files_changed.items()},
                **_streamed(run, norm),
                **_bounds(run),
                **({"client": run.client} if run.client is not None else {}),
                **({"mcp_server": norm(run.invocation.mcp.to_json())}
                   if run.invocation.mcp is not None else {}),
            }))
            timing[name] = {"duration_s": run.duration, "files_changed": norm(run.files_changed),
                            "stdin_written_at_s": [e["at"] for e in run.stdin],
                            "result_duration_ms": (run.result or {}).get("duration_ms"),
                            "result_duration_api_ms": (run.result or {}).get("duration_api_ms")}
        # normalised before it is outlined: the outline cuts texts short, paths included
        section["requests"] = [_request_summary(norm(dict(r)), ev.run_of(r["seq"]))
                               for r in ev.all_requests()]
        section["hook_calls"] = _hook_calls(ev, norm)
        if ev.hook_runs:  # the user's own hooks, observed: only when a setup has some
            section["hook_runs"] = _hook_runs(ev, norm)
        if ev.setup_notes:
            section["setup_notes"] = norm(ev.setup_notes)
        section["journal_torn_tail"] = ev.torn_journal
        if ev.client_mentions:  # static evidence the probe's reach checks read
            section["client_mentions"] = ev.client_mentions
        if ev.mcp_calls:
            section["mcp_calls"] = {run: [norm({k: v for k, v in e.items()
                                                if k not in ("time", "pid")}, volatile=True)
                                          for e in events]
                                    for run, events in ev.mcp_calls.items()}
        section["egress_attempts"] = [norm(a, volatile=True) for a in ev.egress]
        # what the client left that the harness would not read, and what the collector
        # refused (a forged reporter): only when there is some, as the client's doing
        if ev.sandbox_refusals:
            section["sandbox_refusals"] = norm(ev.sandbox_refusals, volatile=True)
        if ev.runs_not_started:
            section["runs_not_started"] = norm(ev.runs_not_started)
        if ev.evidence_faults:
            section["evidence_faults"] = [norm({k: v for k, v in f.items() if k != "time"},
                                               volatile=True) for f in ev.evidence_faults]
        if ev.not_kept:  # the first faults of a flood are above; how many more, here
            section["not_kept"] = list(ev.not_kept)
    return section, run_timelines(ev, timing)


def _bounds(run: RunRecord) -> dict[str, Any]:
    """What the harness cut short or the client got wrong; present only when there was
    some, so reports of runs without any keep their shape."""
    shown = {"stdout_dropped_bytes": run.stdout_dropped,
             "stderr_dropped_bytes": run.stderr_dropped,
             "stopped": run.stopped, "bounds_hit": run.bounds_hit,
             "protocol_faults": run.protocol_faults, "not_kept": run.not_kept}
    return {key: value for key, value in shown.items() if value}


def _streamed(run: RunRecord, norm: Normaliser) -> dict[str, Any]:
    """A streamed run's script and what the caller wrote (times are in the timing file)."""
    script = run.invocation.streamed
    if script is None:
        return {}
    return {"streamed_input": norm(script.shown()),
            "stdin": [norm({k: v for k, v in e.items() if k != "at"}, volatile=True)
                      for e in run.stdin],
            "stdin_never_written": norm(run.stdin_pending)}


def _check_entry(check: CheckResult, norm: Normaliser,
                 line_of: dict[int, int]) -> dict[str, Any]:
    entry: dict[str, Any] = norm(check.to_json())
    entry.pop("journal_seqs", None)
    entry["journal_lines"] = [line_of[s] for s in check.journal_seqs if s in line_of]
    return entry


def _claim_entries(outcome: ProbeOutcome, probe_checks: list[dict[str, Any]],
                   norm: Normaliser) -> list[ClaimEntry]:
    claims: list[ClaimEntry] = []
    for claim in outcome.probe.claims:
        own = [c for c in probe_checks if c["claim"] == claim.id]
        status, reason = decide_claim(own, probe_checks, not_applicable=outcome.not_applicable,
                                      absent=outcome.absent,
                                      error=norm(outcome.error) if outcome.error else None,
                                      baseline=claim.source.kind == "baseline")
        counterfactuals = [cf.description for cf in outcome.probe.counterfactuals
                           if claim.id in cf.claims]
        claims.append({"id": claim.id, "statement": claim.statement,
                       "source": claim.source.to_json(), "beyond_source": claim.beyond_source,
                       "counterfactuals": counterfactuals or None,
                       "probe": outcome.probe.name,
                       "status": status,  # type: ignore[typeddict-item]  # one of CLAIM_VERDICTS
                       "passed": status == "confirmed", "reason": reason,
                       "checks": [c["id"] for c in own]})
    return claims


def report_status(*, errors: bool, ran_any: bool, claims: list[ClaimEntry]) -> ReportStatus:
    """A complete report's status: a harness error (of a probe, or of a claim's run), nothing
    applicable, or whether every claim was upheld. An egress attempt the guard refused is
    the client's act, reported in ``trust.egress_refused``; it does not decide the status."""
    if errors or any(c["status"] == "error" for c in claims):
        return "error"
    if not ran_any:
        return "not_applicable"
    return "passed" if all(c["status"] in UPHELD for c in claims) else "failed"


def build_report(spec: ReportSpec, outcomes: list[ProbeOutcome], binary: ClientBinary, *,
                 complete: bool = True) -> tuple[Report, list[str], dict[str, Any]]:
    """The report, the recorded requests as normalised journal lines for beside it, and
    what differs per run (``<report>.timing.json``)."""
    journal_lines: list[str] = []
    checks: list[dict[str, Any]] = []
    claims: list[ClaimEntry] = []
    probes: list[dict[str, Any]] = []
    timing: dict[str, Any] = {"generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                              "probes": {}}
    for outcome in outcomes:
        norm = Normaliser(outcome.evidence)
        records = outcome.evidence.journal if outcome.evidence else []
        # where each request of this probe lands in <report>.journal.jsonl (1-based lines)
        line_of = {r["seq"]: len(journal_lines) + number for number, r in enumerate(records, 1)
                   if r["type"] == "request"}
        probe_checks = [_check_entry(c, norm, line_of) for c in outcome.checks]
        section, probe_timing = _probe_section(outcome, norm)
        probes.append(section)
        timing["probes"][outcome.probe.name] = probe_timing
        for record in records:
            journal_lines.append(journal_line(outcome.probe.name, dict(record), norm))
        checks += probe_checks
        claims += _claim_entries(outcome, probe_checks, norm)
    egress_refused = sorted({host for c in checks if c["id"].endswith(TRUST_CHECK)
                             and not c["passed"] for host in c["observed"]})
    trust = {"egress_refused": egress_refused,
             "note": "connections the client tried to make to hosts other than the mock; "
                     "all were refused by the egress guard",
             # how the client runs were contained (the same for every probe of a run)
             "containment": next((o.evidence.containment for o in outcomes
                                  if o.evidence is not None and o.evidence.containment),
                                 {"mode": "unknown"})}
    status = "incomplete" if not complete else report_status(
        errors=any(o.error for o in outcomes),
        ran_any=any(not o.not_applicable for o in outcomes),
        claims=claims)
    terminal = [
        {"probe": o.probe.name, "run": name, "terminal_reason": (run.result or {}).get(
            "terminal_reason"), "subtype": (run.result or {}).get("subtype"),
         "is_error": (run.result or {}).get("is_error"), "exit_code": run.exit_code,
         "timed_out": run.timed_out}
        for o in outcomes if o.evidence is not None for name, run in o.evidence.runs.items()]
    report: Report = {
        "schema_version": REPORT_SCHEMA_VERSION,
        "report": spec.name, "title": spec.title, "summary": spec.summary,
        "generator": {"name": "loopprobe", "version": __version__},
        "client": binary.identity(),  # type: ignore[typeddict-item]
        "status": status,  # type: ignore[typeddict-item]  # report_status's
        "passed": status == "passed", "complete": complete,
        "claims": claims, "checks": checks, "probes": probes,  # type: ignore[typeddict-item]
        "terminal_reasons": terminal, "trust": trust,
        "boundaries": sorted({b for o in outcomes for b in o.probe.boundaries}),
        "journal": f"{spec.name}.journal.jsonl",
        "timing": f"{spec.name}{TIMING_SUFFIX}",
    }
    if left_out := report_not_kept(outcomes):
        report["not_kept"] = left_out
    return report, journal_lines, timing


def write_report(report: Report, journal_lines: list[str], out_dir: Path,
                 timing: dict[str, Any] | None = None, *, compress_journal: bool = False) -> Path:
    """Write ``<report>.json``, the recorded requests beside it as ``<report>.journal.jsonl``
    (large repeated parts written once: ``probes.report.journal_blobs``)
    (``.jsonl.gz`` with ``compress_journal``: the same bytes gzipped, with no timestamp in the
    gzip header, so it is as reproducible) and, if given, the timeline as
    ``<report>.timing.json``."""
    journal_lines = compact_lines(journal_lines)
    if compress_journal:
        report["journal"] = f"{report['report']}.journal.jsonl.gz"
        text = "".join(line + "\n" for line in journal_lines).encode()
        write_bytes(out_dir / report["journal"], gzip.compress(text, 9, mtime=0))
    else:
        write_lines(out_dir / report["journal"], journal_lines)
    if timing is not None:
        write_json(out_dir / f"{report['report']}{TIMING_SUFFIX}", timing)
    return write_json(out_dir / f"{report['report']}.json", report)


def write_fingerprint(evidence: list[Evidence], binary: ClientBinary, out_dir: Path) -> Path:
    return write_json(out_dir / FINGERPRINT_FILE, {
        "schema_version": FINGERPRINT_FILE_VERSION, "kind": "fingerprint",
        "client": binary.identity(),
        "fingerprint": fingerprint(evidence)})
