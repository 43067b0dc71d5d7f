"""The ``loopprobe`` command: serve the mock, install clients, run probes, compare reports."""

from __future__ import annotations

import argparse
import difflib
import importlib
import importlib.util
import json
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mockapi.cli import add_serve_arguments
from probes import __version__
from probes.catalog import REPORTS
from probes.cli.progress import Reporter, choose_mode
from probes.clients import Client, InstallError, all_clients, parse_client_spec, report_folder
from probes.clients.base import ClientBinary, ClientKey
from probes.clients.npm import cache_root
from probes.clients.registry import (
    CLIENT_KINDS,
    DEFAULT_KIND,
    PLUGINS_ENV,
    client_for,
    mark_used,
    prune_installs,
    remove_install,
)
from probes.core.files import write_json, write_text
from probes.core.outcome import ProbeOutcome
from probes.core.probe import CatalogError, Probe, ReportSpec
from probes.report.diff import diff_directories, render_markdown
from probes.report.format import Report, ReportError, load_folder
from probes.report.guide import write_guide
from probes.report.junit import write_junit
from probes.report.matrix import build_matrix, render_matrix
from probes.report.mechanism_table import render_mechanism_table, replace_section
from probes.report.partial import mark_partial, merge_into_earlier
from probes.sandbox.folders import fixture_problem
from probes.scale.almanac import load_bisects, render_timeline
from probes.scale.bisect import (
    SKIPPED_VERDICTS,
    BisectError,
    bisect_versions,
    order_versions,
    versions_between,
)
from probes.scale.schedule import default_jobs, run_scheduled
from probes.scale.shard import (
    FINGERPRINT_FILE,
    SHARD_KEY,
    ShardError,
    merge_folders,
    parse_shard,
    shard_of,
)

__all__ = [
    "COMMITTED_SESSION_VERSIONS",
    "HarnessInputError",
    "SuiteResult",
    "build_parser",
    "catalog_for",
    "cmd_bisect",
    "cmd_clients_install",
    "cmd_clients_list",
    "cmd_clients_prune",
    "cmd_diff",
    "cmd_guide",
    "cmd_matrix",
    "cmd_mechanisms",
    "cmd_merge",
    "cmd_probes",
    "cmd_record",
    "cmd_render",
    "cmd_run",
    "cmd_schemas",
    "cmd_sessions",
    "cmd_validate",
    "cmd_versions",
    "execute_suite",
    "load_catalog",
    "main",
    "run_suite",
]

EXIT_PASSED, EXIT_FAILED, EXIT_HARNESS, EXIT_INTERRUPTED = 0, 1, 2, 130
_COMPRESS_HELP = ("write each journal gzipped (<report>.journal.jsonl.gz, reproducible): about "
                  "a quarter of the size, for evidence kept for many versions")
_JOBS_HELP = ("probes run at once, each in its own sandbox and mock (default: this machine's "
              "cores); the reports are the same as with -j 1")
_NO_SANDBOX_HELP = ("run the client on this host, uncontained (no namespaces): only where "
                   "bubblewrap cannot start; the reports record it")


class HarnessInputError(ValueError):
    """What the user asked for cannot be run; said in one line before any probe runs (exit 2)."""


# where progress goes; main() chooses it from the terminal, --quiet and --json
_OUT = Reporter()


def _say(message: str) -> None:
    _OUT.say(message)


def _detail(message: str) -> None:
    _OUT.detail(message)


def _select(reports: tuple[ReportSpec, ...], probe: str | None,
            report: str | None) -> list[ReportSpec]:
    chosen = []
    for spec in reports:
        if report and spec.name != report:
            continue
        probes = tuple(p for p in spec.probes if probe is None or p.name == probe)
        if probes:
            chosen.append(ReportSpec(spec.name, spec.title, probes, spec.summary))
    if not chosen:
        known = sorted({p.name for s in reports for p in s.probes})
        names = [s.name for s in reports]
        guess = _did_you_mean(probe, known) or _did_you_mean(report, names)
        raise HarnessInputError(f"no probe matches --probe {probe!r} --report {report!r}"
                                f"{guess}; expected one of the probes: {', '.join(known)}; or "
                                f"reports: {', '.join(names)}")
    for spec in chosen:
        for one in spec.probes:
            for relative in one.fixtures:
                if problem := fixture_problem(relative):
                    raise HarnessInputError(f"probe {one.name}: {problem}")
    return chosen


def _did_you_mean(given: str | None, known: list[str]) -> str:
    close = difflib.get_close_matches(given, known, n=1, cutoff=0.6) if given else []
    return f" (did you mean {close[0]!r}?)" if close else ""


def load_catalog(name: str | None) -> tuple[ReportSpec, ...]:
    """The built-in reports, or ``REPORTS`` of your own module: a dotted name
    (``--catalog my.probes``) or a file (``--catalog probes/mine.py``)."""
    if name is None:
        return REPORTS
    if name.endswith(".py") and not Path(name).is_file():
        raise HarnessInputError(f"--catalog {name!r}: expected a Python file defining REPORTS, "
                                "but there is no such file")
    try:
        if name.endswith(".py"):
            spec = importlib.util.spec_from_file_location(Path(name).stem, name)
            if spec is None or spec.loader is None:
                raise ImportError(f"no Python module at {name}")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(name)
    except CatalogError as error:  # a declaration's mistake, found as the module loaded
        raise HarnessInputError(f"--catalog {name!r}: {error}") from None
    except Exception as error:  # the user's module: any failure of it is their input's
        where = f" (line {error.lineno})" if isinstance(error, SyntaxError) else ""
        raise HarnessInputError(f"--catalog {name!r}: expected a module defining REPORTS, "
                                f"but importing it failed{where}: {type(error).__name__}: "
                                f"{error}") from None
    reports = getattr(module, "REPORTS", None)
    if not isinstance(reports, tuple) or not all(isinstance(r, ReportSpec) for r in reports):
        raise HarnessInputError(f"{name!r}: expected a REPORTS tuple of ReportSpec, "
                                f"found {type(reports).__name__}")
    return reports


