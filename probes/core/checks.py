"""Checks: one property of the evidence, stated by a claim, with what was expected and seen.

The expectation comes from the claim. A check never adapts it to what a client
version did; when the client disagrees, the check fails and says what it saw. A
check of something the run's mode cannot show (print mode drops some messages) is
"not observable" when it is not seen: it says what was looked for and where, and is
never counted as a contradiction.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["MISSING", "CheckResult", "Checks"]

MISSING = "<missing>"


@dataclass(frozen=True)
class CheckResult:
    id: str
    claim: str | None  # None for the harness's own checks
    description: str
    passed: bool
    expected: Any
    observed: Any
    evidence: str
    observable: bool = True  # False: not seen, and this mode may not show it
    # the recorded requests the check function looked up since the check before this one
    journal_seqs: tuple[int, ...] = ()

    @property
    def status(self) -> str:
        return "passed" if self.passed else "failed" if self.observable else "not_observable"

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "status": self.status}


class Checks:
    """Collects the checks of one probe; ids are prefixed with the probe name."""

    def __init__(self, probe: str, reads: Callable[[], list[int]] | None = None):
        self.probe = probe
        self.results: list[CheckResult] = []
        # the journal seqs the check function looked up since the previous check
        self._reads = reads

    def _add(self, check_id: str, claim: str | None, description: str, passed: bool,
             expected: Any, observed: Any, evidence: str, observable: bool = True) -> bool:
        full_id = f"{self.probe}.{check_id}"
        if any(r.id == full_id for r in self.results):
            raise ValueError(f"check id {full_id!r} is used twice")
        seqs = tuple(self._reads()) if self._reads else ()
        self.results.append(CheckResult(full_id, claim, description, bool(passed), expected,
                                        MISSING if observed is None else observed, evidence,
                                        observable, seqs))
        return bool(passed)

    def equal(self, check_id: str, claim: str | None, description: str, *, expected: Any,
              observed: Any, evidence: str) -> bool:
        return self._add(check_id, claim, description, observed == expected, expected,
                         observed, evidence)

    def that(self, check_id: str, claim: str | None, description: str, *, passed: bool,
             expected: Any, observed: Any, evidence: str) -> bool:
        """A check whose pass condition is not plain equality (e.g. containment, ordering)."""
        return self._add(check_id, claim, description, passed, expected, observed, evidence)

    def contains(self, check_id: str, claim: str | None, description: str, *, needle: str,
                 haystack: str | None, evidence: str) -> bool:
        found = haystack is not None and needle in haystack
        # a short text is shown whole; a long one (a request, a whole stdout) is summarised
        shown = None if haystack is None else (
            f"contains {needle!r}" if found else
            haystack.strip() if len(haystack.strip()) <= 240 else
            f"does not contain {needle!r}")
        return self._add(check_id, claim, description, found, f"contains {needle!r}", shown,
                         evidence)

    def absent(self, check_id: str, claim: str | None, description: str, *, needle: str,
               haystack: str | None, evidence: str) -> bool:
        present = haystack is None or needle in haystack
        shown = None if haystack is None else (
            f"contains {needle!r}" if needle in haystack else f"does not contain {needle!r}")
        return self._add(check_id, claim, description, not present,
                         f"does not contain {needle!r}", shown, evidence)

    def visible(self, check_id: str, claim: str | None, description: str, *, seen: bool,
                expected: Any, looked_in: str, hidden_because: str) -> bool:
        """Something this mode may not show: passes when ``seen``; otherwise it is not
        observable (``hidden_because`` says why), not a failure of the claim."""
        observed = "seen" if seen else (f"not seen in {looked_in}; not observable in this "
                                        f"mode: {hidden_because}")
        self._add(check_id, claim, description, seen, expected, observed, looked_in,
                  observable=seen)
        return seen
