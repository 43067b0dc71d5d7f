"""Evidence kept for many versions: gzipped journals that reproduce byte for byte, and a
timeline per claim in MATRIX.md marking the first version of each change a bisect found."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from probes import cli
from probes.scale.almanac import load_bisects, render_timeline
from tests.fakeloop import FakeLoopClient
from tests.fakeloop.catalog import REPORTS

CLIENT = FakeLoopClient()


def test_compressed_journals_hold_the_same_lines_and_reproduce(tmp_path: Path) -> None:
    plain, packed, again = tmp_path / "plain", tmp_path / "packed", tmp_path / "again"
    assert cli.run_suite((CLIENT, "1"), plain, catalog=REPORTS) == 0
    for out in (packed, again):
        assert cli.run_suite((CLIENT, "1"), out, catalog=REPORTS, compress_journals=True) == 0
    report = json.loads((packed / "fake-tools.json").read_text())
    assert report["journal"] == "fake-tools.journal.jsonl.gz"
    assert gzip.decompress((packed / report["journal"]).read_bytes()) == (
        plain / "fake-tools.journal.jsonl").read_bytes()
    assert (packed / report["journal"]).read_bytes() == (again / report["journal"]).read_bytes()
    assert not (packed / "fake-tools.journal.jsonl").exists()


def test_the_timeline_marks_where_a_bisect_found_the_change(tmp_path: Path) -> None:
    def cell(status: str) -> dict[str, str]:
        return {"status": status}
    matrix = {"versions": [{"kind": "claude-code", "version": v}
                           for v in ("2.1.300", "2.0.77", "2.1.235", "2.1.332")],
              "claims": [{"id": "probe.x", "results": {
                  "claude-code@2.0.77": cell("contradicted"),
                  "claude-code@2.1.235": cell("confirmed"),
                  "claude-code@2.1.300": cell("confirmed"),
                  "claude-code@2.1.332": cell("contradicted")}}]}
    bisects = tmp_path / "bisect"
    bisects.mkdir()
    (bisects / "probe.x.json").write_text(json.dumps(
        {"client": "claude-code", "claims": ["probe.x"], "first_changed": "2.1.91"}))
    (bisects / "other.json").write_text(json.dumps({"not": "a bisect"}))
    text = render_timeline(matrix, load_bisects(bisects), tmp_path)
    assert ("- `probe.x`: claude-code: 2.0.77 contradicted → *behaviour: fixed* **2.1.91** "
            "([bisect](bisect/probe.x.json)) 2.1.235–2.1.300 confirmed → "
            "*behaviour: regressed* 2.1.332 contradicted") in text


def _matrix(claim: str, verdicts: dict[str, str]) -> dict[str, object]:
    return {"versions": [{"kind": "claude-code", "version": v} for v in verdicts],
            "claims": [{"id": claim, "results": {f"claude-code@{v}": {"status": s}
                                                 for v, s in verdicts.items()}}]}


def test_a_bisect_dates_only_a_change_of_its_own_kind(tmp_path: Path) -> None:
    """max-turns changed twice: its behaviour on 2.1.88 (is_error and the exit code, then
    not observable: terminal_reason not yet reported), its reporting on 2.1.91 (the field
    appears). Each committed bisect dates the change of its own kind, and only that one;
    a presence change is named introduced, and dated by a presence bisect."""
    committed = load_bisects(Path("reports/bisect"))
    assert {b["transition"] for b in committed} <= {"behaviour", "reporting"}
    terminal = _matrix("probe.max-turns-terminal", {"2.1.84": "contradicted",
                                                    "2.1.90": "not_observable",
                                                    "2.1.91": "confirmed"})
    text = render_timeline(terminal, committed, Path("reports"))
    assert ("`probe.max-turns-terminal`: claude-code: 2.1.84 contradicted → *behaviour: fixed* "
            "**2.1.88** ([bisect](bisect/probe.max-turns-terminal.json)) 2.1.90 not_observable "
            "→ *reporting: changed* **2.1.91** "
            "([bisect](bisect/probe.max-turns-terminal.reporting.json)) 2.1.91 confirmed") in text
    # a change of another kind between the same versions is not given the bisect's date
    other = _matrix("probe.max-turns-terminal", {"2.1.90": "absent", "2.1.91": "confirmed"})
    assert "**2.1.91**" not in render_timeline(other, committed, Path("reports"))
    (tmp_path / "probe.y.json").write_text(json.dumps(
        {"client": "claude-code", "claims": ["probe.y"], "first_changed": "2.1.50",
         "kind": "presence", "transition": "presence", "change": "introduced"}))
    introduced = _matrix("probe.y", {"2.0.77": "absent", "2.1.90": "not_reached",
                                     "2.1.235": "confirmed"})
    text = render_timeline(introduced, load_bisects(tmp_path), tmp_path)
    assert ("2.0.77 absent → *presence: introduced* **2.1.50** ([bisect](probe.y.json)) "
            "2.1.90 not_reached → *reach: now reached* 2.1.235 confirmed") in text