def _check_out(out: Path, flag: str = "--out") -> None:
    """Make ``out`` a directory this process can write into, or say why it cannot."""
    if out.exists() and not out.is_dir():
        raise HarnessInputError(f"{flag} {out}: expected a directory, found a file")
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as error:
        raise HarnessInputError(f"{flag} {out}: expected a writable directory, but "
                                f"{error.strerror or error}") from None


@dataclass
class SuiteResult:
    """What one suite run wrote, for the exit code and the ``--json`` summary."""

    exit_code: int
    client: str
    out: Path
    reports: list[Report] = field(default_factory=list)
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"command": "run", "exit_code": self.exit_code, "client": self.client,
                "out": str(self.out), "error": self.error,
                "binary": self.reports[0]["client"] if self.reports else None,
                "reports": [_report_summary(r) for r in self.reports]}


def _report_summary(report: Report) -> dict[str, Any]:
    verdicts: dict[str, int] = {}
    for claim in report["claims"]:
        verdicts[claim["status"]] = verdicts.get(claim["status"], 0) + 1
    return {"report": report["report"], "status": report["status"],
            "complete": report["complete"], "claims": verdicts,
            "contradicted": [c["id"] for c in report["claims"] if c["status"] == "contradicted"],
            **({"partial": report["partial"]} if "partial" in report else {})}


def run_suite(client_spec: str | tuple[Client, str], out: Path, **options: Any) -> int:
    """``execute_suite``'s exit code: 0 every claim upheld, 1 one contradicted, 2 a harness
    error, 130 interrupted."""
    return execute_suite(client_spec, out, **options).exit_code


def execute_suite(client_spec: str | tuple[Client, str], out: Path, *, probe: str | None = None,
                  report: str | None = None, work_dir: str | None = None,
                  catalog: tuple[ReportSpec, ...] = REPORTS, no_sandbox: bool = False,
                  jobs: int = 1, shard: tuple[int, int] | None = None,
                  compress_journals: bool = False) -> SuiteResult:
    """Run the selected probes on one client version and write its report directory.

    Every client run is contained (bubblewrap); ``no_sandbox`` runs them on the host, and the
    reports say so. ``jobs`` probes run at once (each in its own sandbox and mock); the
    reports are the same as a serial run's. Input errors raise ``HarnessInputError`` before
    any probe runs. ``shard`` (i, n) runs every n-th report from the i-th and notes the shard
    in its partial fingerprint (``loopprobe merge`` joins the shards).
    """
    # the run machinery (the mock server: uvicorn, starlette) loads only for commands that run
    from probes.report.build import build_report, write_fingerprint, write_report
    from probes.run.containment import ContainmentUnavailable, find_containment
    from probes.run.runner import run_probe
    specs = _select(catalog, probe, report)
    first_report = 0
    if shard is not None:
        first_report = shard[0] - 1
        specs = shard_of(specs, *shard)
        if not specs:
            raise HarnessInputError(f"--shard {shard[0]}/{shard[1]}: the suite has fewer "
                                    "reports than shards")
    try:
        containment = find_containment(no_sandbox)
    except ContainmentUnavailable as error:
        raise HarnessInputError(f"cannot contain the client: {error}") from None
    _check_out(out)
    if work_dir is not None:
        _check_out(Path(work_dir), "--work-dir")
    label = client_spec if isinstance(client_spec, str) else \
        f"{client_spec[0].name}@{client_spec[1]}"
    try:
        client, version = (parse_client_spec(client_spec) if isinstance(client_spec, str)
                           else client_spec)
        _say(f"loopprobe: client {client.name}@{version}")
        binary = _install(client, version)
    except InstallError as error:
        print(f"loopprobe: {error}", file=sys.stderr)
        return SuiteResult(EXIT_HARNESS, label, out, error=str(error))
    _say(f"  binary {binary.entry} sha256 {binary.sha256}")
    mark_used(binary)
    if no_sandbox:
        _say("  WARNING: runs are NOT contained (--no-sandbox): the client runs on this host "
             "with bypassed permissions; the reports say so")
    else:
        _detail(f"  contained: {getattr(containment, 'version', containment.name)}")
    work = Path(work_dir) if work_dir else (
        cache_root() / "runs" / f"{binary.version}-{time.strftime('%Y%m%d-%H%M%S')}")
    _detail(f"  sandboxes under {work}")
    written: list[tuple[str, Report]] = []
    evidence = []
    everything = [one for spec in specs for one in spec.probes]
    if jobs > 1:
        _detail(f"  {len(everything)} probe(s), up to {jobs} at a time")

    started: set[str] = set()

    def run_one(one: Probe) -> ProbeOutcome:
        started.add(one.name)
        _detail(f"probe {one.name}")
        return run_probe(one, client, binary, work, containment=containment,
                         progress=(lambda line: _detail(f"  [{one.name}] {line.strip()}"))
                         if jobs > 1 else _detail)

    with _OUT.task(f"{binary.name}@{binary.version}", len(everything)) as bar:
        def finished(outcome: ProbeOutcome) -> None:
            bar.advance()
            _say(f"  -> {outcome.probe.name}: {_verdict(outcome)}")
            for check in outcome.checks:
                if check.status == "failed":
                    _say(f"     FAIL {check.id}: expected {check.expected!r}, observed "
                         f"{str(check.observed)[:160]!r}")

        scheduled = run_scheduled(everything, run_one, jobs, finished)
    interrupted = scheduled.interrupted
    if interrupted:
        _say("loopprobe: interrupted; writing what was gathered, marked incomplete")
    by_probe = iter(scheduled.outcomes)
    for spec in specs:
        gathered = [next(by_probe) for _ in spec.probes]
        outcomes = [o for o in gathered if o is not None]
        if not started.intersection(p.name for p in spec.probes):
            continue
        evidence += [o.evidence for o in outcomes if o.evidence is not None]
        built, journal, timing = build_report(spec, outcomes, binary,
                                              complete=len(outcomes) == len(gathered))
        full = next((s for s in catalog if s.name == spec.name), spec)
        if len(spec.probes) < len(full.probes) and not interrupted:
            merged = merge_into_earlier(built, journal, timing, full, out)
            if merged is not None:
                built, journal, timing = merged
                _say(f"  {spec.name}: {', '.join(built['merged']['probes_run_now'])} run "
                     f"now, merged into the report of the same binary already in {out}")
            else:
                mark_partial(built, full)
                _say(f"  {spec.name}: partial report ({len(spec.probes)} of "
                     f"{len(full.probes)} probes), marked so")
        written_report = write_report(built, journal, out, timing,
                                      compress_journal=compress_journals)
        _say(f"  wrote {written_report}")
        written.append((spec.name, built))
    if evidence and probe is None and report is None and not interrupted:
        fingerprinted = {one.name for one in everything if one.fingerprinted}
        written_print = write_fingerprint([e for e in evidence if e.probe in fingerprinted],
                                          binary, out)
        if shard is not None:
            partial = json.loads(written_print.read_text())
            partial[SHARD_KEY] = {"index": shard[0], "count": shard[1],
                                  "first_report": first_report}
            write_json(written_print, partial)
        _say(f"  wrote {written_print}")
    _say(f"  wrote {write_guide(out)}")
    _say("")
    _say(f"{'report':<40} {'status':<15} claims confirmed")
    for name, built in written:
        claims = built["claims"]
        _say(f"{name:<40} {built['status']:<15} {sum(c['passed'] for c in claims)}/{len(claims)}")
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
        _say(f"  installing {client.package} {version} (not in the cache "
             f"{cache_root() / 'clients'}; this downloads it once)")
        with _OUT.task(f"installing {client.name}@{version}", None):
            binary = client.install(version)
    else:
        binary = client.install(version)
    if binary.version != version:
        _say(f"  {client.name}@{version} is {binary.version}")
    return binary


