"""``almanac``: every published version of a range, every change of every claim located.

``almanac build`` runs the search (``probes.scale.almanac_search``) with real clients,
appending each finished run to its state, and publishes when the search is complete;
``almanac merge`` joins the states of shards; ``almanac retract`` withdraws the runs of one
report folder the harness got wrong; ``almanac publish`` writes ``almanac.json``
and the witnesses from a complete state, and refuses an incomplete one.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from probes.cli.almanac_ask import add_almanac_ask
from probes.cli.almanac_changelog import add_almanac_changelog
from probes.cli.catalogs import load_catalog
from probes.cli.common import (
    EXIT_FAILED,
    EXIT_HARNESS,
    EXIT_PASSED,
    JOBS_HELP,
    NO_SANDBOX_HELP,
    HarnessInputError,
    check_out,
    command,
    jobs,
    say,
)
from probes.cli.suite import run_suite
from probes.clients import InstallError
from probes.clients.base import Client
from probes.clients.registry import CLIENT_KINDS, client_for, remove_install
from probes.clients.specs import check_version
from probes.core.files import write_text
from probes.core.probe import ReportSpec
from probes.core.safe_read import ReadRefused, read_bytes, read_json
from probes.report.format import ReportError
from probes.report.render import ALMANAC_PAGE, render_almanac_page
from probes.scale.almanac_build import BuildStats, build, claims_of, revisions_of
from probes.scale.almanac_doc import DEFAULT_GRID, DEFAULT_SCREEN, PublishError, publish
from probes.scale.almanac_search import grid_indices, shard_range
from probes.scale.almanac_state import AlmanacState, StateError, merge_states
from probes.scale.bisect import BisectError, order_versions
from probes.scale.shard import ShardError, parse_shard

__all__ = ["add_almanac", "cmd_almanac_build", "cmd_almanac_merge", "cmd_almanac_publish",
           "cmd_almanac_retract"]


def _range(client: Any, since: str | None, until: str | None) -> list[str]:
    try:
        published = order_versions(client.published())
    except (InstallError, BisectError) as error:
        raise HarnessInputError(str(error)) from None
    first_major = next((v for v in published if v.startswith("2.")), published[0])
    since = since or first_major
    until = until or published[-1]
    for flag, version in (("--since", since), ("--until", until)):
        if version not in published:
            raise HarnessInputError(f"{flag} {version}: not a published version of "
                                    f"{client.name} (newest: {published[-1]})")
    low, high = published.index(since), published.index(until)
    if high < low:
        raise HarnessInputError(f"--until {until} is older than --since {since}")
    return published[low:high + 1]


def _identity(client: str, since: str, grid: int, screen: str) -> dict[str, Any]:
    """What a build is: its state may be resumed, merged and extended only as the same. The
    catalog is not part of it: a run counts only for a probe making the same claims
    (``probes.scale.almanac_search``), so a new probe is built on, a changed one rebuilt."""
    return {"client": client, "since": since, "grid": grid, "screen_probe": screen}


def cmd_almanac_build(args: argparse.Namespace) -> int:
    catalog, client, versions = _build_inputs(args)
    state_dir, work = Path(args.state), Path(args.work)
    state = AlmanacState(state_dir, revisions_of(catalog))
    try:
        state.start(_identity(client.name, versions[0], args.grid, args.screen_probe))
    except StateError as error:
        raise HarnessInputError(str(error)) from None
    searched = _searched(args, versions)
    if not searched:
        say(f"almanac: shard {args.shard} has no grid interval of the "
            f"{len(versions)} versions: nothing to run")
        return EXIT_PASSED
    say(f"almanac build {client.name}: {len(searched)} versions {searched[0]}–{searched[-1]}"
        f" (grid {args.grid}, screen {args.screen_probe}, state {state_dir})")
    stats = BuildStats()
    batches = _Batches(args, client, catalog, stats)
    started = time.time()
    result = None
    try:
        result = build(state, searched, claims_of(catalog), args.grid, args.screen_probe,
                       batches.run, work=work, max_batches=args.max_runs, say=say,
                       stats=stats)
    except KeyboardInterrupt:
        pass
    finally:
        batches.remove_installs()
        _record_cost(state_dir, {**stats.to_json(), "installs": batches.installs,
                                 "started": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                          time.gmtime(started)),
                                 "range": [searched[0], searched[-1]],
                                 "shard": args.shard or None})
    if result is None:
        say("almanac: interrupted; the finished runs are kept: run the same command to go on")
        return 130
    say(f"almanac: {stats.batches} suite run(s), {stats.probe_runs} probe run(s), "
        f"{batches.installs} install(s), {stats.seconds:.0f} s")
    if not result.complete:
        say(f"almanac: {len(result.needs)} run(s) still needed: run the same command to go on")
        return EXIT_FAILED
    say("almanac: the search is complete for these versions")
    if args.shard or args.no_publish:
        return EXIT_PASSED
    return _publish(state_dir, work, Path(args.out), versions[-1], catalog, args.start)


def _build_inputs(args: argparse.Namespace) -> tuple[tuple[ReportSpec, ...], Client, list[str]]:
    """The catalog, the client and its versions of the range, every flag checked before
    anything runs."""
    catalog = load_catalog(args.catalog)
    claims = claims_of(catalog)
    if args.screen_probe not in claims:
        raise HarnessInputError(f"--screen-probe {args.screen_probe!r}: no such probe; expected "
                                f"one of {', '.join(claims)}")
    if args.grid < 1:
        raise HarnessInputError(f"--grid: expected a spacing >= 1, found {args.grid}")
    try:
        client = client_for(args.client)
        for version in (args.since, args.until):
            if version:
                check_version(client, version, exact=True)
    except InstallError as error:
        raise HarnessInputError(str(error)) from None
    check_out(Path(args.state), "--state")
    check_out(Path(args.work), "--work")
    return catalog, client, _range(client, args.since, args.until)


def _searched(args: argparse.Namespace, versions: list[str]) -> list[str]:
    """The versions this build searches: from ``--from``'s grid interval on, this shard's
    intervals only (none: the shard has nothing to run)."""
    searched = _from(versions, args.grid, args.start)
    if not args.shard:
        return searched
    try:
        shard, shards = parse_shard(args.shard)
    except ShardError as error:
        raise HarnessInputError(str(error)) from None
    return shard_range(searched, args.grid, shard, shards)


class _Batches:
    """The build's suite runs: each a batch of probes on one version, installing the
    version when needed and keeping at most ``--cache-budget`` of the installs it made."""

    def __init__(self, args: argparse.Namespace, client: Client, catalog: tuple[ReportSpec, ...],
                 stats: BuildStats) -> None:
        self.args, self.client, self.catalog, self.stats = args, client, catalog, stats
        self.installed_before = {b.version for b in client.installed()}
        self.ours: list[str] = []  # versions this build installed, most recently used last
        self.installs = 0
        self.jobs = jobs(args.jobs)

    def run(self, version: str, probes: list[str], folder: Path) -> str:
        """Run ``probes`` on ``version`` into ``folder``; the binary's SHA-256 ("" unknown)."""
        before = {b.version for b in self.client.installed()}
        with _locked(self.args.lock, self.stats):
            try:
                code = run_suite((self.client, version), folder, catalog=self.catalog,
                                 probe=probes, no_sandbox=self.args.no_sandbox,
                                 jobs=min(self.jobs, len(probes)), compress_journals=True)
            except (ReadRefused, ReportError) as error:  # a report it wrote that no reader
                say(f"almanac: {version}: {error}")  # takes: its claims are harness errors
                code = EXIT_HARNESS
        if version not in before:
            self.installs += 1
        say(f"almanac: {version}: {len(probes)} probe(s), exit {code}")
        self._keep_within_budget(version)
        return _binary_of(folder)

    def _keep_within_budget(self, version: str) -> None:
        if version in self.installed_before or self.args.keep_installs:
            return
        if version in self.ours:
            self.ours.remove(version)
        self.ours.append(version)
        while len(self.ours) > self.args.cache_budget:
            remove_install(self.client, self.ours.pop(0))

    def remove_installs(self) -> None:
        """Remove the installs this build made (unless ``--keep-installs``)."""
        if not self.args.keep_installs:
            for version in self.ours:
                remove_install(self.client, version)


