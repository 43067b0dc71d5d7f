"""Hostile files are refused in one line, exit 2, by every command that reads them.

One folder per attack, built from a committed report folder (the tool runner's, small),
then every command that reads files walked over it as a user runs it (a subprocess, with a
timeout: a named pipe would hang it, a bomb exhaust its memory): exit 2, one line on stderr
starting ``loopprobe:``, no traceback, and nothing written outside the command's own out
path. Exit 1 would tell CI a claim regressed; a traceback would say nothing at all.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from probes.cli import build_parser
from probes.core.safe_read import MAX_JSON_BYTES

ROOT = Path(__file__).resolve().parent.parent
BASE = ROOT / "reports" / "anthropic-tool-runner-2.0.0"  # schema 5, ~100 KB
OLDER = ROOT / "reports" / "2.1.90"  # schema 4, gzipped journals
VERSION = BASE.name  # the folder `matrix --clients anthropic-tool-runner@2.0.0` reads
CLIENT = "anthropic-tool-runner@2.0.0"
REPORT = "tool-runner-loop"


def _report(folder: Path) -> dict:  # type: ignore[type-arg]
    return json.loads((folder / f"{REPORT}.json").read_text())  # type: ignore[no-any-return]


def _write_report(folder: Path, report: dict) -> None:  # type: ignore[type-arg]
    (folder / f"{REPORT}.json").write_text(json.dumps(report))


# ---- the attacks: each makes one folder hostile ------------------------------------------------

def _deep(folder: Path, _: Path) -> None:
    (folder / f"{REPORT}.json").write_text("[" * 100_000 + "]" * 100_000)


def _oversize(folder: Path, _: Path) -> None:
    with (folder / f"{REPORT}.json").open("r+b") as out:
        out.truncate(MAX_JSON_BYTES + 1)  # sparse: costs no disk


def _dev_zero(folder: Path, _: Path) -> None:
    (folder / f"{REPORT}.json").unlink()
    (folder / f"{REPORT}.json").symlink_to("/dev/zero")


def _gzip_bomb(folder: Path, _: Path) -> None:
    report = _report(folder)
    (folder / report["journal"]).unlink()
    report["journal"] += ".gz"
    (folder / report["journal"]).write_bytes(gzip.compress(b"\n" * (64 * 1024 * 1024), 9))
    _write_report(folder, report)


def _fifo(folder: Path, _: Path) -> None:
    os.mkfifo(folder / "pipe.json")


def _symlink_out(folder: Path, tmp: Path) -> None:
    outside = tmp / "elsewhere"
    outside.mkdir()
    report = {**_report(folder), "report": "secret"}
    (outside / "secret.json").write_text(json.dumps(report))
    (folder / "secret.json").symlink_to(outside / "secret.json")


def _journal_field(folder: Path, tmp: Path) -> None:
    outside = tmp / "elsewhere"
    outside.mkdir()
    report = _report(folder)
    shutil.copy(folder / report["journal"], outside / "x.jsonl")
    report["journal"] = "../../elsewhere/x.jsonl"
    _write_report(folder, report)


def _yaml_bomb(folder: Path, _: Path) -> None:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for previous, name in zip("abcdefghi", "bcdefghij", strict=True):
        lines.append(f"{name}: &{name} [" + ",".join([f"*{previous}"] * 9) + "]")
    (folder / "scenario.yaml").write_text("\n".join(lines) + "\n")


# ---- the commands, as a user runs them ---------------------------------------------------------
# {folder}: the hostile version folder; {root}: the folder holding it (what matrix and merge
# take); {good}: an intact copy; {out}: where a command that writes may write

COMMANDS: dict[str, list[str]] = {
    "validate": ["validate", "{root}"],
    "validate-file": ["validate", "{folder}/{file}"],
    "diff": ["diff", "{good}", "{folder}"],
    "diff-as-a": ["diff", "{folder}", "{good}", "--out", "{out}/diff.md"],
    "render": ["render", "{folder}", "--out", "{out}/page.html"],
    "render-diff": ["render", "--diff", "{good}", "{folder}", "--out", "{out}/diff.html"],
    "guide": ["guide", "{folder}"],
    "mechanisms": ["mechanisms", "{folder}"],
    "mechanisms-matrix": ["mechanisms", "{good}", "--matrix", "{folder}/{file}"],
    "matrix-skip-run": ["matrix", "--clients", CLIENT, "--out", "{root}", "--skip-run"],
    "matrix-bisects": ["matrix", "--clients", CLIENT, "--out", "{out}", "--skip-run",
                       "--bisects", "{folder}"],
    "merge": ["merge", "{root}", "--out", "{out}/merged"],
    "explain": ["explain", "tool-runner.tool-result-pairing", "--client", CLIENT, "--folder",
                "{folder}"],
}
# where each command may write (relative to the case's folder names); nothing else may change
WRITES = {"guide": "{folder}", "matrix-skip-run": "{root}"}

EVERY_FOLDER_READER = list(COMMANDS)
JOURNAL_READERS = ["validate", "render", "guide", "merge", "explain"]  # the others never open a journal
# (attack, the file it makes hostile, the commands that read that file)
CASES: dict[str, tuple[Callable[[Path, Path], None], str, list[str]]] = {
    "deep-nesting": (_deep, f"{REPORT}.json", EVERY_FOLDER_READER),
    "oversize": (_oversize, f"{REPORT}.json", EVERY_FOLDER_READER),
    "dev-zero-symlink": (_dev_zero, f"{REPORT}.json", EVERY_FOLDER_READER),
    "fifo-json": (_fifo, "pipe.json", EVERY_FOLDER_READER),
    "symlink-out-of-folder": (_symlink_out, "secret.json",
                              [c for c in EVERY_FOLDER_READER if c != "validate-file"]),
    # matrix --bisects reads bisect results, which name no journal
    "journal-field-elsewhere": (_journal_field, f"{REPORT}.json",
                                [c for c in EVERY_FOLDER_READER if c != "matrix-bisects"]),
    "gzip-bomb-journal": (_gzip_bomb, f"{REPORT}.journal.jsonl.gz",
                          [*JOURNAL_READERS, "validate-file"]),
    "yaml-alias-bomb": (_yaml_bomb, "scenario.yaml", ["validate", "validate-file"]),
}
# a file named on purpose (validate FILE, --matrix FILE) is followed wherever it links; the
# file it reaches is a report, not a matrix: still refused, as not a matrix
REFUSED_BY_CONTENT = {("symlink-out-of-folder", "mechanisms-matrix"),
                      ("journal-field-elsewhere", "mechanisms-matrix")}


def _environment(tmp: Path) -> dict[str, str]:
    """The child's environment from an allow-list: this worktree's code, a cache of its own."""
    keep = {k: os.environ[k] for k in ("PATH", "LANG", "LC_ALL", "HOME") if k in os.environ}
    return {**keep, "PYTHONPATH": str(ROOT), "LOOPPROBE_CACHE": str(tmp / "cache")}


def _snapshot(tmp: Path, skip: list[Path]) -> dict[str, tuple[int, int]]:
    found = {}
    for folder, dirs, names in os.walk(tmp):
        here = Path(folder)
        dirs[:] = [d for d in dirs if here / d not in skip]
        for name in names:
            status = (here / name).lstat()
            found[str(here / name)] = (status.st_mtime_ns, status.st_size)
    return found


def _build(tmp: Path, attack: Callable[[Path, Path], None]) -> dict[str, Path]:
    places = {"root": tmp / "hostile", "good": tmp / "good" / VERSION, "out": tmp / "out"}
    places["folder"] = places["root"] / VERSION
    for where in ("folder", "good"):
        shutil.copytree(BASE, places[where])
    places["out"].mkdir()
    attack(places["folder"], tmp)
    return places


def _run(argv: list[str], tmp: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "probes", *argv], capture_output=True,
                          text=True, timeout=60, cwd=tmp, env=_environment(tmp))


def _assert_refused(done: subprocess.CompletedProcess[str], what: str) -> str:
    lines = done.stderr.splitlines()
    assert "Traceback" not in done.stderr, f"{what}: {done.stderr[-2000:]}"
    assert done.returncode == 2, f"{what}: exit {done.returncode}: {done.stderr[-2000:]}"
    assert len(lines) == 1 and lines[0].startswith("loopprobe: "), f"{what}: {done.stderr}"
    return lines[0]


@pytest.mark.parametrize("case", list(CASES))
def test_every_reader_refuses_the_hostile_file(case: str, tmp_path: Path) -> None:
    attack, file, readers = CASES[case]
    places = _build(tmp_path, attack)
    said = {}
    for name in readers:
        writes = WRITES.get(name, "{out}").format(**{k: str(v) for k, v in places.items()})
        skip = [Path(writes), tmp_path / "cache"]
        before = _snapshot(tmp_path, skip)
        argv = [part.format(file=file, **{k: str(v) for k, v in places.items()})
                for part in COMMANDS[name]]
        said[name] = _assert_refused(_run(argv, tmp_path), f"{case}: loopprobe {name}")
        assert _snapshot(tmp_path, skip) == before, f"{case}: {name} wrote outside {writes}"
        if (case, name) not in REFUSED_BY_CONTENT:
            assert "refused" in said[name], f"{case}: {name}: {said[name]}"
    print("\n".join(f"{case} {name}: {line}" for name, line in said.items()))


def test_the_walk_covers_every_command_that_reads_files() -> None:
    """A command added later that reads report files must join the walk (or be named here
    with why it is not walked)."""
    not_walked = {
        "run", "probes", "bisect", "sessions", "versions", "clients", "record",
        # run/bisect/sessions read only what they write this run (bisect and run merge into
        # an earlier report through the same readers); versions, clients and record read no
        # file; probes reads a --catalog module (Python, imported)
        "schemas",  # writes only
        "serve",  # its scenario is read by the mock's loader: tested below
        # reads a case file and a baseline (YAML, tested in test_cases.py) and the folders
        # it writes this run
        "check",
        # reads the report folders under OUT/conformance with load_folder, the readers
        # `matrix --skip-run` and `explain` are walked through here
        "conformance",
        # reads its own state and run folders through safe_read; its hostile inputs (a FIFO
        # state file, a symlink in a run folder) are tested in test_almanac_publish.py
        "almanac",
    }
    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices  # type: ignore[union-attr]
    walked = {argv[0] for argv in COMMANDS.values()}
    assert set(commands) == walked | not_walked


def test_serve_refuses_a_fifo_and_an_alias_bomb_scenario(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.yaml")
    _yaml_bomb(tmp_path, tmp_path)
    for name in ("pipe.yaml", "scenario.yaml"):
        done = _run(["serve", "--scenario", str(tmp_path / name), "--port", "0"], tmp_path)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert "expected a regular file" in done.stderr or "aliases are refused" in done.stderr


# ---- merge --------------------------------------------------------------------------------------

def _slices(tmp: Path) -> tuple[Path, Path]:
    one, two = tmp / "slice1", tmp / "slice2"
    shutil.copytree(BASE, one / VERSION)
    (two / VERSION).mkdir(parents=True)
    return one, two


def _merge(tmp: Path, *argv: str) -> str:
    return _assert_refused(_run(["merge", *argv], tmp), "merge")


def test_merge_refuses_a_symlink_in_a_slice(tmp_path: Path) -> None:
    one, two = _slices(tmp_path)
    (tmp_path / "outside.json").write_text('{"not": "in a slice"}')
    (two / VERSION / "extra.json").symlink_to(tmp_path / "outside.json")
    said = _merge(tmp_path, str(one), str(two), "--out", str(tmp_path / "merged"))
    assert "a symlink in a slice" in said and "extra.json" in said
    assert not (tmp_path / "merged" / VERSION).exists()


def test_merge_refuses_two_slices_holding_one_report_differently(tmp_path: Path) -> None:
    one, two = _slices(tmp_path)
    shutil.copytree(BASE, two / VERSION, dirs_exist_ok=True)
    report = _report(two / VERSION)
    report["claims"][0]["status"] = "contradicted"
    _write_report(two / VERSION, report)
    said = _merge(tmp_path, str(one), str(two), "--out", str(tmp_path / "merged"))
    assert str(one) in said and str(two) in said and repr(REPORT) in said
    assert not (tmp_path / "merged" / VERSION).exists()
    # the same report in both, byte for byte, is one report
    shutil.copy(one / VERSION / f"{REPORT}.json", two / VERSION / f"{REPORT}.json")
    done = _run(["merge", str(one), str(two), "--out", str(tmp_path / "merged")], tmp_path)
    assert done.returncode in (0, 1) and "Traceback" not in done.stderr, done.stderr


@pytest.mark.parametrize("content", ["[]", '{"schema_version": 1, "kind": "fingerprint", '
                                           '"fingerprint": []}', "{"])
def test_merge_refuses_a_fingerprint_that_is_not_one(content: str, tmp_path: Path) -> None:
    one, two = _slices(tmp_path)
    (two / VERSION / "fingerprint.json").write_text(content)
    said = _merge(tmp_path, str(one), str(two), "--out", str(tmp_path / "merged"))
    assert "fingerprint.json" in said


def test_merge_refuses_out_equal_to_or_inside_a_slice(tmp_path: Path) -> None:
    one, two = _slices(tmp_path)
    before = _snapshot(tmp_path, [])
    assert "is the slice" in _merge(tmp_path, str(one), str(two), "--out", str(one))
    assert "is inside the slice" in _merge(tmp_path, str(one), str(two),
                                           "--out", str(one / VERSION / "merged"))
    assert _snapshot(tmp_path, []) == before


# ---- what loopprobe wrote still reads -----------------------------------------------------------

@pytest.mark.parametrize("folder", [BASE, OLDER], ids=["schema-5", "schema-4-gzipped"])
def test_committed_reports_still_read(folder: Path, tmp_path: Path) -> None:
    from probes.report.format import load_folder
    from probes.report.render import render_folder
    from probes.report.schemas import validate_path
    assert load_folder(folder).reports
    assert validate_path(folder)[1] == []
    assert "<html" in render_folder(folder)
