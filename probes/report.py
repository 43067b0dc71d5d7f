"""Reports: versioned JSON evidence per client binary, written atomically, loaded back.

Paths of the isolated run appear as placeholders (``$WORKSPACE``, ``$HOME``…),
session ids as ``$SESSION[<run>]``, other client-made UUIDs and agent ids as
``$UUID_<n>`` and ``$AGENT_<n>``;
durations, timestamps and hashes of files that hold timestamps are moved to
``volatile``. So two runs of the same
binary give the same verdicts, checks and observed values, and the rest of the
report differs only where the client's own output does.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from probes import __version__
from probes.clients.base import ClientBinary
from probes.evidence import Evidence, message_outline
from probes.fingerprint import fingerprint
from probes.model import ReportSpec
from probes.runner import ProbeOutcome

__all__ = ["FINGERPRINT_FILE", "REPORT_SCHEMA_VERSION", "ReportError", "build_report",
           "load_fingerprint", "load_report", "write_fingerprint", "write_json", "write_report"]

REPORT_SCHEMA_VERSION = 1
FINGERPRINT_FILE = "fingerprint.json"
TRUST_CHECK = "harness.no-egress"
# client-made random identifiers, each numbered by first appearance
RANDOM_IDS = re.compile(
    r"\b(?P<UUID>[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\b"
    r"|\b(?P<AGENT>a[0-9a-f]{16})\b")
VOLATILE_KEYS = frozenset({"timestamp", "time", "elapsed", "started", "finished"})


def _volatile(key: str) -> bool:
    """Timing fields: kept out of the normalised output, so reruns compare equal."""
    return key in VOLATILE_KEYS or key.endswith(("_ms", "Ms", "_time", "Time", "_at", "At"))


class ReportError(ValueError):
    pass


class _Normaliser:
    def __init__(self, evidence: Evidence | None):
        self.pairs: list[tuple[str, str]] = []
        self.ids: dict[str, str] = {}
        self.counts: dict[str, int] = {}
        if evidence is None:
            return
        if evidence.mock_url:
            self.pairs.append((evidence.mock_url, "$MOCK_URL"))
        self.pairs += sorted(evidence.placeholders.items(), key=lambda kv: -len(kv[0]))
        for name, run in evidence.runs.items():
            if run.session_id and run.session_id not in self.ids:
                self.ids[run.session_id] = f"$SESSION[{name}]"

    def text(self, value: str) -> str:
        for real, placeholder in self.pairs:
            if real in value:
                value = value.replace(real, placeholder)
        return RANDOM_IDS.sub(self._random_id, value)

    def _random_id(self, match: re.Match[str]) -> str:
        found, kind = match.group(0), str(match.lastgroup)
        if found not in self.ids:
            self.counts[kind] = self.counts.get(kind, 0) + 1
            self.ids[found] = f"${kind}_{self.counts[kind]}"
        return self.ids[found]

    def __call__(self, value: Any, *, volatile: bool = False) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list | tuple):
            return [self(v, volatile=volatile) for v in value]
        if isinstance(value, dict):
            return {self.text(str(k)): ("$VOLATILE" if volatile and _volatile(k)
                                        else self(v, volatile=volatile))
                    for k, v in value.items()}
        return value


def _request_summary(record: dict[str, Any], run: str | None) -> dict[str, Any]:
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
        "messages": message_outline(record) if body else None,
    }


def _change_kind(change: dict[str, str | None]) -> str:
    if change.get("before") is None:
        return "created"
    return "deleted" if change.get("after") is None else "modified"


def _run_of(evidence: Evidence, seq: int) -> str | None:
    return next((name for name, run in evidence.runs.items()
                 if run.seqs[0] < seq <= run.seqs[1]), None)


def _probe_section(outcome: ProbeOutcome,
                   norm: _Normaliser) -> tuple[dict[str, Any], dict[str, Any]]:
    probe, ev = outcome.probe, outcome.evidence
    status = ("not_applicable" if outcome.not_applicable else "error" if outcome.error
              else "passed" if outcome.passed else "failed")
    section: dict[str, Any] = {
        "name": probe.name, "title": probe.title, "status": status,
        "not_applicable": outcome.not_applicable, "error": norm(outcome.error),
        "claims": [c.id for c in probe.claims],
        "scenario": norm(outcome.scenario), "fixtures": dict(probe.fixtures),
        "hook_policy": probe.hooks, "boundaries": list(probe.boundaries),
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
                "requests": [r["seq"] for r in ev.journal if r.get("type") == "request"
                             and run.seqs[0] < r.get("seq", 0) <= run.seqs[1]],
                "files_changed": {path: _change_kind(change)
                                  for path, change in run.files_changed.items()},
            }))
            timing[name] = {"duration_s": run.duration, "files_changed": norm(run.files_changed),
                            "result_duration_ms": (run.result or {}).get("duration_ms"),
                            "result_duration_api_ms": (run.result or {}).get("duration_api_ms")}
        section["requests"] = [
            norm(_request_summary(r, _run_of(ev, r.get("seq", 0))))
            for r in ev.journal if r.get("type") == "request"]
        section["hook_calls"] = [norm({k: v for k, v in h.items() if k != "pid"}, volatile=True)
                                 for h in ev.hook_calls if "input" in h]
        section["journal_torn_tail"] = ev.torn_journal
        section["egress_attempts"] = [norm(a, volatile=True) for a in ev.egress]
    return section, {"runs": timing}


def build_report(spec: ReportSpec, outcomes: list[ProbeOutcome], binary: ClientBinary, *,
                 complete: bool = True) -> tuple[dict[str, Any], list[str]]:
    """The report, and the recorded requests as normalised journal lines for beside it."""
    journal_lines: list[str] = []
    checks: list[dict[str, Any]] = []
    claims: list[dict[str, Any]] = []
    probes: list[dict[str, Any]] = []
    volatile: dict[str, Any] = {"generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                              "probes": {}}
    for outcome in outcomes:
        norm = _Normaliser(outcome.evidence)
        probe_checks = [norm(c.to_json()) for c in outcome.checks]
        section, probe_timing = _probe_section(outcome, norm)
        probes.append(section)
        volatile["probes"][outcome.probe.name] = probe_timing
        for record in outcome.evidence.journal if outcome.evidence else []:
            journal_lines.append(json.dumps({"probe": outcome.probe.name, **norm(record)},
                                            sort_keys=True, ensure_ascii=False))
        checks += probe_checks
        for claim in outcome.probe.claims:
            own = [c for c in probe_checks if c["claim"] == claim.id]
            failed = [c["id"] for c in own if not c["passed"]]
            # a timeout or an unscripted request undermines the evidence of every claim of the
            # probe; an egress attempt does not (it is reported on its own, in `trust`)
            harness_failed = [c["id"] for c in probe_checks if c["claim"] is None
                              and not c["passed"] and not c["id"].endswith(TRUST_CHECK)]
            if outcome.not_applicable:
                status, reason = "not_applicable", outcome.not_applicable
            elif outcome.error:
                status, reason = "error", norm(outcome.error)
            elif not own:
                status, reason = "error", "the probe produced no check for this claim"
            elif failed or harness_failed:
                status, reason = "failed", f"failed checks: {', '.join(failed + harness_failed)}"
            else:
                status, reason = "passed", f"all {len(own)} checks passed"
            claims.append({"id": claim.id, "statement": claim.statement, "source": claim.source,
                           "probe": outcome.probe.name, "status": status, "passed": status == "passed",
                           "reason": reason, "checks": [c["id"] for c in own]})
    trust = {"egress_refused": sorted({host for c in checks if c["id"].endswith(TRUST_CHECK)
                                       and not c["passed"] for host in c["observed"]}),
             "note": "connections the client tried to make to hosts other than the mock; "
                     "all were refused by the egress guard"}
    ran = [o for o in outcomes if not o.not_applicable]
    if not complete:
        status = "incomplete"
    elif any(o.error for o in outcomes):
        status = "error"
    elif not ran:
        status = "not_applicable"
    else:
        status = "passed" if all(c["passed"] for c in claims if c["status"] != "not_applicable") \
            and not trust["egress_refused"] else "failed"
    terminal = [
        {"probe": o.probe.name, "run": name, "terminal_reason": (run.result or {}).get(
            "terminal_reason"), "subtype": (run.result or {}).get("subtype"),
         "is_error": (run.result or {}).get("is_error"), "exit_code": run.exit_code,
         "timed_out": run.timed_out}
        for o in outcomes if o.evidence is not None for name, run in o.evidence.runs.items()]
    report = {
        "schema_version": REPORT_SCHEMA_VERSION,
        "report": spec.name, "title": spec.title, "summary": spec.summary,
        "generator": {"name": "loopprobe", "version": __version__},
        "client": binary.identity(),
        "status": status, "passed": status == "passed", "complete": complete,
        "claims": claims, "checks": checks, "probes": probes, "terminal_reasons": terminal,
        "trust": trust,
        "boundaries": sorted({b for o in outcomes for b in o.probe.boundaries}),
        "journal": f"{spec.name}.journal.jsonl",
        "volatile": volatile,
    }
    return report, journal_lines


def write_json(path: Path, data: Any) -> None:
    """Write JSON atomically: a temporary file in the same directory, then a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(data, out, indent=2, sort_keys=True, ensure_ascii=False)
            out.write("\n")
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _write_lines(path: Path, lines: Iterable[str]) -> None:
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        for line in lines:
            out.write(line + "\n")
    os.chmod(temporary, 0o644)
    os.replace(temporary, path)


