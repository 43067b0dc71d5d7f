"""Nothing left behind: what a killed harness left (its runs' cgroups, its socket folders,
its sandbox tmpfs) is swept when the next harness starts, and only that.

The fast tests plant leftovers named after owners that are alive, gone, or a PID the kernel
gave to another process since (the start time differs), and sweep; the client test
SIGKILLs a harness in the middle of a real Claude Code run and checks that the next run
leaves the machine as it was before the killed one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from probes.run.bounds import Bounds, find_limiter
from probes.run.cgroups import Cgroup
from probes.run.leftovers import sweep
from probes.run.owner import owner_gone, owner_tag, temp_folder_prefix
from probes.run.sandbox_fs import FS_PREFIX, _mount, cannot_mount, sandbox_mounts, unmount
from tests.conftest import DEFAULT_CLIENT_VERSION, bubblewrap

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def owners() -> Iterator[dict[str, str]]:
    """Tags of a live owner, a gone one, and a reused PID (alive, started at another time)."""
    live = subprocess.Popen(["sleep", "120"])  # stopped by this fixture
    gone = subprocess.Popen(["sleep", "120"])
    try:
        tags = {"live": owner_tag(live.pid), "gone": owner_tag(gone.pid)}
        pid, start, namespace = tags["live"].split(".")
        tags["reused"] = f"{pid}.{int(start) + 1}.{namespace}"
        tags["elsewhere"] = f"{pid}.{start}.{int(namespace) + 1}"
        gone.kill()
        gone.wait()
        yield tags
    finally:
        for process in (live, gone):
            process.kill()
            process.wait()


def test_an_owner_is_gone_only_when_that_is_proven(owners: dict[str, str]) -> None:
    assert not owner_gone(owner_tag()) and not owner_gone(owners["live"])
    assert owner_gone(owners["gone"]) and owner_gone(owners["reused"])
    assert not owner_gone(owners["elsewhere"]), "another PID namespace: not ours to judge"
    assert not owner_gone("not-a-tag")


def _cgroup_parent(controller: str) -> Path:
    place = getattr(find_limiter(Bounds(), shutil.which("bwrap") or "bwrap"), controller)
    if not isinstance(place, Cgroup):
        pytest.skip(f"no writable {controller} cgroup here: {place}")
    return place.parent


@pytest.mark.parametrize("controller", ["memory", "pids"])
def test_the_cgroups_of_a_gone_harness_are_swept_and_a_live_ones_are_not(
        controller: str, owners: dict[str, str]) -> None:
    parent = _cgroup_parent(controller)
    made = {kind: parent / f"loopprobe-{tag}-{os.urandom(6).hex()}" for kind, tag in owners.items()}
    for path in made.values():
        path.mkdir()
    # a process still in the gone harness's cgroup (bwrap outlived it): killed, then removed
    survivor = subprocess.Popen(["sleep", "120"])
    try:
        (made["gone"] / "cgroup.procs").write_text(str(survivor.pid))
        sweep([parent])  # (a harness starting beside this test may sweep them first)
        assert survivor.wait(timeout=10) == -9
        left = {kind for kind, path in made.items() if path.exists()}
    finally:
        survivor.kill()
        for path in made.values():
            if path.exists():
                path.rmdir()
    assert left == {"live", "elsewhere"}


def test_a_cgroup_named_by_its_pid_alone_is_swept_only_when_gone_and_empty(
        owners: dict[str, str]) -> None:
    """Names made before the start time was in them: a gone PID's empty cgroup is swept;
    one still holding a task may be a live harness's of another PID namespace, and stays."""
    parent = _cgroup_parent("pids")
    gone_pid, live_pid = owners["gone"].split(".")[0], owners["live"].split(".")[0]
    made = {kind: parent / f"loopprobe-{pid}-{os.urandom(6).hex()}"
            for kind, pid in (("empty", gone_pid), ("busy", gone_pid), ("live", live_pid))}
    for path in made.values():
        path.mkdir()
    holder = subprocess.Popen(["sleep", "120"])  # stopped below
    try:
        (made["busy"] / "cgroup.procs").write_text(str(holder.pid))
        sweep([parent])
        assert holder.poll() is None, "a task of a cgroup that may be live is not killed"
        left = {kind for kind, path in made.items() if path.exists()}
    finally:
        holder.kill()
        holder.wait()
        for path in made.values():
            if path.exists():
                path.rmdir()
    assert left == {"busy", "live"}