def _verdict(outcome: ProbeOutcome) -> str:
    if outcome.not_applicable:
        return "NOT APPLICABLE: " + outcome.not_applicable
    if outcome.error:
        return "HARNESS ERROR: " + outcome.error
    failed = sum(1 for c in outcome.checks if not c.passed)
    return f"{len(outcome.checks) - failed}/{len(outcome.checks)} checks passed"


def catalog_for(client_spec: str, name: str | None) -> tuple[ReportSpec, ...]:
    """``--catalog`` if given, else the client kind's own catalog (its ``catalog`` module,
    e.g. the tool runner's), else the built-in reports."""
    if name is None:
        client, _ = parse_client_spec(client_spec)
        name = getattr(client, "catalog", None)
    return load_catalog(name)


def cmd_run(args: argparse.Namespace) -> int:
    result = execute_suite(args.client, Path(args.out), probe=args.probe, report=args.report,
                           work_dir=args.work_dir,
                           catalog=catalog_for(args.client, args.catalog),
                           no_sandbox=args.no_sandbox, jobs=_jobs(args.jobs),
                           compress_journals=args.compress_journals)
    summary = result.to_json()
    if args.junit:
        summary["junit"] = str(write_junit(Path(args.junit), result.reports))
        _say(f"wrote {args.junit}")
    if args.json:
        print(json.dumps(summary, indent=2))
    return result.exit_code


def _jobs(value: int | None) -> int:
    if value is None:
        return default_jobs()
    if value < 1:
        raise HarnessInputError(f"-j/--jobs: expected a number of probes at once >= 1, "
                                f"found {value}")
    return value


def _client_key(spec: str) -> ClientKey:
    client, version = parse_client_spec(spec)
    return ClientKey(client.name, version)


def _concrete(key: ClientKey) -> ClientKey:
    """``latest`` (or another tag) as the version it names today: report folders are named
    by versions, never by tags."""
    if key.version[:1].isdigit():
        return key
    client = client_for(key.kind)
    resolve = getattr(client, "resolve", None)
    version = resolve(key.version) if resolve else (
        order_versions(client.published())[-1] if key.version == "latest" else None)
    if version is None:
        raise InstallError(f"{key.kind}@{key.version}: expected a version number or latest")
    _say(f"loopprobe: {key.label} is {key.kind}@{version}")
    return ClientKey(key.kind, version)


