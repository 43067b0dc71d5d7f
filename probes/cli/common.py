"""What every command shares: exit codes, the one-line input error, where progress goes,
the checks of output paths, and the help texts several commands repeat."""

from __future__ import annotations

import argparse
import difflib
import tempfile
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from probes.cli.progress import Reporter
from probes.clients.registry import CLIENT_KINDS, DEFAULT_KIND, PLUGINS_ENV
from probes.scale.schedule import default_jobs

__all__ = [
    "CLIENT_HELP",
    "COMPRESS_HELP",
    "EXIT_CODES",
    "EXIT_DONE",
    "EXIT_FAILED",
    "EXIT_HARNESS",
    "EXIT_INTERRUPTED",
    "EXIT_PASSED",
    "JOBS_HELP",
    "NO_SANDBOX_HELP",
    "HarnessInputError",
    "Parser",
    "check_given_once",
    "check_out",
    "check_out_file",
    "check_output_files",
    "command",
    "detail",
    "did_you_mean",
    "jobs",
    "mark_output_files",
    "output_options",
    "reporting",
    "say",
    "task",
    "worst",
]

EXIT_PASSED, EXIT_FAILED, EXIT_HARNESS, EXIT_INTERRUPTED = 0, 1, 2, 130

COMPRESS_HELP = ("write each journal gzipped (<report>.journal.jsonl.gz, reproducible): about "
                 "a quarter of the size, for evidence kept for many versions")
JOBS_HELP = ("probes run at once, each in its own sandbox and mock (default: this machine's "
             "cores); the reports are the same as with -j 1")
NO_SANDBOX_HELP = ("run the client on this host, uncontained (no namespaces): only where "
                   "bubblewrap cannot start; the reports record it")
CLIENT_HELP = ("the client, KIND@VERSION with KIND one of: " + ", ".join(CLIENT_KINDS)
               + f" (plugins: ${PLUGINS_ENV}); a bare VERSION is {DEFAULT_KIND}; VERSION may "
               "be latest (resolved to the version it names, which the reports carry)")
EXIT_CODES = ("exit codes: 0 no claim contradicted (each confirmed, absent, not reached, not "
              "observable or not applicable); 1 a claim contradicted or differing from its "
              "baseline (diff: regressed); 2 bad input or a harness error (said in one line on "
              "stderr; diff: a claim is an error in B); 130 interrupted (what was gathered is "
              "written, marked incomplete)")
EXIT_DONE = "exit codes: 0 done; 2 bad input or a harness error (said in one line on stderr)"


class HarnessInputError(ValueError):
    """What the user asked for cannot be run; said in one line before any probe runs (exit 2)."""


# where progress goes; main() chooses it from the terminal, --quiet and --json
_reporter = Reporter()


@contextmanager
def reporting(reporter: Reporter) -> Iterator[None]:
    """Progress of the commands run inside goes to ``reporter``."""
    global _reporter
    _reporter = reporter
    try:
        yield
    finally:
        _reporter = Reporter()


def say(message: str) -> None:
    _reporter.say(message)


def detail(message: str) -> None:
    _reporter.detail(message)


def task(description: str, total: int | None) -> AbstractContextManager[Any]:
    return _reporter.task(description, total)


def did_you_mean(given: str | None, known: list[str]) -> str:
    close = difflib.get_close_matches(given, known, n=1, cutoff=0.6) if given else []
    return f" (did you mean {close[0]!r}?)" if close else ""


def check_out(out: Path, flag: str = "--out") -> None:
    """Make ``out`` a directory this process can write into, or say why it cannot."""
    _no_nul(out, flag)
    if out.exists() and not out.is_dir():
        raise HarnessInputError(f"{flag} {out}: expected a directory, found a file")
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as error:
        raise HarnessInputError(f"{flag} {out}: expected a writable directory, but "
                                f"{error.strerror or error}") from None


def _no_nul(path: Path, flag: str) -> None:
    if "\0" in str(path):  # no file can have it: every call would raise ValueError
        raise HarnessInputError(f"{flag} {str(path)!r}: expected a path, found a NUL byte in it")


