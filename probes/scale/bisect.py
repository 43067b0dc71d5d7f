"""Which release changed a claim: binary search over a client's published versions.

``bisect_versions`` is the search alone (a pure function of a verdict oracle); ``loopprobe
bisect`` runs the probes a claim needs on each version it visits, installing on demand, and
writes what it found. A search follows one kind of transition (``TRANSITION_KINDS``): a change
of behaviour (confirmed or not observable ↔ contradicted), the feature appearing (absent → present, like a
compatibility table's ``version_added``), the probe reaching it, or the version reporting it.
A version whose verdict says nothing of that kind — or where the claim is not applicable or
the harness failed — is skipped, as ``git bisect skip`` does, and the result names it; the
search then answers with a range.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from packaging.version import InvalidVersion, Version

from probes.core.verdicts import AGAINST, CLAIM_VERDICTS, claim_change

__all__ = ["ANY", "SKIPPED_VERDICTS", "SOURCE_TRANSITION", "TRANSITION_KINDS", "BisectError", "BisectResult",
           "bisect_versions", "order_versions", "side_of", "transition_kind", "versions_between"]

# verdicts that say nothing at all (and ``missing``: the report lacks the claim): skipped
SKIPPED_VERDICTS = frozenset({"not_applicable", "error", "missing"})
_SHOWN = frozenset({"confirmed", *AGAINST})  # the behaviour was observed, one way or the other
# each kind of transition splits the verdicts into a before side and an after side (named);
# a verdict on neither side says nothing of that kind of change, and its version is skipped.
# Tried in this order to name the kind of a pair of verdicts (``transition_kind``).
TRANSITION_KINDS: dict[str, tuple[tuple[str, frozenset[str]], tuple[str, frozenset[str]]]] = {
    # the feature exists from this version on (or no longer): version_added / version_removed
    "presence": (("absent", frozenset({"absent"})),
                 ("present", frozenset({"not_reached", "not_observable", *_SHOWN}))),
    # the feature is there and the probe now triggers it (a gate opened, input now accepted)
    "reach": (("not reached", frozenset({"not_reached"})),
              ("reached", frozenset({"not_observable", *_SHOWN}))),
    # the behaviour itself: what the claim states now holds, or no longer (not observable is
    # upheld: its behaviour checks passed, only a field the version does not report was unseen;
    # tried before reporting, as the verdict rule decides contradicted before not observable)
    "behaviour": (("upheld", frozenset({"confirmed", "not_observable"})),
                  ("against", frozenset(AGAINST))),
    # the version now reports the behaviour (a result field such as terminal_reason appears)
    "reporting": (("not observable", frozenset({"not_observable"})),
                  ("observed", _SHOWN)),
}
_TELLING = frozenset(CLAIM_VERDICTS) - SKIPPED_VERDICTS  # a verdict on some kind's side
# contradicted ↔ differs from baseline: the claim's source changed, not the client
SOURCE_TRANSITION = "source"
ANY = "any"  # follow the verdict itself, whatever kind its change is


def _side(verdict: str, kind: str) -> str | None:
    if verdict in SKIPPED_VERDICTS:
        return None
    if kind == ANY:
        return verdict
    for name, verdicts in TRANSITION_KINDS[kind]:
        if verdict in verdicts:
            return name
    return None


def side_of(verdict: str, kind: str) -> str | None:
    """Which side of a ``kind`` of transition a verdict is on (``any``: the verdict itself);
    None when it says nothing of that kind. A probe's verdict (``id=status, ...``, one per
    claim) is on a side when each of its claims is."""
    if kind != ANY and kind not in TRANSITION_KINDS:
        raise BisectError(f"{kind!r}: expected a transition kind, one of "
                          f"{', '.join([*TRANSITION_KINDS, ANY])}")
    parts = _parts(verdict)
    sides = [_side(status, kind) for status in parts.values()]
    if None in sides:
        return None
    if list(parts) == [""]:
        return sides[0]
    return ", ".join(f"{claim}={side}" for claim, side in zip(parts, sides, strict=True))


def _parts(verdict: str) -> dict[str, str]:
    """``a=confirmed, b=absent`` -> {a: confirmed, b: absent}; one claim's verdict -> {"": it}."""
    if "=" not in verdict:
        return {"": verdict}
    return dict(part.split("=", 1) for part in verdict.split(", "))


