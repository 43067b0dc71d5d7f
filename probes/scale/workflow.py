"""What the shipped GitHub Actions workflows compute: ``python -m probes.scale.workflow plan``
and ``python -m probes.scale.workflow almanac-plan``.

``plan`` reads ``VERSIONS`` (comma-separated; empty: the newest ``LATEST`` published
versions), ``BASELINE`` and ``SHARDS`` from the environment and prints the job matrix as
``versions=[...]`` and ``shards=[...]`` lines for ``$GITHUB_OUTPUT``. The baseline is always
probed too, so every diff has both sides.

``almanac-plan`` (the nightly's almanac) reads ``ALMANAC`` (the published almanac.json),
``ALMANAC_STATE`` (its build state), ``CATALOG`` (a module whose ``REPORTS`` replace the
built-in probes), ``SHARDS`` and ``CLIENT`` and prints ``until=`` (the newest published
version), ``from=`` (the last version the almanac covers: the build goes on from the grid
version at or before it; the first it covers when the state needs runs before that, as after
a probe's revision went up), ``covered_from=`` (the first it covers: the published almanac
keeps its whole range) and ``shards=[...]``.

Both write their lines to the file ``--github-output`` names (a step's ``$GITHUB_OUTPUT``;
printed without it) through the one writer of step outputs
(``probes.report.github_ci``): a value that would forge another output is refused, as is an
almanac.json whose range is no pair of version names. ``summary FILE`` appends a Markdown
file loopprobe wrote (``MATRIX.md``; with ``--section NAME`` only what lies between its
``<!-- NAME: start -->`` and ``<!-- NAME: end -->`` lines) to ``--summary`` (a step's
``$GITHUB_STEP_SUMMARY``), no HTML, entity, link or image of it left to render. Bad input is
one line on stderr and exit 2.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from probes.catalog import REPORTS
from probes.clients.npm import InstallError
from probes.clients.registry import DEFAULT_KIND, client_for, parse_client_spec
from probes.core.probe import ReportSpec
from probes.core.safe_read import ReadRefused, read_text
from probes.report.github_ci import (
    append_github_outputs,
    append_summary,
    github_output_text,
    markdown_document,
)
from probes.scale.almanac_build import claims_of, revisions_of
from probes.scale.almanac_doc import read_almanac
from probes.scale.almanac_search import search
from probes.scale.almanac_state import AlmanacState
from probes.scale.bisect import order_versions

__all__ = ["almanac_plan", "main", "plan", "section"]


def plan(versions: str, latest: int, baseline: str, shards: int,
         client: str = "claude-code") -> dict[str, list[str] | list[int]]:
    chosen = [v.strip() for v in versions.split(",") if v.strip()]
    for spec in [*chosen, *([baseline] if baseline else [])]:
        parse_client_spec(spec)  # refused here as the matrix would refuse it
    if not chosen:
        kind = client_for(client)
        prefix = "" if client == DEFAULT_KIND else f"{client}@"
        chosen = [prefix + v for v in order_versions(kind.published())[-latest:]]
    if baseline and baseline not in chosen:
        chosen.insert(0, baseline)
    if shards < 1:
        raise ValueError(f"SHARDS: expected a count >= 1, found {shards}")
    return {"versions": chosen, "shards": list(range(1, shards + 1))}


def almanac_plan(almanac: Path, shards: int, client: str = "claude-code",
                 state: Path | None = None, catalog: Sequence[ReportSpec] = REPORTS
                 ) -> dict[str, str | list[int]]:
    """The nightly almanac's jobs: the newest version, where the published almanac ends
    (where it begins when ``state`` needs runs before its end)."""
    if shards < 1:
        raise ValueError(f"SHARDS: expected a count >= 1, found {shards}")
    published = order_versions(client_for(client).published())
    start = covered = ""
    if almanac.is_file() or almanac.is_symlink():
        document = read_almanac(almanac)  # refused in one line unless an almanac
        start, covered = document["range"]["last"], document["range"]["first"]
    if start and state is not None and _needs_runs_before(state, catalog, published, start):
        start = covered  # a probe changed since: its runs over the whole range again
    return {"until": published[-1], "from": start, "covered_from": covered,
            "shards": list(range(1, shards + 1))}


def _needs_runs_before(state_dir: Path, catalog: Sequence[ReportSpec],
                       published: Sequence[str], end: str) -> bool:
    """Whether the state, read with this catalog's probes (their claims and revisions),
    needs runs on the versions it covers up to ``end``."""
    state = AlmanacState(state_dir, revisions_of(catalog))
    build = state.build()
    if build is None or build.get("since") not in published or end not in published:
        return False
    versions = list(published[published.index(build["since"]):published.index(end) + 1])
    return not search(versions, claims_of(catalog), int(build["grid"]), state.cell,
                      state.screen).complete


def _catalog(name: str) -> Sequence[ReportSpec]:
    """The built-in probes, or ``REPORTS`` of the module ``name`` (as ``--catalog`` names it)."""
    if not name:
        return REPORTS
    reports = getattr(importlib.import_module(name), "REPORTS", None)
    if not isinstance(reports, tuple):
        raise ValueError(f"CATALOG {name!r}: expected a module defining REPORTS (a tuple)")
    return reports


def section(text: str, name: str) -> str:
    """The lines of ``text`` between its ``<!-- name: start -->`` and ``<!-- name: end -->``
    lines (ValueError when it has no such section)."""
    start, end = f"<!-- {name}: start -->", f"<!-- {name}: end -->"
    lines = text.split("\n")
    if start not in lines or end not in lines[lines.index(start):]:
        raise ValueError(f"expected a section between {start!r} and {end!r} lines, found none")
    first = lines.index(start) + 1
    return "\n".join(lines[first:lines.index(end, first)])


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m probes.scale.workflow",
                                     description="what the shipped workflows compute")
    steps = parser.add_subparsers(dest="step", required=True)
    for name in ("plan", "almanac-plan"):
        step = steps.add_parser(name)
        step.add_argument("--github-output", type=Path,
                          help="append the outputs to this file ($GITHUB_OUTPUT)")
    summary = steps.add_parser("summary")
    summary.add_argument("file", type=Path, help="a Markdown file loopprobe wrote (MATRIX.md)")
    summary.add_argument("--section", help="only its <!-- SECTION: start/end --> part")
    summary.add_argument("--summary", type=Path, required=True,
                         help="the job summary to append to ($GITHUB_STEP_SUMMARY)")
    return parser


def _outputs(step: str) -> dict[str, str]:
    env = os.environ
    result: dict[str, Any] = plan(
        env.get("VERSIONS", ""), int(env.get("LATEST") or 1), env.get("BASELINE", ""),
        int(env.get("SHARDS") or 1), env.get("CLIENT") or "claude-code") \
        if step == "plan" else almanac_plan(
            Path(env.get("ALMANAC") or "reports/almanac.json"),
            int(env.get("SHARDS") or 1), env.get("CLIENT") or "claude-code",
            Path(env.get("ALMANAC_STATE") or "reports/almanac/state"),
            _catalog(env.get("CATALOG", "")))
    return {key: value if isinstance(value, str) else json.dumps(value)
            for key, value in result.items()}


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv[1:])
    try:
        if args.step == "summary":
            text = read_text(args.file)
            append_summary(args.summary, markdown_document(
                section(text, args.section) if args.section else text))
        elif args.github_output is not None:
            append_github_outputs(args.github_output, _outputs(args.step))
        else:
            print(github_output_text(_outputs(args.step)), end="")
    except (ValueError, InstallError, ReadRefused, OSError) as error:
        # ValueError: ReportError, StateError, OutputRefused too, each naming its file or value
        said = f"{error.filename}: {error.strerror}" if isinstance(error, OSError) \
            else " ".join(str(error).split())
        print(f"probes.scale.workflow {args.step}: {said}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
