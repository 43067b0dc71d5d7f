"""The ``loopprobe`` command: one module per command or command group.

``common`` (exit codes, the one-line input error, progress, output paths), ``catalogs``
(``--catalog``, ``--report``, ``--probe``), ``suite`` (one suite run); then the commands:
``run`` (run, probes), ``matrix`` (matrix, merge), ``versions`` (versions, bisect),
``almanac`` (build, merge, retract, publish; ``almanac_ask``: show, at;
``almanac_changelog``: changelog, attach-changelog), ``sessions``, ``clients``, ``mock`` (serve, record),
``compare`` (diff, render, mechanisms, guide, validate, schemas).

May import: every package of ``probes`` (the top floor); nothing imports it.
"""

from __future__ import annotations

import argparse
import os
import sys

from probes import __version__
from probes.cases.format import CaseFileError
from probes.cli import (
    almanac,
    cases,
    clients,
    compare,
    conformance,
    matrix,
    mock,
    run,
    sessions,
    versions,
)
from probes.cli.catalogs import catalog_for, load_catalog
from probes.cli.common import (
    EXIT_CODES,
    EXIT_FAILED,
    EXIT_HARNESS,
    EXIT_INTERRUPTED,
    EXIT_PASSED,
    HarnessInputError,
    Parser,
    check_given_once,
    check_output_files,
    reporting,
)
from probes.cli.progress import Reporter, choose_mode
from probes.cli.sessions import COMMITTED_SESSION_VERSIONS
from probes.cli.suite import SuiteResult, execute_suite, run_suite
from probes.clients import InstallError
from probes.clients.registry import CLIENT_KINDS
from probes.core.safe_read import ReadRefused
from probes.gate.baseline import BaselineError
from probes.report.format import ReportError
from probes.report.github_ci import workflow_commands_stopped
from probes.sandbox.user_setup import SetupError

__all__ = [
    "COMMITTED_SESSION_VERSIONS",
    "EXIT_FAILED",
    "EXIT_HARNESS",
    "EXIT_INTERRUPTED",
    "EXIT_PASSED",
    "TRACEBACK_ENV",
    "HarnessInputError",
    "SuiteResult",
    "build_parser",
    "catalog_for",
    "execute_suite",
    "load_catalog",
    "main",
    "run_suite",
]

# the order --help lists them in: what a newcomer runs first, then comparing, then the rest
_COMMANDS = (run.add_run, cases.add_check, mock.add_serve, clients.add_clients, matrix.add_matrix,
             matrix.add_merge, conformance.add_conformance, conformance.add_explain,
             compare.add_diff, compare.add_mechanisms, versions.add_versions,
             versions.add_bisect, almanac.add_almanac, sessions.add_sessions, run.add_probes,
             compare.add_validate, compare.add_schemas, mock.add_record, compare.add_render,
             compare.add_guide)


# set, an unexpected exception escapes with its traceback instead of the one-line report
TRACEBACK_ENV = "LOOPPROBE_TRACEBACK"


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="loopprobe", description="What an agent-loop client really does, with evidence. "
        f"Client kinds: {', '.join(CLIENT_KINDS)}.", epilog=EXIT_CODES)
    parser.add_argument("--version", action="version", version=f"loopprobe {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    for add in _COMMANDS:
        add(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    # what loopprobe prints quotes the client and the case file: never a workflow command
    with workflow_commands_stopped():
        return _main(argv)


def _main(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    stream = sys.stderr if getattr(args, "json", False) else sys.stdout
    with reporting(Reporter(choose_mode(stream, quiet=getattr(args, "quiet", False)), stream)):
        try:
            check_given_once(args)
            check_output_files(args)
            return int(args.func(args))
        except (HarnessInputError, ReportError, InstallError, ReadRefused, CaseFileError,
                BaselineError, SetupError) as error:
            # InstallError: a client spec that names no client, or an install that failed;
            # ReadRefused: a file that must not be read (a pipe, a bomb, a symlink out); the
            # case file's, the baseline's and the setup folders' refusals: the user's files
            print(f"loopprobe: {error}", file=sys.stderr)
            return EXIT_HARNESS
        except Exception as error:
            # the last resort: exit 1 says a claim regressed, and an escaping exception would
            # say it too; what a command failed to foresee is a harness error, in one line
            if os.environ.get(TRACEBACK_ENV):
                raise
            said = " ".join(str(error).split())[:500]
            print(f"loopprobe: internal error (a bug in loopprobe, not a verdict): "
                  f"{type(error).__name__}: {said} (set {TRACEBACK_ENV}=1 for the traceback)",
                  file=sys.stderr)
            return EXIT_HARNESS
