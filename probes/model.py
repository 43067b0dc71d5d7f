"""What a probe is: a scenario, client invocations in one sandbox, and checks stating claims.

A probe is declarative; adding one is adding one module to ``probes/catalog``.
Reports group probes (one JSON file per report).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from mockapi import Scenario

if TYPE_CHECKING:
    from probes.checks import Checks
    from probes.evidence import Evidence

__all__ = ["Claim", "Invocation", "Probe", "ReportSpec"]


@dataclass(frozen=True)
class Claim:
    id: str
    statement: str
    source: str = "../shared/claims/agent-loop-2.1.235.md"


@dataclass(frozen=True)
class Invocation:
    """One run of the client inside the probe's sandbox.

    ``session``: ``new`` starts a session with a fixed id (derived from the probe
    and this invocation's name); ``resume`` continues the session started by the
    invocation named in ``resume_from``; ``none`` passes no session flag.
    """

    name: str
    prompt: str
    session: Literal["new", "resume", "none"] = "new"
    resume_from: str | None = None
    fork: bool = False
    tools: tuple[str, ...] | None = ("Read",)
    max_turns: int | None = None
    settings: dict[str, Any] | None = None
    extra_args: tuple[str, ...] = ()
    env: dict[str, str | None] = field(default_factory=dict)  # None unsets a variable
    timeout: float = 90.0
    model: str = "claude-sonnet-4-5"


@dataclass(frozen=True)
class Probe:
    name: str
    title: str
    claims: tuple[Claim, ...]
    scenario: Scenario
    invocations: tuple[Invocation, ...]
    check: Callable[[Evidence, Checks], None]
    fixtures: dict[str, str] = field(default_factory=dict)
    hooks: dict[str, Any] | None = None  # policy for probes.hook_recorder
    boundaries: tuple[str, ...] = ()
    # flags beyond the client's base ones; a client whose --help lacks one is not applicable
    requires_flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class ReportSpec:
    name: str
    title: str
    probes: tuple[Probe, ...]
    summary: str = ""