def transition_kind(before: str, after: str) -> str | None:
    """The kind of change from one verdict to another (the first claim that differs, for a
    probe's verdicts): ``presence``, ``reach``, ``reporting`` or ``behaviour`` (the first of
    ``TRANSITION_KINDS`` that puts them on two sides), ``source`` for contradicted ↔ differs
    from baseline; None when they are equal or either says nothing."""
    old, new = _parts(before), _parts(after)
    for claim in old:
        a, b = old[claim], new.get(claim, "missing")
        if a == b or not {a, b} <= _TELLING:
            continue
        for kind in TRANSITION_KINDS:
            sides = _side(a, kind), _side(b, kind)
            if None not in sides and sides[0] != sides[1]:
                return kind
        return SOURCE_TRANSITION
    return None


def _change(before: str, after: str) -> str | None:
    """``probes.core.verdicts.claim_change`` of the first claim that differs."""
    old, new = _parts(before), _parts(after)
    return next((claim_change(old[c], new.get(c)) for c in old if old[c] != new.get(c)), None)


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
    kind: str = "behaviour"  # the kind of transition followed (TRANSITION_KINDS, or any)
    transition: str | None = None  # the kind of the change found (last_same -> first_changed)
    change: str | None = None  # its name in probes.core.verdicts.CHANGES

    def to_json(self) -> dict[str, Any]:
        return {"good": self.good, "good_verdict": self.good_verdict,
                "last_same": self.last_same, "first_changed": self.first_changed,
                "changed_verdict": self.changed_verdict, "candidates": self.candidates,
                "tested": self.tested, "skipped": self.skipped, "kind": self.kind,
                "transition": self.transition, "change": self.change}


def _kind_words(kind: str) -> str:
    if kind == ANY:
        return "any change of verdict"
    (before, old), (after, new) = TRANSITION_KINDS[kind]
    return (f"a {kind} transition ({before}: {', '.join(sorted(old))} ↔ {after}: "
            f"{', '.join(sorted(new))})")


def bisect_versions(versions: Sequence[str], verdict_at: Callable[[str], str],
                    kind: str = "behaviour") -> BisectResult:
    """The first version after ``versions[0]`` on the other side of a ``kind`` of transition
    from ``versions[0]`` (``any``: whose verdict differs).

    ``versions`` runs from the good end to the bad end (oldest first or newest first);
    ``verdict_at`` is called at most once per version. The two ends must be on two sides.
    """
    side_of("confirmed", kind)  # an unknown kind fails before any version runs
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
        if side_of(found, kind) is None:
            found_kind = transition_kind(good_verdict, bad_verdict)
            hint = (f"; --kind {found_kind} follows what changed between the ends"
                    if found_kind in TRANSITION_KINDS and found_kind != kind else "")
            raise BisectError(f"the claim is {found} on {end}, which says nothing of "
                              f"{_kind_words(kind)}: an end of the search must show one{hint}")
    good_side = side_of(good_verdict, kind)
    if good_side == side_of(bad_verdict, kind):
        found_kind = transition_kind(good_verdict, bad_verdict)
        raise BisectError(f"the claim is {good_verdict} on {good} and {bad_verdict} on {bad}, "
                          f"one side ({good_side}) of {_kind_words(kind)}"
                          + (f"; --kind {found_kind} follows what changed between the ends"
                             if found_kind in TRANSITION_KINDS else "")
                          if good_verdict != bad_verdict else
                          f"the claim is {good_verdict} on both {good} and {bad}: nothing "
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
        side = side_of(verdict(versions[probe_at]), kind)
        if side is None:
            skipped.add(probe_at)
        elif side == good_side:
            low = probe_at
        else:
            high = probe_at
    # skipped versions left between the two sides may hold the change as well
    candidates = list(versions[low + 1:high + 1])
    narrowed = high == low + 1
    before, after = tested[versions[low]], tested[versions[high]]
    return BisectResult(
        good=good, good_verdict=good_verdict, last_same=versions[low],
        first_changed=versions[high] if narrowed else None,
        changed_verdict=after if narrowed else None,
        candidates=candidates, tested=tested,
        skipped=[versions[i] for i in sorted(skipped)], kind=kind,
        transition=transition_kind(before, after) if narrowed else None,
        change=_change(before, after) if narrowed else None)
