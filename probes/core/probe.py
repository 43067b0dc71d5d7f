"""What a probe is: a scenario, client invocations in one sandbox, and checks stating claims.

A probe is declarative; adding one is adding one module to ``probes/catalog``.
Reports group probes (one JSON file per report). This module is also the authoring
API for your own probes: it re-exports ``Invocation`` and ``Hooks``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from mockapi.scenario import Scenario
from probes.core.checks import Checks
from probes.core.evidence import Evidence
from probes.core.invocation import CAPABILITIES, Hooks, Invocation
from probes.core.names import NAME_LENGTH, simple_name_problem
from probes.core.provenance import Source, unstated

__all__ = ["HARNESS_CLASSIFIER", "Claim", "Counterfactual", "Hooks", "Invocation", "Probe",
           "ReportSpec", "Source", "served_scenario", "shown_scenario"]

# Probes script Claude Code: its side requests (titles, summaries…), warmups, compactions and
# subagents are told apart, as they always were here (the mock's own default is "plain")
HARNESS_CLASSIFIER = "claude-code"


def served_scenario(scenario: Scenario) -> Scenario:
    """A probe's scenario as the harness serves it: with ``HARNESS_CLASSIFIER`` unless the
    probe names a classifier of its own (the tool runner's ``plain``)."""
    if "classifier" in scenario.model_fields_set:
        return scenario
    return scenario.model_copy(update={"classifier": HARNESS_CLASSIFIER})


def shown_scenario(scenario: Scenario) -> dict[str, Any]:
    """A served scenario as a report shows it: what was scripted, without the defaults — the
    harness's own for the classifier, so that reports keep the shape they always had."""
    shown: dict[str, Any] = scenario.model_dump(mode="json", exclude_defaults=True)
    shown.pop("classifier", None)
    if scenario.classifier != HARNESS_CLASSIFIER:
        shown["classifier"] = scenario.classifier
    return shown


@dataclass(frozen=True)
class Claim:
    id: str
    statement: str
    source: Source = field(default_factory=unstated)
    # what the statement expects beyond what its source states, and why we expect it
    beyond_source: str | None = None


@dataclass(frozen=True)
class Counterfactual:
    """A variant of a probe in which the claimed behaviour cannot happen: run on the real
    client, each of ``claims`` must then fail (shows the checks can fail on real behaviour)."""

    name: str
    description: str  # the setup, and why the behaviour cannot happen in it
    claims: tuple[str, ...]
    change: Callable[[Probe], Probe]

    def probe(self, original: Probe) -> Probe:
        changed = self.change(original)
        return replace(changed, name=f"{original.name}.counterfactual.{self.name}",
                       counterfactuals=())


@dataclass(frozen=True)
class Probe:
    name: str
    title: str
    claims: tuple[Claim, ...]
    scenario: Scenario
    invocations: tuple[Invocation, ...]
    check: Callable[[Evidence, Checks], None]
    fixtures: dict[str, str] = field(default_factory=dict)
    hooks: Hooks | None = None  # None: no hook is installed at all
    boundaries: tuple[str, ...] = ()
    # capabilities beyond what the invocations imply (see probes.core.invocation.CAPABILITIES);
    # a client that lacks one is not applicable
    requires: tuple[str, ...] = ()
    counterfactuals: tuple[Counterfactual, ...] = ()
    # whether its requests count in the version's fingerprint: probes that give the client
    # tools or flags of their own (an MCP server, --json-schema, streamed input) do not, so
    # fingerprints compare versions on the same plain runs whatever the suite grew to hold
    fingerprinted: bool = True

    def __post_init__(self) -> None:
        # its sandbox is a folder named after it; a counterfactual's name adds to its probe's
        problem = simple_name_problem("probe", self.name, longest=2 * NAME_LENGTH)
        if problem:
            raise ValueError(problem)
        unknown = sorted(set(self.requires) - set(CAPABILITIES))
        if unknown:
            raise ValueError(f"probe {self.name!r} requires unknown capabilities {unknown}; "
                             f"known: {', '.join(CAPABILITIES)}")
        names = [i.name for i in self.invocations]
        if len(set(names)) != len(names):
            raise ValueError(f"probe {self.name!r}: invocation names repeat: {names}")
        claims = {c.id for c in self.claims}
        for counterfactual in self.counterfactuals:
            if not set(counterfactual.claims) <= claims:
                raise ValueError(f"probe {self.name!r}: counterfactual {counterfactual.name!r} "
                                 f"names claims {sorted(set(counterfactual.claims) - claims)} "
                                 f"that are not the probe's: {sorted(claims)}")

    def capabilities(self) -> list[str]:
        """Everything a client must support to run this probe, in a stable order."""
        needed = set(self.requires).union(*(i.capabilities() for i in self.invocations))
        if self.hooks is not None:
            needed.add("hooks")
        return [name for name in CAPABILITIES if name in needed]


@dataclass(frozen=True)
class ReportSpec:
    name: str
    title: str
    probes: tuple[Probe, ...]
    summary: str = ""
