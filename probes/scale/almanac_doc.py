"""``almanac.json``: what a complete almanac build found (its witnesses: ``almanac_witness``).

``publish`` asks the search once over the build's range: while any run is still needed it
refuses (``PublishError``), so a half-built almanac is never written. Otherwise it writes,
per claim, the ranges of each verdict with the versions actually probed in them, every
change point with both sides, the kind and name of the change and the checks that flipped,
and per version its binary's SHA-256 and screen; the published 2.x versions outside the
range are listed as not built. Evidence folders are copied only for the two sides of each
change (the reports holding the changed probe) and, whole, for anchors: every
``ANCHOR_EVERY``-th release from the range's first (a grid version; the first covered when
none is); their journals' blobs moved into one store shared by all of them
(``probes.core.blob_store``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import jsonschema

from probes import __version__
from probes.core.changes import CHANGE_KINDS, is_premise_check, release_change
from probes.core.files import write_json, write_text
from probes.core.probe import ReportSpec
from probes.core.safe_read import read_bytes
from probes.report.format import ReportError, load_json_file
from probes.report.schemas import schema
from probes.scale.almanac_build import claims_of
from probes.scale.almanac_changelog import attach_changelog
from probes.scale.almanac_search import grid_indices, search
from probes.scale.almanac_state import AlmanacState
from probes.scale.almanac_witness import (
    WITNESS_DIR,
    PublishError,
    check_witness,
    copy_witness,
    drop_stale_witnesses,
    witnesses_of,
)

__all__ = ["ALMANAC_FILE", "ALMANAC_SCHEMA_VERSION", "ANCHOR_EVERY", "DEFAULT_GRID", "DEFAULT_SCREEN",
           "GUARANTEE", "WITNESS_DIR", "PublishError", "almanac_text", "load_almanac", "publish",
           "read_almanac", "with_almanac_text"]

ALMANAC_FILE = "almanac.json"
ALMANAC_SCHEMA_VERSION = 1
DEFAULT_GRID = 8
DEFAULT_SCREEN = "tool-result-resume"
ANCHOR_EVERY = 64  # a whole evidence folder every 64th release of the range, from its first
GUARANTEE = ("Every change of a claim's verdict between two adjacent releases of the range is "
             "located, unless the verdict it brings changes again fewer than `grid` releases "
             "later and the screen fingerprint moves at neither change. Each located change "
             "was run again on both sides in a fresh sandbox; one that did not reproduce is "
             "flaky, with both outcomes, never a change.")


def _areas(catalog: Sequence[ReportSpec]) -> dict[str, tuple[str, str]]:
    """claim -> (report name, statement)."""
    return {claim.id: (spec.name, claim.statement) for spec in catalog
            for probe in spec.probes for claim in probe.claims}


def _not_built(published: Sequence[str], covered: Sequence[str]) -> list[dict[str, Any]]:
    """The runs of published 2.x versions outside ``covered``."""
    inside = set(covered)
    runs: list[dict[str, Any]] = []
    previous_out = False
    for version in published:
        if not version.startswith("2."):
            continue
        if version in inside:
            previous_out = False
            continue
        if previous_out:
            runs[-1]["last"] = version
            runs[-1]["count"] += 1
        else:
            runs.append({"first": version, "last": version, "count": 1})
        previous_out = True
    return runs


def _sides(state: AlmanacState, probe: str, claim: str, before: str,
           after: str) -> list[dict[str, Any]]:
    """Every check of ``claim`` with its status on both sides."""
    a = state.runs(before, probe)[0].get("checks", {}).get(claim, {})
    b = state.runs(after, probe)[0].get("checks", {}).get(claim, {})
    return [{"id": check, "before": a.get(check, "missing"), "after": b.get(check, "missing")}
            for check in sorted(set(a) | set(b))]


def publish(state: AlmanacState, work: Path, out: Path, published: Sequence[str], until: str,
            catalog: Sequence[ReportSpec], *, start: str | None = None,
            say: Callable[[str], None] = lambda _: None) -> Path:
    """Write ``<out>/almanac.json`` and the witnesses, or raise ``PublishError``."""
    build = state.build()
    if build is None:
        raise PublishError(f"{state.folder}: no almanac build there")
    probe_claims: Mapping[str, Sequence[str]] = claims_of(catalog) or build.get("claims") or {}
    versions, anchors = _range(build["since"], int(build["grid"]), published, until, start)
    result = search(versions, probe_claims, int(build["grid"]), state.cell, state.screen)
    if not result.complete:
        first = result.needs[0]
        raise PublishError(f"{len(result.needs)} run(s) still needed over {build['since']}–"
                           f"{until} (first: {first.probe or 'the screen'} on {first.version}); "
                           "run almanac build to go on")
    claims = result.claims(probe_claims)
    witnesses = witnesses_of(state, claims, probe_claims,
                           [v for v in anchors if v in versions] or versions[:1])
    paths = {version: copy_witness(work, out, version, folders, say)
             for version, folders in sorted(witnesses.items())}
    for claim in claims:
        for change in claim["changes"]:
            for side in ("before", "after"):
                check_witness(out, state, claim, change[side])
    drop_stale_witnesses(out, versions, witnesses, say)
    _describe_changes(claims, _areas(catalog), state, paths)
    binaries = state.binaries()
    probed = {v: sorted(p for p in probe_claims if state.cell(v, p, 1)) for v in versions}
    document: dict[str, Any] = {
        "schema_version": ALMANAC_SCHEMA_VERSION, "kind": "almanac",
        "generator": f"loopprobe {__version__}", "client": build["client"],
        "method": {"grid": int(build["grid"]), "screen_probe": build["screen_probe"],
                   "grid_versions": [versions[i] for i in result.grid],
                   "guarantee": GUARANTEE},
        "range": {"first": versions[0], "last": versions[-1], "count": len(versions)},
        "not_built": _not_built(published, versions),
        "versions": [{"version": v, "binary_sha256": binaries.get(v, ""),
                      "screen": state.screen(v) or "", "probes_run": len(probed[v]),
                      "witness": paths.get(v)} for v in versions],
        "claims": claims,
        "cost": _cost(state),
    }
    document = attach_changelog(document, out)  # the changelog's entries, when mapped
    path = out / ALMANAC_FILE
    write_json(path, document)
    _write_text(out, document)
    return path


def _range(since: str, grid: int, published: Sequence[str], until: str,
           start: str | None) -> tuple[list[str], list[str]]:
    """The versions published (from the grid interval holding ``start`` on, when given: the
    rest is not built) and the anchors of the whole range."""
    if since not in published or until not in published:
        raise PublishError(f"{since}–{until}: not published versions")
    versions = list(published[published.index(since):published.index(until) + 1])
    # anchors: whole evidence folders every ANCHOR_EVERY releases from the first, fixed as the
    # range grows (a new newest release is no anchor: an unchanged release adds no folder)
    anchors = [v for i, v in enumerate(versions) if i % ANCHOR_EVERY == 0]
    if start:
        if start not in versions:
            raise PublishError(f"--from {start}: not a version of {since}–{until}")
        versions = versions[max(i for i in grid_indices(len(versions), grid)
                                if i <= versions.index(start)):]
    return versions, anchors


def _describe_changes(claims: list[dict[str, Any]], areas: Mapping[str, tuple[str, str]],
                      state: AlmanacState, paths: Mapping[str, str | None]) -> None:
    """Each claim's report and statement, and per change its kind and name, whether it was
    verified, the checks that flipped and its witnesses; the version it was introduced in."""
    for claim in claims:
        area, statement = areas.get(claim["id"], ("", ""))
        claim["area"], claim["statement"] = area, statement
        introduced = None
        for change in claim["changes"]:
            sides = _sides(state, claim["probe"], claim["id"], change["before"],
                           change["after"]) if change["located"] else []
            flipped = [c for c in sides if c["before"] != c["after"]]
            named = release_change(change["from"], change["to"], flipped)
            change["change"] = named
            change["kind"] = CHANGE_KINDS.get(named) if named else None
            change["verified"] = change["located"]
            change["flipped_checks"] = flipped
            premises = [c for c in sides if is_premise_check(c["id"])]
            if premises:
                change["premises"] = premises
            change["witnesses"] = {"before": paths.get(change["before"]),
                                   "after": paths.get(change["after"])}
            if change["change"] == "introduced" and introduced is None:
                introduced = change["after"]
        claim["introduced"] = introduced


def _cost(state: AlmanacState) -> dict[str, Any]:
    """What the builds cost, from the runs themselves (so a build killed mid-way counts):
    suite runs (distinct report folders), probe runs, screens and their seconds; installs
    and builds from each build's ``costs.ndjson`` line (written when a build ends)."""
    records = state.records()  # superseded and withdrawn runs were paid for too
    # a suite run: its folder and its duration (two machines' builds before a240846 could
    # give two suite runs one folder name; their durations tell them apart)
    batches: dict[tuple[str, float, int], float] = {}
    for record in records:
        took = float(record.get("batch_s", 0.0))
        batches[(str(record.get("folder")), took, int(record.get("batch_probes", 0)))] = took
    screens = sum("screen" in record for record in records)
    total: dict[str, Any] = {
        "builds": 0, "suite_runs": len(batches), "screens": screens,
        "probe_runs": len(records) - screens, "installs": 0,
        "wall_s": round(sum(batches.values()), 1)}
    path = state.folder / "costs.ndjson"
    text = read_bytes(path, within=state.folder).decode() if path.is_file() else ""
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        total["builds"] += 1
        total["installs"] += int(entry.get("installs", 0))
    return total


