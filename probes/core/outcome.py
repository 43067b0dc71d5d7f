"""What running one probe produced: its evidence and checks, or why there are none."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from probes.core.checks import CheckResult
from probes.core.evidence import Evidence
from probes.core.probe import Probe
from probes.core.verdicts import is_harness_failure

__all__ = ["ProbeOutcome"]


@dataclass
class ProbeOutcome:
    probe: Probe
    evidence: Evidence | None
    checks: list[CheckResult]
    sandbox: Path | None
    error: str | None = None  # a harness error: the evidence could not be gathered or checked
    not_applicable: str | None = None  # the client kind lacks what the probe needs
    scenario: dict[str, Any] = field(default_factory=dict)
    absent: str | None = None  # this version lacks what the probe needs (a flag of others)

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    @property
    def status(self) -> str:
        """not_applicable; absent (this version lacks a flag the probe needs); error (the
        harness's, or one of its checks failed); failed (a check of a claim failed); unreached
        (only reach checks failed: the feature is absent or was not triggered); passed."""
        if self.not_applicable:
            return "not_applicable"
        if self.absent:
            return "absent"
        if self.error or not self.checks or any(is_harness_failure(c.to_json())
                                                for c in self.checks):
            return "error"
        statuses = {c.status for c in self.checks}
        if "failed" in statuses:
            return "failed"
        if statuses & {"absent", "not_reached"}:
            return "unreached"
        return "passed"
