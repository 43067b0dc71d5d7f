"""``run``: the probe suite on one client version; ``probes``: the names it takes."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from probes.cli.catalogs import catalog_for
from probes.cli.common import (
    CLIENT_HELP,
    COMPRESS_HELP,
    EXIT_CODES,
    JOBS_HELP,
    NO_SANDBOX_HELP,
    command,
    jobs,
    output_options,
    say,
)
from probes.cli.suite import execute_suite
from probes.report.junit import write_junit

__all__ = ["add_probes", "add_run", "cmd_probes", "cmd_run"]


def cmd_run(args: argparse.Namespace) -> int:
    result = execute_suite(args.client, Path(args.out), probe=args.probe, report=args.report,
                           work_dir=args.work_dir,
                           catalog=catalog_for(args.client, args.catalog),
                           no_sandbox=args.no_sandbox, jobs=jobs(args.jobs),
                           compress_journals=args.compress_journals,
                           counterfactuals=args.counterfactuals)
    summary = result.to_json()
    if args.junit:
        summary["junit"] = str(write_junit(Path(args.junit), result.reports))
        say(f"wrote {args.junit}")
    if args.json:
        print(json.dumps(summary, indent=2))
    return result.exit_code



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



def add_run(commands: Any) -> None:
    """``run``"""
    run = command(commands, "run", help="run the probe suite on one client version", epilog=EXIT_CODES)
    run.add_argument("--client", default="2.1.235",
                     help=CLIENT_HELP + " (default: %(default)s)")
    run.add_argument("--out", required=True, help="directory for the reports")
    run.add_argument("--probe", action="append", help="run only this probe (repeatable: "
                     "each named probe, once)")
    run.add_argument("--report", action="append", help="run only the probes of this report "
                     "(repeatable: each named report, once, in the order given; with --probe: "
                     "the named probes of the named reports)")
    run.add_argument("--work-dir", help="where sandboxes go (default: under the cache)")
    run.add_argument("--catalog", help="a module whose REPORTS replace the built-in probes")
    run.add_argument("--no-sandbox", action="store_true", help=NO_SANDBOX_HELP)
    run.add_argument("-j", "--jobs", type=int, help=JOBS_HELP)
    run.add_argument("--compress-journals", action="store_true", help=COMPRESS_HELP)
    run.add_argument("--counterfactuals", action="store_true",
                     help="also run every selected probe's counterfactuals (the variants in "
                          "which its claims cannot hold) on the same binary and write what "
                          "each did to counterfactuals.json: the evidence that each claim's "
                          "checks can fail on this version")
    output_options(run, junit=True)
    run.set_defaults(func=cmd_run)



def add_probes(commands: Any) -> None:
    """``probes``"""
    probes_cmd = command(
        commands, "probes", help="list the reports, their probes and the claims each probe tests (the "
                       "names --report and --probe take)")
    probes_cmd.add_argument("--client", default="2.1.235",
                            help="the client whose default catalog is listed: "
                                 + CLIENT_HELP + " (default: %(default)s)")
    probes_cmd.add_argument("--catalog", help="a module whose REPORTS replace the built-in "
                                              "probes")
    probes_cmd.add_argument("--json", action="store_true", help="machine-readable output")
    probes_cmd.set_defaults(func=cmd_probes)
