"""Bounds on a contained run: each bound is reached by a small program in the real sandbox
(bubblewrap, ``sandbox_init``, the run's cgroups) and named by ``hits()``; each is run again
with the default bounds, where the same program succeeds and nothing is named, so every
assertion here can fail. The client tier measures the real Claude Code under the defaults.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from probes.clients.base import ClientBinary, Command
from probes.inside import sandbox_init
from probes.run.bounds import (
    Bounds,
    Limiter,
    MiB,
    RunConfinement,
    disk_usage,
    find_limiter,
    tmp_hit_from_stderr,
)
from probes.run.collector import Collector
from probes.run.containment import Bubblewrap, NoContainment
from probes.run.owner import owner_tag
from probes.sandbox.folders import BASE_PATH, Sandbox
from tests.conftest import bubblewrap, missing_install

SMALL = Bounds(memory_bytes=64 * MiB, processes=50, tmp_bytes=16 * MiB,
               sandbox_bytes=16 * MiB, file_bytes=8 * MiB)
SYSTEM_PYTHON = "/usr/bin/python3"


def _bubblewrap(bounds: Bounds) -> Bubblewrap:
    return bubblewrap(bounds)  # type: ignore[no-any-return]


def _needs_cgroup(controller: str) -> None:
    place = getattr(find_limiter(Bounds(), shutil.which("bwrap") or "bwrap"),
                    "memory" if controller == "memory" else "pids")
    if isinstance(place, str):
        pytest.skip(f"no writable {controller} cgroup here (run as root, or in a delegated "
                    f"cgroup2): {place}")


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str
    stopped: str | None  # why the watchdog stopped the run
    hits: list[dict[str, Any]]
    usage: dict[str, int]

    def bounds_hit(self) -> list[str]:
        return [h["bound"] for h in self.hits]


def _contained(tmp_path: Path, bounds: Bounds, argv: list[str], timeout: float = 60) -> Ran:
    """``argv`` run like a client: in the probe's sandbox, confined, polled as the runner
    would poll it."""
    client_root = tmp_path / "client"
    client_root.mkdir(exist_ok=True)
    binary = ClientBinary("fake", "1", "linux-x64", "p", client_root, client_root / "x",
                          (sys.executable,), "0" * 64)
    box = Sandbox.create(tmp_path / "work", "probe")
    with _bubblewrap(bounds).enter(box, binary, egress_guard=False) as place, \
            Collector(place.record_socket(), box.evidence) as collector:
        command = place.wrap(Command(argv, {"PATH": BASE_PATH, "HOME": "/sandbox/home"},
                                     box.workspace))
        collector.begin_run("run")
        collector.launched("run", os.getpid())  # what it starts descends from this test
        with place.confine() as run:
            process = subprocess.Popen(run.wrap(command.argv), env=command.env,
                                       cwd=command.cwd, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, text=True,
                                       start_new_session=True)
            stopped = _watch(process, run, timeout)
            stdout, stderr = process.communicate()
        return Ran(process.returncode, stdout, stderr, stopped,
                   run.hits(stderr, process.returncode), run.usage())


def _watch(process: subprocess.Popen[str], run: RunConfinement, timeout: float) -> str | None:
    deadline = time.monotonic() + timeout
    while process.poll() is None:
        if (reason := run.should_stop()) is not None or time.monotonic() > deadline:
            os.killpg(process.pid, signal.SIGKILL)  # the group this test started
            return reason or "timeout"
        time.sleep(0.1)
    return None


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


# ---- memory ----------------------------------------------------------------------------

ALLOCATE = "b = b'x' * (256 << 20); print('allocated', len(b))"


def test_memory_over_its_bound_is_oom_killed_and_named(tmp_path: Path) -> None:
    _needs_cgroup("memory")
    before = _run_cgroups()
    ran = _contained(tmp_path, replace(Bounds(), memory_bytes=64 * MiB), _python(ALLOCATE))
    assert ran.returncode == 137 and "allocated" not in ran.stdout, ran
    assert ran.bounds_hit() == ["memory"], ran.hits
    assert "OOM-killed" in ran.hits[0]["how"]
    assert _run_cgroups() == before, "the run's cgroups are removed after it"


def test_memory_under_the_default_bound_allocates(tmp_path: Path) -> None:
    _needs_cgroup("memory")
    ran = _contained(tmp_path, Bounds(), _python(ALLOCATE))
    assert ran.returncode == 0 and "allocated 268435456" in ran.stdout, ran
    assert ran.hits == []
    assert ran.usage["memory_peak_bytes"] > 256 * MiB


def test_a_run_left_going_is_killed_when_its_confinement_ends(tmp_path: Path) -> None:
    _needs_cgroup("memory")
    before = _run_cgroups()
    with find_limiter(Bounds(), shutil.which("bwrap") or "bwrap").confine(tmp_path) as run:
        sleeper = subprocess.Popen(run.wrap(["sleep", "60"]))
        time.sleep(0.2)
        assert _run_cgroups() - before, "the run has its cgroups"
    try:
        assert sleeper.wait(timeout=1) == -signal.SIGKILL
    finally:
        if sleeper.poll() is None:
            sleeper.kill()  # the sleeper this test started
    assert _run_cgroups() == before


def _run_cgroups() -> set[Path]:
    # this process's only: other harnesses on the machine may share a parent (the pids root)
    limiter = find_limiter(Bounds(), shutil.which("bwrap") or "bwrap")
    return {p for place in (limiter.memory, limiter.pids) if not isinstance(place, str)
            for p in place.parent.glob(f"loopprobe-{owner_tag()}-*")}


# ---- processes -------------------------------------------------------------------------

FORK = """
import json, os, time
children, refused = [], None
for _ in range(300):
    try:
        pid = os.fork()
    except OSError as error:
        refused = error.errno
        break
    if pid == 0:
        time.sleep(1)
        os._exit(0)
    children.append(pid)
