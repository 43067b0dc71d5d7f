"""The sandbox folder's bound counts what a run holds, not the names it leaves: each program
below runs like a client (``tests.test_bounds._contained``: bubblewrap, ``sandbox_init``, the
run's cgroups, polled as the runner polls) against a small bound, on the folder's own tmpfs
(``probes.run.sandbox_fs``). A file unlinked while held open was the way past the old walk
of names; a sparse file, hard links and many small files are counted by what they take.
After the probe the folder is an ordinary one again, holding what the client left, as it
left it, and no larger on disk than what the tmpfs held.
"""

from __future__ import annotations

import os
import stat
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from probes.run.bounds import Bounds, Limiter, MiB, RunConfinement
from probes.run.sandbox_fs import cannot_mount, mounted_sandbox, sandbox_mounts
from probes.sandbox.files import Refused
from probes.sandbox.folders import Sandbox
from tests.test_bounds import _bubblewrap, _contained, _python

SMALL = replace(Bounds(), sandbox_bytes=16 * MiB)


@pytest.fixture(autouse=True)
def _mountable() -> None:
    if (why := cannot_mount()) is not None:
        pytest.skip(f"the sandbox folder gets no filesystem of its own here: {why}")


def _kept(tmp_path: Path) -> Path:
    """The probe's sandbox folder, as the harness kept it after the probe."""
    (folder,) = (tmp_path / "work").glob("probe.*/sandbox")
    assert not any(mounted.is_relative_to(tmp_path) for _, mounted in sandbox_mounts()), \
        "the tmpfs is unmounted after the probe"
    return folder


# ---- a file unlinked while held open ------------------------------------------------------

UNLINKED = """
import errno, os, time
out = open('/sandbox/workspace/held', 'wb')
os.unlink('/sandbox/workspace/held')
try:
    for _ in range(64):
        out.write(b'x' * (1 << 20))
        out.flush()
    print('wrote 64 MiB', flush=True)
except OSError as error:
    print(errno.errorcode[error.errno], flush=True)
time.sleep(3)
print('done')
"""


def test_a_file_unlinked_while_held_open_reaches_the_bound(tmp_path: Path) -> None:
    """What the walk of names let through (2,280 MiB past a 2 GiB bound): the tmpfs keeps
    the pages of a file with no name, and refuses them past the bound."""
    ran = _contained(tmp_path, SMALL, _python(UNLINKED))
    assert ran.stdout.splitlines()[0] == "ENOSPC", ran
    assert ran.stopped is not None and "its filesystem is full" in ran.stopped, ran
    assert "done" not in ran.stdout
    assert ran.bounds_hit() == ["sandbox"], ran.hits
    assert "tmpfs" in ran.hits[0]["how"] and f"at most {16 * MiB} bytes" in ran.hits[0]["observed"]


def test_a_file_unlinked_while_held_open_under_the_bound_runs_to_its_end(tmp_path: Path) -> None:
    ran = _contained(tmp_path, Bounds(), _python(UNLINKED))
    assert ran.stdout.split() == ["wrote", "64", "MiB", "done"], ran
    assert ran.hits == [] and ran.usage["sandbox_bytes"] >= 64 * MiB


# ---- sparse files -------------------------------------------------------------------------

SPARSE = """
import errno, os, time
for n in range(20):
    with open(f'/sandbox/workspace/sparse{n}', 'wb') as out:
        out.truncate(1 << 29)
print('10 GiB sparse', flush=True)
try:
    with open('/sandbox/workspace/sparse0', 'r+b') as out:
        for n in range(%d):
            out.seek(n << 20)
            out.write(b'x' * (1 << 20))
    print('filled', flush=True)
except OSError as error:
    print(errno.errorcode[error.errno], flush=True)
time.sleep(%d)
print('done')
"""


def test_sparse_files_count_what_they_hold(tmp_path: Path) -> None:
    """10 GiB of holes take nothing of a 16 MiB bound, and nothing of the disk when kept."""
    ran = _contained(tmp_path, SMALL, _python(SPARSE % (8, 0)))
    assert ran.stdout.split() == ["10", "GiB", "sparse", "filled", "done"], ran
    assert ran.hits == []
    kept = _kept(tmp_path) / "workspace"
    sizes = [(kept / f"sparse{n}").stat() for n in range(20)]
    assert all(s.st_size == 1 << 29 for s in sizes)
    assert 8 * MiB <= sum(s.st_blocks * 512 for s in sizes) < 9 * MiB
    assert (kept / "sparse0").read_bytes()[8 * MiB - 1:8 * MiB + 1] == b"x\0"


