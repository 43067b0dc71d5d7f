"""EVIDENCE.md kept readable: the environment and arguments most runs share written once,
each probe's runs once for all its claims, request bodies left in the journal with the line
that holds each, long output cut."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from probes import cli
from probes.report.format import load_folder, read_journal_lines
from probes.report.guide import render_guide, write_guide
from probes.report.guide_runs import Shared, common_spec, probe_section
from tests.fakeloop import FakeLoopClient
from tests.fakeloop.catalog import REPORTS

KB = 1000  # the bound: 150 KB


def test_each_request_names_the_journal_line_that_holds_its_body(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert cli.run_suite((FakeLoopClient(), "1"), out, catalog=REPORTS,
                         compress_journals=True) == 0
    guide = (out / "EVIDENCE.md").read_text()
    folder = load_folder(out)
    seen = 0
    for report in folder.reports.values():
        lines = read_journal_lines(out / report["journal"])
        assert report["journal"].endswith(".gz")  # read through gzip as well
        for probe in report["probes"]:
            for match in re.finditer(r"#(\d+)@(\d+)", _section(guide, probe["name"])):
                record = json.loads(lines[int(match[2]) - 1])
                assert (record["type"], record["probe"], record["seq"]) == (
                    "request", probe["name"], int(match[1]))
                seen += 1
    assert seen > 5
    # the shared environment once, each run's command on one line after it
    assert guide.count("COMMON_ENV=") == 1 and guide.count("env -i $COMMON_ENV") > 3
    assert "ANTHROPIC_BASE_URL=$MOCK_URL" in guide.split("## ", 3)[2]


def _section(guide: str, probe: str) -> str:
    start = guide.index(f"### Probe `{probe}`")
    end = guide.find("### Probe `", start + 1)
    return guide[start:end if end > 0 else None]


def test_each_probe_is_written_once_for_all_its_claims(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert cli.run_suite((FakeLoopClient(), "1"), out, catalog=REPORTS) == 0
    guide = write_guide(out).read_text()
    for spec in REPORTS:
        for probe in spec.probes:
            assert guide.count(f"### Probe `{probe.name}`") == 1
            for claim in probe.claims:  # every claim still has its section, after its probe
                assert guide.index(f"### `{claim.id}` — ") > guide.index(
                    f"### Probe `{probe.name}`")


VERSION_FOLDERS = sorted(p.parent.name for p in Path("reports").glob("*/fingerprint.json"))


@pytest.mark.parametrize("version", VERSION_FOLDERS)
def test_the_committed_evidence_guide_fits_in_150_kb(version: str, tmp_path: Path) -> None:
    """reports/2.1.235's was 541 KB, mostly one `env -i` block per claim and whole events.
    Each committed guide, and the one this code writes from the same reports (into a copy:
    committed reports are regenerated all at once, elsewhere), fits."""
    assert len(Path("reports", version, "EVIDENCE.md").read_bytes()) <= 150 * KB
    folder = tmp_path / version
    shutil.copytree(Path("reports", version), folder)
    text = write_guide(folder).read_text()
    assert len(text.encode()) <= 150 * KB
    assert text.count("ANTHROPIC_BASE_URL=") == 1
    assert render_guide([]).startswith("# Evidence guide")



def _runs(*specs: dict[str, object]) -> list[Any]:
    return [{"report": "r", "probes": [{"name": "p", "runs": [
        {"name": f"run{i}", "argv": ["node", "driver", json.dumps(spec)]}
        for i, spec in enumerate(specs)]}]}]


def test_the_keys_most_driver_specs_set_alike_are_written_once(tmp_path: Path) -> None:
    reports = _runs({"prompt": "A", "model": "m", "tools": ["Read"], "fork": False},
                    {"prompt": "B", "model": "m", "tools": ["Read"], "fork": True},
                    {"prompt": "C", "model": "other", "tools": None, "fork": False})
    spec = common_spec(reports)
    assert spec == {"model": "m", "tools": ["Read"]}  # each set alike by 2 runs of 3
    shown = "\n".join(probe_section(reports[0], reports[0]["probes"][0],
                                    Shared({}, [], spec), {}))
    # a run shows what it sets otherwise: a common key it lacks as null, never left unsaid
    assert """'{"prompt": "A"}'""" in shown and """'{"prompt": "B", "fork": true}'""" in shown
    assert """'{"prompt": "C", "model": "other", "tools": null}'""" in shown
    assert common_spec(_runs({"prompt": "A"}, {"prompt": "B"})) == {}
    # a driver kind's guide writes them once, and says so
    folder = tmp_path / "runner"
    shutil.copytree(Path("reports", "anthropic-tool-runner-2.0.0"), folder)
    guide = write_guide(folder).read_text()
    assert guide.count("COMMON_SPEC={") == 1 and "nor those set as in `$COMMON_SPEC`" in guide
