"""The almanac's search, build state, resume, shards and merge, on synthetic verdicts: a
made-up truth per version stands in for the client, so every path runs in milliseconds."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from probes.scale.almanac_build import BuildStats, build
from probes.scale.almanac_search import (
    FLAKY,
    UNRESOLVED,
    Need,
    SearchResult,
    grid_indices,
    search,
    shard_range,
)
from probes.scale.almanac_state import AlmanacState, StateError, merge_states

VERSIONS = [f"2.1.{n}" for n in range(100, 141)]  # 41 releases
CLAIMS = {"p-a": ["claim.a"], "p-b": ["claim.b1", "claim.b2"], "screen": ["claim.s"]}


class Truth:
    """What each version would answer: claim -> verdict per version, a screen per version,
    and versions whose second attempt answers otherwise (flaky)."""

    def __init__(self, verdict: Callable[[str, int], str],
                 screen: Callable[[int], str] = lambda i: "s0",
                 flaky: Mapping[tuple[str, str], str] | None = None,
                 by_attempt: Mapping[tuple[str, str, str], str] | None = None) -> None:
        self.verdict, self.screen_of, self.flaky = verdict, screen, dict(flaky or {})
        # (version, claim, "a2") -> what that attempt answers, whatever the others do
        self.by_attempt = dict(by_attempt or {})
        self.runs: list[tuple[str, tuple[str, ...], str]] = []

    def run(self, version: str, probes: list[str], folder: Path) -> str:
        index = VERSIONS.index(version)
        folder.mkdir(parents=True)
        attempt = folder.name.split("-")[0]
        self.runs.append((version, tuple(probes), attempt))
        claims = []
        for probe in probes:
            for claim in CLAIMS[probe]:
                status = self.verdict(claim, index)
                if attempt == "a2" and (version, claim) in self.flaky:
                    status = self.flaky[(version, claim)]
                status = self.by_attempt.get((version, claim, attempt), status)
                claims.append({"id": claim, "status": status, "probe": probe})
        checks = [{"id": f"{c['id']}.check", "claim": c["id"],
                   "status": "passed" if c["status"] == "confirmed" else "failed"} for c in claims]
        (folder / "r.json").write_text(json.dumps({
            "report": "r", "claims": claims, "checks": checks, "journal": "r.journal.jsonl",
            "probes": [{"name": p} for p in probes]}))
        (folder / "r.journal.jsonl").write_text(json.dumps({
            "type": "request", "probe": "screen", "method": "POST", "path": "/v1/messages",
            "kind": "main", "headers": {}, "body": {"tools": [{"name": self.screen_of(index)}]}})
            + "\n")
        return f"sha-{version}"


def _run(tmp: Path, truth: Truth, versions: list[str] = VERSIONS, grid: int = 8,
         state: AlmanacState | None = None, **options: object) -> tuple[AlmanacState, SearchResult]:
    state = state or AlmanacState(tmp / "state")
    result = build(state, versions, CLAIMS, grid, "screen", truth.run, work=tmp / "state" / "w",
                   **options)  # type: ignore[arg-type]
    return state, result


def _verdict_changes(changes: dict[str, list[tuple[int, str]]]) -> Callable[[str, int], str]:
    """claim -> [(first index, verdict), ...]: the verdict from each index on."""
    def verdict(claim: str, index: int) -> str:
        found = "confirmed"
        for start, status in changes.get(claim, []):
            if index >= start:
                found = status
        return found
    return verdict


def _segments(result: SearchResult, claim: str) -> list[tuple[str, str, str]]:
    found = next(c for c in result.claims(CLAIMS) if c["id"] == claim)
    return [(s["first"], s["last"], s["verdict"]) for s in found["segments"]]


def _changes(result: SearchResult, claim: str) -> list[tuple[str, str, bool]]:
    found = next(c for c in result.claims(CLAIMS) if c["id"] == claim)
    return [(c["before"], c["after"], c["located"]) for c in found["changes"]]


def test_the_grid_holds_every_spacing_th_version_and_the_last() -> None:
    assert grid_indices(10, 4) == [0, 4, 8, 9]
    assert grid_indices(9, 4) == [0, 4, 8]
    with pytest.raises(ValueError):
        grid_indices(3, 0)


def test_a_change_is_located_to_adjacent_releases_and_verified(tmp_path: Path) -> None:
    truth = Truth(_verdict_changes({"claim.b2": [(13, "contradicted")]}))
    _, result = _run(tmp_path, truth)
    assert result.complete
    assert _changes(result, "claim.b2") == [("2.1.112", "2.1.113", True)]
    assert _segments(result, "claim.b2") == [("2.1.100", "2.1.112", "confirmed"),
                                             ("2.1.113", "2.1.140", "contradicted")]
    assert _changes(result, "claim.b1") == [] and _changes(result, "claim.a") == []
    # both sides of the change were run twice (attempt 2: the re-verification)
    assert {(v, a) for v, p, a in truth.runs if "p-b" in p and a == "a2"} == {
        ("2.1.112", "a2"), ("2.1.113", "a2")}
    # the probes other than the screen's ran on far fewer than every version
    assert sum(len(set(p) - {"screen"}) for _, p, _ in truth.runs) < len(VERSIONS)


def test_a_change_and_its_revert_between_two_grid_versions_are_caught_by_the_screen(
        tmp_path: Path) -> None:
    # claim.a is contradicted on 2.1.110-2.1.112 only: both grid versions (2.1.108, 2.1.116)
    # agree; the screen moves where the client changed (at 110 and at 113)
    verdict = _verdict_changes({"claim.a": [(10, "contradicted"), (13, "confirmed")]})
    truth = Truth(verdict, screen=lambda i: "s1" if 10 <= i < 13 else "s0")
    _, result = _run(tmp_path, truth)
    assert _changes(result, "claim.a") == [("2.1.109", "2.1.110", True),
                                           ("2.1.112", "2.1.113", True)]
    assert ("2.1.110", "2.1.112", "contradicted") in _segments(result, "claim.a")


def test_without_a_screen_move_a_short_excursion_is_the_stated_blind_spot(
        tmp_path: Path) -> None:
    verdict = _verdict_changes({"claim.a": [(10, "contradicted"), (13, "confirmed")]})
    _, result = _run(tmp_path, Truth(verdict))
    # the guarantee says so: shorter than the grid and the screen still -> not seen
    assert _changes(result, "claim.a") == []


def test_a_change_that_does_not_reproduce_is_flaky_never_a_change(tmp_path: Path) -> None:
    # 2.1.120 answers contradicted once, confirmed on the re-run: no change is published
    verdict = _verdict_changes({"claim.a": [(20, "contradicted"), (21, "confirmed")]})
    truth = Truth(verdict, screen=lambda i: "s1" if i == 20 else "s0",
                  flaky={("2.1.120", "claim.a"): "confirmed"})
    _, result = _run(tmp_path, truth)
    assert result.complete
    assert _changes(result, "claim.a") == []
    claim = next(c for c in result.claims(CLAIMS) if c["id"] == "claim.a")
    flaky = [s for s in claim["segments"] if s["verdict"] == FLAKY]
    assert flaky == [{"first": "2.1.120", "last": "2.1.120", "verdict": FLAKY,
                      "probed": ["2.1.120"], "outcomes": ["contradicted", "confirmed"]}]


def test_a_flaky_cell_is_flaky_only_for_the_claims_whose_verdicts_differed(
        tmp_path: Path) -> None:
    # p-b's re-run on 2.1.120 answers otherwise for claim.b1 only: the cell is flaky for
    # claim.b1; claim.b2, confirmed in both attempts, stands there (seen on real 2.0.27: a
    # claim shown flaky with the outcomes confirmed and confirmed)
    verdict = _verdict_changes({"claim.b1": [(20, "contradicted"), (21, "confirmed")]})
    truth = Truth(verdict, screen=lambda i: "s1" if i == 20 else "s0",
                  flaky={("2.1.120", "claim.b1"): "confirmed"})
    _, result = _run(tmp_path, truth)
    assert result.complete
    assert ("2.1.120", "2.1.120", FLAKY) in _segments(result, "claim.b1")
    assert _segments(result, "claim.b2") == [(VERSIONS[0], VERSIONS[-1], "confirmed")]
    claim = next(c for c in result.claims(CLAIMS) if c["id"] == "claim.b2")
    assert "2.1.120" in claim["segments"][0]["probed"]
    assert _changes(result, "claim.b1") == _changes(result, "claim.b2") == []


def test_a_harness_error_is_run_again_and_its_retry_decides(tmp_path: Path) -> None:
    # 2.1.116's first run is a harness error; run again fresh it answers as its neighbours
    # after it do, so the change is located there and verified by a third attempt
    verdict = _verdict_changes({"claim.a": [(16, "contradicted")]})
    truth = Truth(verdict, by_attempt={("2.1.116", "claim.a", "a1"): "error"})
    _, result = _run(tmp_path, truth)
    assert result.complete
    assert _changes(result, "claim.a") == [("2.1.115", "2.1.116", True)]
    assert [a for v, probes, a in truth.runs if v == "2.1.116" and "p-a" in probes] \
        == ["a1", "a2", "a3"]
    assert ("2.1.116", "2.1.116", "error") not in _segments(result, "claim.a")


def test_a_harness_error_decides_nothing(tmp_path: Path) -> None:
    verdict = _verdict_changes({"claim.a": [(16, "error"), (17, "contradicted")]})
    _, result = _run(tmp_path, Truth(verdict))
    segments = _segments(result, "claim.a")
    assert ("2.1.116", "2.1.116", "error") in segments
    # the change is between 2.1.115 and 2.1.117 with only the error between: a range
    assert _changes(result, "claim.a") == [("2.1.115", "2.1.117", False)]
    assert not [s for s in segments if s[2] == UNRESOLVED]


def test_an_interrupted_build_resumes_without_redoing_finished_runs(tmp_path: Path) -> None:
    verdict = _verdict_changes({"claim.b1": [(5, "absent"), (30, "confirmed")]})
    whole = Truth(verdict)
    _, expected = _run(tmp_path / "whole", whole)
    truth = Truth(verdict)
    _, partial = _run(tmp_path, truth, max_batches=7)
    assert not partial.complete
    # a torn last line (a kill mid-write) is ignored, and that run made again
    cells = sorted((tmp_path / "state" / "cells").glob("*.jsonl"))
    with cells[-1].open("a") as handle:
        handle.write('{"version": "2.1.1')
    _, result = _run(tmp_path, truth, state=AlmanacState(tmp_path / "state"))
    assert result.complete
    assert result.claims(CLAIMS) == expected.claims(CLAIMS)
    # no run was made twice beyond the one whose record was torn
    assert len(truth.runs) <= len(whole.runs) + 1


def test_a_build_killed_mid_run_resumes(tmp_path: Path) -> None:
    """A real process killed with SIGKILL while a run is in progress."""
    script = textwrap.dedent(f"""
        import json, os, sys, time
        from pathlib import Path
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_almanac_search import CLAIMS, VERSIONS, Truth, _verdict_changes
        from probes.scale.almanac_build import build
        from probes.scale.almanac_state import AlmanacState
        truth = Truth(_verdict_changes({{"claim.a": [(9, "contradicted")]}}))
        runs = 0
        def run(version, probes, folder):
            global runs
            runs += 1
            if runs == 6:
                print("ready", flush=True)
                time.sleep(60)
            return truth.run(version, probes, folder)
        state = AlmanacState(Path(sys.argv[1]))
        build(state, VERSIONS, CLAIMS, 8, "screen", run, work=Path(sys.argv[1]) / "w")
    """)
    process = subprocess.Popen([sys.executable, "-c", script, str(tmp_path / "state")],
                               stdout=subprocess.PIPE, text=True, cwd=Path(__file__).parent.parent)
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "ready"
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    state = AlmanacState(tmp_path / "state")
    assert len(state.screens) == 5  # the five runs finished before the kill
    truth = Truth(_verdict_changes({"claim.a": [(9, "contradicted")]}))
    _, result = _run(tmp_path, truth, state=state)
    assert result.complete
    assert _changes(result, "claim.a") == [("2.1.108", "2.1.109", True)]
    # the five runs finished before the kill are not made again
    assert not [run for run in truth.runs if run[0] in VERSIONS[:5] and run[2] == "a1"]


def test_shards_merge_into_the_unsharded_result(tmp_path: Path) -> None:
    verdict = _verdict_changes({"claim.a": [(3, "contradicted")],
                                "claim.b1": [(27, "not_reached")]})
    _, whole = _run(tmp_path / "whole", Truth(verdict))
    slices = []
    for shard in (1, 2, 3):
        chunk = shard_range(VERSIONS, 8, shard, 3)
        assert chunk[0] in [VERSIONS[i] for i in grid_indices(len(VERSIONS), 8)]
        state, result = _run(tmp_path / f"s{shard}", Truth(verdict), versions=chunk)
        assert result.complete
        state.start({"grid": 8})
        slices.append(state.folder)
    merged = merge_states(slices, tmp_path / "merged")
    result = search(VERSIONS, CLAIMS, 8, merged.cell, merged.screen)
    assert result.complete
    assert result.claims(CLAIMS) == whole.claims(CLAIMS)
    assert sorted(merged.binaries()) == VERSIONS


def test_a_state_of_another_build_is_refused(tmp_path: Path) -> None:
    state = AlmanacState(tmp_path / "s")
    state.start({"grid": 8, "client": "claude-code"})
    with pytest.raises(StateError, match="grid"):
        AlmanacState(tmp_path / "s").start({"grid": 4, "client": "claude-code"})
    other = AlmanacState(tmp_path / "t")
    other.start({"grid": 4, "client": "claude-code"})
    with pytest.raises(StateError, match="another build"):
        merge_states([tmp_path / "s", tmp_path / "t"], tmp_path / "m")


def test_build_counts_its_runs(tmp_path: Path) -> None:
    stats = BuildStats()
    _run(tmp_path, Truth(_verdict_changes({})), stats=stats)
    grid = grid_indices(len(VERSIONS), 8)
    assert stats.screens == len(VERSIONS)
    assert stats.batches == len(VERSIONS)  # grid versions' probes run with their screen
    assert stats.probe_runs == len(VERSIONS) + len(grid) * (len(CLAIMS) - 1)


def test_a_probe_whose_claims_changed_is_run_again(tmp_path: Path) -> None:
    state, result = _run(tmp_path, Truth(_verdict_changes({})))
    assert result.complete
    changed = {**CLAIMS, "p-a": ["claim.a", "claim.a2"]}
    again = search(VERSIONS, changed, 8, state.cell, state.screen)
    assert {n.probe for n in again.needs} == {"p-a"}
    assert len(again.needs) == len(grid_indices(len(VERSIONS), 8))


def test_a_probe_of_a_new_revision_is_run_again_and_its_old_runs_are_kept(
        tmp_path: Path) -> None:
    """A probe whose revision went up (a check or rule changed what it concludes): its runs of
    the earlier revision are superseded, kept in the state's files but in no cell."""
    state, result = _run(tmp_path, Truth(_verdict_changes({})))
    assert result.complete
    before = {path.name: path.read_text() for path in (tmp_path / "state" / "cells").iterdir()}
    old_runs = sum(len(runs) for key, runs in state.cells.items() if key[1] == "p-b")

    revised = AlmanacState(tmp_path / "state", {"p-b": 2})
    placed = [*revised.screens.values(), *(r for rs in revised.cells.values() for r in rs),
              *revised.superseded]
    assert len(revised.superseded) == old_runs and sorted(map(repr, revised.records())) == \
        sorted(map(repr, placed))
    needs = search(VERSIONS, CLAIMS, 8, revised.cell, revised.screen).needs
    assert {n.probe for n in needs} == {"p-b"}
    # the revised probe now concludes otherwise from 2.1.113 on: the change is located
    truth = Truth(_verdict_changes({"claim.b2": [(13, "contradicted")]}))
    revised, result = _run(tmp_path, truth, state=revised)
    assert result.complete
    assert _changes(result, "claim.b2") == [("2.1.112", "2.1.113", True)]
    assert {p for _, probes, _ in truth.runs for p in probes} == {"p-b"}
    for name, text in before.items():  # nothing recorded is lost: lines are only added
        assert (tmp_path / "state" / "cells" / name).read_text().startswith(text)
    stamped = [r for r in revised.records() if r.get("revision") == 2]
    assert stamped and all(r["probe"] == "p-b" for r in stamped)
    # read back with the revisions it was built with: the same cells; merged: every line
    assert AlmanacState(tmp_path / "state", {"p-b": 2}).cells == revised.cells
    revised.start({"grid": 8})
    merged = merge_states([tmp_path / "state"], tmp_path / "merged")
    assert len(merged.records()) == len(revised.records())