def cmd_matrix(args: argparse.Namespace) -> int:
    try:
        keys = [_concrete(_client_key(v.strip())) for v in args.clients.split(",") if v.strip()]
        baseline = report_folder(_concrete(_client_key(args.baseline))) if args.baseline \
            else None
    except (InstallError, BisectError) as error:
        print(f"loopprobe: {error}", file=sys.stderr)
        return EXIT_HARNESS
    out = Path(args.out)
    shard = _shard(args.shard)
    if args.cache_budget is not None and args.cache_budget < 1:
        raise HarnessInputError(f"--cache-budget: expected a count >= 1, found "
                                f"{args.cache_budget}")
    codes = {}
    with _OUT.task("versions", None if args.skip_run else len(keys)) as bar:
        for key in keys:
            if not args.skip_run:
                codes[key] = run_suite(key.label, out / report_folder(key),
                                       no_sandbox=args.no_sandbox, jobs=_jobs(args.jobs),
                                       shard=shard, catalog=catalog_for(key.label, args.catalog),
                                       compress_journals=args.compress_journals)
                bar.advance()
                if args.cache_budget is not None:  # most recently used first: this one stays
                    for removed in prune_installs(args.cache_budget):
                        _say(f"  removed {removed.name}@{removed.version} (--cache-budget)")
    folders = [report_folder(key) for key in keys]
    summary: dict[str, Any] = {"command": "matrix", "out": str(out), "folders": folders,
                               "runs": {report_folder(k): c for k, c in codes.items()}}
    if shard is not None:  # a slice: `loopprobe merge` tabulates the whole
        code = _worst(list(codes.values()))
    else:
        regressed = _tabulate(out, folders, baseline, Path(args.bisects) if args.bisects else None)
        code = _worst([*codes.values(), regressed])
        summary.update(matrix=str(out / "matrix.json"), diffs=sorted(
            str(p) for p in out.glob(f"diff-{baseline}-to-*.md")) if baseline else [])
    reports = [r for f in folders if (out / f).is_dir()
               for r in load_folder(out / f, require_reports=False).reports.values()]
    summary["reports"] = {f"{r['client']['name']}@{r['client']['version']}/{r['report']}":
                          _report_summary(r) for r in reports}
    if args.junit:
        summary["junit"] = str(write_junit(Path(args.junit), reports))
        _say(f"wrote {args.junit}")
    summary["exit_code"] = code
    if args.json:
        print(json.dumps(summary, indent=2))
    return code


def _worst(codes: list[int]) -> int:
    if EXIT_HARNESS in codes:
        return EXIT_HARNESS
    return EXIT_FAILED if EXIT_FAILED in codes else EXIT_PASSED


def _shard(text: str | None) -> tuple[int, int] | None:
    try:
        return parse_shard(text) if text else None
    except ShardError as error:
        raise HarnessInputError(str(error)) from None


def _tabulate(out: Path, folders: list[str], baseline: str | None,
              bisects: Path | None = None) -> int:
    """MATRIX.md, matrix.json and the diffs against the baseline from the version folders;
    the worst status of their reports (1: a claim failed, 2: a harness error)."""
    matrix = build_matrix([out / f for f in folders if (out / f).is_dir()])
    write_json(out / "matrix.json", matrix)
    timeline = render_timeline(matrix, load_bisects(bisects) if bisects else [], out)
    write_text(out / "MATRIX.md", render_matrix(matrix) + "\n" + timeline)
    _say(f"wrote {out / 'MATRIX.md'}")
    regressed = False
    if baseline:
        for other in folders:
            if other == baseline or not (out / other).is_dir() or not (out / baseline).is_dir():
                continue
            result = diff_directories(out / baseline, out / other)
            target = write_text(out / f"diff-{baseline}-to-{other}.md", render_markdown(result))
            _say(f"wrote {target}")
            regressed = regressed or bool(result.regressions)
    statuses = {json.loads(p.read_text()).get("status") for f in folders
                for p in (out / f).glob("*.json") if p.name != FINGERPRINT_FILE}
    if "error" in statuses or "incomplete" in statuses:
        return EXIT_HARNESS
    return EXIT_FAILED if "failed" in statuses or regressed else EXIT_PASSED


def cmd_merge(args: argparse.Namespace) -> int:
    """Join what ``matrix --shard`` slices wrote into one report folder per version, then
    tabulate as an unsharded matrix does."""
    out = Path(args.out)
    _check_out(out)
    try:
        folders = merge_folders([Path(d) for d in args.dirs], out)
        baseline = report_folder(_client_key(args.baseline)) if args.baseline else None
    except (ShardError, InstallError) as error:
        raise HarnessInputError(str(error)) from None
    for folder in folders:
        _say(f"wrote {write_guide(out / folder)}")
    return _tabulate(out, folders, baseline)