def check_out_file(path: Path, flag: str) -> None:
    """Say in one line why ``path`` cannot be written, before any work: the writers replace
    the file by a temporary one made beside it, so its folder must take a new file."""
    _no_nul(path, flag)
    if path.is_dir():
        raise HarnessInputError(f"{flag} {path}: expected a file to write, found a directory")
    folder = path.parent
    if not folder.exists():
        raise HarnessInputError(f"{flag} {path}: expected a file in an existing folder, but "
                                f"{folder} does not exist")
    if not folder.is_dir():
        raise HarnessInputError(f"{flag} {path}: expected a file in a folder, but {folder} is "
                                "not a folder")
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as error:
        raise HarnessInputError(f"{flag} {path}: expected a file in a writable folder, but "
                                f"no file can be made in {folder}: {error.strerror or error}"
                                ) from None


_OUTPUT_FILES = "_output_files"


def mark_output_files(parser: argparse.ArgumentParser, *flags: str) -> None:
    """``flags`` of ``parser`` name a file to write: ``check_output_files`` checks them before
    the command starts (also those added by others, e.g. ``serve --journal``)."""
    by_flag = {flag: action for action in parser._actions for flag in action.option_strings}
    marked = tuple(parser.get_default(_OUTPUT_FILES) or ())
    parser.set_defaults(**{_OUTPUT_FILES: (*marked, *((by_flag[f].dest, f) for f in flags))})


def check_output_files(args: argparse.Namespace) -> None:
    for dest, flag in getattr(args, _OUTPUT_FILES, ()):
        if getattr(args, dest, None):
            check_out_file(Path(getattr(args, dest)), flag)


_REPEATED = "_repeated"


class _StoreOnce(argparse._StoreAction):
    """A single-value option: given twice, the command would silently take the last, so the
    repeat is noted and refused in one line after parsing (argparse's own error would print
    the whole usage)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        given = namespace.__dict__.setdefault("_given", {})
        if self.dest in given and option_string is not None:
            namespace.__dict__.setdefault(_REPEATED, []).append(
                (parser.prog.partition(" ")[2], option_string, given[self.dest], values))
        given.setdefault(self.dest, values)
        super().__call__(parser, namespace, values, option_string)


class Parser(argparse.ArgumentParser):
    """``loopprobe``'s parsers: every plain option (``store``) takes one value, once."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.register("action", None, _StoreOnce)
        self.register("action", "store", _StoreOnce)


def check_given_once(args: argparse.Namespace) -> None:
    for prog, flag, first, again in getattr(args, _REPEATED, ())[:1]:
        raise HarnessInputError(f"{prog} {flag}: expected once (it takes one value), given "
                                f"twice: {first!r}, then {again!r}")


def jobs(value: int | None) -> int:
    if value is None:
        return default_jobs()
    if value < 1:
        raise HarnessInputError(f"-j/--jobs: expected a number of probes at once >= 1, "
                                f"found {value}")
    return value


def worst(codes: list[int]) -> int:
    if EXIT_HARNESS in codes:
        return EXIT_HARNESS
    return EXIT_FAILED if EXIT_FAILED in codes else EXIT_PASSED


def command(commands: Any, name: str, help: str, **options: Any) -> argparse.ArgumentParser:
    """A subcommand whose --help says what it does and how it exits."""
    parser: argparse.ArgumentParser = commands.add_parser(
        name, help=help, description=help, epilog=options.pop("epilog", EXIT_DONE), **options)
    return parser


def output_options(parser: argparse.ArgumentParser, *, junit: bool = False) -> None:
    parser.add_argument("--json", action="store_true", help="print one machine-readable "
                        "summary on stdout (progress goes to stderr)")
    parser.add_argument("-q", "--quiet", action="store_true", help="only what was written, "
                        "failures and the result (no per-probe lines, no live progress)")
    if junit:
        parser.add_argument("--junit", metavar="FILE", help="also write a JUnit XML file: "
                            "one test case per claim (contradicted: failure; error: error; "
                            "not observable / not applicable: skipped)")
        mark_output_files(parser, "--junit")