for pid in children:
    os.waitpid(pid, 0)
print(json.dumps({"forked": len(children), "refused": refused}))
"""


def test_processes_over_their_bound_are_refused_and_named(tmp_path: Path) -> None:
    _needs_cgroup("pids")
    ran = _contained(tmp_path, replace(Bounds(), processes=50), _python(FORK))
    result = json.loads(ran.stdout)
    assert result["refused"] == 11 and result["forked"] < 50, ran  # EAGAIN
    assert ran.returncode == 0, "the run goes on after a refused fork"
    assert ran.bounds_hit() == ["processes"], ran.hits
    assert ran.usage["processes_peak"] == 50


def test_processes_under_the_default_bound_fork(tmp_path: Path) -> None:
    _needs_cgroup("pids")
    ran = _contained(tmp_path, Bounds(), _python(FORK))
    assert json.loads(ran.stdout) == {"forked": 300, "refused": None}, ran
    assert ran.hits == []


@pytest.mark.parametrize("user", ["nobody", "root"])
def test_rlimit_nproc_bounds_a_user_in_bwrap_but_not_root(user: str, tmp_path: Path) -> None:
    """Why the fallback without a pids cgroup is RLIMIT_NPROC for a user and nothing for
    root: sandbox_init sets it in both, and only the user's forks are refused."""
    if os.geteuid() != 0:
        pytest.skip("needs root: to run the same sandbox as root and as nobody")
    if not os.access(SYSTEM_PYTHON, os.X_OK) or shutil.which("setpriv") is None:
        missing_install("/usr/bin/python3 and setpriv", "apt-get install python3 util-linux")
    # where nobody can read them (pytest's tmp_path is root's only)
    tools = Path(tempfile.mkdtemp(prefix="loopprobe-nproc-"))
    tools.chmod(0o755)
    for tool in (Path(sandbox_init.__file__), Path(sandbox_init.__file__).with_name("egress.py")):
        shutil.copy(tool, tools / tool.name)
    spec = {"forward": [], "record_socket": str(tools / "record.sock"),
            "rlimits": {"RLIMIT_NPROC": 50}, "argv": [SYSTEM_PYTHON, "-c", FORK]}
    as_user = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] \
        if user == "nobody" else []
    try:
        with Collector(tools / "record.sock", tools) as collector:
            (tools / "record.sock").chmod(0o777)  # nobody reports its egress here too
            collector.begin_run("run")
            collector.launched("run", os.getpid())  # what it starts descends from this test
            done = subprocess.run([*as_user, _bubblewrap(Bounds()).path, "--unshare-all",
                                   "--die-with-parent", "--ro-bind", "/", "/", "--proc",
                                   "/proc", "--dev", "/dev", "--", SYSTEM_PYTHON, "-I", "-S",
                                   str(tools / "sandbox_init.py"), json.dumps(spec)],
                                  capture_output=True, text=True, timeout=60)
    finally:
        shutil.rmtree(tools)
    result = json.loads(done.stdout)
    if user == "nobody":
        assert result["refused"] == 11 and result["forked"] < 50, done
    else:
        assert result == {"forked": 300, "refused": None}, done


# ---- /tmp ------------------------------------------------------------------------------

FILL_TMP = """
import errno
try:
    with open('/tmp/fill', 'wb') as out:
        for _ in range(100):
            out.write(b'x' * (1 << 20))
            out.flush()
    print('wrote 100 MiB')
except OSError as error:
    print(errno.errorcode[error.errno])
"""


