"""The CLI as a newcomer meets it: a version, and mistakes answered with one line and exit 2
before anything is installed."""

from __future__ import annotations

from pathlib import Path

import pytest

from probes import __version__, cli


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        cli.main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"loopprobe {__version__}"


@pytest.mark.parametrize(("args", "guess"), [
    (["--probe", "stop-hook-rentry"], "(did you mean 'stop-hook-reentry'?)"),
    (["--report", "termnation"], "(did you mean 'termination'?)"),
])
def test_an_unknown_name_is_one_line_with_a_guess_before_any_install(
        args: list[str], guess: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    # a version that does not exist: an install attempt would say so instead
    code = cli.main(["run", "--client", "0.0.0-none", "--out", str(tmp_path / "out"), *args])
    err = capsys.readouterr().err.strip()
    assert code == cli.EXIT_HARNESS
    assert len(err.splitlines()) == 1 and guess in err, err
    assert "0.0.0-none" not in err
    assert not (tmp_path / "out").exists()


def test_probes_lists_reports_probes_and_claims(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from probes.catalog import REPORTS
    assert cli.main(["probes"]) == 0
    shown = capsys.readouterr().out
    for spec in REPORTS:
        assert f"{spec.name}: {spec.title}" in shown
        for probe in spec.probes:
            assert f"  {probe.name}: {probe.title}" in shown
            assert all(f"    {claim.id}" in shown for claim in probe.claims)
    assert cli.main(["probes", "--json", "--client", "anthropic-tool-runner@2.16.0"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert {r["report"] for r in listed} == {s.name for s in cli.load_catalog(
        "probes.catalog.tool_runner")}


@pytest.mark.parametrize("catalog", ["broken.py", "missing.py", "no_such_module_here.sub"])
def test_a_missing_or_broken_catalog_is_one_line_before_any_install(
        catalog: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "broken.py").write_text("REPORTS = (\n")
    target = str(tmp_path / catalog) if catalog.endswith(".py") else catalog
    code = cli.main(["run", "--client", "0.0.0-none", "--catalog", target,
                     "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip()
    assert code == cli.EXIT_HARNESS
    assert len(err.splitlines()) == 1 and "--catalog" in err and "expected" in err, err
    assert "Traceback" not in err and "0.0.0-none" not in err


@pytest.mark.parametrize("command", [["guide"], ["mechanisms"], ["render"]])
def test_commands_on_a_missing_folder_say_so_in_one_line(
        command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main([*command, str(tmp_path / "nowhere")])
    err = capsys.readouterr().err.strip()
    assert code == cli.EXIT_HARNESS
    assert len(err.splitlines()) == 1 and "nowhere" in err, err