def test_filling_the_holes_of_a_sparse_file_reaches_the_bound(tmp_path: Path) -> None:
    ran = _contained(tmp_path, SMALL, _python(SPARSE % (64, 3)))
    assert ran.stdout.split()[:4] == ["10", "GiB", "sparse", "ENOSPC"], ran
    assert ran.bounds_hit() == ["sandbox"], ran.hits


# ---- hard links and many small files ------------------------------------------------------

LINKS = """
import errno, os, time
with open('/sandbox/workspace/big', 'wb') as out:
    out.write(b'x' * (8 << 20))
try:
    for n in range(%d):
        os.link('/sandbox/workspace/big', f'/sandbox/workspace/link{n}')
    print('linked', flush=True)
except OSError as error:
    print(errno.errorcode[error.errno], n, flush=True)
time.sleep(%d)
print('done')
"""


def test_hard_links_to_one_file_count_its_bytes_once(tmp_path: Path) -> None:
    ran = _contained(tmp_path, SMALL, _python(LINKS % (50, 0)))
    assert ran.stdout.split() == ["linked", "done"], ran
    assert ran.hits == [] and ran.usage["sandbox_bytes"] < 9 * MiB
    kept = _kept(tmp_path) / "workspace"
    assert (kept / "big").stat().st_nlink == 51 and (kept / "link49").samefile(kept / "big")


def test_hard_links_count_as_names(tmp_path: Path) -> None:
    """A name costs an inode on tmpfs, a hard link too: a bound of names holds against
    links as against files (a folder's walk and copy stay bounded)."""
    ran = _contained(tmp_path, replace(SMALL, sandbox_names=100), _python(LINKS % (500, 3)))
    refused, made = ran.stdout.split()[:2]
    assert refused == "ENOSPC" and int(made) < 100, ran
    assert ran.bounds_hit() == ["sandbox"] and "100 names" in ran.hits[0]["how"], ran.hits


SMALL_FILES = """
import errno, time
try:
    for n in range(%d):
        with open(f'/sandbox/workspace/f{n}', 'wb') as out:
            out.write(b'x')
    print('wrote', flush=True)
except OSError as error:
    print(errno.errorcode[error.errno], n, flush=True)
time.sleep(%d)
print('done')
"""


@pytest.mark.parametrize("bounds, files", [
    (replace(SMALL, sandbox_names=500), 1000),  # the names run out
    (replace(SMALL, sandbox_bytes=MiB), 1000),  # a byte costs a page: 256 fit in 1 MiB
])
def test_many_small_files_reach_the_bound(bounds: Bounds, files: int, tmp_path: Path) -> None:
    ran = _contained(tmp_path, bounds, _python(SMALL_FILES % (files, 3)))
    refused, made = ran.stdout.split()[:2]
    assert refused == "ENOSPC" and int(made) < 500, ran
    assert ran.bounds_hit() == ["sandbox"], ran.hits


def test_many_small_files_under_the_default_bound(tmp_path: Path) -> None:
    ran = _contained(tmp_path, Bounds(), _python(SMALL_FILES % (1000, 0)))
    assert ran.stdout.split() == ["wrote", "done"], ran
    assert ran.hits == []


# ---- what is kept -------------------------------------------------------------------------

PLANTS = """
import os
os.symlink('/etc/hostname', '/sandbox/workspace/link-out')
os.symlink('/etc', '/sandbox/workspace/dir-out')
os.mkfifo('/sandbox/workspace/fifo')
os.makedirs('/sandbox/workspace/a/b/c')
with open('/sandbox/workspace/a/b/c/deep', 'w') as out:
    out.write('deep')
os.chmod('/sandbox/workspace/a/b', 0)
print('planted')
"""


def test_the_folder_is_kept_as_the_client_left_it(tmp_path: Path) -> None:
    """Copied out without following a link or opening a FIFO; the harness's fixtures and
    the client's files both there."""
    ran = _contained(tmp_path, Bounds(), _python(PLANTS))
    assert ran.stdout.strip() == "planted" and ran.hits == [], ran
    kept = _kept(tmp_path) / "workspace"
    assert os.readlink(kept / "link-out") == "/etc/hostname"
    assert os.readlink(kept / "dir-out") == "/etc"
    assert stat.S_ISFIFO((kept / "fifo").lstat().st_mode)
    assert stat.S_IMODE((kept / "a" / "b").stat().st_mode) == 0
    assert (kept / "a" / "b" / "c" / "deep").read_text() == "deep"  # root reads through 0
    assert not list(kept.parent.parent.glob(".sandbox-*")), "nothing of the moves is left"


