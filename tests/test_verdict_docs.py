"""The docs' tables of verdicts, diff changes and bisect transition kinds name every one the
code has, each once, so a new verdict or change cannot go unexplained."""

from __future__ import annotations

import re
from pathlib import Path

from probes.core.changes import CHANGE_KINDS
from probes.core.verdicts import CHANGES, LABELS
from probes.scale.bisect import ANY, TRANSITION_KINDS

DOCS = Path(__file__).resolve().parent.parent / "docs"


def _rows(page: str) -> list[str]:
    """The first cell of every table row of a page (header rows left out)."""
    cells = re.findall(r"^\| ([^|]+?) \|", (DOCS / page).read_text(), flags=re.M)
    return [c.strip("`") for c in cells if not set(c) <= set("-") and c not in (
        "verdict", "change", "kind", "claim")]


def test_every_verdict_has_one_row() -> None:
    rows = _rows("evidence.md")
    assert sorted(r for r in rows if r in LABELS.values()) == sorted(LABELS.values())


def test_every_change_and_transition_kind_has_one_row() -> None:
    rows = _rows("regressions.md")
    assert sorted(r for r in rows if r in CHANGES) == sorted(CHANGES)
    kinds = [*TRANSITION_KINDS, ANY]
    assert sorted(r for r in rows if r in kinds) == sorted(kinds)


def test_every_release_change_name_is_explained() -> None:
    """The almanac's and bisect's change names (probes.core.changes) each in the table of
    regressions.md that says when a change gets it."""
    text = (DOCS / "regressions.md").read_text()
    table = text[text.index("| release change | kind | when |"):]
    table = table[:table.index("\n\n")]
    named = {name for cell in re.findall(r"^\| ([^|]+?) \|", table, flags=re.M)
             for name in re.findall(r"`([^`]+)`", cell)}
    assert named == set(CHANGE_KINDS)
