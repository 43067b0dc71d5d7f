"""Where a claim's expectation comes from, cited so a reader without this repository finds it.

A claim's expectation is either stated by the published analysis (its title, the
version it analyses, the section, the line and a short quote in the original
language) or a project expectation (why we expect it, and the public reference it
rests on: a documentation page, an issue, a prior version's recorded behaviour).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from probes.core.names import CatalogError, described

__all__ = ["ANALYSIS_TITLE", "ANALYSIS_VERSION", "MAX_QUOTE", "Source", "from_analysis",
           "project_expectation", "unstated"]

ANALYSIS_TITLE = "Claude Code CLI 2.1.235 Agent Loop"
ANALYSIS_VERSION = "2.1.235"
MAX_QUOTE = 200


@dataclass(frozen=True)
class Source:
    kind: Literal["analysis", "project", "unstated"]
    # analysis: the section heading as published; project: the public reference
    where: str
    # analysis: a short quote of the passage, in its language; project: the reason
    text: str
    line: int | None = None  # analysis: the line of the quote in the published text

    def __post_init__(self) -> None:
        if self.kind not in ("analysis", "project", "unstated"):
            raise CatalogError(f"Source: kind must be 'analysis', 'project' or 'unstated', got "
                               f"{described(self.kind)}")
        for name in ("where", "text"):
            if not isinstance(getattr(self, name), str):
                raise CatalogError(f"Source ({self.kind}): {name} must be a string, got "
                                   f"{described(getattr(self, name))}")
        if not isinstance(self.line, int | None) or isinstance(self.line, bool):
            raise CatalogError(f"Source ({self.kind}): line must be a line number or None, got "
                               f"{described(self.line)}")
        if self.kind == "analysis" and not (self.where and self.text):
            raise CatalogError("Source (analysis): an analysis source needs its section and a quote")
        if self.kind == "analysis" and len(self.text) > MAX_QUOTE:
            raise CatalogError(f"Source (analysis): quote longer than {MAX_QUOTE} characters: "
                               f"{self.text[:40]!r}…")
        if self.kind == "project" and not (self.where and self.text):
            raise CatalogError("Source (project): a project expectation needs its reason and its "
                               "reference")

    def cite(self) -> str:
        """One line a reader can follow without this repository."""
        if self.kind == "analysis":
            line = f", line {self.line}" if self.line is not None else ""
            quote = " ".join(self.text.split())  # a quote across table rows, on one line
            return (f"“{ANALYSIS_TITLE}” (analysis of Claude Code {ANALYSIS_VERSION}), "
                    f"section “{self.where}”{line}: “{quote}”")
        if self.kind == "project":
            return f"project expectation: {self.text} (reference: {self.where})"
        return "no source given for this expectation"

    def to_json(self) -> dict[str, Any]:
        if self.kind == "analysis":
            return {"kind": "analysis", "title": ANALYSIS_TITLE, "version": ANALYSIS_VERSION,
                    "section": self.where, "line": self.line, "quote": self.text,
                    "citation": self.cite()}
        if self.kind == "project":
            return {"kind": "project", "reference": self.where, "reason": self.text,
                    "citation": self.cite()}
        return {"kind": "unstated", "citation": self.cite()}


def from_analysis(section: str, quote: str, line: int | None = None) -> Source:
    return Source("analysis", section, quote, line)


def project_expectation(reason: str, reference: str) -> Source:
    return Source("project", reference, reason)


def unstated() -> Source:
    return Source("unstated", "", "")
