"""Which release changed a claim: binary search over a client's published versions.

``bisect_versions`` is the search alone (a pure function of a verdict oracle); ``run_bisect``
runs the probes a claim needs on each version it visits, installing on demand, and writes
what it found. A version where the claim is not applicable or the harness failed is skipped,
as ``git bisect skip`` does, and the result names it; the search then answers with a range.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from packaging.version import InvalidVersion, Version

__all__ = ["SKIPPED_VERDICTS", "BisectError", "BisectResult", "bisect_versions",
           "order_versions", "versions_between"]

# verdicts that say nothing about the behaviour: the version is skipped
SKIPPED_VERDICTS = frozenset({"not_applicable", "error", "missing"})


class BisectError(ValueError):
    """The search cannot start or cannot answer (said in one line)."""


def _key(version: str) -> Version:
    try:
        return Version(version)
    except InvalidVersion:
        raise BisectError(f"{version!r}: expected a version such as 2.1.235") from None


def order_versions(versions: Sequence[str]) -> list[str]:
    """Oldest first, by version number (not publication date)."""
    return sorted(set(versions), key=_key)


def versions_between(published: Sequence[str], good: str, bad: str) -> list[str]:
    """The published versions from ``good`` to ``bad`` (both included), oldest first; either
    end may be the newer one."""
    ordered = order_versions(published)
    for end in (good, bad):
        if end not in ordered:
            raise BisectError(f"{end} is not a published version (expected one of "
                              f"{', '.join(ordered[-5:])}, ...)")
    low, high = sorted((ordered.index(good), ordered.index(bad)))
    return ordered[low:high + 1]


@dataclass
class BisectResult:
    good: str  # the version whose verdict is the trusted one
    good_verdict: str
    last_same: str  # the newest version seen with the good verdict before the change
    first_changed: str | None  # the first version with another verdict; None: not narrowed
    changed_verdict: str | None
    candidates: list[str]  # versions that may hold the change, when skips hide it
    tested: dict[str, str] = field(default_factory=dict)  # version -> verdict, in visit order
    skipped: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"good": self.good, "good_verdict": self.good_verdict,
                "last_same": self.last_same, "first_changed": self.first_changed,
                "changed_verdict": self.changed_verdict, "candidates": self.candidates,
                "tested": self.tested, "skipped": self.skipped}


def bisect_versions(versions: Sequence[str], verdict_at: Callable[[str], str]) -> BisectResult:
    """The first version after ``versions[0]`` whose verdict differs from ``versions[0]``'s.

    ``versions`` runs from the good end to the bad end (oldest first or newest first);
    ``verdict_at`` is called at most once per version. The two ends must differ.
    """
    if len(versions) < 2:
        raise BisectError("expected at least two versions to search between")
    tested: dict[str, str] = {}

    def verdict(version: str) -> str:
        if version not in tested:
            tested[version] = verdict_at(version)
        return tested[version]

    good, bad = versions[0], versions[-1]
    good_verdict, bad_verdict = verdict(good), verdict(bad)
    for end, found in ((good, good_verdict), (bad, bad_verdict)):
        if found in SKIPPED_VERDICTS:
            raise BisectError(f"the claim is {found} on {end}: an end of the search must "
                              "have a verdict")
    if good_verdict == bad_verdict:
        raise BisectError(f"the claim is {good_verdict} on both {good} and {bad}: nothing "
                          "changed between them to search for")
    low, high = 0, len(versions) - 1  # verdict(low) == good's, verdict(high) != good's
    skipped: set[int] = set()
    while True:
        open_range = [i for i in range(low + 1, high) if i not in skipped]
        if not open_range:
            break
        middle = (low + high) // 2
        # the untried index nearest the middle, as git bisect skip moves off a skipped one
        probe_at = min(open_range, key=lambda i: (abs(i - middle), i))
        found = verdict(versions[probe_at])
        if found in SKIPPED_VERDICTS:
            skipped.add(probe_at)
        elif found == good_verdict:
            low = probe_at
        else:
            high = probe_at
    # skipped versions left between the two sides may hold the change as well
    candidates = list(versions[low + 1:high + 1])
    narrowed = high == low + 1
    return BisectResult(
        good=good, good_verdict=good_verdict, last_same=versions[low],
        first_changed=versions[high] if narrowed else None,
        changed_verdict=tested[versions[high]] if narrowed else None,
        candidates=candidates, tested=tested,
        skipped=[versions[i] for i in sorted(skipped)])