def test_a_build_on_another_machine_never_reuses_a_recorded_folder_name(tmp_path: Path) -> None:
    """Before: a build whose work folder was empty (another machine) named its runs a1-1 again,
    so the state held two runs of one folder name and a witness kept the other's evidence."""
    state, _ = _run(tmp_path, Truth(_verdict_changes({})))
    first = {str(r["folder"]) for r in state.records()}
    revised = AlmanacState(tmp_path / "state", {"p-b": 2})
    result = build(revised, VERSIONS, CLAIMS, 8, "screen", Truth(_verdict_changes({})).run,
                   work=tmp_path / "elsewhere")
    assert result.complete
    again = [str(r["folder"]) for r in revised.records() if r.get("revision") == 2]
    assert again and not set(again) & first


def test_a_withdrawn_run_is_run_again_and_kept(tmp_path: Path) -> None:
    """A run the harness got wrong (a defect fixed since, evidence overwritten) is withdrawn
    with a reason: it stays in its file and no cell holds it, so the next build runs it
    again, into a folder of another name."""
    truth = Truth(_verdict_changes({"claim.b2": [(13, "contradicted")]}))
    state, result = _run(tmp_path, truth)
    assert _changes(result, "claim.b2") == [("2.1.112", "2.1.113", True)]
    before = {path.name: path.read_text() for path in (tmp_path / "state" / "cells").iterdir()}
    [run] = state.runs("2.1.113", "p-b")
    with pytest.raises(StateError, match="expected a reason"):
        state.retract("2.1.113", run["folder"], "p-b", "  ")
    with pytest.raises(StateError, match=r"no standing run of p-b in folder '2.1.113/a9-9'.*"
                       r"found: 2\.1\.113/a1-1 \(screen\), 2\.1\.113/a1-2 \(p-b\)"):
        state.retract("2.1.113", "2.1.113/a9-9", "p-b", "wrong")

    assert state.retract("2.1.113", run["folder"], "p-b", "a misread offer") == 1
    assert state.withdrawn == [run] and run in state.records()
    assert not state.runs("2.1.113", "p-b") and state.runs("2.1.113", "p-b", 2)
    again = AlmanacState(tmp_path / "state")  # read back: the same
    assert again.withdrawn == [run] and again.retractions == state.retractions
    needs = search(VERSIONS, CLAIMS, 8, again.cell, again.screen).needs
    assert needs == [Need("2.1.113", "p-b")]
    truth.runs.clear()
    again, result = _run(tmp_path, truth, state=again)
    assert truth.runs == [("2.1.113", ("p-b",), "a1")]
    assert _changes(result, "claim.b2") == [("2.1.112", "2.1.113", True)]
    [rerun] = again.runs("2.1.113", "p-b")
    assert rerun["folder"] != run["folder"]
    for name, text in before.items():  # nothing recorded is lost: lines are only added
        assert (tmp_path / "state" / "cells" / name).read_text().startswith(text)
    # a whole folder, the screen too
    screen_folder = str(again.screens["2.1.124"]["folder"])
    assert again.retract("2.1.124", screen_folder, None, "overwritten evidence") >= 2
    needs = search(VERSIONS, CLAIMS, 8, again.cell, again.screen).needs
    assert Need("2.1.124", None) in needs and Need("2.1.124", "p-a") in needs


