"""``loopprobe run -j N``: probes at once, reports the same as one after another."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from probes import cli
from probes.core.outcome import ProbeOutcome
from probes.core.probe import Probe
from probes.scale.schedule import run_scheduled
from tests.fakeloop import FakeLoopClient
from tests.fakeloop.catalog import READ, REPORTS

CLIENT = FakeLoopClient()


def _files(folder: Path) -> dict[str, bytes]:
    # timings differ from run to run by nature; everything else must not
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())
            if not p.name.endswith(".timing.json")}


def test_parallel_reports_equal_serial_reports(tmp_path: Path) -> None:
    codes = {jobs: cli.run_suite((CLIENT, "1"), tmp_path / f"j{jobs}", catalog=REPORTS,
                                 work_dir=str(tmp_path / f"work{jobs}"), jobs=jobs)
             for jobs in (1, 3)}
    assert codes[1] == codes[3]
    serial, parallel = _files(tmp_path / "j1"), _files(tmp_path / "j3")
    assert sorted(serial) == sorted(parallel) and len(serial) > 3
    assert [name for name in serial if serial[name] != parallel[name]] == []


def test_probes_really_overlap_and_come_back_in_order() -> None:
    probes = [Probe(**{**READ.__dict__, "name": f"p{i}"}) for i in range(4)]
    running, most = 0, 0
    lock = threading.Lock()
    others_done = threading.Event()

    def run(probe: Probe) -> ProbeOutcome:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        if probe.name == "p0":  # finishes last: only once the other three have come back,
            # which they can only do beside it (no sleep: a loaded machine cannot reorder it)
            assert others_done.wait(60), "the other probes never came back beside p0"
        with lock:
            running -= 1
        return ProbeOutcome(probe, None, [], None)

    finished: list[str] = []

    def came_back(outcome: ProbeOutcome) -> None:
        finished.append(outcome.probe.name)
        if {"p1", "p2", "p3"} <= set(finished):
            others_done.set()

    scheduled = run_scheduled(probes, run, 2, came_back)
    assert most == 2 and not scheduled.interrupted
    assert [o.probe.name for o in scheduled.outcomes if o] == ["p0", "p1", "p2", "p3"]
    assert finished[-1] == "p0"


@pytest.mark.parametrize("jobs", [0, -2])
def test_jobs_must_be_positive(jobs: int, tmp_path: Path,
                               capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", "-j", str(jobs), "--out", str(tmp_path)]) == 2
    assert "expected a number of probes at once >= 1" in capsys.readouterr().err
