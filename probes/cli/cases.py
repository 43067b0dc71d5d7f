"""``check``: your own setup's cases (a case file) on client versions, judged against your
baseline, with the job summary, JUnit and CTRF files a CI needs."""

from __future__ import annotations

import argparse
import json
import time
from functools import partial
from pathlib import Path
from typing import Any

from probes.cases.format import CaseFileError
from probes.cases.paths import given_path, repository_root
from probes.cli.catalogs import load_cases
from probes.cli.common import (
    EXIT_CODES,
    JOBS_HELP,
    NO_SANDBOX_HELP,
    HarnessInputError,
    check_out,
    check_out_file,
    command,
    jobs,
    say,
)
from probes.cli.suite import execute_suite
from probes.cli.versions import claim_verdict
from probes.clients import DEFAULT_KIND, client_for
from probes.clients.registry import CLIENT_KINDS
from probes.clients.specs import resolve_versions
from probes.gate.baseline import Baseline, BaselineError, check_names, load_baseline
from probes.gate.ctrf import write_check_ctrf
from probes.gate.gate import judge, write_check
from probes.gate.github_outputs import append_github_outputs
from probes.gate.junit import write_check_junit
from probes.gate.summary import append_gate_summary, summary_markdown

__all__ = ["add_check", "cmd_check"]


def cmd_check(args: argparse.Namespace) -> int:
    catalog = load_cases(args.cases, args.workspace, args.home_config, args.plugin_dir)
    baseline = _baseline(args.cases, args.baseline, catalog) if args.baseline else None
    out = Path(args.out)
    # each checked before any client runs (--out made first: the files often go in it), so
    # a file that cannot be written wastes no run
    check_out(out)
    for flag, given in (("--junit", args.junit), ("--ctrf", args.ctrf),
                        ("--summary", args.summary), ("--github-output", args.github_output)):
        if given:
            check_out_file(Path(given), flag)
    client = client_for(args.client)
    versions = resolve_versions(args.versions, client.published())
    folders = []
    started = int(time.time() * 1000)
    for version in versions:
        spec = version if args.client == "claude-code" else f"{args.client}@{version}"
        say(f"{args.cases} on {args.client} {version}")
        execute_suite(spec, out / version, catalog=catalog, no_sandbox=args.no_sandbox,
                      jobs=jobs(args.jobs))
        folders.append((version, out / version))
    result = judge(folders, baseline)
    if args.bisect and result.failed:
        _bisect(args, catalog, result, out)
    say(f"wrote {write_check(result, out)}")
    if args.junit:
        say(f"wrote {write_check_junit(Path(args.junit), result)}")
    if args.ctrf:
        written = write_check_ctrf(Path(args.ctrf), result, start_ms=started,
                                   stop_ms=int(time.time() * 1000))
        say(f"wrote {written}")
    if args.summary:
        append_gate_summary(Path(args.summary), result)
    if args.github_output:
        append_github_outputs(Path(args.github_output), result)
    print(summary_markdown(result))
    return result.exit_code


def _baseline(cases: str, given: str, catalog: tuple[Any, ...]) -> Baseline:
    """The baseline file, read where it is (not through a link of the case file's
    repository leading out of it), each entry naming a case and expectation of the file."""
    try:
        path = given_path(repository_root(Path(cases)), "--baseline", given)
        baseline = load_baseline(path)
        check_names(baseline, {probe.name: [claim.id.split(".", 1)[1] for claim in probe.claims]
                               for spec in catalog for probe in spec.probes})
    except BaselineError as error:
        raise HarnessInputError(f"--baseline {error}") from None
    except CaseFileError as error:  # a link of the repository leading out: named by the flag
        raise HarnessInputError(str(error)) from None
    return baseline


