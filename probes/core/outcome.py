"""What running one probe produced: its evidence and checks, or why there are none."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from probes.core.checks import CheckResult
from probes.core.evidence import Evidence
from probes.core.probe import Probe

__all__ = ["ProbeOutcome"]


@dataclass
class ProbeOutcome:
    probe: Probe
    evidence: Evidence | None
    checks: list[CheckResult]
    sandbox: Path | None
    error: str | None = None  # a harness error: the evidence could not be gathered or checked
    not_applicable: str | None = None
    scenario: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.error is None and self.not_applicable is None and bool(self.checks) \
            and all(c.status != "failed" for c in self.checks)

    @property
    def status(self) -> str:
        return ("not_applicable" if self.not_applicable else "error" if self.error
                else "passed" if self.passed else "failed")