def write_report(report: dict[str, Any], journal_lines: list[str], out_dir: Path) -> Path:
    """Write ``<report>.json`` and the recorded requests beside it as ``<report>.journal.jsonl``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    _write_lines(out_dir / report["journal"], journal_lines)
    path = out_dir / f"{report['report']}.json"
    write_json(path, report)
    return path


def _load_json(path: Path, what: str) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ReportError(f"{path}: no such {what}") from None
    except ValueError as error:
        raise ReportError(f"{path}: not JSON: {error}") from None
    if not isinstance(data, dict) or data.get("schema_version") != REPORT_SCHEMA_VERSION:
        found = data.get("schema_version") if isinstance(data, dict) else type(data).__name__
        raise ReportError(f"{path}: expected a loopprobe {what} with schema_version "
                          f"{REPORT_SCHEMA_VERSION}, found {found!r}")
    return data


def load_report(path: Path) -> dict[str, Any]:
    data = _load_json(path, "report")
    missing = [k for k in ("report", "client", "claims", "checks", "probes") if k not in data]
    if missing:
        raise ReportError(f"{path}: not a loopprobe report (no {', '.join(missing)})")
    return data


def write_fingerprint(evidence: list[Evidence], binary: ClientBinary, out_dir: Path) -> Path:
    path = out_dir / FINGERPRINT_FILE
    write_json(path, {"schema_version": REPORT_SCHEMA_VERSION, "kind": "fingerprint",
                      "client": binary.identity(), "fingerprint": fingerprint(evidence)})
    return path


def load_fingerprint(path: Path) -> dict[str, Any]:
    data = _load_json(path, "fingerprint")
    if data.get("kind") != "fingerprint" or "fingerprint" not in data:
        raise ReportError(f"{path}: not a loopprobe fingerprint")
    return data