def test_tmp_over_its_bound_is_full_and_named(tmp_path: Path) -> None:
    ran = _contained(tmp_path, replace(Bounds(), tmp_bytes=16 * MiB), _python(FILL_TMP))
    assert ran.stdout.strip() == "ENOSPC", ran
    assert ran.bounds_hit() == ["tmp"], ran.hits
    assert ran.hits[0]["limit"] == 16 * MiB


def test_tmp_under_the_default_bound_takes_the_file(tmp_path: Path) -> None:
    ran = _contained(tmp_path, Bounds(), _python(FILL_TMP))
    assert ran.stdout.strip() == "wrote 100 MiB", ran
    assert ran.hits == [] and "bound tmp" not in ran.stderr


def test_the_tmp_report_of_sandbox_init_is_what_bounds_reads(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    full = os.statvfs_result((4096, 4096, 4096, 0, 0, 100, 99, 99, 0, 255))
    monkeypatch.setattr(os, "statvfs", lambda path: full)
    sandbox_init.report_tmp_usage()
    hit = tmp_hit_from_stderr("client output\n" + capsys.readouterr().err)
    assert hit is not None and hit["bound"] == "tmp" and hit["limit"] == 16 * MiB
    assert "16777216 of 16777216 bytes used" in hit["observed"]
    half = os.statvfs_result((4096, 4096, 4096, 2048, 2048, 100, 99, 99, 0, 255))
    monkeypatch.setattr(os, "statvfs", lambda path: half)
    sandbox_init.report_tmp_usage()
    assert capsys.readouterr().err == ""


# ---- one file --------------------------------------------------------------------------

WRITE_64 = """
import errno
try:
    with open('/sandbox/workspace/big', 'wb') as out:
        out.write(b'x' * (64 << 20))
    print('wrote 64 MiB')
except OSError as error:
    print(errno.errorcode[error.errno])
"""
# sh does not ignore SIGXFSZ, as a node or bun client does not: the write kills it
WRITE_64_SH = ["/bin/sh", "-c", "head -c 67108864 /dev/zero > /sandbox/workspace/big; "
               "echo head exited $?; exec head -c 67108864 /dev/zero > /sandbox/workspace/big"]


def test_a_file_over_its_bound_fails_and_is_named(tmp_path: Path) -> None:
    ran = _contained(tmp_path, replace(Bounds(), file_bytes=8 * MiB), _python(WRITE_64))
    assert ran.stdout.strip() == "EFBIG", ran  # python ignores SIGXFSZ
    assert ran.bounds_hit() == ["file"], ran.hits
    assert ran.hits[0]["observed"] == f"workspace/big: {8 * MiB} bytes"


def test_a_client_killed_by_sigxfsz_is_named(tmp_path: Path) -> None:
    ran = _contained(tmp_path, replace(Bounds(), file_bytes=8 * MiB), WRITE_64_SH)
    assert "head exited 153" in ran.stdout, ran
    assert ran.returncode == 128 + signal.SIGXFSZ
    hows = [h["how"] for h in ran.hits if h["bound"] == "file"]
    assert any(how.startswith("the client was killed by SIGXFSZ") for how in hows), ran.hits


def test_a_file_under_the_default_bound_is_written(tmp_path: Path) -> None:
    ran = _contained(tmp_path, Bounds(), _python(WRITE_64))
    assert ran.stdout.strip() == "wrote 64 MiB", ran
    assert ran.hits == []


# ---- the sandbox folder ----------------------------------------------------------------

FILL_SANDBOX = """
import errno, time
try:
    for n in range(50):
        with open(f'/sandbox/workspace/part{n}', 'wb') as out:
            out.write(b'x' * (1 << 20))
        time.sleep(0.02)
    print('wrote 50 MiB', flush=True)
except OSError as error:
    print(errno.errorcode[error.errno], flush=True)
time.sleep(3)
print('done')
"""


def test_a_sandbox_over_its_bound_is_stopped_and_named(tmp_path: Path) -> None:
    ran = _contained(tmp_path, replace(Bounds(), sandbox_bytes=16 * MiB), _python(FILL_SANDBOX))
    assert ran.stopped is not None and "bound sandbox reached" in ran.stopped, ran
    assert "done" not in ran.stdout and "wrote 50 MiB" not in ran.stdout
    assert ran.bounds_hit() == ["sandbox"], ran.hits


def test_a_sandbox_under_the_default_bound_runs_to_its_end(tmp_path: Path) -> None:
    ran = _contained(tmp_path, Bounds(), _python(FILL_SANDBOX))
    assert ran.stopped is None and "done" in ran.stdout, ran
    assert ran.hits == []
    assert 50 * MiB <= ran.usage["sandbox_bytes"] < 60 * MiB


@pytest.mark.parametrize("files, stopped", [(150, True), (50, False)])
def test_too_many_files_stop_the_run(files: int, stopped: bool, tmp_path: Path) -> None:
    """The walk, where no filesystem of its own can be mounted."""
    for n in range(files):
        (tmp_path / f"f{n}").touch()
    run = RunConfinement(Bounds(sandbox_names=100), tmp_path, [])
    reason = run.should_stop()
    assert (reason is not None and "more than 100 files" in reason) == stopped, reason
    assert ("sandbox" in [h["bound"] for h in run.hits()]) == stopped


def test_disk_usage_counts_a_hard_link_once_and_follows_no_symlink(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "big").write_bytes(b"x" * MiB)
    root = tmp_path / "root"
    root.mkdir()
    (root / "a").write_bytes(b"y" * MiB)
    os.link(root / "a", root / "b")
    (root / "out").symlink_to(outside)
    usage = disk_usage(root)
    assert usage.entries == 3 and usage.complete
    assert MiB <= usage.bytes < 2 * MiB
    assert usage.largest in (("a", MiB), ("b", MiB))


def test_the_watchdog_walks_at_most_every_half_second(tmp_path: Path) -> None:
    run = RunConfinement(Bounds(sandbox_bytes=MiB), tmp_path, [])
    assert run.should_stop() is None
    (tmp_path / "big").write_bytes(b"x" * 2 * MiB)
    assert run.should_stop() is None, "walked again before 0.5 s"
    time.sleep(0.6)
    assert run.should_stop() is not None


# ---- what the report says --------------------------------------------------------------


def test_without_cgroups_a_user_gets_rlimit_nproc_and_root_gets_no_bound() -> None:
    user = Limiter(Bounds(), "no cgroup here", "no cgroup here", tmp_size=True, root=False)
    root = replace(user, root=True)
    assert user.rlimits()["RLIMIT_NPROC"] == 512 and "RLIMIT_NPROC" not in root.rlimits()
    assert "RLIMIT_NPROC" in user.describe()["processes"]["enforced_by"]
    assert root.describe()["processes"]["enforced_by"] is None
    assert "no cgroup here" in root.describe()["processes"]["not_enforced_because"]
    assert user.describe()["memory"]["enforced_by"] is None
    assert user.rlimits()["RLIMIT_FSIZE"] == Bounds().file_bytes


def test_the_reports_say_how_each_bound_is_enforced(tmp_path: Path) -> None:
    described = _bubblewrap(Bounds()).describe()["bounds"]
    assert set(described) == {"memory", "processes", "tmp", "sandbox", "file"}
    assert described["tmp"]["enforced_by"].startswith("bwrap --size")
    assert described["file"]["limit"] == Bounds().file_bytes
    nothing = NoContainment().describe()["bounds"]
    assert all(b["enforced_by"] is None for b in nothing.values())


def test_bounds_refuse_what_is_not_a_positive_int() -> None:
    with pytest.raises(ValueError, match=r"Bounds.processes: expected a positive int, got 0"):
        Bounds(processes=0)


# ---- the real client -------------------------------------------------------------------


@pytest.fixture
def measured() -> Iterator[list[dict[str, Any]]]:
    found: list[dict[str, Any]] = []
    yield found
    print("\nClaude Code under the default bounds:", json.dumps(found))


@pytest.mark.client
@pytest.mark.parametrize("flag", ["--version", "--help"])
def test_claude_code_runs_well_inside_the_default_bounds(  # type: ignore[no-untyped-def]
        flag: str, claude_code_binary, tmp_path: Path,
        measured: list[dict[str, Any]]) -> None:
    _needs_cgroup("memory")
    _needs_cgroup("pids")
    box = Sandbox.create(tmp_path / "work", "probe")
    with _bubblewrap(Bounds()).enter(box, claude_code_binary, egress_guard=False) as place, \
            Collector(place.record_socket(), box.evidence) as collector:
        command = place.wrap(Command([*claude_code_binary.launcher, flag],
                                     {"PATH": BASE_PATH, "HOME": "/sandbox/home"},
                                     box.workspace))
        collector.begin_run("run")
        collector.launched("run", os.getpid())  # what it starts descends from this test
        with place.confine() as run:
            done = subprocess.run(run.wrap(command.argv), env=command.env, cwd=command.cwd,
                                  capture_output=True, text=True, timeout=120)
            hits, usage = run.hits(done.stderr, done.returncode), run.usage()
    measured.append({"flag": flag, **usage})
    assert done.returncode == 0 and "Claude Code" in done.stdout, done.stderr[-2000:]
    assert hits == []
    assert usage["memory_peak_bytes"] > 16 * MiB and usage["processes_peak"] >= 3, \
        "the run was measured in its cgroups"
    # the defaults leave a margin of four times what these take
    assert usage["memory_peak_bytes"] * 4 < Bounds().memory_bytes
    assert usage["processes_peak"] * 4 < Bounds().processes
