"""The public changelog held against the almanac: for each entry mapped to claims, whether a
verdict of one of its claims moved at its release, and for each change of verdict the loop
entries of the releases in its interval.

``join`` is pure (an ``almanac.json`` document and a reviewed mapping in, the block and the
per-change entries out); ``with_changelog`` returns the document with both in it;
``attach_changelog`` reads the mapping beside an almanac (``<reports>/changelog/<client>.yaml``)
when there is one. An entry's release is placed at the first version of the range at or
after it, so an entry of a section never published (2.0.43) falls on the release that
shipped it (2.0.44). Its status, from the changes of its claims (``Δ``: releases between the
entry's release and a change's interval, 0 inside it):

- ``agrees``: a located change of one of its claims has the entry's release as its after
  side;
- ``near``: the nearest change is ``NEAR_WINDOW`` releases away or fewer (or its interval,
  not located, holds the release), the count kept as ``releases_away``;
- ``disagrees``: the nearest change is farther, but within ``SEEN_WINDOW`` releases: the
  probe saw the claim move, at another release, and held one verdict across the entry's;
  ``decided_by`` names the probed versions on both sides of the release and where the change
  was located instead, with their witnesses;
- ``not seen by the probe``: no change of its claims within ``SEEN_WINDOW`` releases.
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from probes.scale.changelog_map import load_mapping, mapping_path

__all__ = ["NEAR_WINDOW", "SEEN_WINDOW", "attach_changelog", "join", "with_changelog"]

NEAR_WINDOW = 3  # releases: a change this close to the entry's release is near it
SEEN_WINDOW = 16  # releases (two grid spacings of the committed build): farther is unrelated


def _key(version: str) -> Version | None:
    try:
        return Version(version)
    except InvalidVersion:
        return None


class _Range:
    """The almanac's versions in order, and where a release falls among them."""

    def __init__(self, document: Mapping[str, Any]) -> None:
        self.versions = [str(v["version"]) for v in document["versions"]]
        self.keys = [_key(v) for v in self.versions]
        self.index = {v: i for i, v in enumerate(self.versions)}
        self.witness = {str(v["version"]): v.get("witness") for v in document["versions"]}

    def position(self, release: str) -> int | None:
        """The index of the first version at or after ``release``; None outside the range."""
        wanted = _key(release)
        if wanted is None or not self.versions or self.keys[0] is None or wanted < self.keys[0]:
            return None
        for i, key in enumerate(self.keys):
            if key is not None and key >= wanted:
                return i
        return None  # newer than the range's last version

    def inside(self, release: str, before: str, after: str) -> bool:
        """``before < release <= after``, as versions."""
        r, b, a = _key(release), _key(before), _key(after)
        return r is not None and b is not None and a is not None and b < r <= a


def _distance(change: Mapping[str, Any], at: int, span: _Range) -> int | None:
    before, after = span.index.get(change["before"]), span.index.get(change["after"])
    if before is None or after is None:
        return None
    if before < at <= after:
        return 0
    return before - at + 1 if at <= before else at - after


