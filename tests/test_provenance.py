"""Every claim of the built-in catalog says where its expectation comes from.

A claim quoting the published analysis must quote it verbatim, at the line and in the
section it names. The analysis itself is not part of the repository: CI keeps a copy
beside it (``LOOPPROBE_ANALYSIS`` points elsewhere); without one those checks skip.
Reports are read by people who have neither the copy nor its path, so no claim may
name it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from probes.catalog import REPORTS
from probes.core.probe import Claim
from probes.core.provenance import MAX_QUOTE

ANALYSIS_FILE = "agent-loop-2.1.235.md"
HEADING_END = "¶"
# a local copy's location must never reach a report
LOCAL_PATHS = ("../shared", "shared/claims")


def _claims() -> list[Claim]:
    return [claim for spec in REPORTS for probe in spec.probes for claim in probe.claims]


CLAIMS = _claims()
QUOTING = [claim for claim in CLAIMS if claim.source.kind == "analysis"]


def _analysis_path() -> Path:
    override = os.environ.get("LOOPPROBE_ANALYSIS")
    if override:
        return Path(override)
    return Path(__file__).resolve().parents[2] / "shared" / "claims" / ANALYSIS_FILE


@pytest.fixture(scope="module")
def analysis() -> str:
    path = _analysis_path()
    if not path.is_file():
        pytest.skip(f"no copy of the published analysis at {path}: CI keeps one in "
                    "../shared/claims/ beside the repository; set LOOPPROBE_ANALYSIS=<file> "
                    "to use another")
    return path.read_text(encoding="utf-8")


def test_the_catalog_has_claims_with_distinct_ids() -> None:
    ids = [claim.id for claim in CLAIMS]
    assert ids and len(set(ids)) == len(ids)


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: c.id)
def test_every_claim_has_a_source(claim: Claim) -> None:
    # a baseline is a source too: loopprobe's recording of one version, said as such
    assert claim.source.kind in ("analysis", "project", "baseline"), claim.source.cite()
    assert claim.source.where.strip() and claim.source.text.strip()


@pytest.mark.parametrize("claim", QUOTING, ids=lambda c: c.id)
def test_an_analysis_source_is_short_and_names_its_line(claim: Claim) -> None:
    source = claim.source
    assert 0 < len(source.text) <= MAX_QUOTE
    assert source.line is not None and source.line > 0
    assert not source.where.endswith(HEADING_END), "the heading is cited without its ¶"


@pytest.mark.parametrize("claim", QUOTING, ids=lambda c: c.id)
def test_an_analysis_quote_is_verbatim_at_its_line(claim: Claim, analysis: str) -> None:
    source = claim.source
    assert source.line is not None
    lines = analysis.split("\n")
    assert source.line <= len(lines), f"line {source.line} is past the end ({len(lines)} lines)"
    assert source.text in analysis, f"not in the analysis: {source.text!r}"
    start = sum(len(line) + 1 for line in lines[:source.line - 1])
    found = analysis.find(source.text, start)
    assert start <= found < start + len(lines[source.line - 1]) + 1, (
        f"line {source.line} does not hold the start of the quote; it reads "
        f"{lines[source.line - 1]!r}")


@pytest.mark.parametrize("claim", QUOTING, ids=lambda c: c.id)
def test_an_analysis_quote_lies_in_the_section_it_names(claim: Claim, analysis: str) -> None:
    source = claim.source
    assert source.line is not None
    lines = analysis.split("\n")
    headings = [(number, line.removesuffix(HEADING_END))
                for number, line in enumerate(lines, start=1) if line.endswith(HEADING_END)]
    assert source.where in [title for _, title in headings], (
        f"no heading {source.where!r} in the analysis")
    before = [title for number, title in headings if number < source.line]
    assert before and before[-1] == source.where, (
        f"line {source.line} is in section {before[-1] if before else None!r}, "
        f"not {source.where!r}")


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in _strings(v)]
    return []


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: c.id)
def test_no_claim_names_the_local_copy_of_the_analysis(claim: Claim) -> None:
    shown = [claim.statement, claim.source.cite(), *_strings(claim.source.to_json())]
    assert [s for s in shown if any(path in s for path in LOCAL_PATHS)] == []
