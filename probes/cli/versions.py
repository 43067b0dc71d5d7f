"""A client's published versions: ``versions`` lists them, ``bisect`` finds the first where a
claim's verdict changes."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from probes.cli.catalogs import load_catalog, select
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
    output_options,
    say,
)
from probes.cli.suite import run_suite
from probes.clients import Client, InstallError, report_folder
from probes.clients.base import ClientKey
from probes.clients.registry import CLIENT_KINDS, client_for, remove_install
from probes.clients.specs import check_version
from probes.core.changes import CHANGE_KINDS, release_change
from probes.core.files import write_json
from probes.core.probe import ReportSpec
from probes.core.safe_read import read_json
from probes.report.diff import diff_directories
from probes.report.format import load_report
from probes.scale.bisect import (
    ANY,
    SKIPPED_VERDICTS,
    TRANSITION_KINDS,
    BisectError,
    bisect_versions,
    order_versions,
    versions_between,
)

__all__ = ["add_bisect", "add_versions", "claim_verdict", "cmd_bisect", "cmd_versions"]


def cmd_versions(args: argparse.Namespace) -> int:
    if args.latest is not None and args.latest < 1:
        # versions[-0:] would be every version
        raise HarnessInputError(f"--latest: expected a count >= 1, found {args.latest}")
    try:
        client = client_for(args.client)
        if args.since:
            check_version(client, args.since, exact=True)
        versions = order_versions(client.published())
    except (InstallError, BisectError) as error:
        raise HarnessInputError(str(error)) from None
    if args.since:
        if args.since not in versions:
            raise HarnessInputError(f"--since {args.since}: not a published version of "
                                    f"{client.name}")
        versions = versions[versions.index(args.since):]
    if args.latest is not None:
        versions = versions[-args.latest:]
    if args.json:
        print(json.dumps({"client": client.name, "versions": versions}))
    else:
        for version in versions:
            say(version)
    return EXIT_PASSED



def claim_verdict(folder: Path, claims: list[str]) -> str:
    """The verdict of ``claims`` in a version's reports: one claim's status, or for several
    (a whole probe) each ``id=status``; ``missing`` when a report lacks one."""
    found: dict[str, str] = {}
    for report in sorted(folder.glob("*.json")):
        data = read_json(report, within=folder)
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
    try:
        client = client_for(args.client)
        for version in (args.good, args.bad):
            check_version(client, version, exact=True)
    except InstallError as error:
        raise HarnessInputError(str(error)) from None
    needed, claims = _followed(load_catalog(args.catalog), args.claim, args.probe)
    try:
        versions = versions_between(client.published(), args.good, args.bad)
    except (InstallError, BisectError) as error:
        raise HarnessInputError(str(error)) from None
    kind = args.kind
    if order_versions([args.good, args.bad])[0] != args.good:
        versions.reverse()  # the search runs from the trusted end
    out = Path(args.out)
    check_out(out)
    verdict_at = _verdict_at(args, client, needed, claims, out)
    target = args.claim or f"probe-{args.probe}"
    say(f"bisect {target} on {client.name}: {len(versions)} versions from {args.good} "
         f"(good) to {args.bad}, following {kind if kind == ANY else f'a {kind} transition'}")
    try:
        result = bisect_versions(versions, verdict_at, kind)
    except BisectError as error:
        raise HarnessInputError(str(error)) from None
    summary: dict[str, Any] = {"client": client.name, "target": target, "claims": claims,
                               **result.to_json()}
    if result.first_changed:
        summary.update(_where_it_changed(out, client, result.last_same, result.first_changed,
                                         needed, claims))
        if len(claims) == 1:  # named as the almanac names it: from the checks that flipped
            named = release_change(result.tested[result.last_same], str(result.changed_verdict),
                                   [{"id": c["id"], "before": _passed(c["a"]),
                                     "after": _passed(c["b"])}
                                    for c in summary["flipped_checks"]])
            summary["change"] = named
            summary["transition"] = CHANGE_KINDS.get(named or "") or summary["transition"]
            result.change, result.transition = summary["change"], summary["transition"]
        say(f"bisect: {target} changed in {result.first_changed}, a {result.transition} "
             f"transition ({result.change}: {result.tested[result.last_same]} on "
             f"{result.last_same} -> {result.changed_verdict})")
        for check in summary["flipped_checks"]:
            say(f"  flipped: {check.get('id')}")
    else:
        say(f"bisect: the change is in one of {', '.join(result.candidates)} (skipped: "
             f"{', '.join(result.skipped)})")
    write_json(out / f"bisect-{target}.json", summary)
    say(f"wrote {out / f'bisect-{target}.json'}")
    code = EXIT_PASSED if result.first_changed else EXIT_FAILED
    if args.json:
        print(json.dumps({"command": "bisect", "exit_code": code,
                          "result": str(out / f"bisect-{target}.json"), **summary}, indent=2))
    return code


def _followed(catalog: tuple[ReportSpec, ...], claim: str | None,
              probe: str | None) -> tuple[tuple[ReportSpec, ...], list[str]]:
    """The reports a bisect runs on each version (only the probes making ``claim``, or the
    probe named) and the claims whose verdict it follows."""
    if bool(claim) == bool(probe):
        raise HarnessInputError("expected exactly one of --claim ID or --probe NAME")
    if not claim:
        needed = tuple(select(catalog, probe, None))
        return needed, [c.id for spec in needed for p in spec.probes for c in p.claims]
    needed = tuple(ReportSpec(spec.name, spec.title, chosen, spec.summary)
                   for spec in catalog if (chosen := tuple(
                       p for p in spec.probes if claim in {c.id for c in p.claims})))
    if not needed:
        known = sorted({c.id for spec in catalog for p in spec.probes for c in p.claims})
        raise HarnessInputError(f"--claim {claim!r}: no probe makes it; expected one "
                                f"of {', '.join(known)}")
    return needed, [claim]


def _verdict_at(args: argparse.Namespace, client: Client, needed: tuple[ReportSpec, ...],
                claims: list[str], out: Path) -> Callable[[str], str]:
    """How a version is probed: the reports run into its folder, the claims' verdict read
    back, and its install removed after unless it was there before, is an end of the range
    or ``--keep-installs`` is given."""
    installed_before = {b.version for b in client.installed()}

    def verdict_at(version: str) -> str:
        folder = out / report_folder(ClientKey(client.name, version))
        code = run_suite((client, version), folder, catalog=needed,
                         no_sandbox=args.no_sandbox, jobs=jobs(args.jobs))
        found = "error" if code == EXIT_HARNESS and not any(folder.glob("*.json")) \
            else claim_verdict(folder, claims)
        say(f"bisect: {version} -> {found}")
        if version not in installed_before and version not in (args.good, args.bad) \
                and not args.keep_installs:
            remove_install(client, version)
        return found

    return verdict_at


def _passed(passed: bool | None) -> str:
    return "missing" if passed is None else "passed" if passed else "failed"


def _where_it_changed(out: Path, client: Client, last_same: str, first_changed: str,
                      needed: tuple[ReportSpec, ...], claims: list[str]) -> dict[str, Any]:
    """The report folders on both sides of the change, and the checks of the followed claims
    that flipped between them."""
    same = out / report_folder(ClientKey(client.name, last_same))
    changed = out / report_folder(ClientKey(client.name, first_changed))
    claim_checks = {check["id"] for spec in needed
                    if (changed / f"{spec.name}.json").is_file()
                    for check in load_report(changed / f"{spec.name}.json",
                                             within=changed)["checks"]
                    if check.get("claim") in claims}
    flipped = [check for check in diff_directories(same, changed)["checks_flipped"]
               if check["id"] in claim_checks]
    return {"reports": {"last_same": str(same), "first_changed": str(changed)},
            "flipped_checks": flipped}



def add_versions(commands: Any) -> None:
    """``versions``"""
    versions = command(commands, "versions", help="a client's published versions, oldest "
                                   "first (npm for the CLI, PyPI for the Agent SDK)")
    versions.add_argument("client", nargs="?", default="claude-code",
                          help=f"client kind, one of {', '.join(CLIENT_KINDS)} (default: "
                          "%(default)s)")
    versions.add_argument("--since", help="from this version on")
    versions.add_argument("--latest", type=int, help="only the newest N")
    versions.add_argument("--json", action="store_true", help="machine-readable output")
    versions.set_defaults(func=cmd_versions)



def add_bisect(commands: Any) -> None:
    """``bisect``"""
    bisect = command(
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
    bisect.add_argument("--kind", choices=[*TRANSITION_KINDS, ANY], default="behaviour",
                        help="what change to date: behaviour (confirmed or not observable <-> "
                        "contradicted or differs from baseline), presence (absent -> "
                        "present: introduced in), "
                        "reach (not reached -> reached), reporting (not observable -> "
                        "observed) or any change of verdict; versions whose verdict says "
                        "nothing of that kind are skipped (default: %(default)s)")
    bisect.add_argument("--out", default="runs/bisect", help="report folders and the "
                        "bisect-<target>.json result (default: %(default)s)")
    bisect.add_argument("--catalog", help="a module whose REPORTS replace the built-in probes")
    bisect.add_argument("--keep-installs", action="store_true",
                        help="keep the versions it installed (default: remove them after "
                        "probing, ~330 MB each)")
    bisect.add_argument("--no-sandbox", action="store_true", help=NO_SANDBOX_HELP)
    bisect.add_argument("-j", "--jobs", type=int, help=JOBS_HELP)
    output_options(bisect)
    bisect.set_defaults(func=cmd_bisect)
