"""The gate's step outputs, appended to the file $GITHUB_OUTPUT names (``key=value`` lines).

``failed`` and ``regressed`` are ``true``/``false``; ``first-bad-version`` is empty when
nothing failed. Written by the one writer of step outputs
(``probes.report.github_ci.append_github_outputs``), which refuses a value that would forge
another output.
"""

from __future__ import annotations

from pathlib import Path

from probes.gate.gate import GateResult
from probes.report import github_ci

__all__ = ["append_github_outputs", "github_outputs"]


def github_outputs(result: GateResult) -> dict[str, str]:
    return {"failed": str(result.failed).lower(), "regressed": str(result.regressed).lower(),
            "first-bad-version": result.first_bad_version or ""}


def append_github_outputs(path: Path, result: GateResult) -> Path:
    return github_ci.append_github_outputs(path, github_outputs(result))
