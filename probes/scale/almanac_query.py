"""Questions put to an ``almanac.json``: which claims a query names, a claim's whole story
(segments, changes and why each happened), and every claim's verdict on one release.

A query is a claim id (``probe.`` may be left out) or words, each of which must occur in the
claim's id, statement, report (area), probe, mechanism (``probes.catalog.mechanisms``) or the
changelog entries mapped to it. Observed values come from the witnesses' reports: a change's
flipped checks with what each side expected and observed, read as hostile input (bounded,
regular files inside the almanac's folder, ``probes.core.safe_read``).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from probes.catalog.mechanisms import MECHANISMS
from probes.scale.almanac_witness import reports_in

__all__ = ["QueryError", "claim_story", "close_claims", "match_claims", "verdicts_at"]


class QueryError(ValueError):
    """A query the almanac cannot answer, said in one line."""


def _short(claim_id: str) -> str:
    return claim_id.removeprefix("probe.")


def _haystack(document: Mapping[str, Any], claim: Mapping[str, Any]) -> str:
    mechanisms = [m.description for m in MECHANISMS if m.claim == claim["id"]]
    texts = [e["text"] for e in document.get("changelog", {}).get("entries", [])
             if claim["id"] in e.get("claims", [])]
    texts += [e["text"] for c in claim["changes"] for e in c.get("changelog", [])
              if claim["id"] in e.get("claims", [])]
    return "\n".join([claim["id"], claim.get("statement", ""), claim.get("area", ""),
                      claim.get("probe", ""), *mechanisms, *texts]).lower()


def match_claims(document: Mapping[str, Any], query: str) -> list[dict[str, Any]]:
    """The claims a query names: the one whose id it is, else those holding every word."""
    wanted = query.strip()
    if not wanted:
        raise QueryError("expected a claim id or words, found nothing")
    claims = list(document["claims"])
    exact = [c for c in claims if wanted in (c["id"], _short(c["id"]))]
    if exact:
        return exact
    words = wanted.lower().split()
    return [c for c in claims if all(word in _haystack(document, c) for word in words)]


def close_claims(document: Mapping[str, Any], query: str, n: int = 5) -> list[str]:
    """Claim ids near a query that matched nothing: by spelling of the whole id, of a word of
    one, then by any word the claim holds."""
    ids = [c["id"] for c in document["claims"]]
    shorts = {_short(i): i for i in ids}
    close = [shorts[s] for s in difflib.get_close_matches(_short(query.strip()), list(shorts),
                                                          n=n, cutoff=0.6)]
    words = [w for w in re.split(r"[\s._/-]+", query.lower()) if len(w) > 2]
    parts = {i: set(re.split(r"[._-]+", _short(i).lower())) for i in ids}
    for word in words:
        near = set(difflib.get_close_matches(word, sorted(set().union(*parts.values())),
                                             n=3, cutoff=0.7))
        close += [i for i in ids if parts[i] & near]
    close += [c["id"] for c in document["claims"]
              if any(w in _haystack(document, c) for w in words)]
    return list(dict.fromkeys(close))[:n]


def _check_values(root: Path, folder: str | None, claim: Mapping[str, Any], verdict: str,
                  check_ids: set[str]) -> dict[str, dict[str, Any]]:
    """check id -> expected/observed/status in the witness ``folder`` (relative to ``root``):
    from the run whose report gives the claim ``verdict`` (the first run holding it else)."""
    if not folder:
        return {}
    base = root / folder
    if base.is_symlink() or not base.is_dir():
        return {}
    runs = sorted(p for p in base.iterdir() if p.is_dir() and not p.is_symlink())
    chosen: dict[str, dict[str, Any]] = {}
    for run in runs:
        for report in reports_in(run):
            statuses = [c.get("status") for c in report["claims"] if c.get("id") == claim["id"]]
            if not statuses:
                continue
            found = {str(c["id"]): {k: c.get(k) for k in ("expected", "observed", "status")}
                     for c in report.get("checks", [])
                     if isinstance(c, dict) and c.get("id") in check_ids}
            if statuses[0] == verdict:
                return found
            chosen = chosen or found
    return chosen


def claim_story(document: Mapping[str, Any], claim: Mapping[str, Any],
                root: Path) -> dict[str, Any]:
    """Everything the almanac says of one claim, each change with its flipped checks'
    observed values on both sides (from the witnesses under ``root``, the almanac's folder),
    its changelog entries and premises (when the change carries them)."""
    changes = []
    for change in claim["changes"]:
        ids = {str(f["id"]) for f in change.get("flipped_checks", [])}
        sides = {side: _check_values(root, change["witnesses"].get(side), claim,
                                     change["from" if side == "before" else "to"], ids)
                 for side in ("before", "after")}
        flipped = [{**f, "values": {side: sides[side].get(str(f["id"]))
                                    for side in ("before", "after")}}
                   for f in change.get("flipped_checks", [])]
        shown = {k: change[k] for k in ("before", "after", "from", "to", "located", "kind",
                                        "change", "verified", "witnesses") if k in change}
        shown["flipped_checks"] = flipped
        for optional in ("candidates", "premises", "changelog"):
            if optional in change:
                shown[optional] = change[optional]
        changes.append(shown)
    elsewhere = [e for e in document.get("changelog", {}).get("entries", [])
                 if claim["id"] in e.get("claims", [])
                 and not any(e["release"] == m["release"] and e["text"] == m["text"]
                             for c in changes for m in c.get("changelog", []))]
    return {"id": claim["id"], "area": claim.get("area", ""), "probe": claim.get("probe", ""),
            "statement": claim.get("statement", ""), "introduced": claim.get("introduced"),
            "segments": claim["segments"], "changes": changes,
            "changelog_elsewhere": elsewhere}


def _version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


def _nearest(versions: Sequence[str], wanted: str, n: int = 2) -> list[str]:
    key = _version(wanted)
    if key is None:
        return difflib.get_close_matches(wanted, list(versions), n=2 * n, cutoff=0.5)
    keyed = [(k, v) for v in versions if (k := _version(v)) is not None]
    below = [v for k, v in keyed if k < key][-n:]
    above = [v for k, v in keyed if k > key][:n]
    return below + above


def verdicts_at(document: Mapping[str, Any], version: str) -> dict[str, Any]:
    """Every claim's verdict on ``version``: probed there, or held inside a segment."""
    versions = [str(v["version"]) for v in document["versions"]]
    if version not in versions:
        first, last = document["range"]["first"], document["range"]["last"]
        inside_not_built = [r for r in document.get("not_built", [])
                            if r["first"] == version or r["last"] == version]
        why = " (published, not built yet)" if inside_not_built else ""
        near = _nearest(versions, version)
        raise QueryError(f"{version!r}: expected a version of the almanac's range "
                         f"{first}–{last}, found none{why}"
                         + (f"; nearest: {', '.join(near)}" if near else ""))
    index = versions.index(version)
    at = next(v for v in document["versions"] if v["version"] == version)
    rows = []
    for claim in document["claims"]:
        segment = next((s for s in claim["segments"]
                        if versions.index(s["first"]) <= index <= versions.index(s["last"])),
                       None)
        if segment is None:
            rows.append({"id": claim["id"], "verdict": "missing", "probed": False})
            continue
        probed = version in segment["probed"]
        row: dict[str, Any] = {"id": claim["id"], "verdict": segment["verdict"],
                               "probed": probed, "segment": [segment["first"], segment["last"]]}
        if not probed:
            row["held_between"] = ([p for p in segment["probed"]
                                    if versions.index(p) < index][-1:]
                                   + [p for p in segment["probed"]
                                      if versions.index(p) > index][:1])
        rows.append(row)
    return {"version": version, "probes_run": at.get("probes_run", 0),
            "witness": at.get("witness"), "claims": rows}