_MARK_START, _MARK_END = "<!-- almanac: start -->", "<!-- almanac: end -->"


def almanac_text(document: Mapping[str, Any]) -> str:
    """The compact text form: per claim its ranges, each change and where it is located."""
    first, last = document["range"]["first"], document["range"]["last"]
    out = [_MARK_START, "## Almanac: every release of a range", "",
           f"{document['client']} {first}–{last} ({document['range']['count']} published "
           f"versions; grid {document['method']['grid']}, screen "
           f"`{document['method']['screen_probe']}`; `almanac.json`, `loopprobe render "
           "reports/almanac.json`). Ranges hold a verdict on every version in them, probed "
           "on the versions counted; → marks a change located to adjacent releases and "
           "re-verified.", ""]
    not_built = sum(r["count"] for r in document["not_built"])
    if not_built:
        out += [f"Not built yet: {not_built} published 2.x versions ("
                + ", ".join(f"{r['first']}–{r['last']}" if r["first"] != r["last"]
                            else r["first"] for r in document["not_built"]) + ").", ""]
    for claim in document["claims"]:
        parts = []
        for segment in claim["segments"]:
            span = segment["first"] if segment["first"] == segment["last"] else \
                f"{segment['first']}–{segment['last']}"
            verdict = segment["verdict"]
            if "outcomes" in segment:
                verdict += f" ({' / '.join(segment['outcomes'])})"
            parts.append(f"{span} {verdict} [{len(segment['probed'])} probed]")
        changes = [f"{c['kind'] or 'change'}: {c['change']} in **{c['after']}**"
                   + ("" if c["located"] else f" (somewhere in {c['before']}–{c['after']})")
                   for c in claim["changes"]]
        out.append(f"- `{claim['id']}`: " + " · ".join(parts)
                   + (f" — {'; '.join(changes)}" if changes else ""))
    return "\n".join([*out, _MARK_END]) + "\n"