def _decided_by(claims: Sequence[Mapping[str, Any]], at: int, span: _Range,
                nearest: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per claim: its verdict across the release, the probed versions nearest it on both
    sides in that segment, and where its nearest change was located instead."""
    out = []
    for claim in claims:
        if claim["id"] not in nearest:
            continue
        segment = next((s for s in claim["segments"]
                        if span.index.get(s["first"], at + 1) <= at
                        <= span.index.get(s["last"], -1)), None)
        if segment is None:
            continue
        probed = [p for p in segment["probed"] if p in span.index]
        below = [p for p in probed if span.index[p] < at]
        above = [p for p in probed if span.index[p] >= at]
        sides = ([below[-1]] if below else []) + ([above[0]] if above else [])
        change = nearest[claim["id"]]
        witnesses = [w for w in (*(span.witness.get(p) for p in sides),
                                 *(change["witnesses"].get(s) for s in ("before", "after")))
                     if w]
        out.append({"claim": claim["id"], "verdict": segment["verdict"], "probed": sides,
                    "witnesses": list(dict.fromkeys(witnesses)),
                    "located_at": [change["before"], change["after"]]})
    return out


def _status(entry: Mapping[str, Any], span: _Range,
            claims: Mapping[str, Mapping[str, Any]]) -> dict[str, Any] | None:
    """What the verdicts say of one entry mapped to claims; None outside the range."""
    at = span.position(entry["release"])
    if at is None:
        return None
    found = []  # (releases away, not located, claim id, the change)
    for claim_id in entry["claims"]:
        for change in claims.get(claim_id, {}).get("changes", []):
            distance = _distance(change, at, span)
            if distance is not None:
                found.append((distance, not change["located"], claim_id, change))
    if not found:
        return {"status": "not seen by the probe"}
    distance, unlocated = min(f[:2] for f in found)
    if (distance, unlocated) == (0, False):
        return {"status": "agrees"}
    if distance <= NEAR_WINDOW:
        return {"status": "near", "releases_away": distance}
    if distance > SEEN_WINDOW:
        return {"status": "not seen by the probe"}
    nearest: dict[str, Mapping[str, Any]] = {}
    for _, _, claim_id, change in sorted(found, key=lambda f: f[:2], reverse=True):
        nearest[claim_id] = change  # the nearest last
    return {"status": "disagrees", "decided_by": _decided_by(
        [claims[c] for c in entry["claims"] if c in claims], at, span, nearest)}


def _shown(entry: Mapping[str, Any]) -> dict[str, Any]:
    shown = {"release": entry["release"], "text": entry["text"]}
    for name in ("claims", "not_probed"):
        if name in entry:
            shown[name] = entry[name]
    return shown


def join(document: Mapping[str, Any], mapping: Mapping[str, Any], *,
         mapping_name: str = "") -> tuple[dict[str, Any], dict[tuple[str, str, str], list[Any]]]:
    """The ``changelog`` block, and per change (claim id, before, after) the loop entries of
    the releases in its interval, each with what the verdicts say of it."""
    span = _Range(document)
    claims = {c["id"]: c for c in document["claims"]}
    statuses: dict[tuple[str, str], dict[str, Any]] = {}
    counts = {"loop_entries": len(mapping["entries"]), "mapped": 0, "not_probed": 0,
              "unmapped": 0, "outside_range": 0, "agrees": 0, "near": 0,
              "not seen by the probe": 0, "disagrees": 0}
    entries = []
    for entry in mapping["entries"]:
        if "not_probed" in entry:
            counts["not_probed"] += 1
            continue
        if "claims" not in entry:
            counts["unmapped"] += 1
            continue
        counts["mapped"] += 1
        status = _status(entry, span, claims)
        if status is None:
            counts["outside_range"] += 1
            continue
        counts[status["status"]] += 1
        statuses[(entry["release"], entry["text"])] = status
        entries.append({**_shown(entry), **status})
    per_change: dict[tuple[str, str, str], list[Any]] = {}
    for claim in document["claims"]:
        for change in claim["changes"]:
            per_change[(claim["id"], change["before"], change["after"])] = [
                {**_shown(e), **statuses.get((e["release"], e["text"]), {})}
                for e in mapping["entries"]
                if span.inside(e["release"], change["before"], change["after"])]
    source = mapping["source"]
    sections = [s for s in source["sections"] if _key(s) is not None]
    newest = _key(source["newest"])
    first, last = (span.keys[0], span.keys[-1]) if span.versions else (None, None)
    block = {
        "source": {k: source[k] for k in ("repository", "path", "commit", "newest")},
        "mapping": mapping_name, "near_window": NEAR_WINDOW, "seen_window": SEEN_WINDOW,
        "counts": counts, "entries": entries,
        "skipped": [v for v, k in zip(span.versions, span.keys, strict=True)
                    if k is not None and newest is not None and k <= newest
                    and v not in source["sections"]],
        "unpublished": [s for s in sections if first is not None and last is not None
                        and first <= Version(s) <= last and s not in span.index],
        "after_newest": sum(1 for k in span.keys
                            if k is not None and newest is not None and k > newest),
    }
    return block, per_change


def with_changelog(document: Mapping[str, Any], mapping: Mapping[str, Any], *,
                   mapping_name: str = "") -> dict[str, Any]:
    """``document`` with the changelog block and each change's entries (replacing earlier
    ones); the input is left as it was."""
    out = copy.deepcopy(dict(document))
    block, per_change = join(out, mapping, mapping_name=mapping_name)
    for claim in out["claims"]:
        for change in claim["changes"]:
            change["changelog"] = per_change[(claim["id"], change["before"], change["after"])]
    out["changelog"] = block
    return out


def attach_changelog(document: Mapping[str, Any], folder: Path,
                     claim_ids: Collection[str] | None = None) -> dict[str, Any]:
    """``document`` joined with the mapping beside it (``<folder>/changelog/<client>.yaml``),
    or as it is when there is none; a mapping that does not load, or names a claim outside
    ``claim_ids`` (default: the almanac's claims), raises ``MappingError``."""
    path = mapping_path(folder, str(document["client"]))
    if not path.is_file():
        return dict(document)
    mapping = load_mapping(path, claim_ids if claim_ids is not None
                           else [c["id"] for c in document["claims"]])
    return with_changelog(document, mapping, mapping_name=str(path.relative_to(folder)))
