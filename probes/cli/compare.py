"""Files made from reports already written: ``diff``, ``render``, ``mechanisms``, ``guide``,
and their formats: ``validate``, ``schemas``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from probes.cli.common import (
    EXIT_CODES,
    EXIT_FAILED,
    EXIT_HARNESS,
    EXIT_PASSED,
    HarnessInputError,
    check_out,
    command,
    mark_output_files,
    say,
)
from probes.core.files import write_text
from probes.core.safe_read import read_json, read_text
from probes.report.diff import diff_directories, render_markdown
from probes.report.format import ReportError, load_folder
from probes.report.guide import write_guide
from probes.report.mechanism_table import render_mechanism_table, replace_section

__all__ = [
    "add_diff",
    "add_guide",
    "add_mechanisms",
    "add_render",
    "add_schemas",
    "add_validate",
    "cmd_diff",
    "cmd_guide",
    "cmd_mechanisms",
    "cmd_render",
    "cmd_schemas",
    "cmd_validate",
]


def cmd_diff(args: argparse.Namespace) -> int:
    try:
        result = diff_directories(Path(args.a), Path(args.b))
    except ReportError as error:
        print(f"loopprobe: {error}", file=sys.stderr)
        return EXIT_HARNESS
    text = json.dumps(result, indent=2, sort_keys=True) if args.json else render_markdown(result)
    if args.out:
        write_text(Path(args.out), text)
    else:
        sys.stdout.write(text)
    regressions = result.regressions
    if regressions:
        print(f"loopprobe: {len(regressions)} claim(s) regressed: "
              f"{', '.join(c['id'] for c in regressions)}", file=sys.stderr)
        return EXIT_FAILED
    errors = [c for c in result["claims"] if c["change"] == "error" and c["b"] == "error"]
    if errors:  # B could not be judged there: neither a pass nor a regression
        print(f"loopprobe: {len(errors)} claim(s) are a harness error in B: "
              f"{', '.join(c['id'] for c in errors)}", file=sys.stderr)
        return EXIT_HARNESS
    return EXIT_PASSED



def cmd_mechanisms(args: argparse.Namespace) -> int:
    target = Path(args.write) if args.write else None
    if target is not None and not target.exists() and not target.is_symlink():
        raise HarnessInputError(f"--write {target}: expected an existing file holding the "
                                "generated section (e.g. README.md), found nothing")
    folder = load_folder(Path(args.reports))
    matrix = _load_matrix(Path(args.matrix)) if args.matrix else None
    table = render_mechanism_table(folder, matrix)
    if target is not None:
        try:
            text = replace_section(read_text(target), table, target)
        except ValueError as error:  # the file lacks the section's markers
            raise HarnessInputError(f"--write {error}") from None
        write_text(target, text)
        say(f"wrote {target}")
    else:
        sys.stdout.write(table + "\n")
    return EXIT_PASSED



def _load_matrix(path: Path) -> dict[str, Any]:
    """``--matrix``: a matrix.json, or a folder holding one (as ``render`` takes)."""
    given = path
    if path.is_dir():
        path = path / "matrix.json"
    try:
        matrix = read_json(path)
    except (OSError, ValueError) as error:
        found = (f"{error.strerror}" if isinstance(error, OSError) else f"not JSON: {error}")
        raise HarnessInputError(f"--matrix {given}: expected a matrix.json (or a folder holding "
                                f"one) written by `loopprobe matrix`, but {path}: {found}") from None
    if not isinstance(matrix, dict) or matrix.get("kind", "matrix") != "matrix" \
            or not isinstance(matrix.get("claims"), list) \
            or not all(isinstance(c, dict) and isinstance(c.get("results"), dict)
                       for c in matrix["claims"]):
        shown = matrix.get("kind") if isinstance(matrix, dict) and "kind" in matrix else (
            "a report" if isinstance(matrix, dict) and "report" in matrix
            else type(matrix).__name__)
        raise HarnessInputError(f"--matrix {given}: expected a matrix.json written by "
                                f"`loopprobe matrix` (kind matrix, claims with their "
                                f"results), found {shown}")
    return matrix


def cmd_guide(args: argparse.Namespace) -> int:
    path = write_guide(Path(args.reports))
    say(f"wrote {path}")
    return 0



def cmd_render(args: argparse.Namespace) -> int:
    """One self-contained HTML page: a version folder, a matrix, or (``--diff A B``) a diff."""
    from probes.report.render import diff_page_path, render_diff, write_page
    if (args.target is None) == (args.diff is None):
        raise HarnessInputError("render: expected a report folder or matrix.json, or --diff A B")
    out = Path(args.out) if args.out else None
    try:
        if args.diff:
            a, b = (Path(d) for d in args.diff)
            path = write_text(out or diff_page_path(a, b), render_diff(a, b))
        else:
            path = write_page(Path(args.target), out)
    except ReportError as error:
        raise HarnessInputError(str(error)) from None
    say(f"wrote {path}")
    return EXIT_PASSED



def cmd_validate(args: argparse.Namespace) -> int:
    from probes.report.schemas import validate_path
    checked, problems = 0, []
    for target in args.paths:
        count, found = validate_path(Path(target))
        checked += count
        problems += found
    for problem in problems:
        print(problem)
    say(f"loopprobe: {checked} file(s) checked, {len(problems)} problem(s)")
    # a file that breaks its schema is bad input (exit 2): exit 1 says only that a claim was
    # contradicted or regressed, which CI reads as such
    return EXIT_HARNESS if problems else EXIT_PASSED



def cmd_schemas(args: argparse.Namespace) -> int:
    from probes.report.schemas import write_schemas
    out = Path(args.out or ".")  # never the installed package's own folder
    check_out(out)
    for path in write_schemas(out):
        say(f"wrote {path}")
    return 0



def add_diff(commands: Any) -> None:
    """``diff``"""
    diff = command(commands, "diff", help="what changed between two report directories "
                                            "(exit 1 when a claim regressed)", epilog=EXIT_CODES)
    diff.add_argument("a", help="reports of the version you trust")
    diff.add_argument("b", help="reports of the version to check")
    diff.add_argument("--json", action="store_true", help="machine-readable output")
    diff.add_argument("--out", help="write to this file instead of stdout")
    mark_output_files(diff, "--out")
    diff.set_defaults(func=cmd_diff)



def add_mechanisms(commands: Any) -> None:
    """``mechanisms``"""
    mechanisms = command(
        commands, "mechanisms", help="the analysis' mechanisms with each claim's verdict (README table)")
    mechanisms.add_argument("reports", help="the report folder whose verdicts are shown")
    mechanisms.add_argument("--matrix", help="matrix.json, or a folder holding one: also name "
                            "versions that differ")
    mechanisms.add_argument("--write", metavar="FILE",
                            help="replace the generated section of FILE (e.g. README.md)")
    mark_output_files(mechanisms, "--write")
    mechanisms.set_defaults(func=cmd_mechanisms)



def add_validate(commands: Any) -> None:
    """``validate``"""
    validate = command(
        commands, "validate", help="check reports, fingerprints, matrices, journals, timing, session "
                         "tables, bisect results and scenarios against their JSON Schemas; "
                         "each problem names the file, the line for journals, and the JSON "
                         "pointer",
        epilog="exit codes: 0 every file valid; 2 a file breaks its schema, is missing or is "
               "refused (bad input; never 1, which says a claim regressed)")
    validate.add_argument("paths", nargs="+", help="files, or folders searched recursively")
    validate.set_defaults(func=cmd_validate)



def add_schemas(commands: Any) -> None:
    """``schemas``"""
    schemas = command(commands, "schemas", help="write the JSON Schemas (shipped in the "
                                                  "package under probes/report/json_schemas/)")
    schemas.add_argument("--out", help="folder (default: the working directory)")
    schemas.set_defaults(func=cmd_schemas)



def add_render(commands: Any) -> None:
    """``render``"""
    render = command(
        commands, "render", help="one self-contained HTML page of a report folder (evidence.html "
        "in it), a matrix.json (matrix.html beside it) or, with --diff A B, a diff")
    render.add_argument("target", nargs="?", help="a report folder, a matrix.json or a folder "
                        "holding one")
    render.add_argument("--diff", nargs=2, metavar=("A", "B"), help="compare two report folders "
                        "(default out: diff-A-to-B.html beside B)")
    render.add_argument("--out", metavar="FILE", help="write the page here instead")
    mark_output_files(render, "--out")
    render.set_defaults(func=cmd_render)



def add_guide(commands: Any) -> None:
    """``guide``"""
    guide = command(commands, "guide", help="regenerate EVIDENCE.md for a report directory")
    guide.add_argument("reports")
    guide.set_defaults(func=cmd_guide)
