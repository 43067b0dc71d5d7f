"""``matrix``: the suite on several versions, tabulated; ``merge``: the slices of a sharded
matrix joined and tabulated."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from probes.cli.catalogs import catalog_for
from probes.cli.common import (
    CLIENT_HELP,
    COMPRESS_HELP,
    EXIT_CODES,
    EXIT_FAILED,
    EXIT_HARNESS,
    EXIT_PASSED,
    JOBS_HELP,
    NO_SANDBOX_HELP,
    HarnessInputError,
    check_out,
    command,
    jobs,
    output_options,
    say,
    task,
    worst,
)
from probes.cli.suite import report_summary, run_suite
from probes.clients import InstallError, parse_client_spec, report_folder
from probes.clients.base import ClientKey
from probes.clients.registry import client_for, prune_installs
from probes.clients.specs import check_version
from probes.core.files import write_json, write_text
from probes.core.probe import ReportSpec
from probes.report.diff import diff_directories, render_markdown
from probes.report.format import REPORT_SCHEMA_VERSION, ReportError, load_folder
from probes.report.guide import write_guide
from probes.report.junit import write_junit
from probes.report.matrix import build_matrix, render_matrix
from probes.scale.almanac import load_bisects, render_timeline
from probes.scale.almanac_doc import load_almanac, with_almanac_text
from probes.scale.bisect import BisectError, order_versions
from probes.scale.shard import ShardError, check_slices, merge_folders, parse_shard

__all__ = ["add_matrix", "add_merge", "cmd_matrix", "cmd_merge"]


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
    check_version(client, version, exact=True)  # the registry's answer is input too
    say(f"loopprobe: {key.label} is {key.kind}@{version}")
    return ClientKey(key.kind, version)



def cmd_matrix(args: argparse.Namespace) -> int:
    try:
        keys = [_concrete(_client_key(v.strip())) for v in args.clients.split(",") if v.strip()]
        baseline = report_folder(_concrete(_client_key(args.baseline))) if args.baseline \
            else None
    except (InstallError, BisectError) as error:
        print(f"loopprobe: {error}", file=sys.stderr)
        return EXIT_HARNESS
    if not keys:
        raise HarnessInputError(f"--clients {args.clients!r}: expected comma-separated "
                                "clients, e.g. 2.0.77,2.1.235, found none")
    bisects = _bisects(Path(args.bisects)) if args.bisects else None
    out = Path(args.out)
    shard = _shard(args.shard)
    if args.cache_budget is not None and args.cache_budget < 1:
        raise HarnessInputError(f"--cache-budget: expected a count >= 1, found "
                                f"{args.cache_budget}")
    codes = {}
    with task("versions", None if args.skip_run else len(keys)) as bar:
        for key in keys:
            if args.resume and _done(out / report_folder(key), catalog_for(key.label,
                                                                             args.catalog)):
                say(f"  {report_folder(key)}: already complete in {out} (--resume), not run")
                bar.advance()
                continue
            if not args.skip_run:
                codes[key] = run_suite(key.label, out / report_folder(key),
                                       no_sandbox=args.no_sandbox, jobs=jobs(args.jobs),
                                       shard=shard, catalog=catalog_for(key.label, args.catalog),
                                       compress_journals=args.compress_journals)
                bar.advance()
                if args.cache_budget is not None:  # most recently used first: this one stays
                    for removed in prune_installs(args.cache_budget):
                        say(f"  removed {removed.name}@{removed.version} (--cache-budget)")
    folders = [report_folder(key) for key in keys]
    summary: dict[str, Any] = {"command": "matrix", "out": str(out), "folders": folders,
                               "runs": {report_folder(k): c for k, c in codes.items()}}
    if shard is not None:  # a slice: `loopprobe merge` tabulates the whole
        code = worst(list(codes.values()))
    else:
        regressed = _tabulate(out, folders, baseline, bisects)
        code = worst([*codes.values(), regressed])
        summary.update(matrix=str(out / "matrix.json"), diffs=sorted(
            str(p) for p in out.glob(f"diff-{baseline}-to-*.md")) if baseline else [])
    reports = [r for f in folders if (out / f).is_dir()
               for r in load_folder(out / f, require_reports=False).reports.values()]
    summary["reports"] = {f"{r['client']['name']}@{r['client']['version']}/{r['report']}":
                          report_summary(r) for r in reports}
    if args.junit:
        summary["junit"] = str(write_junit(Path(args.junit), reports))
        say(f"wrote {args.junit}")
    summary["exit_code"] = code
    if args.json:
        print(json.dumps(summary, indent=2))
    return code



def _done(folder: Path, catalog: tuple[ReportSpec, ...]) -> bool:
    """A version folder that already holds a complete report of today's schema for every
    report of the catalog, each with exactly the catalog's claims (``--resume``)."""
    try:
        reports = load_folder(folder, require_reports=False).reports if folder.is_dir() else {}
    except ReportError:
        return False
    for spec in catalog:
        report = reports.get(spec.name)
        if report is None or report.get("schema_version") != REPORT_SCHEMA_VERSION \
                or not report.get("complete") or report.get("status") == "error":
            return False
        if sorted(c["id"] for c in report["claims"]) != sorted(
                claim.id for one in spec.probes for claim in one.claims):
            return False
    return True