def cmd_diff(args: argparse.Namespace) -> int:
    try:
        result = diff_directories(Path(args.a), Path(args.b))
    except ReportError as error:
        print(f"loopprobe: {error}", file=sys.stderr)
        return EXIT_HARNESS
    text = json.dumps(result, indent=2, sort_keys=True) if args.json else render_markdown(result)
    if args.out:
        write_text(Path(args.out), text)
    else:
        sys.stdout.write(text)
    regressions = result.regressions
    if regressions:
        print(f"loopprobe: {len(regressions)} claim(s) regressed: "
              f"{', '.join(c['id'] for c in regressions)}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_PASSED


def _serve(args: argparse.Namespace) -> int:
    from mockapi.cli import serve
    return serve(args)


def cmd_clients_install(args: argparse.Namespace) -> int:
    status = 0
    for spec in args.specs:
        try:
            client, version = parse_client_spec(spec)
            binary = client.install(version)
        except InstallError as error:
            print(f"loopprobe: {error}", file=sys.stderr)
            status = EXIT_HARNESS
            continue
        _say(f"{binary.name}@{binary.version} {binary.platform} {binary.entry} "
             f"sha256:{binary.sha256}")
    return status


def cmd_clients_list(args: argparse.Namespace) -> int:
    found = [binary for client in all_clients() for binary in client.installed()]
    if args.json:
        print(json.dumps([{**binary.identity(), "root": str(binary.root)} for binary in found],
                         indent=2))
        return 0
    if not found:
        _say(f"no clients installed under {cache_root() / 'clients'}")
    for binary in found:
        _say(f"{binary.name}@{binary.version}\t{binary.platform}\t{binary.sha256}\t{binary.entry}")
    return 0


def cmd_versions(args: argparse.Namespace) -> int:
    try:
        client = client_for(args.client)
        versions = order_versions(client.published())
    except (InstallError, BisectError) as error:
        raise HarnessInputError(str(error)) from None
    if args.since:
        if args.since not in versions:
            raise HarnessInputError(f"--since {args.since}: not a published version of "
                                    f"{client.name}")
        versions = versions[versions.index(args.since):]
    if args.latest:
        versions = versions[-args.latest:]
    if args.json:
        print(json.dumps({"client": client.name, "versions": versions}))
    else:
        for version in versions:
            _say(version)
    return EXIT_PASSED


def _claim_verdict(folder: Path, claims: list[str]) -> str:
    """The verdict of ``claims`` in a version's reports: one claim's status, or for several
    (a whole probe) each ``id=status``; ``missing`` when a report lacks one."""
    found: dict[str, str] = {}
    for report in sorted(folder.glob("*.json")):
        data = json.loads(report.read_text())
        for claim in data.get("claims", []) if isinstance(data, dict) else []:
            if claim.get("id") in claims:
                found[claim["id"]] = str(claim.get("status"))
    statuses = [found.get(claim, "missing") for claim in claims]
    skipped = [s for s in statuses if s in SKIPPED_VERDICTS]
    if skipped:
        return skipped[0]
    return statuses[0] if len(statuses) == 1 else ", ".join(
        f"{claim}={status}" for claim, status in zip(claims, statuses, strict=True))


def cmd_bisect(args: argparse.Namespace) -> int:
    """The first published version where a claim's (or a probe's) verdict changes."""
    catalog = load_catalog(args.catalog)
    if bool(args.claim) == bool(args.probe):
        raise HarnessInputError("expected exactly one of --claim ID or --probe NAME")
    if args.claim:
        needed = tuple(ReportSpec(spec.name, spec.title, chosen, spec.summary)
                       for spec in catalog if (chosen := tuple(
                           p for p in spec.probes if args.claim in {c.id for c in p.claims})))
        claims = [args.claim]
        if not needed:
            known = sorted({c.id for spec in catalog for p in spec.probes for c in p.claims})
            raise HarnessInputError(f"--claim {args.claim!r}: no probe makes it; expected one "
                                    f"of {', '.join(known)}")
    else:
        needed = tuple(_select(catalog, args.probe, None))
        claims = [c.id for spec in needed for p in spec.probes for c in p.claims]
    try:
        client = client_for(args.client)
        versions = versions_between(client.published(), args.good, args.bad)
    except (InstallError, BisectError) as error:
        raise HarnessInputError(str(error)) from None
    if order_versions([args.good, args.bad])[0] != args.good:
        versions.reverse()  # the search runs from the trusted end
    out = Path(args.out)
    _check_out(out)
    installed_before = {b.version for b in client.installed()}
    target = args.claim or f"probe-{args.probe}"
    _say(f"bisect {target} on {client.name}: {len(versions)} versions from {args.good} "
         f"(good) to {args.bad}")

    def verdict_at(version: str) -> str:
        folder = out / report_folder(ClientKey(client.name, version))
        code = run_suite((client, version), folder, catalog=needed,
                         no_sandbox=args.no_sandbox, jobs=_jobs(args.jobs))
        found = "error" if code == EXIT_HARNESS and not any(folder.glob("*.json")) \
            else _claim_verdict(folder, claims)
        _say(f"bisect: {version} -> {found}")
        if version not in installed_before and version not in (args.good, args.bad) \
                and not args.keep_installs:
            remove_install(client, version)
        return found

    try:
        result = bisect_versions(versions, verdict_at)
    except BisectError as error:
        raise HarnessInputError(str(error)) from None
    summary: dict[str, Any] = {"client": client.name, "target": target, "claims": claims,
                               **result.to_json()}
    if result.first_changed:
        same = out / report_folder(ClientKey(client.name, result.last_same))
        changed = out / report_folder(ClientKey(client.name, result.first_changed))
        claim_checks = {check["id"] for spec in needed
                        if (changed / f"{spec.name}.json").is_file()
                        for check in json.loads((changed / f"{spec.name}.json").read_text())
                        .get("checks", []) if check.get("claim") in claims}
        flipped = [check for check in diff_directories(same, changed)["checks_flipped"]
                   if check["id"] in claim_checks]
        summary["reports"] = {"last_same": str(same), "first_changed": str(changed)}
        summary["flipped_checks"] = flipped
        _say(f"bisect: {target} changed in {result.first_changed} "
             f"({result.good_verdict} on {result.last_same} -> {result.changed_verdict})")
        for check in flipped:
            _say(f"  flipped: {check.get('id')}")
    else:
        _say(f"bisect: the change is in one of {', '.join(result.candidates)} (skipped: "
             f"{', '.join(result.skipped)})")
    write_json(out / f"bisect-{target}.json", summary)
    _say(f"wrote {out / f'bisect-{target}.json'}")
    code = EXIT_PASSED if result.first_changed else EXIT_FAILED
    if args.json:
        print(json.dumps({"command": "bisect", "exit_code": code,
                          "result": str(out / f"bisect-{target}.json"), **summary}, indent=2))
    return code


def cmd_clients_prune(args: argparse.Namespace) -> int:
    if args.keep < 0:
        raise HarnessInputError(f"--keep: expected a count >= 0, found {args.keep}")
    removed = prune_installs(args.keep, dry_run=args.dry_run)
    verb = "would remove" if args.dry_run else "removed"
    for binary in removed:
        _say(f"{verb} {binary.name}@{binary.version} ({binary.root})")
    if not removed:
        _say(f"nothing to prune: at most {args.keep} install(s) of each client kind")
    return EXIT_PASSED


def cmd_mechanisms(args: argparse.Namespace) -> int:
    folder = load_folder(Path(args.reports))
    matrix_path = Path(args.matrix) if args.matrix else None
    matrix = json.loads(matrix_path.read_text()) if matrix_path else None
    table = render_mechanism_table(folder, matrix)
    if args.write:
        target = Path(args.write)
        write_text(target, replace_section(target.read_text(), table, target))
        _say(f"wrote {target}")
    else:
        sys.stdout.write(table + "\n")
    return EXIT_PASSED


def cmd_guide(args: argparse.Namespace) -> int:
    path = write_guide(Path(args.reports))
    _say(f"wrote {path}")
    return 0


def cmd_render(args: argparse.Namespace) -> int:
    """One self-contained HTML page: a version folder, a matrix, or (``--diff A B``) a diff."""
    from probes.report.render import diff_page_path, render_diff, write_page
    if (args.target is None) == (args.diff is None):
        raise HarnessInputError("render: expected a report folder or matrix.json, or --diff A B")
    out = Path(args.out) if args.out else None
    try:
        if args.diff:
            a, b = (Path(d) for d in args.diff)
            path = write_text(out or diff_page_path(a, b), render_diff(a, b))
        else:
            path = write_page(Path(args.target), out)
    except ReportError as error:
        raise HarnessInputError(str(error)) from None
    _say(f"wrote {path}")
    return EXIT_PASSED


COMMITTED_SESSION_VERSIONS = ("2.0.77", "2.1.54", "2.1.84", "2.1.90", "2.1.91", "2.1.117",
                              "2.1.235", "2.1.268", "2.1.269", "2.1.306", "2.1.307", "2.1.332")


def cmd_sessions(args: argparse.Namespace) -> int:
    """Sessions written by one Claude Code version, resumed and forked by another."""
    from probes.clients.claude_code import ClaudeCode
    from probes.run.containment import ContainmentUnavailable, find_containment
    from probes.run.runner import run_probe
    from probes.scale.sessions import run_table
    versions = [v.strip() for v in args.clients.split(",") if v.strip()]
    try:
        containment = find_containment(args.no_sandbox)
    except ContainmentUnavailable as error:
        raise HarnessInputError(f"cannot contain the client: {error}") from None
    out = Path(args.out)
    _check_out(out)
    work = cache_root() / "runs" / f"sessions-{time.strftime('%Y%m%d-%H%M%S')}"
    _say(f"loopprobe: sessions across {len(versions)} versions "
         f"({len(versions) ** 2} pairs), sandboxes under {work}")
    try:
        entries = run_table(
            ClaudeCode(), versions, out, jobs=_jobs(args.jobs), progress=_say,
            run=lambda probe, binary: run_probe(probe, ClaudeCode(), binary, work,
                                                containment=containment, keep=False))
    except InstallError as error:
        print(f"loopprobe: {error}", file=sys.stderr)
        return EXIT_HARNESS
    _say(f"  wrote {out / 'sessions.json'} and {out / 'SESSIONS.md'}")
    if any(e["error"] for e in entries):
        return EXIT_HARNESS
    return 1 if any("fails" in (e["resume"], e["fork"]) for e in entries) else 0


def cmd_validate(args: argparse.Namespace) -> int:
    from probes.report.schemas import validate_path
    checked, problems = 0, []
    for target in args.paths:
        count, found = validate_path(Path(target))
        checked += count
        problems += found
    for problem in problems:
        print(problem)
    _say(f"loopprobe: {checked} file(s) checked, {len(problems)} problem(s)")
    return EXIT_FAILED if problems else EXIT_PASSED


def cmd_record(args: argparse.Namespace) -> int:
    # imported here: the proxy brings the server stack (uvicorn, httpx)
    from mockapi.record import UpstreamError, check_upstream, record
    try:
        check_upstream(args.upstream)
    except UpstreamError as error:
        print(f"loopprobe record: {error}", file=sys.stderr)
        return EXIT_HARNESS
    return record(args.upstream, Path(args.out), host=args.host, port=args.port,
                  classifier=args.classifier)


def cmd_probes(args: argparse.Namespace) -> int:
    """Every report, its probes and their claims: the names --report and --probe take."""
    catalog = catalog_for(args.client, args.catalog)
    if args.json:
        print(json.dumps([{"report": spec.name, "title": spec.title, "probes": [
            {"probe": p.name, "title": p.title, "claims": [c.id for c in p.claims],
             "needs": p.capabilities()} for p in spec.probes]} for spec in catalog], indent=2))
        return 0
    for spec in catalog:
        print(f"{spec.name}: {spec.title}")
        for one in spec.probes:
            print(f"  {one.name}: {one.title}")
            for claim in one.claims:
                print(f"    {claim.id}")
    return 0


def cmd_schemas(args: argparse.Namespace) -> int:
    from probes.report.schemas import SCHEMA_DIR, write_schemas
    for path in write_schemas(Path(args.out) if args.out else SCHEMA_DIR):
        _say(f"wrote {path}")
    return 0


_CLIENT_HELP = ("the client, KIND@VERSION with KIND one of: " + ", ".join(CLIENT_KINDS)
                + f" (plugins: ${PLUGINS_ENV}); a bare VERSION is {DEFAULT_KIND}; VERSION may "
                "be latest (resolved to the version it names, which the reports carry)")
_EXIT_CODES = ("exit codes: 0 every claim confirmed (or not observable / not applicable); "
               "1 a claim contradicted (diff, matrix: or regressed); 2 bad input or a harness "
               "error (said in one line on stderr); 130 interrupted (what was gathered is "
               "written, marked incomplete)")

_EXIT_DONE = "exit codes: 0 done; 2 bad input or a harness error (said in one line on stderr)"


def _command(commands: Any, name: str, help: str, **options: Any) -> argparse.ArgumentParser:
    """A subcommand whose --help says what it does and how it exits."""
    parser: argparse.ArgumentParser = commands.add_parser(
        name, help=help, description=help, epilog=options.pop("epilog", _EXIT_DONE), **options)
    return parser


def _output_options(parser: argparse.ArgumentParser, *, junit: bool = False) -> None:
    parser.add_argument("--json", action="store_true", help="print one machine-readable "
                        "summary on stdout (progress goes to stderr)")
    parser.add_argument("-q", "--quiet", action="store_true", help="only what was written, "
                        "failures and the result (no per-probe lines, no live progress)")
    if junit:
        parser.add_argument("--junit", metavar="FILE", help="also write a JUnit XML file: "
                            "one test case per claim (contradicted: failure; error: error; "
                            "not observable / not applicable: skipped)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="loopprobe", description="What an agent-loop client really does, with evidence. "
        f"Client kinds: {', '.join(CLIENT_KINDS)}.", epilog=_EXIT_CODES)
    parser.add_argument("--version", action="version", version=f"loopprobe {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    run = _command(commands, "run", help="run the probe suite on one client version", epilog=_EXIT_CODES)
    run.add_argument("--client", default="2.1.235",
                     help=_CLIENT_HELP + " (default: %(default)s)")
    run.add_argument("--out", required=True, help="directory for the reports")
    run.add_argument("--probe", help="run only this probe")
    run.add_argument("--report", help="run only the probes of this report")
    run.add_argument("--work-dir", help="where sandboxes go (default: under the cache)")
    run.add_argument("--catalog", help="a module whose REPORTS replace the built-in probes")
    run.add_argument("--no-sandbox", action="store_true", help=_NO_SANDBOX_HELP)
    run.add_argument("-j", "--jobs", type=int, help=_JOBS_HELP)
    run.add_argument("--compress-journals", action="store_true", help=_COMPRESS_HELP)
    _output_options(run, junit=True)
    run.set_defaults(func=cmd_run)

    serve_cmd = _command(commands, "serve", help="run the Messages API mock")
    add_serve_arguments(serve_cmd)
    serve_cmd.set_defaults(func=_serve)

    clients = _command(commands, "clients", help="install and list client versions")
    client_commands = clients.add_subparsers(dest="clients_command", required=True)
    install = _command(client_commands, "install", help="install exact client versions")
    install.add_argument("specs", nargs="+", metavar="KIND@VERSION", help=_CLIENT_HELP)
    install.set_defaults(func=cmd_clients_install)
    listing = _command(client_commands, "list", help="list installed client versions")
    listing.add_argument("--json", action="store_true", help="machine-readable output")
    listing.set_defaults(func=cmd_clients_list)
    prune = _command(client_commands,
        "prune", help="remove all but the most recently used installs (~330 MB each)")
    prune.add_argument("--keep", type=int, default=3,
                       help="installs to keep per client kind (default: %(default)s)")
    prune.add_argument("--dry-run", action="store_true", help="only say what would go")
    prune.set_defaults(func=cmd_clients_prune)

    matrix = _command(commands, "matrix", help="run the suite on several versions, tabulate",
                      epilog=_EXIT_CODES)
    matrix.add_argument("--clients", required=True,
                        help="comma-separated clients, e.g. 2.0.77,2.1.235,latest; "
                        + _CLIENT_HELP)
    matrix.add_argument("--out", required=True, help="directory; one folder per version")
    matrix.add_argument("--baseline", help="also write diff-<baseline>-to-<version>.md files")
    matrix.add_argument("--no-sandbox", action="store_true", help=_NO_SANDBOX_HELP)
    matrix.add_argument("-j", "--jobs", type=int, help=_JOBS_HELP)
    matrix.add_argument("--compress-journals", action="store_true", help=_COMPRESS_HELP)
    matrix.add_argument("--cache-budget", type=int, metavar="N",
                        help="after each version, keep only the N most recently used installs "
                        "of each client kind (~330 MB each)")
    matrix.add_argument("--bisects", metavar="DIR", help="folder of bisect-*.json results "
                        "(or <claim>.json): MATRIX.md gains a timeline per claim with the "
                        "first version of each change")
    matrix.add_argument("--catalog", help="a module whose REPORTS replace the built-in probes")
    matrix.add_argument("--shard", metavar="I/N", help="run only the I-th of N slices of the "
                        "suite (every N-th report); join the slices with `loopprobe merge`")
    matrix.add_argument("--skip-run", action="store_true",
                        help="only rebuild the tables and diffs from the existing folders")
    _output_options(matrix, junit=True)
    matrix.set_defaults(func=cmd_matrix)

    merge = _command(commands, "merge", help="join `matrix --shard` slices and tabulate "
                                "(exit 1 when a claim failed or regressed against --baseline)",
                     epilog=_EXIT_CODES)
    merge.add_argument("dirs", nargs="+", help="the --out folders of the slices")
    merge.add_argument("--out", required=True, help="the merged folder")
    merge.add_argument("--baseline", help="also write diff-<baseline>-to-<version>.md files")
    merge.set_defaults(func=cmd_merge)

    diff = _command(commands, "diff", help="what changed between two report directories "
                                            "(exit 1 when a claim regressed)", epilog=_EXIT_CODES)
    diff.add_argument("a", help="reports of the version you trust")
    diff.add_argument("b", help="reports of the version to check")
    diff.add_argument("--json", action="store_true", help="machine-readable output")
    diff.add_argument("--out", help="write to this file instead of stdout")
    diff.set_defaults(func=cmd_diff)

    mechanisms = _command(
        commands, "mechanisms", help="the analysis' mechanisms with each claim's verdict (README table)")
    mechanisms.add_argument("reports", help="the report folder whose verdicts are shown")
    mechanisms.add_argument("--matrix", help="matrix.json: also name versions that differ")
    mechanisms.add_argument("--write", metavar="FILE",
                            help="replace the generated section of FILE (e.g. README.md)")
    mechanisms.set_defaults(func=cmd_mechanisms)

    versions = _command(commands, "versions", help="a client's published versions, oldest "
                                   "first (npm for the CLI, PyPI for the Agent SDK)")
    versions.add_argument("client", nargs="?", default="claude-code",
                          help=f"client kind, one of {', '.join(CLIENT_KINDS)} (default: "
                          "%(default)s)")
    versions.add_argument("--since", help="from this version on")
    versions.add_argument("--latest", type=int, help="only the newest N")
    versions.add_argument("--json", action="store_true", help="machine-readable output")
    versions.set_defaults(func=cmd_versions)

    bisect = _command(
        commands, "bisect", help="the first published version where a claim's verdict changes",
        epilog="exit codes: 0 the first changed version was found; 1 skipped versions leave a "
               "range; 2 bad input or a harness error")
    bisect.add_argument("--client", default="claude-code",
                        help=f"client kind, one of {', '.join(CLIENT_KINDS)} (default: "
                        "%(default)s)")
    bisect.add_argument("--good", required=True, help="the version you trust")
    bisect.add_argument("--bad", required=True, help="a version where the verdict differs")
    bisect.add_argument("--claim", help="the claim id to follow")
    bisect.add_argument("--probe", help="or: a probe, following all its claims")
    bisect.add_argument("--out", default="runs/bisect", help="report folders and the "
                        "bisect-<target>.json result (default: %(default)s)")
    bisect.add_argument("--catalog", help="a module whose REPORTS replace the built-in probes")
    bisect.add_argument("--keep-installs", action="store_true",
                        help="keep the versions it installed (default: remove them after "
                        "probing, ~330 MB each)")
    bisect.add_argument("--no-sandbox", action="store_true", help=_NO_SANDBOX_HELP)
    bisect.add_argument("-j", "--jobs", type=int, help=_JOBS_HELP)
    _output_options(bisect)
    bisect.set_defaults(func=cmd_bisect)

    sessions = _command(
        commands, "sessions", help="resume and fork sessions written by one Claude Code version with "
                         "another: every ordered pair",
        epilog="exit codes: 0 every pair resumes and forks; 1 a pair fails; 2 a harness error")
    sessions.add_argument("--clients", default=",".join(COMMITTED_SESSION_VERSIONS),
                          help="comma-separated claude-code versions (sessions are the "
                               "CLI's own; default: the committed ones)")
    sessions.add_argument("--out", default="reports/sessions",
                          help="where sessions.json and SESSIONS.md go (default: %(default)s)")
    sessions.add_argument("--no-sandbox", action="store_true", help=_NO_SANDBOX_HELP)
    sessions.add_argument("-j", "--jobs", type=int, help=_JOBS_HELP)
    sessions.set_defaults(func=cmd_sessions)

    probes_cmd = _command(
        commands, "probes", help="list the reports, their probes and the claims each probe tests (the "
                       "names --report and --probe take)")
    probes_cmd.add_argument("--client", default="2.1.235",
                            help="the client whose default catalog is listed: "
                                 + _CLIENT_HELP + " (default: %(default)s)")
    probes_cmd.add_argument("--catalog", help="a module whose REPORTS replace the built-in "
                                              "probes")
    probes_cmd.add_argument("--json", action="store_true", help="machine-readable output")
    probes_cmd.set_defaults(func=cmd_probes)

    validate = _command(
        commands, "validate", help="check reports, fingerprints, matrices, journals, timing, session "
                         "tables, bisect results and scenarios against their JSON Schemas; "
                         "each problem names the file, the line for journals, and the JSON "
                         "pointer",
        epilog="exit codes: 0 every file valid; 1 a file breaks its schema; 2 bad input")
    validate.add_argument("paths", nargs="+", help="files, or folders searched recursively")
    validate.set_defaults(func=cmd_validate)

    schemas = _command(commands, "schemas", help="write the JSON Schemas (shipped in the "
                                                  "package under probes/report/json_schemas/)")
    schemas.add_argument("--out", help="folder (default: the package's schemas folder)")
    schemas.set_defaults(func=cmd_schemas)

    recorder = _command(
        commands, "record", help="a recording proxy in front of a Messages API endpoint: "
                                 "relays every request, writes a scenario the mock replays "
                                 "and the journal")
    recorder.add_argument("--upstream", required=True,
                          help="the endpoint's base URL, e.g. https://api.anthropic.com")
    recorder.add_argument("--out", default="recording",
                          help="folder for scenario.yaml and journal.jsonl (default: %(default)s)")
    recorder.add_argument("--host", default="127.0.0.1", help="default: %(default)s (loopback only)")
    recorder.add_argument("--port", type=int, default=0, help="0 picks a free port (default)")
    recorder.add_argument("--classifier", choices=("claude-code", "plain"), default="claude-code",
                          help="how request kinds are told apart (default: %(default)s)")
    recorder.set_defaults(func=cmd_record)

    render = _command(
        commands, "render", help="one self-contained HTML page of a report folder (evidence.html "
        "in it), a matrix.json (matrix.html beside it) or, with --diff A B, a diff")
    render.add_argument("target", nargs="?", help="a report folder, a matrix.json or a folder "
                        "holding one")
    render.add_argument("--diff", nargs=2, metavar=("A", "B"), help="compare two report folders "
                        "(default out: diff-A-to-B.html beside B)")
    render.add_argument("--out", metavar="FILE", help="write the page here instead")
    render.set_defaults(func=cmd_render)

    guide = _command(commands, "guide", help="regenerate EVIDENCE.md for a report directory")
    guide.add_argument("reports")
    guide.set_defaults(func=cmd_guide)
    return parser


def main(argv: list[str] | None = None) -> int:
    global _OUT
    args = build_parser().parse_args(argv)
    stream = sys.stderr if getattr(args, "json", False) else sys.stdout
    _OUT = Reporter(choose_mode(stream, quiet=getattr(args, "quiet", False)), stream)
    try:
        return int(args.func(args))
    except (HarnessInputError, ReportError) as error:
        print(f"loopprobe: {error}", file=sys.stderr)
        return EXIT_HARNESS
    finally:
        _OUT = Reporter()
