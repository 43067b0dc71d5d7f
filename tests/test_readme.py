"""The README is a front door: it starts with the two scripts, offers the four jobs, runs its
example and keeps its generated table true. (Every code block of it, CONTRIBUTING.md and
docs/ is run or checked by tests/test_docs_snippets.py.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
JOBS = ("Verify what a client version does", "Find what changed between two versions",
        "Mock the Messages API in your own tests", "Probe your own setup")


def _blocks(language: str) -> list[str]:
    """Fenced blocks of one info string ('' for plain fences), paired line by line."""
    blocks, current, info = [], None, ""
    for line in README.splitlines(keepends=True):
        if line.startswith("```"):
            if current is None:
                current, info = [], line[3:].strip()
            else:
                if info == language:
                    blocks.append("".join(current))
                current = None
        elif current is not None:
            current.append(line)
    return blocks


def test_readme_python_example_passes(mock_api) -> None:
    (source,) = _blocks("python")
    namespace: dict[str, object] = {}
    exec(compile(source, "README.md", "exec"), namespace)
    tests = [f for name, f in namespace.items() if name.startswith("test_")]
    assert tests
    for test in tests:
        test(mock_api)  # type: ignore[operator]


def test_readme_starts_with_the_two_scripts_then_the_four_jobs() -> None:
    lines = README.splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines: move detail into docs/"
    first = README[:README.index("\n## ")]
    assert "./scripts/probe" in first and "./scripts/test" in first
    assert first.index("./scripts/probe") < first.index("./scripts/test")
    headings = [line[4:] for line in lines if line.startswith("### ")]
    assert headings[:4] == list(JOBS)
    for job in JOBS:  # each job links into the docs
        section = README[README.index(f"### {job}"):]
        section = section[:section.index("\n#", 4)]
        assert "](docs/" in section, job


def test_readme_commands_exist() -> None:
    done = subprocess.run([sys.executable, "-m", "probes", "--help"], capture_output=True,
                          text=True, timeout=60)
    for command in ("run", "serve", "clients", "guide", "render"):
        assert command in done.stdout


def test_readme_mechanism_table_is_rendered_from_the_committed_reports() -> None:
    import json

    from probes.report.format import load_folder
    from probes.report.mechanism_table import render_mechanism_table, replace_section
    root = Path(__file__).resolve().parent.parent
    table = render_mechanism_table(load_folder(root / "reports" / "2.1.235"),
                                   json.loads((root / "reports" / "matrix.json").read_text()))
    assert replace_section(README, table, Path("README.md")) == README, \
        "README's mechanism table disagrees with the reports; run: loopprobe mechanisms " \
        "reports/2.1.235 --matrix reports/matrix.json --write README.md"


def test_every_claim_of_the_catalog_has_a_mechanism_row() -> None:
    from probes.catalog import REPORTS
    from probes.catalog.mechanisms import MECHANISMS
    claims = {c.id for spec in REPORTS for p in spec.probes for c in p.claims}
    rows = {m.claim for m in MECHANISMS if m.claim}
    assert sorted(rows - claims) == [], "rows naming claims the catalog does not have"
    assert sorted(claims - rows) == [], "claims without a row in the mechanism table"


def test_a_version_range_never_spans_two_client_kinds() -> None:
    from probes.report.mechanism_table import _ordered, _ranges
    labels = ["claude-code@2.1.54", "claude-agent-sdk@0.2.140", "claude-code@2.0.77",
              "claude-code@2.1.117", "claude-code@2.1.235"]
    order = _ordered(labels)
    assert order[0] == "claude-agent-sdk@0.2.140" and order[2] == "claude-code@2.1.54"
    chosen = ["claude-agent-sdk@0.2.140", "claude-code@2.0.77", "claude-code@2.1.54",
              "claude-code@2.1.117"]
    assert _ranges(chosen, order, "claude-code") == "claude-agent-sdk@0.2.140, 2.0.77–2.1.117"


def test_its_almanac_numbers_are_the_committed_almanacs() -> None:
    """What the README says is built is what reports/almanac.json holds (range, changes,
    what is not built yet): a rebuild that changes them must change the README too."""
    almanac = json.loads((ROOT / "reports" / "almanac.json").read_text())
    text = " ".join(README.split())
    first, last, count = (almanac["range"][k] for k in ("first", "last", "count"))
    assert f"Built so far: {first}–{last} ({count} releases)" in text
    changes = [c for claim in almanac["claims"] for c in claim["changes"]]
    located = [c for c in changes if c["located"] and c["verified"]]
    assert f"{len(changes)} changes, every one located" in text and located == changes
    cost = almanac["cost"]
    assert f"{cost['probe_runs']:,} probe runs (in {cost['suite_runs']:,} suite runs" in text
    for gap in almanac["not_built"]:
        assert f"The remaining {gap['count']} 2.x releases ({gap['first']}–{gap['last']})" \
            in text
    if not almanac["not_built"]:  # every release built: nothing may be said to remain
        assert "2.x releases (" not in text.split("Built so far:")[1].split("[Regressions]")[0]