def _bisect(args: argparse.Namespace, catalog: tuple[Any, ...], result: Any, out: Path) -> None:
    """For each expectation that failed (unlisted) on a version after one where it passed:
    the first published version where it fails, each version between run with its case
    alone, in ``OUT/bisect/<version>``; both sides' evidence kept. Written to
    ``OUT/bisect.json``; the oldest first failing version becomes ``first_bad_version``."""
    from probes.scale.bisect import BisectError, bisect_versions, order_versions, versions_between
    order = order_versions(result.versions)
    failed: dict[str, str] = {}
    for row in sorted(result.rows, key=lambda r: order.index(r.version)):
        if row.outcome == "failed":
            failed.setdefault(row.claim, row.version)
    client = client_for(args.client)
    published: list[str] = []
    found: list[dict[str, Any]] = []
    # the folder of each version a claim was judged on: the runs of every version given,
    # then the bisect's own runs of one case (OUT/bisect/<case>/<version>)
    folders: dict[tuple[str, str], Path] = {}

    def verdict_at(claim: str, version: str) -> str:
        case = claim.split(".", 1)[0]
        if (case, version) not in folders:
            folders[case, version] = out / "bisect" / case / version
            spec = version if args.client == "claude-code" else f"{args.client}@{version}"
            say(f"bisect {claim}: {args.client} {version}")
            execute_suite(spec, folders[case, version], catalog=catalog, probe=case,
                          no_sandbox=args.no_sandbox, jobs=jobs(args.jobs))
        return claim_verdict(folders[case, version], [claim])

    for claim, bad in failed.items():
        passed = [r.version for r in result.rows if r.claim == claim and r.outcome == "passed"
                  and order.index(r.version) < order.index(bad)]
        if not passed:
            found.append({"claim": claim, "bad": bad, "first_changed": None,
                          "why": f"no version run before {bad} passed: nothing to search "
                                 "between (add an older version to --versions)"})
            continue
        good = max(passed, key=order.index)
        published = published or client.published()
        case = claim.split(".", 1)[0]
        folders.update({(case, v): out / v for v in (good, bad)})
        try:
            searched = bisect_versions(versions_between(published, good, bad),
                                       partial(verdict_at, claim))
        except BisectError as error:
            found.append({"claim": claim, "good": good, "bad": bad, "first_changed": None,
                          "why": str(error)})
            continue
        found.append({"claim": claim, **searched.to_json(),
                      "evidence": {v: str(folders[case, v]) for v in (
                                    searched.last_same, searched.first_changed) if v}})
    firsts = [f["first_changed"] for f in found if f.get("first_changed")]
    if firsts:
        result.bisected_first_bad = order_versions(firsts)[0]
    (out / "bisect.json").write_text(json.dumps({"bisects": found}, indent=2) + "\n")
    say(f"wrote {out / 'bisect.json'}")


def add_check(commands: Any) -> None:
    """``check``"""
    check = command(commands, "check", help="check your own setup (a case file: hooks, "
                    "plugins, commands, CLAUDE.md) on client versions", epilog=EXIT_CODES)
    check.add_argument("cases", help="the case file (YAML, loopprobe: cases/1)")
    check.add_argument("--versions", default="latest",
                       help="versions to run: a comma list, latest, latest~N (the N+1 newest) "
                            "or a range such as '>=2.1.90,<2.1.240' (default: %(default)s)")
    check.add_argument("--client", default=DEFAULT_KIND, help="the client kind: one of "
                       f"{', '.join(CLIENT_KINDS)}, or one from $LOOPPROBE_CLIENTS "
                       "(default: %(default)s)")
    check.add_argument("--baseline", help="known differences (loopprobe: baseline/1): a "
                       "listed failure passes, a listed entry that passes fails as stale")
    check.add_argument("--workspace", help="a folder copied as the workspace (replaces the "
                       "case file's setup.workspace)")
    check.add_argument("--home-config", help="a folder copied as ~/.claude (replaces "
                       "setup.home_config)")
    check.add_argument("--plugin-dir", action="append", help="a plugin folder passed with "
                       "--plugin-dir (repeatable; added to setup.plugin_dirs)")
    check.add_argument("--out", required=True, help="directory: one folder per version and "
                       "check.json")
    check.add_argument("--junit", help="also write a JUnit XML file")
    check.add_argument("--ctrf", help="also write a CTRF JSON file")
    check.add_argument("--summary", help="append the Markdown summary to this file "
                       "(e.g. $GITHUB_STEP_SUMMARY)")
    check.add_argument("--github-output", help="append failed, regressed and "
                       "first-bad-version to this file (e.g. $GITHUB_OUTPUT)")
    check.add_argument("--bisect", action="store_true", help="on a failure, find the first "
                       "failing version between the newest passing and the oldest failing one")
    check.add_argument("--no-sandbox", action="store_true", help=NO_SANDBOX_HELP)
    check.add_argument("-j", "--jobs", type=int, help=JOBS_HELP)
    check.set_defaults(func=cmd_check)
