"""``sessions``: sessions written by one Claude Code version, resumed and forked by another."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from probes.cli.common import (
    EXIT_HARNESS,
    JOBS_HELP,
    NO_SANDBOX_HELP,
    HarnessInputError,
    check_out,
    command,
    jobs,
    say,
)
from probes.clients import InstallError
from probes.clients.npm import cache_root
from probes.clients.specs import check_version

__all__ = ["COMMITTED_SESSION_VERSIONS", "add_sessions", "cmd_sessions"]


COMMITTED_SESSION_VERSIONS = ("2.0.77", "2.1.54", "2.1.84", "2.1.90", "2.1.91", "2.1.117",
                              "2.1.235", "2.1.268", "2.1.269", "2.1.306", "2.1.307", "2.1.332")



def cmd_sessions(args: argparse.Namespace) -> int:
    """Sessions written by one Claude Code version, resumed and forked by another."""
    from probes.clients.claude_code import ClaudeCode
    from probes.run.containment import ContainmentUnavailable, find_containment
    from probes.run.runner import run_probe
    from probes.scale.sessions import run_table
    versions = [v.strip() for v in args.clients.split(",") if v.strip()]
    if not versions:
        raise HarnessInputError(f"--clients {args.clients!r}: expected comma-separated "
                                "claude-code versions, found none")
    for version in versions:
        check_version(ClaudeCode(), version)
    try:
        containment = find_containment(args.no_sandbox)
    except ContainmentUnavailable as error:
        raise HarnessInputError(f"cannot contain the client: {error}") from None
    out = Path(args.out)
    check_out(out)
    work = cache_root() / "runs" / f"sessions-{time.strftime('%Y%m%d-%H%M%S')}"
    say(f"loopprobe: sessions across {len(versions)} versions "
         f"({len(versions) ** 2} pairs), sandboxes under {work}")
    try:
        entries = run_table(
            ClaudeCode(), versions, out, jobs=jobs(args.jobs), progress=say,
            run=lambda probe, binary: run_probe(probe, ClaudeCode(), binary, work,
                                                containment=containment, keep=False))
    except InstallError as error:
        print(f"loopprobe: {error}", file=sys.stderr)
        return EXIT_HARNESS
    say(f"  wrote {out / 'sessions.json'}, {out / 'SESSIONS.md'} and each pair's journal "
        f"under {out / 'journals'}")
    if any(e["error"] for e in entries):
        return EXIT_HARNESS
    return 1 if any("fails" in (e["resume"], e["fork"]) for e in entries) else 0



def add_sessions(commands: Any) -> None:
    """``sessions``"""
    sessions = command(
        commands, "sessions", help="resume and fork sessions written by one Claude Code version with "
                         "another: every ordered pair",
        epilog="exit codes: 0 every pair resumes and forks; 1 a pair fails; 2 a harness error")
    sessions.add_argument("--clients", default=",".join(COMMITTED_SESSION_VERSIONS),
                          help="comma-separated claude-code versions (sessions are the "
                               "CLI's own; default: the committed ones)")
    sessions.add_argument("--out", default="reports/sessions",
                          help="where sessions.json and SESSIONS.md go (default: %(default)s)")
    sessions.add_argument("--no-sandbox", action="store_true", help=NO_SANDBOX_HELP)
    sessions.add_argument("-j", "--jobs", type=int, help=JOBS_HELP)
    sessions.set_defaults(func=cmd_sessions)