def test_the_socket_folders_of_a_gone_harness_are_swept_and_nothing_else(
        owners: dict[str, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "kept").write_text("not the sweep's")
    for tag in owners.values():
        folder = Path(tempfile.mkdtemp(prefix=temp_folder_prefix(tag)))
        (folder / "etc").mkdir()
        (folder / "record.sock").write_text("")
        (folder / "link-out").symlink_to(outside)
    (temp / f"{temp_folder_prefix(owners['gone'])}linkabcd").symlink_to(outside)
    (temp / "loopprobe-cli.abcdefgh").mkdir()  # another tool's folder: no owner in its name
    swept = sorted(p for p in temp.iterdir() if not p.is_symlink() and (
        owners["gone"] in p.name or owners["reused"] in p.name))
    done = sweep([])
    assert [line for line in done if str(temp) in line] == [f"removed {p}" for p in swept]
    left = sorted(p.name for p in temp.iterdir())
    assert [n.split("-")[1] for n in left if n.startswith("loopprobe-") and "cli" not in n] == \
        sorted([owners["live"], owners["elsewhere"], owners["gone"]]), left
    assert (temp / f"{temp_folder_prefix(owners['gone'])}linkabcd").is_symlink()
    assert (temp / "loopprobe-cli.abcdefgh").is_dir()
    assert (outside / "kept").read_text() == "not the sweep's"


def test_the_sandbox_tmpfs_of_a_gone_harness_is_unmounted(owners: dict[str, str],
                                                          tmp_path: Path) -> None:
    if (why := cannot_mount()) is not None:
        pytest.skip(why)
    points = {kind: tmp_path / kind for kind in owners}
    for kind, point in points.items():
        point.mkdir()
        _mount(f"{FS_PREFIX}{owners[kind]}", point, "size=65536,nr_inodes=16")
    try:
        sweep([])
        mounted = {p for _, p in sandbox_mounts()}
        assert points["gone"] not in mounted and points["reused"] not in mounted
        assert points["live"] in mounted and points["elsewhere"] in mounted
    finally:
        for point in points.values():
            if point in {p for _, p in sandbox_mounts()}:
                unmount(point)


# ---- the real client: a harness SIGKILLed in the middle of a run -------------------------

HARNESS = """
import sys
from pathlib import Path
from probes.clients import parse_client_spec
from probes.run.containment import Bubblewrap
from probes.run.runner import run_probe
from tests.fixtures.attack_catalog import attack_probe
client, version = parse_client_spec(sys.argv[2])
binary = next(b for b in client.installed() if b.version == version)
probe = attack_probe("echo held > /sandbox/workspace/started; sleep 120\\n", runs=1, timeout=180)
run_probe(probe, client, binary, Path(sys.argv[1]), containment=Bubblewrap.find())
"""


def _left_by(pid: int, temp: Path, work: Path) -> dict[str, list[str]]:
    """What the harness of ``pid`` has on the machine: cgroups, socket folders, mounts."""
    limiter = find_limiter(Bounds(), shutil.which("bwrap") or "bwrap")
    return {"cgroups": sorted(str(p) for place in (limiter.memory, limiter.pids)
                              if isinstance(place, Cgroup)
                              for p in place.parent.glob(f"loopprobe-{pid}[.-]*")),
            "socket folders": sorted(p.name for p in temp.iterdir()),
            "mounts": sorted(str(p) for _, p in sandbox_mounts() if p.is_relative_to(work))}


@pytest.mark.client
def test_a_harness_killed_mid_run_leaves_nothing_after_the_next_run(
        claude_code_binary: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from probes.clients.claude_code import ClaudeCode
    from probes.run.runner import run_probe
    from tests.fixtures.attack_catalog import attack_probe
    temp = Path(tempfile.mkdtemp(prefix="lp-"))  # this test's own: other runs use /tmp
    try:
        monkeypatch.setattr(tempfile, "tempdir", str(temp))
        harness = subprocess.Popen(
            [sys.executable, "-c", HARNESS, str(tmp_path / "killed"),
             f"claude-code@{DEFAULT_CLIENT_VERSION}"],
            cwd=REPO, env={**os.environ, "TMPDIR": str(temp)}, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, start_new_session=True)
        try:
            deadline = time.monotonic() + 120
            while not list((tmp_path / "killed").glob("attack.*/sandbox/workspace/started")):
                assert harness.poll() is None, harness.stderr.read() if harness.stderr else ""
                assert time.monotonic() < deadline, "the run never started its attack"
                time.sleep(0.2)
            left = _left_by(harness.pid, temp, tmp_path)
        finally:
            harness.kill()  # SIGKILL: the harness this test started, nothing else
            harness.wait()
        assert left["cgroups"] and left["socket folders"], left
        assert left["mounts"] or cannot_mount() is not None, left
        time.sleep(1)  # its bwrap dies with it (--die-with-parent)
        outcome = run_probe(attack_probe("echo attack:done\n", runs=1), ClaudeCode(),
                            claude_code_binary, tmp_path / "next",
                            containment=bubblewrap())
        assert outcome.passed, (outcome.error, [c for c in outcome.checks if not c.passed])
        assert _left_by(harness.pid, temp, tmp_path) == \
            {"cgroups": [], "socket folders": [], "mounts": []}
        assert _left_by(os.getpid(), temp, tmp_path)["cgroups"] == []
    finally:
        shutil.rmtree(temp, ignore_errors=True)