def test_the_harness_writing_into_a_full_folder_is_refused(tmp_path: Path) -> None:
    """The client filled its folder: the harness's next write (a run's settings file) is
    refused like a planted link, so the later runs are not started, never a harness error."""
    box = Sandbox.create(tmp_path, "probe")
    box.files.write("workspace/fixture", "kept")
    with mounted_sandbox(box.client_root, MiB, 100) as fs:
        assert box.files.read("workspace/fixture").data == b"kept", "moved onto the tmpfs"
        fill = os.open(box.workspace / "fill", os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            with pytest.raises(OSError, match="No space left"):
                while True:
                    os.write(fill, b"x" * 65536)
        finally:
            os.close(fill)
        assert fs.usage().full == "bytes"
        with pytest.raises(Refused, match="no room: the sandbox folder is full"):
            box.files.write("home/.claude/settings.json", "{}")
        assert sorted(os.listdir(box.home / ".claude")) == []
    assert box.files.read("workspace/fixture").data == b"kept"
    assert MiB // 2 < (box.workspace / "fill").stat().st_size < MiB


# ---- what the report says -----------------------------------------------------------------


def test_the_report_says_what_holds_the_bound() -> None:
    described = _bubblewrap(Bounds()).describe()["bounds"]["sandbox"]
    assert described["enforced_by"].startswith("a tmpfs of its own at /sandbox")
    assert "unlinked while open included" in described["enforced_by"]
    walked = Limiter(Bounds(), "no cgroup", "no cgroup", tmp_size=True, root=False,
                     mount="not root").describe()["sandbox"]
    assert "files unlinked while held open are not counted (not root)" in walked["enforced_by"]


def test_without_a_filesystem_of_its_own_the_walk_misses_unlinked_files(tmp_path: Path) -> None:
    """Why the tmpfs: the walk (kept where nothing can be mounted) sees no file without a
    name, however much it holds."""
    with open(tmp_path / "held", "wb") as out:
        os.unlink(tmp_path / "held")
        out.write(b"x" * 4 * MiB)
        out.flush()
        run = RunConfinement(replace(SMALL, sandbox_bytes=MiB), tmp_path, [])
        assert run.should_stop() is None and run.hits() == []


# ---- the whole harness, the fake loop's Bash as the client's ------------------------------

FILL = """\
head -c 64M /dev/zero > /sandbox/workspace/kept; echo "kept:$?"
sleep 20
echo attack:done
"""


def test_a_probe_whose_run_fills_its_folder_names_the_bound_and_starts_no_more_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run 1 fills the folder and keeps it full: it is stopped, its report names the bound;
    run 2's file from the harness finds no room, so run 2 is not started: the client's
    doing, never a harness error."""
    from probes.run.runner import run_probe
    from tests.fakeloop import FakeLoopClient
    from tests.fixtures.attack_catalog import attack_probe
    client = FakeLoopClient()
    original = client.command

    def command(binary: Any, invocation: Any, context: Any) -> Any:
        made = original(binary, invocation, context)
        made.files[str(context.box.workspace / "from-the-harness")] = "x" * 8192
        return made
    monkeypatch.setattr(client, "command", command)
    outcome = run_probe(attack_probe(FILL, runs=2, timeout=60), client,
                        client.install("1"), tmp_path / "work",
                        containment=_bubblewrap(replace(Bounds(), sandbox_bytes=32 * MiB)))
    assert outcome.error is None and outcome.evidence is not None, outcome.error
    run = outcome.evidence.runs["run1"]
    assert run.stopped is not None and "its filesystem is full" in run.stopped, run.stdout
    assert [h["bound"] for h in run.bounds_hit] == ["sandbox"]
    finished = next(c for c in outcome.checks if c.id.endswith("harness.run1.finished"))
    assert not finished.passed and "the sandbox bound" in str(finished.observed)
    assert "run2" not in outcome.evidence.runs
    assert "no room: the sandbox folder is full" in outcome.evidence.runs_not_started["run2"]