def _shard(text: str | None) -> tuple[int, int] | None:
    try:
        return parse_shard(text) if text else None
    except ShardError as error:
        raise HarnessInputError(str(error)) from None


def _bisects(folder: Path) -> list[dict[str, Any]]:
    """``--bisects``, read before any version runs."""
    if not folder.is_dir():
        raise HarnessInputError(f"--bisects {folder}: expected a folder of bisect-*.json "
                                f"results, found {'a file' if folder.exists() else 'nothing'}")
    try:
        return load_bisects(folder)
    except (OSError, ValueError) as error:
        raise HarnessInputError(f"--bisects {folder}: expected bisect results (JSON), but "
                                f"{error}") from None


def _tabulate(out: Path, folders: list[str], baseline: str | None,
              bisects: list[dict[str, Any]] | None = None) -> int:
    """MATRIX.md, matrix.json and the diffs against the baseline from the version folders;
    the worst status of their reports (1: a claim failed, 2: a harness error)."""
    matrix_folders = [out / f for f in folders if (out / f).is_dir()]
    matrix = build_matrix(matrix_folders)
    write_json(out / "matrix.json", matrix)
    timeline = render_timeline(matrix, bisects or [], out)
    text = render_matrix(matrix) + "\n" + timeline
    almanac = load_almanac(out)  # its text form stays in MATRIX.md
    write_text(out / "MATRIX.md", with_almanac_text(text, almanac) if almanac else text)
    say(f"wrote {out / 'MATRIX.md'}")
    regressed = False
    if baseline:
        for other in folders:
            if other == baseline or not (out / other).is_dir() or not (out / baseline).is_dir():
                continue
            result = diff_directories(out / baseline, out / other)
            target = write_text(out / f"diff-{baseline}-to-{other}.md", render_markdown(result))
            say(f"wrote {target}")
            regressed = regressed or bool(result.regressions)
    statuses = {report["status"] for folder in matrix_folders
                for report in load_folder(folder, require_reports=False).reports.values()}
    if "error" in statuses or "incomplete" in statuses:
        return EXIT_HARNESS
    return EXIT_FAILED if "failed" in statuses or regressed else EXIT_PASSED



def cmd_merge(args: argparse.Namespace) -> int:
    """Join what ``matrix --shard`` slices wrote into one report folder per version, then
    tabulate as an unsharded matrix does."""
    out, slices = Path(args.out), [Path(d) for d in args.dirs]
    try:
        check_slices(slices, out)
        check_out(out)
        folders = merge_folders(slices, out)
        baseline = report_folder(_client_key(args.baseline)) if args.baseline else None
    except (ShardError, InstallError) as error:
        raise HarnessInputError(str(error)) from None
    for folder in folders:
        say(f"wrote {write_guide(out / folder)}")
    return _tabulate(out, folders, baseline)



def add_matrix(commands: Any) -> None:
    """``matrix``"""
    matrix = command(commands, "matrix", help="run the suite on several versions, tabulate",
                      epilog=EXIT_CODES)
    matrix.add_argument("--clients", required=True,
                        help="comma-separated clients, e.g. 2.0.77,2.1.235,latest; "
                        + CLIENT_HELP)
    matrix.add_argument("--out", required=True, help="directory; one folder per version")
    matrix.add_argument("--baseline", help="also write diff-<baseline>-to-<version>.md files")
    matrix.add_argument("--no-sandbox", action="store_true", help=NO_SANDBOX_HELP)
    matrix.add_argument("-j", "--jobs", type=int, help=JOBS_HELP)
    matrix.add_argument("--compress-journals", action="store_true", help=COMPRESS_HELP)
    matrix.add_argument("--cache-budget", type=int, metavar="N",
                        help="after each version, keep only the N most recently used installs "
                        "of each client kind (~330 MB each)")
    matrix.add_argument("--bisects", metavar="DIR", help="folder of bisect-*.json results "
                        "(or <claim>.json): MATRIX.md gains a timeline per claim with the "
                        "first version of each change")
    matrix.add_argument("--catalog", help="a module whose REPORTS replace the built-in probes")
    matrix.add_argument("--shard", metavar="I/N", help="run only the I-th of N slices of the "
                        "suite (every N-th report); join the slices with `loopprobe merge`")
    matrix.add_argument("--resume", action="store_true",
                        help="do not run a version whose folder in --out already holds a "
                             "complete report of this loopprobe's schema, with the catalog's "
                             "claims and no harness error, for every report (an interrupted "
                             "matrix goes on where it stopped)")
    matrix.add_argument("--skip-run", action="store_true",
                        help="only rebuild the tables and diffs from the existing folders")
    output_options(matrix, junit=True)
    matrix.set_defaults(func=cmd_matrix)



def add_merge(commands: Any) -> None:
    """``merge``"""
    merge = command(commands, "merge", help="join `matrix --shard` slices and tabulate "
                                "(exit 1 when a claim failed or regressed against --baseline)",
                     epilog=EXIT_CODES)
    merge.add_argument("dirs", nargs="+", help="the --out folders of the slices")
    merge.add_argument("--out", required=True, help="the merged folder")
    merge.add_argument("--baseline", help="also write diff-<baseline>-to-<version>.md files")
    merge.set_defaults(func=cmd_merge)
