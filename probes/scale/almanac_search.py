"""Where every claim changes over a range of releases, from few runs: the almanac's search.

Pure: a function of what is known (each probe's verdicts per version and attempt, each
version's screen fingerprint), answering what to run next or, when nothing is left, the
result. The build (``probes.scale.almanac_build``) runs what it asks for and asks again, so
a build interrupted anywhere resumes from what is on disk, and ``publish`` asks once: any
run still needed means the build is not complete.

The method, in rounds until nothing is needed:

1. **Screen** every version: one short probe, its request shape reduced to a digest
   (``probes.scale.almanac_build.screen_digest``).
2. **Grid**: every probe on every ``grid``-th version and the last; and on both versions of
   every pair of neighbours whose screen differs (a denser grid where the fingerprint moves).
3. **Search**: for each probe, between two neighbouring probed versions whose verdicts differ
   and that are not adjacent releases, run that probe on the untried version nearest the
   middle; repeat until each change lies between adjacent releases.
4. **Verify**: run the probe again, in a fresh sandbox (attempt 2), on both versions of each
   located change. A version whose two attempts differ is flaky: it leaves the probed
   versions (both outcomes are kept), and the search goes on around it. It is flaky for
   the claims whose verdicts differ; a claim of the same probe whose verdict was the same
   in both attempts stands there, verified.

A version where the probe ended in a harness error is run once more in a fresh sandbox
(attempt 2; a located change there is then verified by attempt 3); when that errs too, it
is skipped, as ``git bisect skip`` does: its verdict is ``error`` and decides nothing.
The guarantee: a change of verdict between two adjacent releases is located unless the
verdict it brings is changed again fewer than ``grid`` releases later *and* the screen moves
at neither of the two changes (a run of one verdict lasting ``grid`` releases or more always
holds a grid version).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

__all__ = ["FLAKY", "SCREEN_ERROR", "UNRESOLVED", "CellLookup", "Need", "Outcome", "ProbeState",
           "ScreenLookup", "SearchResult", "grid_indices", "search", "shard_range"]

FLAKY = "flaky"  # two attempts on one version disagreed
UNRESOLVED = "unresolved"  # between two probed versions that differ, no version left to try
SCREEN_ERROR = "error"  # the screen run failed: taken as a move of the fingerprint
_ERROR = "error"

Outcome = Mapping[str, str]  # claim id -> verdict, for one probe on one version
# (version, probe, attempt) -> the verdicts of each run made of it (several when shards both
# ran it); None: not run yet
CellLookup = Callable[[str, str, int], Sequence[Outcome] | None]
ScreenLookup = Callable[[str], str | None]


@dataclass(frozen=True, order=True)
class Need:
    """A run the search needs: ``probe`` None is the screen of ``version``."""

    version: str
    probe: str | None
    attempt: int = 1


@dataclass
class ProbeState:
    probed: dict[int, Outcome] = field(default_factory=dict)  # index -> verified-or-single
    flaky: dict[int, list[Outcome]] = field(default_factory=dict)
    errors: dict[int, Outcome] = field(default_factory=dict)
    verified: set[int] = field(default_factory=set)
    # index -> the attempt that stands, where attempt 1 was a harness error run again
    retried: dict[int, int] = field(default_factory=dict)

    def verifying(self, index: int) -> int:
        """The attempt that verifies a version: the one after the attempt that stands."""
        return self.retried.get(index, 1) + 1


@dataclass
class SearchResult:
    versions: list[str]
    needs: list[Need]  # empty: the search is complete
    probes: dict[str, ProbeState]
    screens: dict[str, str]
    grid: list[int]

    @property
    def complete(self) -> bool:
        return not self.needs

    def claims(self, claims_of: Mapping[str, Sequence[str]]) -> list[dict[str, Any]]:
        """Per claim: its segments (ranges of one verdict) and its change points."""
        return [_claim_result(claim, probe, self.versions, self.probes[probe])
                for probe, claims in claims_of.items() if probe in self.probes
                for claim in claims]


def grid_indices(count: int, grid: int) -> list[int]:
    """Every ``grid``-th index from the first, and the last."""
    if grid < 1:
        raise ValueError(f"grid: expected a spacing >= 1, found {grid}")
    return sorted({*range(0, count, grid), count - 1}) if count else []


def shard_range(versions: Sequence[str], grid: int, shard: int, shards: int) -> list[str]:
    """The versions shard ``shard`` of ``shards`` searches: a run of whole grid intervals,
    from one grid version to another (neighbouring shards share that end version)."""
    if not 1 <= shard <= shards:
        raise ValueError(f"shard: expected 1..{shards}, found {shard}")
    points = grid_indices(len(versions), grid)
    intervals = max(len(points) - 1, 1)
    start, end = ((shard - 1) * intervals) // shards, (shard * intervals) // shards
    if start == end:
        return []
    return list(versions[points[start]:points[min(end, len(points) - 1)] + 1])


def _single(runs: Sequence[Outcome] | None) -> tuple[Outcome | None, bool]:
    """The outcome of a cell's runs, and whether they disagree."""
    if not runs:
        return None, False
    first = dict(runs[0])
    return first, any(dict(r) != first for r in runs[1:])


def _runs(cell: CellLookup, version: str, probe: str, attempt: int,
          claims: Sequence[str]) -> list[Outcome] | None:
    """The runs of a cell that count: those of the probe as it is now (the same claims), so a
    probe whose claims changed is run again and a new probe is built on."""
    found = [r for r in cell(version, probe, attempt) or () if set(r) == set(claims)]
    return found or None


