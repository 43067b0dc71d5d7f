"""``almanac changelog`` and ``almanac attach-changelog``: the public changelog as a witness.

``changelog --changelog PATH`` reads a newer CHANGELOG.md against the reviewed mapping
(``reports/changelog/<client>.yaml``): every reviewed entry still in it is kept, new loop
entries are added unreviewed, and what is unreviewed is printed (exit 1 while any is, so the
nightly job flags it); ``--write`` writes the updated mapping. ``attach-changelog`` joins the
mapping into an existing ``almanac.json`` and renders its page again, without a rebuild.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from probes.catalog import REPORTS
from probes.cli.almanac_ask import plain
from probes.cli.common import EXIT_FAILED, EXIT_PASSED, HarnessInputError, command, say
from probes.core.files import write_json, write_text
from probes.core.safe_read import ReadRefused, read_bytes
from probes.report.render import ALMANAC_PAGE, render_almanac_page
from probes.scale.almanac_changelog import with_changelog
from probes.scale.almanac_doc import read_almanac
from probes.scale.changelog import ChangelogError, parse_changelog
from probes.scale.changelog_map import (
    MappingError,
    claim_ids_of,
    entry_key,
    load_mapping,
    mapping_path,
    mapping_text,
    unmapped,
    update_mapping,
)

__all__ = ["add_almanac_changelog", "cmd_almanac_attach_changelog", "cmd_almanac_changelog"]

_MAX_CHANGELOG = 16 << 20  # Claude Code's is about 600 KB


def _mapping(path: Path, *, missing_ok: bool = False) -> dict[str, Any] | None:
    if missing_ok and not path.exists():
        return None
    try:
        return load_mapping(path, claim_ids_of(REPORTS))
    except MappingError as error:
        raise HarnessInputError(str(error)) from None


def cmd_almanac_changelog(args: argparse.Namespace) -> int:
    path = Path(args.mapping or mapping_path(Path("reports"), args.client))
    mapping = _mapping(path, missing_ok=True)
    source_path = Path(args.changelog)
    try:
        text = read_bytes(source_path, limit=_MAX_CHANGELOG).decode("utf-8")
        releases = parse_changelog(text, str(source_path))
    except FileNotFoundError:
        raise HarnessInputError(f"--changelog {source_path}: expected a CHANGELOG.md, but there "
                                "is no such file") from None
    except UnicodeDecodeError as error:
        raise HarnessInputError(f"--changelog {source_path}: expected UTF-8 text, found a byte "
                                f"it cannot decode at {error.start}") from None
    except (ChangelogError, ReadRefused, OSError) as error:
        raise HarnessInputError(str(error)) from None
    before = (mapping or {}).get("source", {})
    commit = args.commit or before.get("commit")
    if args.write and not commit:
        raise HarnessInputError("--write: expected --commit SHA (the changelog's commit), "
                                "found none and no earlier mapping to keep it from")
    if args.commit and not re.fullmatch(r"[0-9a-f]{40}", args.commit):
        raise HarnessInputError(f"--commit: expected a commit's 40 hex digits, found "
                                f"{args.commit[:60]!r}")
    update = update_mapping(mapping, releases, client=args.client, source={
        "repository": args.repository or before.get("repository", "anthropics/claude-code"),
        "path": before.get("path", "CHANGELOG.md"), "commit": commit or "0" * 40})
    waiting = unmapped(update.mapping)
    say(f"almanac changelog: {len(releases)} release(s) to {releases[0].version}, "
        f"{len(update.mapping['entries'])} loop entr(ies): "
        f"{len(update.mapping['entries']) - len(waiting)} reviewed, {len(update.added)} new, "
        f"{len(waiting)} not reviewed yet, {len(update.dropped)} reviewed entr(ies) no longer "
        "in the changelog")
    for entry in update.dropped:
        say(f"  gone: {entry['release']} {plain(entry['text'])[:120]}")
    for entry in waiting:
        say(f"  not reviewed: {entry['release']} [{', '.join(entry['topics'])}] "
            f"{plain(entry['text'])}")
        was = update.was.get(entry_key(entry))
        if was is not None:
            said = (f"claims {', '.join(was['claims'])}" if "claims" in was
                    else f"not probed: {plain(was['not_probed'])}")
            say(f"    was (text since edited): {said}")
    if args.write:
        write_text(path, mapping_text(update.mapping))
        _mapping(path)  # what was written reads back
        say(f"wrote {path}")
    elif update.added or update.dropped:
        say(f"(not written: --write updates {path})")
    return EXIT_FAILED if waiting else EXIT_PASSED


def cmd_almanac_attach_changelog(args: argparse.Namespace) -> int:
    path = Path(args.almanac)
    if not path.is_file():
        raise HarnessInputError(f"--almanac {path}: expected an almanac.json, but there is no "
                                "such file")
    document = read_almanac(path, within=path.parent)
    folder = path.parent
    where = Path(args.mapping) if args.mapping else mapping_path(folder, str(document["client"]))
    mapping = _mapping(where)
    assert mapping is not None
    try:
        name = str(where.resolve().relative_to(folder.resolve()))
    except ValueError:
        name = str(where)
    joined = with_changelog(document, mapping, mapping_name=name)
    write_json(path, joined)
    read_almanac(path, within=folder)  # the almanac's schema holds what was written
    counts = joined["changelog"]["counts"]
    say(f"wrote {path}: {counts['mapped']} entr(ies) mapped to claims ({counts['agrees']} agree, "
        f"{counts['near']} near, {counts['not seen by the probe']} not seen by the probe, "
        f"{counts['disagrees']} disagree), {counts['not_probed']} not probed, "
        f"{counts['unmapped']} not reviewed")
    page = write_text(path.with_name(ALMANAC_PAGE), render_almanac_page(path))
    say(f"wrote {page}")
    return EXIT_PASSED


def add_almanac_changelog(steps: Any) -> None:
    """``almanac changelog`` and ``almanac attach-changelog``."""
    updated = command(steps, "changelog", help="read a newer public changelog against the "
                      "reviewed mapping: keep every review, add new loop entries unreviewed, "
                      "print what is not reviewed",
                      epilog="exit codes: 0 every loop entry reviewed; 1 some not reviewed yet "
                      "(printed; --write adds them to the mapping); 2 bad input (a malformed "
                      "changelog or mapping, an unknown claim id)")
    updated.add_argument("--changelog", required=True, help="the changelog (CHANGELOG.md)")
    updated.add_argument("--client", default="claude-code", help="(default: %(default)s)")
    updated.add_argument("--mapping", help="the mapping (default: "
                         "reports/changelog/<client>.yaml)")
    updated.add_argument("--commit", help="the changelog's commit, recorded as its source "
                         "(default: the mapping's)")
    updated.add_argument("--repository", help="the changelog's repository, owner/name "
                         "(default: the mapping's)")
    updated.add_argument("--write", action="store_true", help="write the updated mapping")
    updated.set_defaults(func=cmd_almanac_changelog)
    attached = command(steps, "attach-changelog", help="join the changelog mapping into an "
                       "existing almanac.json (each change's entries, what the verdicts say "
                       "of each) and render its page again, without a rebuild")
    attached.add_argument("--almanac", default="reports/almanac.json",
                          help="(default: %(default)s)")
    attached.add_argument("--mapping", help="(default: changelog/<client>.yaml beside the "
                          "almanac)")
    attached.set_defaults(func=cmd_almanac_attach_changelog)
