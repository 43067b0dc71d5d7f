"""Where a claim's expectation comes from, cited so a reader without this repository finds it.

A claim's expectation is either stated by the published analysis (its title, the
version it analyses, the section, the line and a short quote in the original
language) or a project expectation (why we expect it, and the public reference it
rests on: a documentation page, an issue) or a baseline: what loopprobe itself recorded a
given version doing, when no published source states the behaviour. A baseline is not a
source's word: a version that behaves otherwise *differs from the baseline*, it does not
contradict anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from probes.core.names import CatalogError, described

__all__ = ["ANALYSIS_TITLE", "ANALYSIS_VERSION", "MAX_QUOTE", "SOURCE_KINDS", "Source",
           "baseline", "from_analysis", "project_expectation", "unstated"]

ANALYSIS_TITLE = "Claude Code CLI 2.1.235 Agent Loop"
ANALYSIS_VERSION = "2.1.235"
MAX_QUOTE = 200
SOURCE_KINDS = ("analysis", "project", "baseline", "unstated")


@dataclass(frozen=True)
class Source:
    kind: Literal["analysis", "project", "baseline", "unstated"]
    # analysis: the section heading as published; project: the public reference;
    # baseline: the client and version whose recorded behaviour is the expectation
    where: str
    # analysis: a short quote of the passage, in its language; project: the reason;
    # baseline: what was recorded, and where the committed evidence of it is
    text: str
    line: int | None = None  # analysis: the line of the quote in the published text

    def __post_init__(self) -> None:
        if self.kind not in SOURCE_KINDS:
            raise CatalogError(f"Source: kind must be one of {', '.join(SOURCE_KINDS)}, got "
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
        if self.kind == "baseline" and not (self.where and self.text):
            raise CatalogError("Source (baseline): a baseline needs the version it was recorded "
                               "on and what was recorded")

    def cite(self) -> str:
        """One line a reader can follow without this repository."""
        if self.kind == "analysis":
            line = f", line {self.line}" if self.line is not None else ""
            quote = " ".join(self.text.split())  # a quote across table rows, on one line
            return (f"“{ANALYSIS_TITLE}” (analysis of Claude Code {ANALYSIS_VERSION}), "
                    f"section “{self.where}”{line}: “{quote}”")
        if self.kind == "project":
            return f"project expectation: {self.text} (reference: {self.where})"
        if self.kind == "baseline":
            return f"baseline, as recorded on {self.where}: {self.text}"
        return "no source given for this expectation"

    def to_json(self) -> dict[str, Any]:
        if self.kind == "analysis":
            return {"kind": "analysis", "title": ANALYSIS_TITLE, "version": ANALYSIS_VERSION,
                    "section": self.where, "line": self.line, "quote": self.text,
                    "citation": self.cite()}
        if self.kind == "project":
            return {"kind": "project", "reference": self.where, "reason": self.text,
                    "citation": self.cite()}
        if self.kind == "baseline":
            return {"kind": "baseline", "recorded_on": self.where, "recorded": self.text,
                    "citation": self.cite()}
        return {"kind": "unstated", "citation": self.cite()}


def from_analysis(section: str, quote: str, line: int | None = None) -> Source:
    return Source("analysis", section, quote, line)


def project_expectation(reason: str, reference: str) -> Source:
    return Source("project", reference, reason)


def baseline(recorded_on: str, recorded: str) -> Source:
    """An expectation that is loopprobe's own recording of ``recorded_on`` (e.g.
    ``"claude-code 2.1.235"``): ``recorded`` says what it did and where the evidence is."""
    return Source("baseline", recorded_on, recorded)


def unstated() -> Source:
    return Source("unstated", "", "")