def _has_error(outcome: Outcome) -> bool:
    return not outcome or any(status == _ERROR for status in outcome.values())


def search(versions: Sequence[str], claims_of: Mapping[str, Sequence[str]], grid: int,
           cell: CellLookup, screen: ScreenLookup) -> SearchResult:
    """What to run next over ``versions`` (oldest first) for the probes of ``claims_of``
    (probe -> its claims), from what ``cell`` and ``screen`` know; with nothing left to run,
    the result."""
    versions = list(versions)
    needs: list[Need] = []
    screens: dict[str, str] = {}
    for version in versions:
        found = screen(version)
        if found is None:
            needs.append(Need(version, None))
        else:
            screens[version] = found
    points = set(grid_indices(len(versions), grid))
    for index in range(1, len(versions)):
        a, b = screens.get(versions[index - 1]), screens.get(versions[index])
        if a is not None and b is not None and (a != b or SCREEN_ERROR in (a, b)):
            points.update((index - 1, index))
    states: dict[str, ProbeState] = {}
    for probe, claims in claims_of.items():
        state = states[probe] = ProbeState()
        for index, version in enumerate(versions):
            first, split = _single(_runs(cell, version, probe, 1, claims))
            if first is None:
                if index in points:
                    needs.append(Need(version, probe))
                continue
            if not split and _has_error(first):
                # a harness error says nothing of the client: run once more, fresh
                retry, split = _single(_runs(cell, version, probe, 2, claims))
                if retry is None:
                    needs.append(Need(version, probe, 2))
                    continue
                if split or _has_error(retry):
                    state.errors[index] = retry
                    continue
                first, state.retried[index] = retry, 2
            again, split_again = _single(_runs(cell, version, probe, state.verifying(index),
                                               claims))
            if split or split_again or (again is not None and dict(again) != first):
                state.flaky[index] = [first, *([again] if again is not None else [])]
            else:
                state.probed[index] = first
                if again is not None:
                    state.verified.add(index)
        tried = {i for i, v in enumerate(versions) if _runs(cell, v, probe, 1, claims)}
        needs += _next_runs(versions, probe, state, tried)
    return SearchResult(versions, sorted(set(needs), key=_order(versions)), states, screens,
                        sorted(points))


def _order(versions: Sequence[str]) -> Callable[[Need], tuple[int, int, str]]:
    place = {v: i for i, v in enumerate(versions)}
    return lambda need: (place[need.version], need.attempt, need.probe or "")


def _next_runs(versions: Sequence[str], probe: str, state: ProbeState,
               tried: set[int]) -> list[Need]:
    needs: list[Need] = []
    known = sorted(state.probed)
    for low, high in pairwise(known):
        if dict(state.probed[low]) == dict(state.probed[high]):
            continue
        untried = [i for i in range(low + 1, high) if i not in tried]
        if untried:
            middle = (low + high) // 2
            pick = min(untried, key=lambda i: (abs(i - middle), i))
            needs.append(Need(versions[pick], probe))
        elif high == low + 1:
            needs += [Need(versions[i], probe, state.verifying(i)) for i in (low, high)
                      if i not in state.verified]
    return needs


def _claim_result(claim: str, probe: str, versions: Sequence[str],
                  state: ProbeState) -> dict[str, Any]:
    # A cell is flaky for the probe when any of its claims differed between the attempts; a
    # claim whose verdict was the same in every attempt stands there, and is verified.
    agreed: dict[int, str] = {}
    for index, attempts in state.flaky.items():
        same = {o.get(claim, "missing") for o in attempts}
        if len(attempts) > 1 and len(same) == 1 and not same & {_ERROR, "missing"}:
            agreed[index] = same.pop()
    standing = {i: o.get(claim, "missing") for i, o in state.probed.items()} | agreed
    verified = state.verified | set(agreed)
    verdicts: list[tuple[str, list[str] | None, bool]] = []  # verdict, outcomes, probed
    known = sorted(standing)
    for index in range(len(versions)):
        if index in standing:
            verdicts.append((standing[index], None, True))
        elif index in state.flaky:
            verdicts.append((FLAKY, [o.get(claim, "missing") for o in state.flaky[index]],
                             True))
        elif index in state.errors:
            verdicts.append((_ERROR, None, True))
        else:
            before = [i for i in known if i < index]
            after = [i for i in known if i > index]
            a = standing[before[-1]] if before else None
            b = standing[after[0]] if after else None
            verdicts.append((a if a is not None and a != "missing" and a == b else UNRESOLVED,
                             None, False))
    segments: list[dict[str, Any]] = []
    for version, (verdict, outcomes, probed) in zip(versions, verdicts, strict=True):
        last = segments[-1] if segments else None
        if last and last["verdict"] == verdict and verdict != FLAKY:
            last["last"] = version
            if probed:
                last["probed"].append(version)
            continue
        segment: dict[str, Any] = {"first": version, "last": version, "verdict": verdict,
                                   "probed": [version] if probed else []}
        if outcomes is not None:
            segment["outcomes"] = outcomes
        segments.append(segment)
    changes: list[dict[str, Any]] = []
    for low, high in pairwise(known):
        a, b = standing[low], standing[high]
        if a == b:
            continue
        located = high == low + 1 and {low, high} <= verified
        changes.append({"before": versions[low], "after": versions[high], "from": a, "to": b,
                        "located": located,
                        **({} if located else {"candidates": list(versions[low + 1:high + 1])})})
    return {"id": claim, "probe": probe, "segments": segments, "changes": changes}
