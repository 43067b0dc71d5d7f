"""``conformance``: the generic agent-loop catalog on many clients, as one scored table;
``explain``: one claim on one client as a Markdown bug report."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from probes.catalog.agent_loop import REPORTS as AGENT_LOOP
from probes.cli.common import (
    CLIENT_HELP,
    EXIT_CODES,
    EXIT_HARNESS,
    JOBS_HELP,
    NO_SANDBOX_HELP,
    HarnessInputError,
    check_out,
    command,
    jobs,
    say,
    task,
)
from probes.cli.suite import run_suite
from probes.clients import parse_client_spec, report_folder
from probes.clients.base import ClientKey
from probes.core.files import write_json, write_text
from probes.gate.baseline import BaselineError, load_baseline
from probes.gate.conformance import (
    CONFORMANCE_FILE,
    CONFORMANCE_MD,
    CONFORMANCE_SUBDIR,
    build_conformance,
    render_conformance,
)
from probes.report.format import ReportError

__all__ = ["BASELINE_FILE", "DEFAULT_CLIENTS", "add_conformance", "add_explain", "cmd_conformance",
           "cmd_explain"]

BASELINE_FILE = "conformance-baseline.yaml"  # read from OUT when --baseline is not given
# the clients and versions the committed table holds: the oldest and newest of each kind
# that can run the generic catalog (each kind's own versions, see docs/conformance.md)
DEFAULT_CLIENTS = ("claude-code@2.0.77", "claude-code@2.1.332",
                   "claude-agent-sdk@0.2.140", "claude-agent-sdk@0.2.190",
                   "claude-agent-sdk-ts@0.2.90", "claude-agent-sdk-ts@0.3.337",
                   "anthropic-tool-runner@2.0.0", "anthropic-tool-runner@2.16.0",
                   "anthropic-ts-tool-runner@1.0.0", "anthropic-ts-tool-runner@1.17.0",
                   "vercel-ai@5.0.277", "vercel-ai@7.0.185",
                   "pydantic-ai@2.68.0", "pydantic-ai@2.78.0",
                   "langgraph@1.1.10", "langgraph@1.2.24",
                   "opencode@1.18.3", "opencode@1.18.33")


def _keys(given: str | None) -> list[ClientKey]:
    specs = [s.strip() for s in (given.split(",") if given else DEFAULT_CLIENTS) if s.strip()]
    if not specs:
        raise HarnessInputError(f"--clients {given!r}: expected comma-separated KIND@VERSION, "
                                "found none")
    keys = []
    for spec in specs:
        client, version = parse_client_spec(spec)
        keys.append(ClientKey(client.name, version))
    return keys


def cmd_conformance(args: argparse.Namespace) -> int:
    out = Path(args.out)
    check_out(out)
    keys = _keys(args.clients)
    baseline = None
    given = Path(args.baseline) if args.baseline else out / BASELINE_FILE
    if args.baseline or given.is_file():
        try:
            baseline = load_baseline(given)
        except BaselineError as error:
            raise HarnessInputError(f"--baseline {error}") from None
    folders = [out / CONFORMANCE_SUBDIR / report_folder(key) for key in keys]
    if not args.skip_run:
        with task("clients", len(keys)) as bar:
            for key, folder in zip(keys, folders, strict=True):
                run_suite(key.label, folder, catalog=AGENT_LOOP, jobs=jobs(args.jobs),
                          no_sandbox=args.no_sandbox)
                bar.advance()
    missing = [str(f) for f in folders if not f.is_dir()]
    if missing:
        raise HarnessInputError(f"--skip-run: no report folder {', '.join(missing)}; run "
                                "without --skip-run first")
    try:
        table = build_conformance(folders, baseline)
    except (ReportError, ValueError) as error:
        raise HarnessInputError(str(error)) from None
    write_json(out / CONFORMANCE_FILE, table)
    write_text(out / CONFORMANCE_MD, render_conformance(table))
    from probes.report.render import CONFORMANCE_PAGE, render_conformance_page
    write_text(out / CONFORMANCE_PAGE, render_conformance_page(out / CONFORMANCE_FILE))
    for client in table["clients"]:
        score = "—" if client["score"] is None else f"{client['score'] * 100:.0f} %"
        say(f"  {client['label']:<36} {score:>6} ({client['confirmed']}/"
            f"{client['applicable']}) {client['tier'] or ''}")
    say(f"wrote {out / CONFORMANCE_MD}, {out / CONFORMANCE_FILE}, {out / CONFORMANCE_PAGE}")
    for row in table["gate"]:
        if row["outcome"] in ("failed", "stale"):
            say(f"  {row['outcome']}: {row['claim']} on {row['client']} ({row['verdict']})")
    return table["exit_code"]


def add_conformance(commands: Any) -> None:
    parser = command(
        commands, "conformance",
        "Run the generic agent-loop catalog on each client version and write the conformance "
        "table: OUT/CONFORMANCE.md, OUT/conformance.json, OUT/conformance.html, the reports "
        "in OUT/conformance/<kind>-<version>/. Exit 0: every claim confirmed or listed in the "
        "baseline; 1: an unlisted failure or a stale baseline entry; 2: nothing judged.",
        epilog=EXIT_CODES)
    parser.add_argument("--out", required=True, help="the folder to write (e.g. reports)")
    parser.add_argument("--clients", help="comma-separated KIND@VERSION (default: "
                        + ", ".join(DEFAULT_CLIENTS) + "). " + CLIENT_HELP)
    parser.add_argument("--baseline", metavar="YAML", help="the known failures per client "
                        "kind (loopprobe: baseline/1; case: the kind, expectation: the claim); "
                        f"default: OUT/{BASELINE_FILE} if there is one")
    parser.add_argument("--skip-run", action="store_true", help="tabulate the report folders "
                        "already in OUT/conformance, run nothing")
    parser.add_argument("-j", "--jobs", type=int, help=JOBS_HELP)
    parser.add_argument("--no-sandbox", action="store_true", help=NO_SANDBOX_HELP)
    parser.set_defaults(func=cmd_conformance)


def cmd_explain(args: argparse.Namespace) -> int:
    from probes.report.explain import explain_claim
    client, version = parse_client_spec(args.client)
    folder = Path(args.reports) / CONFORMANCE_SUBDIR / report_folder(ClientKey(client.name,
                                                                              version))
    if args.folder:
        folder = Path(args.folder)
    if not folder.is_dir():
        raise HarnessInputError(f"--client {args.client}: no report folder {folder} (run "
                                f"loopprobe conformance --clients {args.client} --out "
                                f"{args.reports})")
    try:
        sys.stdout.write(explain_claim(folder, args.claim))
    except ReportError as error:
        print(f"loopprobe: {error}", file=sys.stderr)
        return EXIT_HARNESS
    return 0


def add_explain(commands: Any) -> None:
    parser = command(commands, "explain", "Print one claim's verdict on one client version as "
                     "a self-contained Markdown bug report: the client and its SHA-256, the "
                     "expected and observed values, the scripted exchange, the request "
                     "bodies, the command that reproduces it.")
    parser.add_argument("claim", help="a claim id, e.g. loop.pause-turn-continue")
    parser.add_argument("--client", required=True, help="KIND@VERSION. " + CLIENT_HELP)
    parser.add_argument("--reports", default="reports", help="the folder `loopprobe "
                        "conformance --out` wrote (default: reports)")
    parser.add_argument("--folder", help="a report folder to read instead (any `loopprobe run` "
                        "output holding the claim)")
    parser.set_defaults(func=cmd_explain)
