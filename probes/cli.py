"""The ``loopprobe`` command: serve the mock, install clients, run probes, compare reports."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from mockapi.cli import add_serve_arguments, serve
from probes.catalog import REPORTS
from probes.clients import InstallError, parse_client_spec
from probes.clients.claude_code import ClaudeCode
from probes.clients.npm import cache_root
from probes.guide import write_guide
from probes.model import ReportSpec
from probes.report import build_report, write_report
from probes.runner import ProbeOutcome, run_probe

__all__ = ["main"]

EXIT_PASSED, EXIT_FAILED, EXIT_HARNESS = 0, 1, 2


def _say(message: str) -> None:
    print(message, flush=True)


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
        raise SystemExit(f"loopprobe: no probe matches --probe {probe!r} --report {report!r}; "
                         f"probes: {', '.join(known)}; reports: "
                         f"{', '.join(s.name for s in reports)}")
    return chosen


def cmd_run(args: argparse.Namespace) -> int:
    try:
        client, version = parse_client_spec(args.client)
        _say(f"loopprobe: client {client.name}@{version}")
        binary = client.install(version)
    except InstallError as error:
        print(f"loopprobe: {error}", file=sys.stderr)
        return EXIT_HARNESS
    _say(f"  binary {binary.entry} sha256 {binary.sha256}")
    specs = _select(REPORTS, args.probe, args.report)
    out = Path(args.out)
    work = Path(args.work_dir) if args.work_dir else (
        cache_root() / "runs" / f"{binary.version}-{time.strftime('%Y%m%d-%H%M%S')}")
    _say(f"  sandboxes under {work}")
    written: list[tuple[str, dict]] = []
    interrupted = False
    for spec in specs:
        outcomes: list[ProbeOutcome] = []
        try:
            for probe in spec.probes:
                _say(f"probe {probe.name} ({spec.name})")
                started = time.monotonic()
                outcome = run_probe(probe, client, binary, work, progress=_say)
                outcomes.append(outcome)
                failed = [c for c in outcome.checks if not c.passed]
                verdict = ("NOT APPLICABLE: " + outcome.not_applicable if outcome.not_applicable
                           else "HARNESS ERROR: " + outcome.error if outcome.error
                           else f"{len(outcome.checks) - len(failed)}/{len(outcome.checks)} checks passed")
                _say(f"  -> {verdict} ({time.monotonic() - started:.1f}s)")
                for check in failed:
                    _say(f"     FAIL {check.id}: expected {check.expected!r}, observed "
                         f"{str(check.observed)[:160]!r}")
        except KeyboardInterrupt:
            interrupted = True
            _say("loopprobe: interrupted; writing what was gathered, marked incomplete")
        report, journal = build_report(spec, outcomes, binary, complete=not interrupted)
        path = write_report(report, journal, out)
        written.append((spec.name, report))
        _say(f"  wrote {path}")
        if interrupted:
            break
    write_guide(out)
    _say(f"  wrote {out / 'EVIDENCE.md'}")
    _say("")
    _say(f"{'report':<40} {'status':<15} claims passed")
    for name, report in written:
        claims = report["claims"]
        passed = sum(1 for c in claims if c["passed"])
        _say(f"{name:<40} {report['status']:<15} {passed}/{len(claims)}")
    if interrupted:
        return 130
    statuses = {report["status"] for _, report in written}
    if "error" in statuses:
        return EXIT_HARNESS
    return EXIT_FAILED if "failed" in statuses else EXIT_PASSED


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
    found = ClaudeCode().installed()
    if not found:
        _say(f"no clients installed under {cache_root() / 'clients'}")
    for binary in found:
        _say(f"{binary.name}@{binary.version}\t{binary.platform}\t{binary.sha256}\t{binary.entry}")
    return 0


def cmd_guide(args: argparse.Namespace) -> int:
    path = write_guide(Path(args.reports))
    _say(f"wrote {path}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="loopprobe", description="What an agent-loop client really does, with evidence.")
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="run the probe suite on one client version")
    run.add_argument("--client", default="2.1.235",
                     help="claude-code@VERSION, VERSION or latest (default: %(default)s)")
    run.add_argument("--out", required=True, help="directory for the reports")
    run.add_argument("--probe", help="run only this probe")
    run.add_argument("--report", help="run only the probes of this report")
    run.add_argument("--work-dir", help="where sandboxes go (default: under the cache)")
    run.set_defaults(func=cmd_run)

    serve_cmd = commands.add_parser("serve", help="run the Messages API mock")
    add_serve_arguments(serve_cmd)
    serve_cmd.set_defaults(func=serve)

    clients = commands.add_parser("clients", help="install and list client versions")
    client_commands = clients.add_subparsers(dest="clients_command", required=True)
    install = client_commands.add_parser("install", help="install exact client versions")
    install.add_argument("specs", nargs="+", metavar="claude-code@VERSION")
    install.set_defaults(func=cmd_clients_install)
    listing = client_commands.add_parser("list", help="list installed client versions")
    listing.set_defaults(func=cmd_clients_list)

    guide = commands.add_parser("guide", help="regenerate EVIDENCE.md for a report directory")
    guide.add_argument("reports")
    guide.set_defaults(func=cmd_guide)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))
