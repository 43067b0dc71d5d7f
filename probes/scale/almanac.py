"""A timeline per claim across client versions: the version ranges where each verdict held,
the kind of each change between them (``probes.scale.bisect.transition_kind``: behaviour,
presence, reach, reporting) and, where a bisect of that kind found its first version, that
version with a link.

Pure rendering from ``matrix.json`` and the ``bisect-*.json`` results; versions of one client
kind are ordered by number, each kind on its own line.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from packaging.version import Version

from probes.core.safe_read import read_json
from probes.core.verdicts import claim_change
from probes.scale.bisect import order_versions, transition_kind

__all__ = ["bisect_transition", "load_bisects", "render_timeline"]


def load_bisects(folder: Path) -> list[dict[str, Any]]:
    """Every bisect result in ``folder`` (``bisect-*.json`` or ``<claim>.json``), with its path."""
    found = []
    for path in sorted(folder.glob("*.json")):
        data = read_json(path, within=folder)
        if isinstance(data, dict) and "first_changed" in data and "claims" in data:
            found.append({**data, "path": str(path), "transition": bisect_transition(data)})
    return found


def bisect_transition(result: dict[str, Any]) -> str | None:
    """The kind of change a bisect found: as written, or for a result written before bisect
    followed kinds, read from its two verdicts (the last same and the first changed)."""
    if "transition" in result:
        return result["transition"]  # type: ignore[no-any-return]
    tested = result.get("tested") or {}
    before = tested.get(result.get("last_same")) or result.get("good_verdict")
    after = result.get("changed_verdict")
    return transition_kind(before, after) if before and after else None


def _segments(versions: Sequence[str], verdicts: dict[str, str]) -> list[tuple[str, str, str]]:
    """(first version, last version, verdict) of each run of equal verdicts."""
    segments: list[tuple[str, str, str]] = []
    for version in versions:
        verdict = verdicts.get(version, "not run")
        if segments and segments[-1][2] == verdict:
            segments[-1] = (segments[-1][0], version, verdict)
        else:
            segments.append((version, version, verdict))
    return segments


def render_timeline(matrix: dict[str, Any], bisects: Sequence[dict[str, Any]],
                    out_dir: Path) -> str:
    kinds: dict[str, list[str]] = {}
    for entry in matrix["versions"]:
        kinds.setdefault(entry["kind"], []).append(entry["version"])
    out = ["## Timeline per claim", "",
           "Where each verdict held, over the versions in this matrix (ordered by number); "
           "each → names the kind of the change (behaviour, presence, reach, reporting; "
           "docs/regressions.md) and its name (fixed, regressed, introduced…), and → **V** "
           "the first version of it found by a `loopprobe bisect` of that kind, with its "
           "result.", ""]
    for claim in matrix["claims"]:
        lines = []
        for kind, versions in kinds.items():
            ordered = order_versions(versions)
            verdicts = {v: claim["results"].get(f"{kind}@{v}", {}).get("status", "not run")
                        for v in ordered}
            parts: list[str] = []
            previous, before = "", ""
            for first, last, verdict in _segments(ordered, verdicts):
                if previous:
                    change = transition_kind(before, verdict)
                    found = next((b for b in bisects if claim["id"] in b["claims"]
                                  and b.get("client", kind) == kind
                                  and b.get("transition") in (None, change)
                                  and _between(b.get("first_changed"), previous, first)), None)
                    named = (f"*{change}: {claim_change(before, verdict)}* "
                             if change else "")
                    parts.append(f"→ {named}**{found['first_changed']}** ([bisect]"
                                 f"({os.path.relpath(found['path'], out_dir)}))" if found
                                 else f"→ {named}".rstrip())
                parts.append(f"{first if first == last else f'{first}–{last}'} {verdict}")
                previous, before = last, verdict
            lines.append(f"{kind}: " + " ".join(parts))
        out.append(f"- `{claim['id']}`: " + "; ".join(lines))
    return "\n".join(out) + "\n"


def _between(version: str | None, low: str, high: str) -> bool:
    """``low`` < ``version`` <= ``high``."""
    return bool(version) and Version(low) < Version(str(version)) <= Version(high)
