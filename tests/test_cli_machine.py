"""The command line for machines and logs: --json summaries, JUnit XML, progress that knows
whether anyone watches, partial runs that never pass for full ones, and tags resolved to
versions. Driven by the fake loop client (fast tier)."""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from probes import cli
from probes.cli.progress import Reporter, choose_mode
from probes.clients import registry
from probes.clients.base import ClientBinary
from probes.core.probe import ReportSpec
from probes.report.diff import diff_directories
from probes.report.format import load_report
from probes.report.junit import junit_xml
from probes.report.schemas import validate_path
from tests.fakeloop import FakeLoopClient
from tests.fakeloop import catalog as fake_catalog
from tests.fakeloop.catalog import DENY, READ, read_probe

CATALOG = str(Path(fake_catalog.__file__))


@pytest.fixture
def fake_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry.CLIENT_KINDS, "fake-loop", FakeLoopClient)


def _run(tmp_path: Path, out: Path, *extra: str) -> int:
    return cli.main(["run", "--client", "fake-loop@1", "--catalog", CATALOG, "--report",
                     "fake-tools", "--out", str(out), "--work-dir", str(tmp_path / "work"),
                     "-j", "1", *extra])


def test_run_json_is_the_only_stdout_and_junit_has_a_case_per_claim(
        fake_kind: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    junit = tmp_path / "claims.xml"
    code = _run(tmp_path, tmp_path / "out", "--json", "--junit", str(junit))
    captured = capsys.readouterr()
    summary = json.loads(captured.out)  # nothing else on stdout
    assert summary["exit_code"] == code == cli.EXIT_PASSED
    assert summary["binary"]["name"] == "fake-loop"
    [report] = summary["reports"]
    assert report["report"] == "fake-tools" and report["status"] == "passed"
    assert report["claims"] == {"confirmed": 2} and report["contradicted"] == []
    assert "probe read-file" in captured.err  # progress went to stderr
    cases = ET.parse(junit).getroot().findall("testsuite/testcase")
    assert sorted(c.get("name") for c in cases) == sorted(
        c["id"] for c in load_report(tmp_path / "out" / "fake-tools.json")["claims"])
    assert summary["junit"] == str(junit)


def test_quiet_leaves_out_the_per_probe_lines_but_not_the_result(
        fake_kind: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(tmp_path, tmp_path / "out", "--quiet") == cli.EXIT_PASSED
    out = capsys.readouterr().out
    assert "probe read-file" not in out and "[read-file]" not in out
    assert "-> read-file: " in out and "fake-tools" in out and "wrote" in out


def test_junit_marks_a_contradicted_claim_as_a_failure(tmp_path: Path) -> None:
    failing = (ReportSpec("fake-wrong", "Fake read, wrong answer", (read_probe("WRONG"),)),)
    out = tmp_path / "out"
    assert cli.run_suite((FakeLoopClient(), "1"), out, catalog=failing,
                         work_dir=str(tmp_path / "work")) == cli.EXIT_FAILED
    root = ET.fromstring(junit_xml([load_report(out / "fake-wrong.json")]))
    suite = root.find("testsuite")
    assert suite is not None and suite.get("failures") == "1" and suite.get("tests") == "1"
    failure = root.find("testsuite/testcase/failure")
    assert failure is not None and failure.get("type") == "contradicted"


def test_a_partial_run_merges_into_the_full_report_of_the_same_binary(
        fake_kind: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert _run(tmp_path, out) == cli.EXIT_PASSED
    full = load_report(out / "fake-tools.json")
    assert _run(tmp_path, out, "--probe", READ.name) == cli.EXIT_PASSED
    assert "merged into the report" in capsys.readouterr().out
    merged = load_report(out / "fake-tools.json")
    assert merged["complete"] is True and "partial" not in merged
    assert merged["merged"] == {"probes_run_now": [READ.name],
                                "probes_from_earlier_run": [DENY.name]}
    assert [c["id"] for c in merged["claims"]] == [c["id"] for c in full["claims"]]
    assert [c["id"] for c in merged["checks"]] == [c["id"] for c in full["checks"]]
    # each check still points at its own probe's requests in the merged journal
    lines = (out / "fake-tools.journal.jsonl").read_text().splitlines()
    for check in merged["checks"]:
        owner = check["id"].split(".")[0]
        assert all(json.loads(lines[n - 1])["probe"] == owner
                   for n in check.get("journal_lines", [])), check["id"]
    assert validate_path(out)[1] == []
    assert "**Merged:** read-file run later" in (out / "EVIDENCE.md").read_text()


def test_a_partial_run_alone_says_so_and_a_diff_calls_the_rest_not_run(
        fake_kind: None, tmp_path: Path) -> None:
    assert _run(tmp_path, tmp_path / "full") == cli.EXIT_PASSED
    assert _run(tmp_path, tmp_path / "part", "--probe", READ.name) == cli.EXIT_PASSED
    part = load_report(tmp_path / "part" / "fake-tools.json")
    assert part["complete"] is False
    assert part["partial"] == {"probes_run": [READ.name], "probes_not_run": [DENY.name]}
    diff = diff_directories(tmp_path / "full", tmp_path / "part")
    assert diff.regressions == []
    assert {c["id"]: c["change"] for c in diff["claims"]}["fake.pretooluse-deny"] == "not run"
    assert cli.main(["diff", str(tmp_path / "full"), str(tmp_path / "part")]) == cli.EXIT_PASSED
    assert validate_path(tmp_path / "part")[1] == []
    assert "**Partial:** only read-file ran; not run: pretooluse-deny." in (
        tmp_path / "part" / "EVIDENCE.md").read_text()


def test_latest_is_resolved_to_the_version_it_names(
        fake_kind: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    ran: list[tuple[str, str]] = []
    monkeypatch.setattr("probes.cli.matrix.run_suite",
                        lambda spec, out, **_: ran.append((spec, out.name)) or cli.EXIT_PASSED)
    newest = FakeLoopClient().published()
    code = cli.main(["matrix", "--clients", "fake-loop@latest", "--out", str(tmp_path),
                     "--catalog", CATALOG, "--json"])
    expected = sorted(newest, key=lambda v: [int(p) for p in v.split(".")])[-1]
    assert ran == [(f"fake-loop@{expected}", f"fake-loop-{expected}")]
    captured = capsys.readouterr()
    assert f"fake-loop@latest is fake-loop@{expected}" in captured.err
    summary = json.loads(captured.out)
    assert summary["folders"] == [f"fake-loop-{expected}"] and summary["exit_code"] == code


def test_progress_is_live_only_on_a_terminal_and_quiet_keeps_what_matters() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert choose_mode(io.StringIO()) == "plain"
    assert choose_mode(Terminal()) == "live"
    assert choose_mode(Terminal(), quiet=True) == "quiet"
    stream = io.StringIO()
    quiet = Reporter("quiet", stream)
    quiet.detail("a detail")
    quiet.say("a result")
    assert stream.getvalue() == "a result\n"
    screen = Terminal()
    live = Reporter("live", screen)
    with live.task("probing", 2) as bar:
        live.say("between")
        bar.advance()
    assert "between" in screen.getvalue() and "\x1b[" in screen.getvalue()  # drawn, not logged


@pytest.mark.parametrize("command", sorted(cli.build_parser()._subparsers._group_actions[0]
                                           .choices))  # type: ignore[union-attr]
def test_every_subcommand_describes_itself_and_its_exit_codes(command: str) -> None:
    parser = cli.build_parser()._subparsers._group_actions[0].choices[command]  # type: ignore[union-attr]
    text = parser.format_help()
    assert parser.description, command
    assert "exit codes:" in text, command
    flat = "".join(text.split())  # argparse wraps at spaces and hyphens
    if command == "sessions":  # Claude Code's own sessions
        assert "claude-code" in flat
    elif any(a.dest in ("client", "clients", "specs") for a in parser._actions):
        assert all(kind in flat for kind in registry.CLIENT_KINDS), command


@pytest.mark.parametrize("command", ["run", "matrix", "bisect"])
def test_long_commands_take_json_and_quiet(command: str) -> None:
    parser = cli.build_parser()._subparsers._group_actions[0].choices[command]  # type: ignore[union-attr]
    flags = {o for a in parser._actions for o in a.option_strings}
    assert {"--json", "--quiet"} <= flags


def test_clients_list_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["clients", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert isinstance(listed, list)
    assert all({"name", "version", "binary_sha256", "root"} <= set(b) for b in listed)


def test_an_install_says_what_it_fetches_and_which_version_a_tag_names(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    class NotYetInstalled(FakeLoopClient):
        def installed(self) -> list[ClientBinary]:
            return []

        def install(self, version: str) -> ClientBinary:
            return super().install("9.9.9" if version == "latest" else version)

    spec = (ReportSpec("fake-read", "Fake read", (READ,)),)
    result = cli.execute_suite((NotYetInstalled(), "latest"), tmp_path / "out", catalog=spec,
                               work_dir=str(tmp_path / "work"))
    out = capsys.readouterr().out
    assert "installing" in out and "latest" in out.split("installing", 1)[1].splitlines()[0]
    assert "fake-loop@latest is 9.9.9" in out
    assert result.reports[0]["client"]["version"] == "9.9.9"


def test_matrix_json_and_junit_from_committed_folders(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    import shutil
    for folder in ("2.1.235", "2.1.332"):
        shutil.copytree(Path("reports") / folder, tmp_path / folder)
    junit = tmp_path / "matrix.xml"
    code = cli.main(["matrix", "--clients", "2.1.235,2.1.332", "--out", str(tmp_path),
                     "--baseline", "2.1.235", "--skip-run", "--json", "--junit", str(junit)])
    summary = json.loads(capsys.readouterr().out)
    assert summary["exit_code"] == code and summary["folders"] == ["2.1.235", "2.1.332"]
    assert summary["diffs"] == [str(tmp_path / "diff-2.1.235-to-2.1.332.md")]
    contradicted = {key: r["contradicted"] for key, r in summary["reports"].items()
                    if r["contradicted"]}
    assert contradicted and all(k.startswith("claude-code@2.1.") for k in contradicted)
    suites = ET.parse(junit).getroot().findall("testsuite")
    assert {s.get("name").split("/")[0] for s in suites} == {  # type: ignore[union-attr]
        "claude-code@2.1.235", "claude-code@2.1.332"}
    failures = sum(int(s.get("failures") or 0) for s in suites)
    assert failures == sum(len(v) for v in contradicted.values())


def test_matrix_resume_runs_only_the_versions_not_yet_complete(
        fake_kind: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from probes.cli import matrix as matrix_command
    out = tmp_path / "out"
    args = ["matrix", "--clients", "fake-loop@1,fake-loop@2", "--catalog", CATALOG,
            "--out", str(out), "-q"]
    assert cli.main(["run", "--client", "fake-loop@1", "--catalog", CATALOG, "--out",
                     str(out / "fake-loop-1"), "--work-dir", str(tmp_path / "work"), "-q"]) == 0
    ran: list[str] = []
    real = matrix_command.run_suite

    def counted(label: str, folder: Path, **options: object) -> int:
        ran.append(label)
        return real(label, folder, **options)

    monkeypatch.setattr(matrix_command, "run_suite", counted)
    assert cli.main([*args, "--resume"]) == 0
    assert ran == ["fake-loop@2"]  # version 1 was complete: not run again
    assert cli.main([*args, "--resume"]) == 0
    assert ran == ["fake-loop@2"]  # both complete now
    # a report of another schema (an older loopprobe's) is not complete for --resume
    path = out / "fake-loop-1" / "fake-tools.json"
    report = json.loads(path.read_text())
    report["schema_version"] = 4
    path.write_text(json.dumps(report))
    assert cli.main([*args, "--resume"]) == 0
    assert ran == ["fake-loop@2", "fake-loop@1"]