def test_a_retraction_holds_whichever_shard_brings_it(tmp_path: Path) -> None:
    state, _ = _run(tmp_path, Truth(_verdict_changes({})))
    state.start({"grid": 8})
    [run] = state.runs("2.1.108", "p-a")
    other = AlmanacState(tmp_path / "other")
    other.start({"grid": 8})
    other.add({"version": "2.1.108", "retract": run["folder"], "probe": "p-a",
               "reason": "wrong"})
    for order in ([tmp_path / "other", tmp_path / "state"],
                  [tmp_path / "state", tmp_path / "other"]):
        out = tmp_path / f"merged-{order[0].name}"
        merged = merge_states(order, out)
        assert merged.withdrawn == [run] and not merged.runs("2.1.108", "p-a")
        assert AlmanacState(out).withdrawn == [run]


def test_a_report_no_reader_takes_is_a_harness_error_never_the_end_of_the_build(
        tmp_path: Path) -> None:
    """Before: one report too large to read back (2.1.37's 53 MB) ended the whole build with
    exit 2, and the suite run's verdicts were never recorded."""
    truth = Truth(_verdict_changes({}))

    def run(version: str, probes: list[str], folder: Path) -> str:
        binary = truth.run(version, probes, folder)
        if version == "2.1.108" and folder.name.startswith("a1-"):
            (folder / "r.json").write_text("{" * 10)  # not JSON: refused as any oversized one
        return binary

    said: list[str] = []
    state = AlmanacState(tmp_path / "state")
    result = build(state, VERSIONS, CLAIMS, 8, "screen", run, work=tmp_path / "w",
                   say=said.append)
    assert result.complete
    assert [r["claims"] for r in state.runs("2.1.108", "p-a")] == [{"claim.a": "error"}]
    assert [r["claims"] for r in state.runs("2.1.108", "p-a", 2)] == [{"claim.a": "confirmed"}]
    assert any(line.startswith(f"almanac: {tmp_path}/w/2.1.108/a1-1/r.json not read (")
               and "harness errors" in line for line in said)
    assert _segments(result, "claim.a") == [("2.1.100", "2.1.140", "confirmed")]
