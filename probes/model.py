"""What a probe is: a scenario, client invocations in one sandbox, and checks stating claims.

A probe is declarative; adding one is adding one module to ``probes/catalog``.
Reports group probes (one JSON file per report). This module is also the authoring
API for your own probes: it re-exports ``Invocation`` and ``Hooks``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from mockapi.scenario import Scenario
from probes.checks import Checks
from probes.evidence import Evidence
from probes.invocation import CAPABILITIES, Hooks, Invocation

__all__ = ["Claim", "Hooks", "Invocation", "Probe", "ReportSpec"]


@dataclass(frozen=True)
class Claim:
    id: str
    statement: str
    source: str = "../shared/claims/agent-loop-2.1.235.md"


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
    # capabilities beyond what the invocations imply (see probes.invocation.CAPABILITIES);
    # a client that lacks one is not applicable
    requires: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        unknown = sorted(set(self.requires) - set(CAPABILITIES))
        if unknown:
            raise ValueError(f"probe {self.name!r} requires unknown capabilities {unknown}; "
                             f"known: {', '.join(CAPABILITIES)}")
        names = [i.name for i in self.invocations]
        if len(set(names)) != len(names):
            raise ValueError(f"probe {self.name!r}: invocation names repeat: {names}")

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
