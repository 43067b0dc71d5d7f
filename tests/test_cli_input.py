"""Bad input on the command line is one line on stderr and exit 2, before any work: an output
file that cannot be written, a single-value flag given twice, a --matrix or --bisects that is
not one. Repeatable --report and --probe take the union, in the order given."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from probes import cli
from probes.cli.catalogs import select
from probes.clients import registry
from tests.conftest import one_line_error
from tests.fakeloop import FakeLoopClient
from tests.fakeloop.catalog import REPORTS as FAKE_REPORTS

ROOT = Path(__file__).resolve().parent.parent
REPORTS = ROOT / "reports"
CATALOG = "tests.fakeloop.catalog"


@pytest.fixture
def fake_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry.CLIENT_KINDS, "fake-loop", FakeLoopClient)


# each option that names a file to write, with a command line that reaches it
OUTPUT_FILES = {
    "render --out": ["render", str(REPORTS / "2.1.235"), "--out"],
    "diff --out": ["diff", str(REPORTS / "2.1.235"), str(REPORTS / "2.1.332"), "--out"],
    "mechanisms --write": ["mechanisms", str(REPORTS / "2.1.235"), "--write"],
    "matrix --junit": ["matrix", "--clients", "fake-loop@1", "--catalog", CATALOG, "--skip-run",
                       "--out", "{tmp}/matrix", "--junit"],
    "run --junit": ["run", "--client", "fake-loop@1", "--catalog", CATALOG, "-j", "1",
                    "--out", "{tmp}/run", "--work-dir", "{tmp}/work", "--junit"],
    "serve --journal": ["serve", "--port", "0", "--journal"],
}


def _subcommands(parser: argparse.ArgumentParser,
                 path: tuple[str, ...] = ()) -> dict[str, argparse.ArgumentParser]:
    found = {" ".join(path): parser}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.update(_subcommands(sub, (*path, name)))
    return found


def test_every_option_naming_a_file_to_write_is_checked() -> None:
    marked = set()
    for name, parser in _subcommands(cli.build_parser()).items():
        checked = {flag for _, flag in parser.get_default("_output_files") or ()}
        marked |= {f"{name} {flag}" for flag in checked}
        files = {action.option_strings[-1] for action in parser._actions
                 if action.metavar == "FILE"}
        assert files <= checked, f"{name}: {files - checked} write a file but are not checked"
    assert marked == set(OUTPUT_FILES)


@pytest.mark.parametrize("option", sorted(OUTPUT_FILES))
@pytest.mark.parametrize(("where", "expected"), [
    ("{tmp}/a-dir", "expected a file to write, found a directory"),
    ("{tmp}/no-folder/out.txt", "expected a file in an existing folder, but {tmp}/no-folder "
                                "does not exist"),
    ("{tmp}/a-file/out.txt", "expected a file in a folder, but {tmp}/a-file is not a folder"),
    ("/proc/loopprobe-cannot-write-here", "expected a file in a writable folder"),
])
def test_an_output_file_that_cannot_be_written_is_refused_before_any_work(
        option: str, where: str, expected: str, fake_kind: None, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a-dir").mkdir()
    (tmp_path / "a-file").write_text("")
    flag = option.split()[-1]
    argv = [a.format(tmp=tmp_path) for a in [*OUTPUT_FILES[option], where]]
    err = one_line_error(argv, capsys)
    assert f"{flag} {argv[-1]}: {expected.format(tmp=tmp_path)}" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-dir", "a-file"], \
        "the command worked before refusing its output file"


@pytest.mark.parametrize("argv", [
    # each would fail later for another reason: the repeat is what must be said
    ["run", "--client", "0.0.0-none", "--client", "0.0.0-other", "--catalog", "no_such_module",
     "--out", "{tmp}/out"],
    ["run", "--catalog", "no_such_module", "--out", "{tmp}/a", "--out", "{tmp}/b"],
    ["bisect", "--claim", "a", "--claim", "b", "--good", "1", "--bad", "2"],
    ["matrix", "--clients", "nosuch@1", "--clients", "nosuch@2", "--out", "{tmp}/out"],
    ["serve", "--port", "1", "--port", "2", "--scenario", "{tmp}/none.yaml"],
    ["diff", "{tmp}", "{tmp}", "--out", "{tmp}/a.md", "--out", "{tmp}/b.md"],
])
def test_a_single_value_flag_given_twice_is_refused(argv: list[str], tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    argv = [a.format(tmp=tmp_path) for a in argv]
    flag = next(a for a in argv if argv.count(a) == 2 and a.startswith("--"))
    err = one_line_error(argv, capsys)
    assert f"{argv[0]} {flag}: expected once (it takes one value), given twice" in err, err


def test_repeated_reports_and_probes_are_a_union_in_the_order_given() -> None:
    chosen = select(FAKE_REPORTS, None, ["fake-sessions", "fake-tools", "fake-sessions"])
    assert [s.name for s in chosen] == ["fake-sessions", "fake-tools"]
    assert [len(s.probes) for s in chosen] == [len(s.probes) for s in reversed(FAKE_REPORTS)]
    chosen = select(FAKE_REPORTS, ["resume", "read-file", "resume"], None)
    assert [(s.name, [p.name for p in s.probes]) for s in chosen] == [
        ("fake-sessions", ["resume"]), ("fake-tools", ["read-file"])]
    chosen = select(FAKE_REPORTS, ["resume", "read-file"], ["fake-tools"])
    assert [(s.name, [p.name for p in s.probes]) for s in chosen] == [
        ("fake-tools", ["read-file"])]


@pytest.mark.parametrize(("probes", "reports", "expected"), [
    (["read-file", "reed-file"], [], "no probe matches --probe 'reed-file' (did you mean "
                                     "'read-file'?)"),
    ([], ["fake-tools", "fake-tool"], "no report matches --report 'fake-tool'"),
    (["resume"], ["fake-tools"], "no probe matches --probe resume in --report fake-tools"),
])
def test_one_unknown_name_among_known_ones_is_refused(probes: list[str], reports: list[str],
                                                      expected: str) -> None:
    with pytest.raises(cli.HarnessInputError, match=expected.replace("(", r"\(")
                       .replace(")", r"\)").replace("?", r"\?")):
        select(FAKE_REPORTS, probes, reports)


def test_run_with_two_reports_writes_both(fake_kind: None, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    code = cli.main(["run", "--client", "fake-loop@1", "--catalog", CATALOG, "-j", "1",
                     "--report", "fake-sessions", "--report", "fake-tools",
                     "--out", str(out), "--work-dir", str(tmp_path / "work"), "--json"])
    summary = json.loads(capsys.readouterr().out)
    assert code == summary["exit_code"]
    assert [r["report"] for r in summary["reports"]] == ["fake-sessions", "fake-tools"]
    assert {"fake-sessions.json", "fake-tools.json"} <= {p.name for p in out.iterdir()}


@pytest.mark.parametrize(("argv", "expected"), [
    (["mechanisms", str(REPORTS / "2.1.235"), "--matrix", "{tmp}"],
     "--matrix {tmp}: expected a matrix.json (or a folder holding one)"),
    (["mechanisms", str(REPORTS / "2.1.235"), "--matrix", "{tmp}/a-file"],
     "--matrix {tmp}/a-file: expected a matrix.json (or a folder holding one) written by "
     "`loopprobe matrix`, but {tmp}/a-file: not JSON"),
    (["mechanisms", str(REPORTS / "2.1.235"), "--matrix", "{tmp}/list.json"],
     "expected a matrix.json written by `loopprobe matrix` (kind matrix, claims with their "
     "results), found list"),
    (["mechanisms", str(REPORTS / "2.1.235"), "--write", "{tmp}/missing.md"],
     "--write {tmp}/missing.md: expected an existing file holding the generated section"),
    (["mechanisms", str(REPORTS / "2.1.235"), "--write", "{tmp}/a-file"],
     "no generated mechanism table"),
    (["matrix", "--clients", "", "--out", "{tmp}/m", "--skip-run"],
     "--clients '': expected comma-separated clients"),
    (["matrix", "--clients", "fake-loop@1", "--out", "{tmp}/m", "--skip-run", "--bisects",
      "{tmp}/a-file"], "--bisects {tmp}/a-file: expected a folder of bisect-*.json results"),
    (["matrix", "--clients", "fake-loop@1", "--out", "{tmp}/m", "--skip-run", "--bisects",
      "{tmp}"], "--bisects {tmp}: expected bisect results (JSON)"),
    (["sessions", "--clients", " , ", "--out", "{tmp}/s"], "expected comma-separated"),
    (["versions", "fake-loop", "--latest", "0"], "--latest: expected a count >= 1, found 0"),
    (["probes", "--client", "nosuch@1"], "unknown client 'nosuch'"),
    (["run", "--client", "nosuch@1", "--out", "{tmp}/r"], "unknown client 'nosuch'"),
    (["schemas", "--out", "{tmp}/a-file"], "--out {tmp}/a-file: expected a directory"),
    (["record", "--upstream", "http://127.0.0.1:9", "--out", "{tmp}/a-file"],
     "--out {tmp}/a-file: expected a directory"),
])
def test_bad_input_is_one_line_not_a_traceback(argv: list[str], expected: str,
                                               fake_kind: None, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a-file").write_text("x")
    (tmp_path / "list.json").write_text("[1]")
    (tmp_path / "bisect-x.json").write_text("{")
    err = one_line_error([a.format(tmp=tmp_path) for a in argv], capsys)
    assert expected.format(tmp=tmp_path) in err, err


def test_mechanisms_takes_a_folder_holding_matrix_json(capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    assert cli.main(["mechanisms", str(REPORTS / "2.1.235"), "--matrix", str(REPORTS)]) == 0
    by_folder = capsys.readouterr().out
    assert cli.main(["mechanisms", str(REPORTS / "2.1.235"), "--matrix",
                     str(REPORTS / "matrix.json")]) == 0
    assert capsys.readouterr().out == by_folder