def _binary_of(folder: Path) -> str:
    """The SHA-256 of the binary the reports in ``folder`` ran ("" when none says)."""
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            data = read_json(path, within=folder)
        except (ReadRefused, ValueError):
            continue  # said when its verdicts are read
        if isinstance(data, dict) and isinstance(data.get("client"), dict):
            return str(data["client"].get("binary_sha256") or "")
    return ""


def _from(versions: list[str], grid: int, start: str | None) -> list[str]:
    """The versions from the grid version at or before ``start`` on (all without it)."""
    if not start:
        return versions
    if start not in versions:
        raise HarnessInputError(f"--from {start}: not a version of the range "
                                f"{versions[0]}–{versions[-1]}")
    first = max(i for i in grid_indices(len(versions), grid) if i <= versions.index(start))
    return versions[first:]


@contextmanager
def _locked(path: str | None, stats: BuildStats) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (shared with other users of the machine's cores)
    for one suite run, so a build of hours never holds it for long; the wait is counted."""
    if not path:
        yield
        return
    with open(path, "a") as handle:
        began = time.monotonic()
        fcntl.flock(handle, fcntl.LOCK_EX)
        stats.waited += time.monotonic() - began
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _record_cost(state_dir: Path, entry: dict[str, Any]) -> None:
    with (state_dir / "costs.ndjson").open("a") as handle:
        handle.write(json.dumps(entry, sort_keys=True) + "\n")


def _publish(state_dir: Path, work: Path, out: Path, until: str | None,
             catalog: tuple[ReportSpec, ...], start: str | None = None) -> int:
    check_out(out)
    state = AlmanacState(state_dir, revisions_of(catalog))
    found = state.build()
    if found is None or "client" not in found:
        raise HarnessInputError(f"--state {state_dir}: no almanac build there (expected a "
                                "build.json naming its client)")
    client = client_for(found["client"])
    try:
        published = order_versions(client.published())
    except (InstallError, BisectError) as error:
        raise HarnessInputError(str(error)) from None
    until = until or max(state.screens, key=lambda v: published.index(v) if v in published
                         else -1)
    try:
        path = publish(state, work, out, published, until, catalog, start=start, say=say)
    except PublishError as error:
        say(f"almanac: not published: {error}")
        return EXIT_FAILED
    say(f"wrote {path}")
    # the page beside it, from the same file: never one stale beside the other
    page = write_text(path.with_name(ALMANAC_PAGE), render_almanac_page(path))
    say(f"wrote {page}")
    return EXIT_PASSED


def cmd_almanac_publish(args: argparse.Namespace) -> int:
    return _publish(Path(args.state), Path(args.work), Path(args.out), args.until,
                    load_catalog(args.catalog), args.start)


def cmd_almanac_merge(args: argparse.Namespace) -> int:
    out = Path(args.state)
    check_out(out, "--state")
    sources = [Path(s) for s in args.shards]
    if any(out.resolve() == s.resolve() for s in sources):
        raise HarnessInputError(f"--state {out}: expected a folder apart from the shards")
    try:
        merged = merge_states(sources, out)
    except StateError as error:
        raise HarnessInputError(str(error)) from None
    for source in sources:
        costs = source / "costs.ndjson"
        if costs.is_file():
            with (out / "costs.ndjson").open("a") as handle:
                handle.write(read_bytes(costs, within=source).decode())
    say(f"almanac: merged {len(sources)} state(s) into {out}: {len(merged.screens)} "
        f"screen(s), {len(merged.records()) - len(merged.screens)} probe run(s)")
    return EXIT_PASSED


def cmd_almanac_retract(args: argparse.Namespace) -> int:
    state_dir = Path(args.state)
    state = AlmanacState(state_dir, revisions_of(load_catalog(args.catalog)))
    if state.build() is None:
        raise HarnessInputError(f"--state {state_dir}: no almanac build there")
    try:
        count = state.retract(args.version, args.folder, args.probe, args.reason)
    except StateError as error:
        raise HarnessInputError(str(error)) from None
    say(f"almanac: withdrew {count} run(s) of {args.folder} on {args.version}: the next build "
        "runs them again")
    return EXIT_PASSED


def _state_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--state", default="reports/almanac/state",
                        help="the build's state: one line per finished run (default: "
                        "%(default)s)")
    parser.add_argument("--work", default="runs/almanac/work",
                        help="the report folder of every run (large; witnesses are copied "
                        "from it) (default: %(default)s)")
    parser.add_argument("--catalog", help="a module whose REPORTS replace the built-in probes")
    parser.add_argument("--from", dest="start", metavar="V", help="only the grid intervals "
                        "from the grid version at or before V on (the rest is reported as not "
                        "built)")


def add_almanac(commands: Any) -> None:
    """``almanac build|merge|retract|publish|show|at|changelog|attach-changelog``"""
    almanac = command(commands, "almanac", help="every published version of a range, every "
                      "change of every claim located to adjacent releases")
    steps = almanac.add_subparsers(dest="almanac_command", required=True)
    built = command(steps, "build", help="run the almanac's search (resumable), and publish "
                    "when it is complete",
                    epilog="exit codes: 0 complete (and published, unless sharded or "
                    "--no-publish); 1 runs still needed (run it again) or not published; 2 bad "
                    "input or a harness error; 130 interrupted (run it again)")
    built.add_argument("--client", default="claude-code",
                       help=f"client kind, one of {', '.join(CLIENT_KINDS)} (default: "
                       "%(default)s)")
    built.add_argument("--since", help="the first version (default: the first 2.x); the grid "
                       "starts here, so a build is extended only by --until")
    built.add_argument("--until", help="the last version (default: the newest)")
    built.add_argument("--grid", type=int, default=DEFAULT_GRID,
                       help="every probe on every N-th version (default: %(default)s)")
    built.add_argument("--screen-probe", default=DEFAULT_SCREEN,
                       help="the short probe run on every version, whose request shape is "
                       "the screen (default: %(default)s)")
    built.add_argument("--shard", metavar="I/N", help="search only the I-th of N runs of grid "
                       "intervals (merge the states with almanac merge)")
    built.add_argument("--max-runs", type=int, help="stop after this many suite runs (the "
                       "state keeps them; run again to go on)")
    built.add_argument("--cache-budget", type=int, default=4,
                       help="installs this build keeps at once (it removes only its own) "
                       "(default: %(default)s)")
    built.add_argument("--keep-installs", action="store_true",
                       help="keep every version it installed")
    built.add_argument("--out", default="reports",
                       help="where almanac.json and the witnesses go (default: %(default)s)")
    built.add_argument("--no-publish", action="store_true", help="do not publish when complete")
    built.add_argument("--lock", metavar="LOCKFILE", help="hold an exclusive lock on LOCKFILE during "
                       "each suite run (a machine shared with other client runs)")
    built.add_argument("--no-sandbox", action="store_true", help=NO_SANDBOX_HELP)
    built.add_argument("-j", "--jobs", type=int, help=JOBS_HELP)
    _state_options(built)
    built.set_defaults(func=cmd_almanac_build)
    merged = command(steps, "merge", help="join the states of an almanac's shards")
    merged.add_argument("shards", nargs="+", help="the shards' state folders")
    merged.add_argument("--state", required=True, help="the merged state's folder")
    merged.set_defaults(func=cmd_almanac_merge)
    retracted = command(steps, "retract", help="withdraw the runs of one report folder the "
                        "harness got wrong (kept in the state and the cost; the next build runs "
                        "them again)",
                        epilog="exit codes: 0 withdrawn; 2 bad input (no such standing run, no "
                        "reason)")
    retracted.add_argument("--version", required=True, help="the version the runs were made on")
    retracted.add_argument("--folder", required=True,
                           help="the runs' report folder as the state names it (e.g. 2.1.74/a1-3)")
    retracted.add_argument("--probe", help="only this probe's run (default: every run of the "
                           "folder, the screen too)")
    retracted.add_argument("--reason", required=True,
                           help="what the harness got wrong there (kept in the state)")
    retracted.add_argument("--state", default="reports/almanac/state",
                           help="the build's state (default: %(default)s)")
    retracted.add_argument("--catalog", help="a module whose REPORTS replace the built-in probes")
    retracted.set_defaults(func=cmd_almanac_retract)
    published = command(steps, "publish", help="write almanac.json and the witnesses from a "
                        "complete state (refused while runs are still needed)",
                        epilog="exit codes: 0 published; 1 the state is not complete; 2 bad "
                        "input")
    published.add_argument("--until", help="the last version (default: the newest screened)")
    published.add_argument("--out", default="reports", help="(default: %(default)s)")
    _state_options(published)
    published.set_defaults(func=cmd_almanac_publish)
    add_almanac_ask(steps)  # show, at
    add_almanac_changelog(steps)  # changelog, attach-changelog
