"""One suite run: the selected probes on one client version, its reports written into one
folder (``run``, and each version of ``matrix``, ``bisect``)."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from probes.catalog import REPORTS
from probes.cli.catalogs import names, select
from probes.cli.common import (
    EXIT_FAILED,
    EXIT_HARNESS,
    EXIT_INTERRUPTED,
    EXIT_PASSED,
    HarnessInputError,
    check_out,
    detail,
    say,
    task,
)
from probes.clients import Client, InstallError, parse_client_spec
from probes.clients.base import ClientBinary
from probes.clients.npm import cache_root
from probes.clients.registry import mark_used
from probes.core.evidence import Evidence
from probes.core.files import write_json
from probes.core.outcome import ProbeOutcome
from probes.core.probe import Probe, ReportSpec
from probes.core.verdicts import AGAINST
from probes.report.format import Report
from probes.report.guide import write_guide
from probes.report.partial import mark_partial, merge_into_earlier
from probes.scale.schedule import Scheduled, run_scheduled
from probes.scale.shard import SHARD_KEY, shard_of

if TYPE_CHECKING:
    from probes.run.containment import Containment

__all__ = ["SuiteResult", "execute_suite", "report_summary", "run_suite"]


@dataclass
class SuiteResult:
    """What one suite run wrote, for the exit code and the ``--json`` summary."""

    exit_code: int
    client: str
    out: Path
    reports: list[Report] = field(default_factory=list)
    error: str | None = None
    # probe name -> what its run gave (the evidence, checks and verdicts the reports hold),
    # for a caller in the same process; never in the JSON summary
    outcomes: dict[str, ProbeOutcome] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"command": "run", "exit_code": self.exit_code, "client": self.client,
                "out": str(self.out), "error": self.error,
                "binary": self.reports[0]["client"] if self.reports else None,
                "reports": [report_summary(r) for r in self.reports]}


def report_summary(report: Report) -> dict[str, Any]:
    verdicts: dict[str, int] = {}
    for claim in report["claims"]:
        verdicts[claim["status"]] = verdicts.get(claim["status"], 0) + 1
    return {"report": report["report"], "status": report["status"],
            "complete": report["complete"], "claims": verdicts,
            "contradicted": [c["id"] for c in report["claims"] if c["status"] in AGAINST],
            **({"partial": report["partial"]} if "partial" in report else {})}


def run_suite(client_spec: str | tuple[Client, str], out: Path, **options: Any) -> int:
    """``execute_suite``'s exit code: 0 every claim upheld, 1 one contradicted, 2 a harness
    error, 130 interrupted."""
    return execute_suite(client_spec, out, **options).exit_code


def execute_suite(client_spec: str | tuple[Client, str], out: Path, *,
                  probe: str | Sequence[str] | None = None,
                  report: str | Sequence[str] | None = None, work_dir: str | None = None,
                  catalog: tuple[ReportSpec, ...] = REPORTS, no_sandbox: bool = False,
                  jobs: int = 1, shard: tuple[int, int] | None = None,
                  compress_journals: bool = False, counterfactuals: bool = False) -> SuiteResult:
    """Run the selected probes on one client version and write its report directory.

    Every client run is contained (bubblewrap); ``no_sandbox`` runs them on the host, and the
    reports say so. ``jobs`` probes run at once (each in its own sandbox and mock); the
    reports are the same as a serial run's. ``probe`` and ``report`` are names or lists of
    names (see ``select``). Input errors raise ``HarnessInputError`` before
    any probe runs. ``shard`` (i, n) runs every n-th report from the i-th and notes the shard
    in its partial fingerprint (``loopprobe merge`` joins the shards). ``counterfactuals``
    then runs every selected probe's counterfactuals on the same binary and writes what each
    did to ``counterfactuals.json`` (merged with the folder's earlier one for other probes).
    """
    specs, first_report = _selected(catalog, probe, report, shard)
    containment = _containment(no_sandbox)
    check_out(out)
    if work_dir is not None:
        check_out(Path(work_dir), "--work-dir")
    label = client_spec if isinstance(client_spec, str) else \
        f"{client_spec[0].name}@{client_spec[1]}"
    try:
        client, version = (parse_client_spec(client_spec) if isinstance(client_spec, str)
                           else client_spec)
        say(f"loopprobe: client {client.name}@{version}")
        binary = _install(client, version)
    except InstallError as error:
        print(f"loopprobe: {error}", file=sys.stderr)
        return SuiteResult(EXIT_HARNESS, label, out, error=str(error))
    run = _announce(client, binary, containment, no_sandbox, work_dir, jobs, out)
    everything = [one for spec in specs for one in spec.probes]
    if jobs > 1:
        detail(f"  {len(everything)} probe(s), up to {jobs} at a time")
    scheduled = _run_probes(run, everything)
    interrupted = scheduled.interrupted
    if interrupted:
        say("loopprobe: interrupted; writing what was gathered, marked incomplete")
    written, evidence = _write_reports(run, specs, catalog, scheduled.outcomes, interrupted,
                                       compress_journals)
    if evidence and not names(probe) and not names(report) and not interrupted:
        _write_fingerprint(run, everything, evidence, shard, first_report)
    if counterfactuals and not interrupted:
        interrupted = not _write_counterfactuals(run, everything)
    say(f"  wrote {write_guide(out)}")
    result = _summary(label, out, written, interrupted)
    result.outcomes = {o.probe.name: o for o in scheduled.outcomes if o is not None}
    return result


@dataclass
class _SuiteRun:
    """What every step of one suite run reads: the binary, where and how its probes run, the
    folder written, and which probes were started."""

    client: Client
    binary: ClientBinary
    containment: Containment
    work: Path
    jobs: int
    out: Path
    started: set[str] = field(default_factory=set)

    def probe(self, one: Probe) -> ProbeOutcome:
        from probes.run.runner import run_probe
        self.started.add(one.name)
        detail(f"probe {one.name}")
        return run_probe(one, self.client, self.binary, self.work,
                         containment=self.containment,
                         progress=(lambda line: detail(f"  [{one.name}] {line.strip()}"))
                         if self.jobs > 1 else detail)


def _selected(catalog: tuple[ReportSpec, ...], probe: str | Sequence[str] | None,
              report: str | Sequence[str] | None,
              shard: tuple[int, int] | None) -> tuple[list[ReportSpec], int]:
    """The reports to run (of the shard, when one is given) and the shard's first report."""
    specs = select(catalog, probe, report)
    if shard is None:
        return specs, 0
    specs = shard_of(specs, *shard)
    if not specs:
        raise HarnessInputError(f"--shard {shard[0]}/{shard[1]}: the suite has fewer "
                                "reports than shards")
    return specs, shard[0] - 1


def _containment(no_sandbox: bool) -> Containment:
    # the run machinery (the mock server: uvicorn, starlette) loads only for commands that run
    from probes.run.containment import ContainmentUnavailable, find_containment
    try:
        return find_containment(no_sandbox)
    except ContainmentUnavailable as error:
        raise HarnessInputError(f"cannot contain the client: {error}") from None


def _announce(client: Client, binary: ClientBinary, containment: Containment, no_sandbox: bool,
              work_dir: str | None, jobs: int, out: Path) -> _SuiteRun:
    """Say what runs and how it is contained, and where its sandboxes go."""
    say(f"  binary {binary.entry} sha256 {binary.sha256}")
    mark_used(binary)
    if no_sandbox:
        say("  WARNING: runs are NOT contained (--no-sandbox): the client runs on this host "
             "with bypassed permissions; the reports say so")
    else:
        detail(f"  contained: {getattr(containment, 'version', containment.name)}")
    work = Path(work_dir) if work_dir else (
        cache_root() / "runs" / f"{binary.version}-{time.strftime('%Y%m%d-%H%M%S')}")
    detail(f"  sandboxes under {work}")
    return _SuiteRun(client, binary, containment, work, jobs, out)


def _run_probes(run: _SuiteRun, everything: list[Probe]) -> Scheduled:
    """Every probe, ``run.jobs`` at a time, each said as it ends with the checks it failed."""
    with task(f"{run.binary.name}@{run.binary.version}", len(everything)) as bar:
        def finished(outcome: ProbeOutcome) -> None:
            bar.advance()
            say(f"  -> {outcome.probe.name}: {_verdict(outcome)}")
            for check in outcome.checks:
                if check.status in ("failed", "absent", "not_reached"):
                    said = "FAIL" if check.status == "failed" else check.status.upper()
                    say(f"     {said} {check.id}: expected {check.expected!r}, observed "
                         f"{str(check.observed)[:160]!r}")

        return run_scheduled(everything, run.probe, run.jobs, finished)


def _write_reports(run: _SuiteRun, specs: list[ReportSpec], catalog: tuple[ReportSpec, ...],
                   outcomes: list[ProbeOutcome | None], interrupted: bool,
                   compress_journals: bool) -> tuple[list[tuple[str, Report]], list[Evidence]]:
    """Each report any of whose probes started, written (merged into the folder's earlier
    report of the same binary, or marked partial, when only some of its probes ran); what was
    written and the evidence gathered."""
    from probes.report.build import build_report, write_report
    written: list[tuple[str, Report]] = []
    evidence: list[Evidence] = []
    by_probe = iter(outcomes)
    for spec in specs:
        gathered = [next(by_probe) for _ in spec.probes]
        ended = [o for o in gathered if o is not None]
        if not run.started.intersection(p.name for p in spec.probes):
            continue
        evidence += [o.evidence for o in ended if o.evidence is not None]
        built, journal, timing = build_report(spec, ended, run.binary,
                                              complete=len(ended) == len(gathered))
        full = next((s for s in catalog if s.name == spec.name), spec)
        if len(spec.probes) < len(full.probes) and not interrupted:
            merged = merge_into_earlier(built, journal, timing, full, run.out)
            if merged is not None:
                built, journal, timing = merged
                say(f"  {spec.name}: {', '.join(built['merged']['probes_run_now'])} run "
                     f"now, merged into the report of the same binary already in {run.out}")
            else:
                mark_partial(built, full)
                say(f"  {spec.name}: partial report ({len(spec.probes)} of "
                     f"{len(full.probes)} probes), marked so")
        written_report = write_report(built, journal, run.out, timing,
                                      compress_journal=compress_journals)
        say(f"  wrote {written_report}")
        written.append((spec.name, built))
    return written, evidence


def _write_fingerprint(run: _SuiteRun, everything: list[Probe], evidence: list[Evidence],
                       shard: tuple[int, int] | None, first_report: int) -> None:
    """The binary's fingerprint from the fingerprinted probes' evidence; a shard's notes its
    place, for ``loopprobe merge``."""
    from probes.report.build import write_fingerprint
    fingerprinted = {one.name for one in everything if one.fingerprinted}
    written_print = write_fingerprint([e for e in evidence if e.probe in fingerprinted],
                                      run.binary, run.out)
    if shard is not None:
        partial = json.loads(written_print.read_text())
        partial[SHARD_KEY] = {"index": shard[0], "count": shard[1],
                              "first_report": first_report}
        write_json(written_print, partial)
    say(f"  wrote {written_print}")


def _write_counterfactuals(run: _SuiteRun, everything: list[Probe]) -> bool:
    """Every probe's counterfactuals run on the same binary, what each did merged into
    counterfactuals.json; False when interrupted (then nothing is written)."""
    from probes.report.counterfactuals import counterfactual_entry, merge_counterfactuals
    variants = [(one, cf) for one in everything for cf in one.counterfactuals]
    with task(f"{run.binary.name}@{run.binary.version} counterfactuals", len(variants)) as bar:
        ran = run_scheduled([cf.probe(one) for one, cf in variants], run.probe, run.jobs,
                            lambda _: bar.advance())
    if ran.interrupted:
        say("loopprobe: interrupted; counterfactuals.json not written")
        return False
    entries = [counterfactual_entry(one, cf, o)
               for (one, cf), o in zip(variants, ran.outcomes, strict=True) if o is not None]
    written_cf = merge_counterfactuals(run.out, run.binary, entries,
                                       {one.name for one in everything})
    shown = sum(e["able_to_fail"] for e in entries)
    say(f"  wrote {written_cf}: {shown} of {len(entries)} counterfactuals made "
        f"their claims fail")
    return True


def _summary(label: str, out: Path, written: list[tuple[str, Report]],
             interrupted: bool) -> SuiteResult:
    """The table of the reports written, and the exit code they give."""
    say("")
    say(f"{'report':<40} {'status':<15} claims confirmed")
    for name, built in written:
        claims = built["claims"]
        say(f"{name:<40} {built['status']:<15} {sum(c['passed'] for c in claims)}/{len(claims)}")
    result = SuiteResult(EXIT_PASSED, label, out, [built for _, built in written])
    statuses = {built["status"] for _, built in written}
    if interrupted:
        result.exit_code = EXIT_INTERRUPTED
    elif "error" in statuses:
        result.exit_code = EXIT_HARNESS
    elif "failed" in statuses:
        result.exit_code = EXIT_FAILED
    return result


def _install(client: Client, version: str) -> ClientBinary:
    """The install of ``version``, saying first when it has to be fetched (~330 MB for the
    CLI) and which version a tag such as ``latest`` names."""
    if not any(b.version == version for b in client.installed()):
        say(f"  installing {client.package} {version} (not in the cache "
             f"{cache_root() / 'clients'}; this downloads it once)")
        with task(f"installing {client.name}@{version}", None):
            binary = client.install(version)
    else:
        binary = client.install(version)
    if binary.version != version:
        say(f"  {client.name}@{version} is {binary.version}")
    return binary


def _verdict(outcome: ProbeOutcome) -> str:
    if outcome.not_applicable:
        return "NOT APPLICABLE: " + outcome.not_applicable
    if outcome.error:
        return "HARNESS ERROR: " + outcome.error
    failed = sum(1 for c in outcome.checks if not c.passed)
    return f"{len(outcome.checks) - failed}/{len(outcome.checks)} checks passed"
