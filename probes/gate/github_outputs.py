"""The gate's step outputs, appended to the file $GITHUB_OUTPUT names (``key=value`` lines).

``failed`` and ``regressed`` are ``true``/``false``; ``first-bad-version`` is empty when
nothing failed. Values are versions and booleans, never multi-line, but a value with a line
break would forge another output: it is refused.
"""

from __future__ import annotations

from pathlib import Path

from probes.gate.gate import GateResult

__all__ = ["append_github_outputs", "github_outputs"]


def github_outputs(result: GateResult) -> dict[str, str]:
    return {"failed": str(result.failed).lower(), "regressed": str(result.regressed).lower(),
            "first-bad-version": result.first_bad_version or ""}


def append_github_outputs(path: Path, result: GateResult) -> Path:
    outputs = github_outputs(result)
    for key, value in outputs.items():
        if "\n" in value or "\r" in value:
            raise ValueError(f"output {key}: expected one line, found {value!r}")
    with path.open("a", encoding="utf-8") as handle:  # appended: other steps' outputs stay
        handle.writelines(f"{key}={value}\n" for key, value in outputs.items())
    return path
