"""Checks: one property of the evidence, stated by a claim, with what was expected and seen.

The expectation comes from the claim. A check never adapts it to what a client
version did; when the client disagrees, the check fails and says what it saw. A
check of something the run's mode cannot show (print mode drops some messages) is
"not observable" when it is not seen: it says what was looked for and where, and is
never counted as a contradiction.

Each check has a role, which decides what its failure means for its claim
(``probes.core.verdicts.decide_claim``):

- ``reach``: the feature exists in this version and the probe triggered the mechanism
  (the command was accepted, the tool was offered and called with input the version
  accepted, the gate answered open). A failed reach check makes the claim *absent* (the
  version lacks the feature) or *not reached* (the feature is there, the probe did not
  trigger it); its behaviour checks then say nothing about the claim.
- ``behaviour``: what the claim states. Failed, with reach held: *contradicted*.
- ``reporting``: a field of the client's output that states the behaviour (a
  ``terminal_reason``). Missing, because the version never reports it: *not observable*;
  present with another value: a failure like a behaviour check's.
- ``premise``: the version has what the probe relies on (``probes.core.premises``): a flag,
  a variable, a field it measures with. Missing, the claim is *absent* (a premise of the
  feature) or *not observable* (of the harness's instrument); not established either way,
  *not observable*. Only with every premise held can a behaviour check contradict.

A value the check could not measure (``Unmeasured``: no pairing id, no timestamp) makes a
behaviour check *not observable*, never failed: the instrument was missing, not the
behaviour.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Literal

__all__ = ["MISSING", "ROLES", "CheckResult", "Checks", "Role", "Unmeasured", "Unreached",
           "unmeasured_in"]

MISSING = "<missing>"
Role = Literal["reach", "behaviour", "reporting", "premise"]
ROLES: tuple[Role, ...] = ("reach", "behaviour", "reporting", "premise")
# what a failed reach or premise check says of its claim
Unreached = Literal["absent", "not_reached", "not_observable"]


@dataclass(frozen=True)
class Unmeasured:
    """An observed value the instrument could not measure, and why (a hook window without its
    call's id, a run without timestamps): the check is not observable, never failed."""

    why: str

    def __str__(self) -> str:
        return f"not measured: {self.why}"


def unmeasured_in(value: Any) -> Unmeasured | None:
    """The first ``Unmeasured`` in an observed value (itself, or one of a dict's or list's
    items), if any."""
    if isinstance(value, Unmeasured):
        return value
    items = value.values() if isinstance(value, dict) else value \
        if isinstance(value, list | tuple) else ()
    return next((found for item in items if (found := unmeasured_in(item)) is not None), None)


def _shown(value: Any) -> Any:
    """An observed value as the report keeps it: each ``Unmeasured`` as its sentence."""
    if isinstance(value, Unmeasured):
        return str(value)
    if isinstance(value, dict):
        return {key: _shown(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_shown(item) for item in value]
    return value


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
    role: Role = "behaviour"
    unreached: Unreached | None = None  # a failed reach check: what it says of the claim

    @property
    def status(self) -> str:
        """passed, failed, not_observable, or (a failed reach check) absent / not_reached."""
        if self.passed:
            return "passed"
        if self.role == "reach":
            return self.unreached or "not_reached"
        if self.role == "premise":
            return self.unreached or "not_observable"
        return "failed" if self.observable else "not_observable"

    def to_json(self) -> dict[str, Any]:
        entry = {**asdict(self), "status": self.status}
        # a behaviour check, the default, is written as before roles existed
        if self.role == "behaviour":
            del entry["role"]
        if self.unreached is None:
            del entry["unreached"]
        return entry


class Checks:
    """Collects the checks of one probe; ids are prefixed with the probe name."""

    def __init__(self, probe: str, reads: Callable[[], list[int]] | None = None):
        self.probe = probe
        self.results: list[CheckResult] = []
        # the journal seqs the check function looked up since the previous check
        self._reads = reads

    def _add(self, check_id: str, claim: str | None, description: str, passed: bool,
             expected: Any, observed: Any, evidence: str, observable: bool = True,
             role: Role = "behaviour", unreached: Unreached | None = None) -> bool:
        full_id = f"{self.probe}.{check_id}"
        if any(r.id == full_id for r in self.results):
            raise ValueError(f"check id {full_id!r} is used twice")
        seqs = tuple(self._reads()) if self._reads else ()
        if not passed and role in ("behaviour", "reporting") and unmeasured_in(observed):
            observable = False  # the instrument was missing, not the behaviour
        self.results.append(CheckResult(full_id, claim, description, bool(passed), expected,
                                        MISSING if observed is None else _shown(observed),
                                        evidence, observable, seqs, role,
                                        None if passed else unreached))
        return bool(passed)

    def premise(self, check_id: str, claim: str, description: str, *, present: bool | None,
                role: Literal["feature", "instrument"], expected: Any, observed: Any,
                evidence: str) -> bool:
        """That the version has what the probe relies on (``probes.core.premises``). Missing:
        the claim is absent (``role`` feature) or not observable (instrument); ``present``
        None (nothing established it) is not observable either way."""
        missing: Unreached = "absent" if role == "feature" and present is False \
            else "not_observable"
        return self._add(check_id, claim, description, present is True, expected, observed,
                         evidence, role="premise", unreached=missing)

    def reach(self, check_id: str, claim: str, description: str, *, held: bool,
              absent: bool, expected: Any, observed: Any, evidence: str) -> bool:
        """That the feature exists and the probe triggered it. When not ``held``: ``absent``
        says this version lacks the feature (an unknown command, tool, flag or field), else
        the feature is there and the mechanism was not reached (a gate closed, the probe's
        input refused). ``observed`` is what decided it, in the client's own words."""
        return self._add(check_id, claim, description, held, expected, observed, evidence,
                         role="reach", unreached="absent" if absent else "not_reached")

    def reports(self, check_id: str, claim: str, description: str, *, expected: Any,
                observed: Any, evidence: str) -> bool:
        """A field of the client's output that states the behaviour: equal to ``expected``
        passes; missing (``observed`` None: this version never reports it) is not
        observable; another value fails."""
        return self._add(check_id, claim, description, observed == expected, expected,
                         observed, evidence, observable=observed is not None,
                         role="reporting")

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