def with_almanac_text(text: str, document: Mapping[str, Any]) -> str:
    """``text`` (a MATRIX.md) with the almanac's text form in place of an earlier one, or
    after it: ``loopprobe matrix`` and ``almanac publish`` write the same file."""
    block = almanac_text(document)
    if _MARK_START in text and _MARK_END in text:
        head, rest = text.split(_MARK_START, 1)
        return head + block + rest.split(_MARK_END, 1)[1].lstrip("\n")
    return text.rstrip("\n") + ("\n\n" if text else "") + block


def load_almanac(folder: Path) -> dict[str, Any] | None:
    """The ``almanac.json`` of a folder, if it holds one (``read_almanac``)."""
    path = folder / ALMANAC_FILE
    return read_almanac(path, within=folder) if path.is_file() else None


_VERSION_NAME = re.compile(r"[0-9A-Za-z][0-9A-Za-z.+_@-]*")


def read_almanac(path: Path, *, within: Path | None = None) -> dict[str, Any]:
    """An ``almanac.json`` as its schema has it, its range's ends version names; else a
    ``ReportError`` in one line naming the file, the field and what was expected."""
    document = load_json_file(path, "almanac", (ALMANAC_SCHEMA_VERSION,), within=within)
    validator = jsonschema.Draft202012Validator(schema("almanac"))
    for error in sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path)):
        where = "/".join(str(part) for part in error.absolute_path) or "(top level)"
        raise ReportError(f"{path}: {where}: {' '.join(error.message.split())[:200]} "
                          "(expected by the almanac schema): refused")
    for end in ("first", "last"):
        if not _VERSION_NAME.fullmatch(found := document["range"][end]):
            raise ReportError(f"{path}: range/{end}: expected a version name (letters, digits, "
                              f"'.', '-', '+', '_', '@'), found {found[:80]!r}: refused")
    return document


def _write_text(out: Path, document: Mapping[str, Any]) -> None:
    """Put the text form in ``<out>/MATRIX.md`` (replacing an earlier one)."""
    path = out / "MATRIX.md"
    write_text(path, with_almanac_text(path.read_text() if path.is_file() else "", document))
