"""``almanac show`` and ``almanac at``: the almanac asked in one command.

``show <claim id or words>`` prints each matching claim's segments over the releases and
each change with its kind, the checks that flipped with what both sides observed (from the
witnesses), its premises when it carries them, the changelog entries of its interval with
what the verdicts say of them, and the witness paths. ``at <version>`` prints every claim's
verdict on one release, probed there or held inside a segment. ``--json`` for machines.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from probes.cli.common import EXIT_PASSED, HarnessInputError, command
from probes.scale.almanac_changelog import attach_changelog
from probes.scale.almanac_doc import read_almanac
from probes.scale.almanac_query import (
    QueryError,
    claim_story,
    close_claims,
    match_claims,
    verdicts_at,
)
from probes.scale.changelog_map import MappingError

__all__ = ["add_almanac_ask", "cmd_almanac_at", "cmd_almanac_show", "plain"]

_VALUE_CHARS = 160  # an observed value in the text form; --json has it whole


def _load(path_text: str) -> tuple[dict[str, Any], Path]:
    path = Path(path_text)
    if not path.is_file():
        raise HarnessInputError(f"--almanac {path}: expected an almanac.json, but there is no "
                                "such file")
    document = read_almanac(path, within=path.parent)
    if "changelog" not in document:  # published before the changelog's join: joined here
        try:
            document = attach_changelog(document, path.parent)
        except MappingError as error:
            raise HarnessInputError(str(error)) from None
    return document, path.parent


def plain(text: Any) -> str:
    """Untrusted text (changelog, statements, client output) as one terminal line: runs of
    whitespace one space, other control characters shown escaped, never sent raw."""
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1]
                   for ch in " ".join(str(text).split()))


def _emit(text: str) -> None:
    """``text`` on stdout; a reader that left early (``| head``) ends the output quietly."""
    try:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _value(value: Any) -> str:
    text = " ".join(json.dumps(value, sort_keys=True, default=str).split())
    return text if len(text) <= _VALUE_CHARS else text[:_VALUE_CHARS - 1] + "…"


def _entry_line(entry: dict[str, Any]) -> str:
    if "status" in entry:
        said = entry["status"]
        if "releases_away" in entry:
            said += f", {entry['releases_away']} release(s) away"
        said += f"; {plain(', '.join(entry['claims']))}"
    elif "not_probed" in entry:
        said = f"not probed: {plain(entry['not_probed'])}"
    elif "claims" in entry:
        said = f"outside the range; {plain(', '.join(entry['claims']))}"
    else:
        said = "not reviewed yet"
    return f"{plain(entry['release'])} [{said}] {plain(entry['text'])}"


def _story_text(story: dict[str, Any], root: Path) -> list[str]:
    lines = [f"{plain(story['id'])}  ({plain(story['area'])}; probe {plain(story['probe'])})",
             f"  {plain(story['statement'])}", "  segments:"]
    for s in story["segments"]:
        span = s["first"] if s["first"] == s["last"] else f"{s['first']}–{s['last']}"
        lines.append(f"    {span:<20} {s['verdict']:<22} [{len(s['probed'])} probed]")
    if not story["changes"]:
        lines.append("  changes: none over the range")
    for c in story["changes"]:
        where = (f"{c['before']} → {c['after']}" if c["located"] else
                 f"somewhere in {c['before']}–{c['after']} (not located)")
        lines.append(f"  change {where}: {c.get('kind') or 'change'}: {c.get('change')} "
                     f"({c['from']} → {c['to']})" + (", re-verified" if c.get("verified")
                                                     else ""))
        for f in c["flipped_checks"]:
            lines.append(f"    flipped {plain(f['id'])}: {plain(f['before'])} → "
                         f"{plain(f['after'])}")
            for side in ("before", "after"):
                values = f["values"][side]
                if values is not None:
                    lines.append(f"      {side:<6} expected {_value(values.get('expected'))}; "
                                 f"observed {_value(values.get('observed'))}")
        for premise in c.get("premises", []):
            lines.append(f"    premise: {_value(premise)}")
        for entry in c.get("changelog", []):
            lines.append(f"    changelog {_entry_line(entry)}")
        paths = [str(root / w) for w in (c["witnesses"].get("before"),
                                         c["witnesses"].get("after")) if w]
        if paths:
            lines.append(f"    witnesses: {', '.join(paths)}")
    for entry in story["changelog_elsewhere"]:
        lines.append(f"  changelog elsewhere {_entry_line(entry)}")
    return lines


def cmd_almanac_show(args: argparse.Namespace) -> int:
    document, root = _load(args.almanac)
    query = " ".join(args.query)
    try:
        claims = match_claims(document, query)
    except QueryError as error:
        raise HarnessInputError(f"almanac show: {error}") from None
    if not claims:
        close = close_claims(document, query)
        raise HarnessInputError(f"almanac show: no claim matches {query!r} (its id, statement, "
                                "report, mechanism or mapped changelog entries)"
                                + (f"; close: {', '.join(close)}" if close else ""))
    stories = [claim_story(document, claim, root) for claim in claims]
    if args.json:
        _emit(json.dumps({"almanac": args.almanac, "query": query, "claims": stories},
                         indent=2, sort_keys=True, default=str))
        return EXIT_PASSED
    out: list[str] = []
    for story in stories:
        out += [*_story_text(story, root), ""]
    _emit("\n".join(out).rstrip("\n"))
    return EXIT_PASSED


def cmd_almanac_at(args: argparse.Namespace) -> int:
    document, _ = _load(args.almanac)
    try:
        found = verdicts_at(document, args.version)
    except QueryError as error:
        raise HarnessInputError(f"almanac at {error}") from None
    if args.json:
        _emit(json.dumps(found, indent=2, sort_keys=True))
        return EXIT_PASSED
    probed = sum(1 for row in found["claims"] if row["probed"])
    lines = [f"{found['version']}: {probed} of {len(found['claims'])} claim(s) probed on it, "
             "the rest held inside a segment"
             + (f"; witness {found['witness']}" if found["witness"] else "")]
    for row in found["claims"]:
        if row["probed"]:
            how = "probed here"
        elif "segment" in row:
            how = (f"held in {row['segment'][0]}–{row['segment'][1]}, probed on "
                   f"{', '.join(row['held_between']) or 'none near'}")
        else:
            how = "no segment holds it"
        lines.append(f"  {plain(row['id']):<48} {row['verdict']:<22} {how}")
    _emit("\n".join(lines))
    return EXIT_PASSED


def add_almanac_ask(steps: Any) -> None:
    """``almanac show`` and ``almanac at``."""
    shown = command(steps, "show", help="a claim's story over the releases: segments, each "
                    "change's kind, flipped checks with observed values on both sides, "
                    "premises, changelog entries, witnesses",
                    epilog="exit codes: 0 shown; 2 bad input (no claim matches: the close ids "
                    "are named; an unreadable almanac)")
    shown.add_argument("query", nargs="+", help="a claim id (probe. may be left out) or words, "
                       "each matched against claim ids, statements, reports, mechanisms and "
                       "the changelog entries mapped to a claim (e.g. /goal, list_changed, "
                       "max budget)")
    shown.add_argument("--almanac", default="reports/almanac.json",
                       help="(default: %(default)s)")
    shown.add_argument("--json", action="store_true", help="the stories as JSON on stdout")
    shown.set_defaults(func=cmd_almanac_show)
    at = command(steps, "at", help="every claim's verdict on one release, probed there or "
                 "held inside a segment",
                 epilog="exit codes: 0 shown; 2 bad input (a version outside the range: the "
                 "nearest are named)")
    at.add_argument("version", help="a version of the almanac's range (e.g. 2.1.90)")
    at.add_argument("--almanac", default="reports/almanac.json", help="(default: %(default)s)")
    at.add_argument("--json", action="store_true", help="the verdicts as JSON on stdout")
    at.set_defaults(func=cmd_almanac_at)
