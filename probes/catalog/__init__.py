"""The probe suite: every report and the probes it groups."""

from __future__ import annotations

from probes.catalog import tool_result_resume
from probes.model import ReportSpec

__all__ = ["REPORTS", "find_report"]

REPORTS: tuple[ReportSpec, ...] = (
    ReportSpec(
        name="agent-loop-tool-result-resume",
        title="Agent loop: tool feedback, resume, manual compaction and fork",
        probes=(tool_result_resume.PROBE,),
        summary="One isolated session: a Read tool_use answered by the client with a paired "
                "tool_result, resumed, compacted by /compact and forked.",
    ),
)


def find_report(name: str) -> ReportSpec:
    for spec in REPORTS:
        if spec.name == name:
            return spec
    raise KeyError(f"no report {name!r}; known: {', '.join(s.name for s in REPORTS)}")
