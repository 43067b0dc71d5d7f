"""The README's examples run as tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from mockapi import ScenarioError, load_scenario, parse_scenario

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


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


def test_readme_yaml_is_the_shipped_example() -> None:
    shipped = load_scenario(Path(__file__).resolve().parent.parent /
                            "examples/scenarios/tool-then-text.yaml")
    import yaml
    (block,) = [b for b in _blocks("yaml") if b.startswith("name: tool-then-text")]
    assert parse_scenario(yaml.safe_load(block)).rules == shipped.rules


def test_readme_error_listing_is_what_the_loader_says() -> None:
    shown = next(b for b in _blocks("") if b.startswith("invalid scenario"))
    try:
        parse_scenario({"rules": [{"match": {"turn": "one"}, "reply": {"text": "x"}},
                                  {"match": {}}]}, "bad.yaml")
    except ScenarioError as error:
        assert str(error).strip() == shown.strip()
    else:
        raise AssertionError("the README's bad scenario was accepted")


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
