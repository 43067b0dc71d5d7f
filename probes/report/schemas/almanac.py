"""The shapes of the almanac: almanac.json, and the lines of its build state (a finished run,
a retraction)."""

from __future__ import annotations

from typing import Annotated, Literal, NotRequired

from pydantic import Field
from typing_extensions import TypedDict

from probes.report.schemas.changelog import ChangelogDecision, ChangelogEntryShown

__all__ = ["AlmanacChange", "AlmanacClaim", "AlmanacCost", "AlmanacFile", "AlmanacFlip",
           "AlmanacLine", "AlmanacMethod", "AlmanacRange", "AlmanacRetraction", "AlmanacRun",
           "AlmanacSegment", "AlmanacVersion"]

_VERDICT = Literal["confirmed", "contradicted", "differs_from_baseline", "absent", "not_reached",
                  "not_observable", "not_applicable", "error"]
# a version's verdict in an almanac: a claim verdict, or what the search could say of it
_ALMANAC_VERDICT = Literal["confirmed", "contradicted", "differs_from_baseline", "absent",
                           "not_reached", "not_observable", "not_applicable", "error",
                           "flaky", "unresolved", "missing"]


class AlmanacSegment(TypedDict):
    first: str
    last: str
    verdict: _ALMANAC_VERDICT  # held on every version first..last
    probed: list[str]  # the versions of the range where it was run
    outcomes: NotRequired[list[str]]  # flaky: what each attempt gave


class AlmanacFlip(TypedDict):
    id: str
    before: str
    after: str


AlmanacChange = TypedDict("AlmanacChange", {
    "before": str,  # the last version of the old verdict
    "after": str,  # the first of the new one (adjacent releases when located)
    "from": str,
    "to": str,
    "located": bool,
    "candidates": NotRequired[list[str]],  # not located: the versions that may hold it
    # what moved: the feature, the behaviour, the instrument... (probes.core.changes)
    "kind": Literal["behaviour", "presence", "reach", "reporting", "instrument",
                    "source"] | None,
    "change": str | None,  # its name, a key of probes.core.changes.CHANGE_KINDS
    "verified": bool,  # both sides run again in a fresh sandbox, the same
    "flipped_checks": list[AlmanacFlip],
    # the claim's premise checks on both sides (what the probe relies on the version having)
    "premises": NotRequired[list[AlmanacFlip]],
    "witnesses": dict[str, str | None],  # before/after -> evidence folder, relative
    "changelog": NotRequired[list[ChangelogEntryShown]],  # loop entries of (before, after]
})


class AlmanacClaim(TypedDict):
    id: str
    probe: str
    area: str  # the report it is in
    statement: str
    introduced: str | None  # the first version of a presence: introduced change
    segments: list[AlmanacSegment]
    changes: list[AlmanacChange]


class AlmanacVersion(TypedDict):
    version: str
    binary_sha256: str
    screen: str  # the screen's digest (error: its run failed)
    probes_run: int  # probes with a verdict of their own on it
    witness: str | None  # its evidence folder, relative to almanac.json


class AlmanacRange(TypedDict):
    first: str
    last: str
    count: int


class AlmanacMethod(TypedDict):
    grid: int
    screen_probe: str
    grid_versions: list[str]
    guarantee: str


class AlmanacCost(TypedDict):
    builds: int  # builds that ended (a killed one's runs count, its installs do not)
    suite_runs: int
    probe_runs: int
    screens: int
    installs: int
    wall_s: float  # seconds of the suite runs that recorded it, without lock waits


class AlmanacFile(TypedDict):
    """Every version of a range, per claim (``loopprobe almanac``)."""

    schema_version: int
    kind: Literal["almanac"]
    generator: str
    client: str
    method: AlmanacMethod
    range: AlmanacRange
    not_built: list[AlmanacRange]  # published 2.x versions the almanac does not cover yet
    versions: list[AlmanacVersion]
    claims: list[AlmanacClaim]
    cost: AlmanacCost
    changelog: NotRequired[ChangelogDecision]  # the public changelog as a witness


class AlmanacRun(TypedDict):
    """One finished run of an almanac build's state (``cells/<version>.runs.jsonl``)."""

    version: str
    binary_sha256: str
    folder: str
    screen: NotRequired[str]
    probe: NotRequired[str]
    attempt: NotRequired[int]
    claims: NotRequired[dict[str, _VERDICT]]
    checks: NotRequired[dict[str, dict[str, str]]]
    # the probe's revision (probes.core.probe.Probe.revision) when it is past the first
    revision: NotRequired[Annotated[int, Field(ge=2)]]
    batch_s: NotRequired[float]  # the suite run it came from: seconds (no lock wait), probes
    batch_probes: NotRequired[int]


class AlmanacRetraction(TypedDict):
    """A line of an almanac build's state withdrawing the runs made into one report folder
    (``loopprobe almanac retract``): they stay in the file and the cost, and are run again."""

    version: str
    retract: str  # the runs' report folder, as the runs name it
    probe: NotRequired[str]  # only this probe's run (none: every run of the folder)
    reason: Annotated[str, Field(min_length=1)]  # what the harness got wrong there


AlmanacLine = AlmanacRun | AlmanacRetraction
