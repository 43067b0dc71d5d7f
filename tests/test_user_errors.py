"""What the user wrote, refused, says so: each refusal of a case file, a baseline, a catalog or
a flag of ``check``, ``run`` and ``validate`` is one line naming the file, the field and what
was expected, exit 2, before any client starts, and never "internal error", which is kept for
loopprobe's own bugs. Found by throwing malformed inputs at the three commands; each row was
an internal error (or, for the baseline's names and the output files, no refusal at all)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

import probes.cli.cases as check_command
from probes.cli import main
from tests.conftest import one_line_error

CASE = {"loopprobe": "cases/1", "name": "demo", "title": "Demo",
        "cases": [{"name": "one", "title": "One", "prompt": "hi",
                   "expect": [{"max_requests": 3}, {"id": "mine", "max_requests": 4}]}]}


def _yaml(tmp: Path, name: str, data: Any) -> str:
    (tmp / name).write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return str(tmp / name)


def _cases(tmp: Path, **changes: Any) -> str:
    return _yaml(tmp, "cases.yaml", {**CASE, **changes})


def _baseline(tmp: Path, text: str) -> list[str]:
    return ["check", _cases(tmp), "--baseline", _yaml(tmp, "baseline.yaml", text)]


def _entry(**changes: Any) -> str:
    entry = {"case": "one", "expectation": "mine", "versions": "*", "reason": "r", **changes}
    return yaml.safe_dump({"loopprobe": "baseline/1", "expected_failures": [entry]})


def _fifo_in_workspace(tmp: Path) -> list[str]:
    (tmp / "ws").mkdir()
    os.mkfifo(tmp / "ws" / "pipe")
    return ["check", _cases(tmp, setup={"workspace": "ws"})]


def _two_plugins(tmp: Path) -> list[str]:
    for folder in ("a/guard", "b/guard"):
        (tmp / folder).mkdir(parents=True)
    return ["check", _cases(tmp, setup={"plugin_dirs": ["a/guard", "b/guard"]})]


def _plugin_flag_of_a_taken_name(tmp: Path) -> list[str]:
    for folder in ("a/guard", "b/guard"):
        (tmp / folder).mkdir(parents=True)
    return ["check", _cases(tmp, setup={"plugin_dirs": ["a/guard"]}),
            "--plugin-dir", str(tmp / "b" / "guard")]


def _catalog_that_exits(tmp: Path) -> list[str]:
    (tmp / "mine.py").write_text("import sys\nsys.exit(3)\n")
    return ["run", "--catalog", str(tmp / "mine.py"), "--client", "2.1.235"]


# (what is refused, the argv, what the line must hold: {tmp} is the test's folder)
REFUSALS: list[tuple[str, Callable[[Path], list[str]], list[str]]] = [
    ("a baseline that is not there (a typo)",
     lambda t: ["check", _cases(t), "--baseline", str(t / "baselin.yaml")],
     ["--baseline {tmp}/baselin.yaml: expected a baseline file, but there is no such file"]),
    ("a baseline of another format",
     lambda t: _baseline(t, "loopprobe: baseline/2\n"),
     ["{tmp}/baseline.yaml: loopprobe: expected 'baseline/1', found 'baseline/2'"]),
    ("a baseline that is a folder",
     lambda t: ["check", _cases(t), "--baseline", str(t)],
     ["--baseline {tmp}: expected a regular file, found a folder"]),
    ("a baseline whose name is too long to read",
     lambda t: ["check", _cases(t), "--baseline", str(t / ("b" * 300))],
     ["--baseline {tmp}/bbb", "expected a readable baseline file, but File name too long"]),
    ("a baseline that is not YAML",
     lambda t: _baseline(t, "loopprobe: [\n"),
     ["{tmp}/baseline.yaml: expected a YAML baseline file, found not valid YAML"]),
    ("a baseline that is empty",
     lambda t: _baseline(t, ""),
     ["{tmp}/baseline.yaml: expected a mapping with loopprobe: baseline/1 and "
      "expected_failures, found an empty file"]),
    ("a baseline key of no baseline",
     lambda t: _baseline(t, "loopprobe: baseline/1\nsource: x\n"),
     ["{tmp}/baseline.yaml: source: unknown key; expected only loopprobe, expected_failures"]),
    ("a baseline entry that is not a mapping",
     lambda t: _baseline(t, "loopprobe: baseline/1\nexpected_failures: [1]\n"),
     ["{tmp}/baseline.yaml: expected_failures[0]: expected a mapping of case, expectation, "
      "versions, reason, found 1"]),
    ("a baseline entry without its case",
     lambda t: _baseline(t, "loopprobe: baseline/1\nexpected_failures: [{}]\n"),
     ["{tmp}/baseline.yaml: expected_failures[0].case: expected this key, found none"]),
    ("a baseline version YAML read as a number",
     lambda t: _baseline(t, _entry(versions=[2.1])),
     ["{tmp}/baseline.yaml: expected_failures[0].versions: expected a PEP 440 specifier set",
      "found a list holding 2.1 (quote a version that YAML reads as a number)"]),
    ("a baseline entry naming a case the case file does not hold",
     lambda t: _baseline(t, _entry(case="on")),
     ["{tmp}/baseline.yaml: expected_failures[0].case: expected a case of the case file "
      "(one), found 'on'"]),
    ("a baseline entry naming an expectation its case does not hold",
     lambda t: _baseline(t, _entry(expectation="max-requests-3")),
     ["{tmp}/baseline.yaml: expected_failures[0].expectation: expected \"*\" or an "
      "expectation id of case one (max-requests-1, mine), found 'max-requests-3'"]),
    ("two plugin folders of one name",
     _two_plugins,
     ["{tmp}/cases.yaml: setup.plugin_dirs[1]: expected plugin folders of distinct names",
      "found 'guard' again (first named by setup.plugin_dirs[0])"]),
    ("a plugin flag of a name the case file's plugin has",
     _plugin_flag_of_a_taken_name,
     ["{tmp}/cases.yaml: --plugin-dir {tmp}/b/guard: expected plugin folders of distinct names"]),
    ("a case file that is not there",
     lambda t: ["check", str(t / "case.yaml")],
     ["{tmp}/case.yaml: expected a case file, but there is no such file"]),
    ("a case file that is not YAML",
     lambda t: ["check", _yaml(t, "cases.yaml", "a:\tb\n")],
     ["{tmp}/cases.yaml: expected a YAML case file, found not valid YAML"]),
    ("a case file whose name is too long to read",
     lambda t: ["check", str(t / ("c" * 300))],
     ["{tmp}/ccc", "expected a readable case file, but File name too long"]),
    ("a case file that is a link to nothing",
     lambda t: (os.symlink(t / "gone.yaml", t / "cases.yaml"), ["check", str(t / "cases.yaml")])[1],
     ["{tmp}/cases.yaml: expected a case file, but there is no such file"]),
    ("a title of spaces",
     lambda t: ["check", _cases(t, title="  ")],
     ["{tmp}/cases.yaml: at title: String should match pattern"]),
    ("a case's title of spaces",
     lambda t: ["check", _cases(t, cases=[{**CASE["cases"][0], "title": " "}])],  # type: ignore[index]
     ["{tmp}/cases.yaml: at cases.0.title: String should match pattern"]),
    ("an empty setup path",
     lambda t: ["check", _cases(t, setup={"workspace": ""})],
     ["{tmp}/cases.yaml: at setup.workspace: String should have at least 1 character"]),
    ("a FIFO in the workspace, refused at load",
     _fifo_in_workspace,
     ["{tmp}/cases.yaml: setup: workspace {tmp}/ws/pipe: expected a file, a folder or a link, "
      "found a FIFO"]),
    ("a JUnit file that is a folder, refused before any run",
     lambda t: ["check", _cases(t), "--junit", str(t)],
     ["--junit {tmp}: expected a file to write, found a directory"]),
    ("a summary file in a folder that does not exist",
     lambda t: ["check", _cases(t), "--summary", str(t / "no" / "summary.md")],
     ["--summary {tmp}/no/summary.md: expected a file in an existing folder"]),
    ("a CTRF file name holding a NUL",
     lambda t: ["check", _cases(t), "--ctrf", "a\0b"],
     ["--ctrf 'a\\x00b': expected a path, found a NUL byte in it"]),
    ("an --out holding a NUL",
     lambda t: ["check", _cases(t), "--out", "o\0"],
     ["--out 'o\\x00': expected a path, found a NUL byte in it"]),
    ("a --catalog case file that is not there",
     lambda t: ["run", "--catalog", str(t / "gone.yaml"), "--client", "2.1.235"],
     ["{tmp}/gone.yaml: expected a case file, but there is no such file"]),
    ("a --catalog module that exits while imported",
     _catalog_that_exits,
     ["--catalog '{tmp}/mine.py': expected a module defining REPORTS, but importing it "
      "failed: SystemExit: 3"]),
]


@pytest.mark.parametrize(("what", "argv", "said"), REFUSALS, ids=[r[0] for r in REFUSALS])
def test_a_refusal_of_what_the_user_wrote_names_it_and_is_no_internal_error(
        what: str, argv: Callable[[Path], list[str]], said: list[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def started(*_: Any, **__: Any) -> None:
        raise AssertionError("a client run started")
    monkeypatch.setattr(check_command, "execute_suite", started)
    monkeypatch.setattr(check_command, "client_for", started)
    monkeypatch.setattr("probes.cli.run.execute_suite", started)
    given = argv(tmp_path)
    if given[0] in ("check", "run"):
        given += ["--versions", "2.1.235"] if given[0] == "check" else []
        given += [] if "--out" in given else ["--out", str(tmp_path / "out")]
    line = one_line_error(given, capsys)
    assert "internal error" not in line, line
    for part in said:
        assert part.format(tmp=tmp_path) in line, line


@pytest.mark.parametrize("name", ["link-to-nothing.yaml", "n" * 300])
def test_validate_names_a_file_it_cannot_read_as_a_problem(
        name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if name.startswith("link"):
        os.symlink(tmp_path / "gone.yaml", tmp_path / name)
    assert main(["validate", str(tmp_path / name)]) == 2
    captured = capsys.readouterr()
    assert "internal error" not in captured.err, captured.err
    assert f"{tmp_path / name}" in captured.out and "cannot be read" in captured.out, \
        captured.out
