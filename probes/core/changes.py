"""What changed between two releases for one claim, named as a release note would name it,
and true: decided from the two verdicts and the checks that flipped between them.

- ``introduced`` / ``removed``: the feature (or a premise of it: a flag, a variable, a hook
  field the claim is about) appears or goes (``absent`` on one side).
- ``fixed`` / ``regressed``: the behaviour itself, with every premise held on both sides
  (contradicted ↔ confirmed; a side upheld with only an unreported field unseen counts as
  upheld).
- ``now observable`` / ``no longer observable``: an instrument the harness measures with
  (a premise of role instrument: a hook input field, an event) appears or goes; the
  behaviour on the side without it is unknown, never called a fix or a regression.
- ``reporting``: a field of the client's output that states the behaviour (a
  ``terminal_reason``) appears or goes; the behaviour checks agree on both sides.
- ``now reached`` / ``no longer reached``: the probe triggers the mechanism (a gate opened).
- ``source``: contradicted ↔ differs from baseline (the claim's source changed).
- ``error``: a harness failure on either side decides nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from probes.core.verdicts import AGAINST

__all__ = ["CHANGE_KINDS", "PREMISE_MARK", "is_premise_check", "release_change"]

# each change's name -> its kind (what moved: the feature, the behaviour, the instrument...)
CHANGE_KINDS: dict[str, str | None] = {
    "introduced": "presence", "removed": "presence",
    "fixed": "behaviour", "regressed": "behaviour",
    "now observable": "instrument", "no longer observable": "instrument",
    "reporting": "reporting",
    "now reached": "reach", "no longer reached": "reach",
    "source": "source", "error": None, "changed": None,
}
# how a premise check's id is told from the others' (probes.core.premises.premise_checks)
PREMISE_MARK = ".premise."


def is_premise_check(check_id: str) -> bool:
    return PREMISE_MARK in f".{check_id}"


def _premise_moved(flipped: Sequence[Mapping[str, Any]], to_passed: bool) -> bool:
    """A premise check went to passed (``to_passed``) or from passed."""
    side = "after" if to_passed else "before"
    return any(is_premise_check(str(f.get("id"))) and f.get(side) == "passed" for f in flipped)


def release_change(before: str, after: str,
                   flipped: Sequence[Mapping[str, Any]] = ()) -> str | None:
    """The name of what a claim's verdict did from ``before`` to ``after`` (a key of
    ``CHANGE_KINDS``), given the checks whose status differs (``{"id", "before", "after"}``);
    None when the verdicts are equal."""
    if before == after:
        return None
    if "error" in (before, after):
        return "error"
    if after == "absent":
        return "removed"
    if before == "absent":
        return "introduced"
    if "not_applicable" in (before, after):
        return "changed"
    if before == "not_reached":
        return "now reached"
    if after == "not_reached":
        return "no longer reached"
    if before in AGAINST and after in AGAINST:
        return "source"
    if before == "not_observable":
        if _premise_moved(flipped, to_passed=True):
            return "now observable"
        return "regressed" if after in AGAINST else "reporting"
    if after == "not_observable":
        if _premise_moved(flipped, to_passed=False):
            return "no longer observable"
        return "fixed" if before in AGAINST else "reporting"
    return "fixed" if before in AGAINST else "regressed"
