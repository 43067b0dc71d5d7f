"""``almanac.json`` from a build's state: published only when complete, valid against its
schema, each change with both sides, its flipped checks and its witnesses; the text form."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from probes.core.safe_read import ReadRefused
from probes.report.schemas import validate_path
from probes.scale.almanac_doc import PublishError, almanac_text, publish
from probes.scale.almanac_state import AlmanacState
from tests.test_almanac_search import CLAIMS, VERSIONS, Truth, _run, _verdict_changes

PUBLISHED = ["1.0.0", *VERSIONS, "2.2.0"]  # one version before the range, one after


def _state(tmp_path: Path, max_batches: int | None = None) -> AlmanacState:
    truth = Truth(_verdict_changes({"claim.b2": [(13, "contradicted")],
                                    "claim.a": [(0, "absent"), (30, "confirmed")]}))
    state = AlmanacState(tmp_path / "state")
    state.start({"client": "claude-code", "since": VERSIONS[0], "grid": 8,
                 "screen_probe": "screen", "claims": CLAIMS})
    _run(tmp_path, truth, state=state, max_batches=max_batches)
    return state


def test_an_incomplete_build_is_never_published(tmp_path: Path) -> None:
    state = _state(tmp_path, max_batches=3)
    with pytest.raises(PublishError, match="still needed"):
        publish(state, tmp_path / "state" / "w", tmp_path / "out", PUBLISHED, VERSIONS[-1], ())
    assert not (tmp_path / "out" / "almanac.json").exists()


def test_a_complete_build_publishes_ranges_changes_and_witnesses(tmp_path: Path) -> None:
    state = _state(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    path = publish(state, tmp_path / "state" / "w", out, PUBLISHED, VERSIONS[-1], ())
    document = json.loads(path.read_text())
    checked, problems = validate_path(path)
    assert checked == 1 and not problems, problems
    assert document["range"] == {"first": VERSIONS[0], "last": VERSIONS[-1],
                                 "count": len(VERSIONS)}
    assert document["not_built"] == [{"first": "2.2.0", "last": "2.2.0", "count": 1}]
    assert [v["binary_sha256"] for v in document["versions"]] == [f"sha-{v}" for v in VERSIONS]
    claims = {c["id"]: c for c in document["claims"]}
    [change] = claims["claim.b2"]["changes"]
    assert (change["before"], change["after"], change["from"], change["to"]) == (
        "2.1.112", "2.1.113", "confirmed", "contradicted")
    assert change["verified"] and change["kind"] == "behaviour"
    assert change["change"] == "regressed"
    assert change["flipped_checks"] == [{"id": "claim.b2.check", "before": "passed",
                                         "after": "failed"}]
    for side in ("before", "after"):
        witness = out / change["witnesses"][side]
        assert any(witness.rglob("r.json"))
    assert claims["claim.a"]["introduced"] == "2.1.130"
    # witnesses only for change sides and an anchor (the first), not for every version
    folders = {p.name for p in (out / "almanac" / "witnesses").iterdir()}
    assert folders == {"2.1.100", "2.1.112", "2.1.113", "2.1.129", "2.1.130"}
    # the text form in MATRIX.md, with ranges
    text = (out / "MATRIX.md").read_text()
    assert "`claim.b2`: 2.1.100–2.1.112 confirmed" in text
    assert "regressed in **2.1.113**" in text
    # published again: the block is replaced, not appended
    publish(state, tmp_path / "state" / "w", out, PUBLISHED, VERSIONS[-1], ())
    assert (out / "MATRIX.md").read_text() == text
    assert almanac_text(document) in text


def test_a_witness_that_witnesses_nothing_now_is_removed(tmp_path: Path) -> None:
    """A probe's new revision finds no change where its old one did: the change's witnesses
    go (their runs stay in the state's files), those of other changes and versions stay."""
    state = _state(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    publish(state, tmp_path / "state" / "w", out, PUBLISHED, VERSIONS[-1], ())
    witnesses = out / "almanac" / "witnesses"
    outside = witnesses / "0.9.0" / "a1-1"  # a version this range does not hold
    outside.mkdir(parents=True)
    revised = AlmanacState(tmp_path / "state", {"p-b": 2})
    _run(tmp_path, Truth(_verdict_changes({"claim.a": [(0, "absent"), (30, "confirmed")]})),
         state=revised)
    publish(revised, tmp_path / "state" / "w", out, PUBLISHED, VERSIONS[-1], ())
    document = json.loads((out / "almanac.json").read_text())
    assert [c["changes"] for c in document["claims"] if c["id"] == "claim.b2"] == [[]]
    assert {p.name for p in witnesses.iterdir()} == {"2.1.100", "2.1.129", "2.1.130", "0.9.0"}
    assert outside.is_dir() and revised.superseded


def test_the_state_lines_are_schema_checked(tmp_path: Path) -> None:
    state = _state(tmp_path)
    checked, problems = validate_path(state.folder / "cells")
    assert checked == len(VERSIONS) and not problems, problems[:3]


def test_a_symlink_in_a_run_folder_is_never_copied_into_a_witness(tmp_path: Path) -> None:
    state = _state(tmp_path)
    work = tmp_path / "state" / "w"
    for folder in (work / "2.1.113").iterdir():  # every run folder of a change side
        (folder / "secret.json").symlink_to("/etc/passwd")
    with pytest.raises(PublishError, match=r"secret\.json not a regular file"):
        publish(state, work, tmp_path / "out", PUBLISHED, VERSIONS[-1], ())
    assert not list((tmp_path / "out").rglob("secret.json"))


def test_a_state_file_that_is_a_fifo_is_refused(tmp_path: Path) -> None:
    cells = tmp_path / "s" / "cells"
    cells.mkdir(parents=True)
    os.mkfifo(cells / "2.1.100.runs.jsonl")
    with pytest.raises(ReadRefused):
        AlmanacState(tmp_path / "s")


def test_a_witness_holding_another_runs_evidence_is_refused_until_that_run_is_withdrawn(
        tmp_path: Path) -> None:
    """Before: two machines' builds gave two runs one folder name; the witness published first
    was kept for the other, so a change's witness showed no report of its probe."""
    state = _state(tmp_path)
    out, work = tmp_path / "out", tmp_path / "state" / "w"
    out.mkdir()
    publish(state, work, out, PUBLISHED, VERSIONS[-1], ())
    [run] = state.runs("2.1.113", "p-b")
    witness = out / "almanac" / "witnesses" / "2.1.113" / Path(run["folder"]).name
    report = json.loads((witness / "r.json").read_text())
    for claim in report["claims"]:  # the other run: p-b confirmed there
        claim["status"] = "confirmed"
    (witness / "r.json").write_text(json.dumps(report))
    with pytest.raises(PublishError, match=r"witness of claim\.b2 on 2\.1\.113 to show its "
                       r"run's verdict 'contradicted', found \['confirmed'\].*almanac retract "
                       rf"--version 2\.1\.113 --folder {run['folder']} --probe p-b"):
        publish(state, work, out, PUBLISHED, VERSIONS[-1], ())

    state.retract("2.1.113", run["folder"], "p-b", "its witness holds another run's evidence")
    truth = Truth(_verdict_changes({"claim.b2": [(13, "contradicted")],
                                    "claim.a": [(0, "absent"), (30, "confirmed")]}))
    _run(tmp_path, truth, state=state)
    publish(state, work, out, PUBLISHED, VERSIONS[-1], ())
    document = json.loads((out / "almanac.json").read_text())
    [change] = next(c["changes"] for c in document["claims"] if c["id"] == "claim.b2")
    [rerun] = state.runs("2.1.113", "p-b")
    shown = json.loads((out / "almanac" / "witnesses" / "2.1.113" / Path(rerun["folder"]).name
                        / "r.json").read_text())
    assert [c["status"] for c in shown["claims"] if c["id"] == "claim.b2"] == ["contradicted"]
    assert change["witnesses"]["after"] == "almanac/witnesses/2.1.113"
    assert not witness.exists()  # the other run's folder witnesses nothing now: removed
    checked, problems = validate_path(state.folder / "cells")
    assert checked == len(VERSIONS) and not problems, problems[:3]


def test_retract_on_the_command_line(tmp_path: Path) -> None:
    state = _state(tmp_path)
    [run] = state.runs("2.1.113", "p-b")

    def retract(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "probes", "almanac", "retract", "--state",
                               str(state.folder), "--version", "2.1.113", *argv],
                              capture_output=True, text=True, timeout=60)

    refused = retract("--folder", "2.1.113/a7-7", "--reason", "wrong")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "no standing run of any probe in folder '2.1.113/a7-7'" in refused.stderr
    done = retract("--folder", run["folder"], "--probe", "p-b", "--reason", "misread offer")
    assert done.returncode == 0, done.stderr
    assert "withdrew 1 run(s)" in done.stdout
    assert AlmanacState(state.folder).withdrawn == [run]
    again = retract("--folder", run["folder"], "--probe", "p-b", "--reason", "misread offer")
    assert again.returncode == 2  # withdrawn already: nothing standing there


def test_the_cost_counts_every_suite_run_even_two_of_one_folder_name(tmp_path: Path) -> None:
    truth = Truth(_verdict_changes({"claim.b2": [(13, "contradicted")]}))
    state = AlmanacState(tmp_path / "state")
    state.start({"client": "claude-code", "since": VERSIONS[0], "grid": 8,
                 "screen_probe": "screen", "claims": CLAIMS})
    _run(tmp_path, truth, state=state)
    out = tmp_path / "out"
    out.mkdir()

    def cost() -> dict[str, int]:
        publish(state, tmp_path / "state" / "w", out, PUBLISHED, VERSIONS[-1], ())
        return json.loads((out / "almanac.json").read_text())["cost"]  # type: ignore[no-any-return]

    found = cost()
    assert found["suite_runs"] == len(truth.runs)
    assert found["screens"] == len(VERSIONS)
    assert found["probe_runs"] == len(state.records()) - len(VERSIONS)
    # another machine's suite run, recorded under a folder name this one used
    [run] = state.runs("2.1.140", "p-a")
    state.add({**run, "attempt": 2, "batch_s": run["batch_s"] + 7.5})
    assert cost()["suite_runs"] == len(truth.runs) + 1
