"""Nothing the sandbox can write is trusted: every harness access to it goes through
``probes.sandbox.files``, which follows no link, opens only regular files and caps reads.

Three layers:
- the module itself, with a link, a hard link, a FIFO, a device and a huge file planted at
  the path it writes, reads, digests or walks;
- every path a probe run touches in the sandbox, enumerated from a clean run (the module's
  calls recorded), attacked from inside the run by the client's own Bash tool (the fake loop
  here; ``tests/test_sandbox_attacks.py`` does it with the real client) with each kind of
  plant: no host file changes, no host secret reaches the evidence, the run ends; the same
  attack against a harness that follows links shows these assertions can fail;
- an audit hook over a whole run: any access beneath the client's part of the sandbox made
  from outside ``probes/sandbox/files.py`` fails the test (a new bypass is caught).
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
import time
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

from probes.core.outcome import ProbeOutcome
from probes.run.containment import Bubblewrap, NoContainment
from probes.run.runner import run_probe
from probes.sandbox import files as sandbox_files
from probes.sandbox.files import Refused, SandboxFiles
from tests.conftest import bubblewrap
from tests.fakeloop import FakeLoopClient
from tests.fixtures.attack_catalog import PLANTS, attack_probe, plant_script

CANARY_TEXT = "CANARY-HOST-FILE-7c1e\n"


def _caller_environment_entry() -> str:
    """An entry of the harness's own environment as /proc shows it (``NAME=value``: set at
    exec, so a test cannot plant one), the caller's secret a link to /proc/self/environ
    would read."""
    entries = Path("/proc/self/environ").read_bytes().split(b"\0")
    return next(e.decode() for e in entries if e.startswith(b"PATH="))


SECRET = _caller_environment_entry()


@pytest.fixture
def canary(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A host file and a host folder the sandbox must not reach."""
    host = tmp_path / "host"
    host.mkdir()
    file, folder = host / "precious.txt", host / "folder"
    file.write_text(CANARY_TEXT)
    folder.mkdir()
    yield file, folder


def _plant(kind: str, at: Path, canary: tuple[Path, Path]) -> None:
    at.parent.mkdir(parents=True, exist_ok=True)
    if kind == "symlink-file":
        at.symlink_to(canary[0])
    elif kind == "symlink-dir":
        at.symlink_to(canary[1])
    elif kind == "fifo":
        os.mkfifo(at)
    elif kind == "huge":
        with open(at, "wb") as handle:
            handle.truncate(64 * 1024 ** 3)
    elif kind == "hardlink":
        os.link(canary[0], at)
    elif kind == "device":
        try:
            os.mknod(at, 0o600 | stat.S_IFCHR, os.makedev(1, 5))  # /dev/zero
        except PermissionError:
            pytest.skip("creating a device node needs CAP_MKNOD")


# ---- the module -------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["symlink-file", "symlink-dir", "fifo", "huge", "hardlink",
                                  "device"])
def test_a_write_replaces_whatever_was_planted(tmp_path: Path, canary: tuple[Path, Path],
                                               kind: str) -> None:
    root = tmp_path / "box"
    _plant(kind, root / "home" / "settings.json", canary)
    SandboxFiles(root).write("home/settings.json", "{}")
    assert (root / "home" / "settings.json").read_text() == "{}"
    assert not (root / "home" / "settings.json").is_symlink()
    assert canary[0].read_text() == CANARY_TEXT and list(canary[1].iterdir()) == []


@pytest.mark.parametrize("kind", ["symlink-dir", "symlink-file"])
def test_a_link_on_the_way_refuses_a_write(tmp_path: Path, canary: tuple[Path, Path],
                                           kind: str) -> None:
    root = tmp_path / "box"
    _plant(kind, root / "home", canary)
    with pytest.raises(Refused, match="'home' on the way is a symbolic link"):
        SandboxFiles(root).write("home/.claude/settings.json", "{}")
    assert canary[0].read_text() == CANARY_TEXT and list(canary[1].iterdir()) == []


def test_a_directory_where_a_file_goes_is_refused_and_left(tmp_path: Path) -> None:
    root = tmp_path / "box"
    (root / "home" / "settings.json").mkdir(parents=True)
    with pytest.raises(Refused, match="a directory, expected a file or nothing"):
        SandboxFiles(root).write("home/settings.json", "{}")
    assert [p.name for p in (root / "home").iterdir()] == ["settings.json"]


@pytest.mark.parametrize(("kind", "found"), [
    ("symlink-file", "a symbolic link"), ("symlink-dir", "a symbolic link"),
    ("fifo", "a FIFO"), ("hardlink", "a hard link (2 names)"),
    ("device", "a character device")])
def test_a_read_refuses_what_is_not_a_file_of_its_own(tmp_path: Path,
                                                     canary: tuple[Path, Path],
                                                     kind: str, found: str) -> None:
    root = tmp_path / "box"
    _plant(kind, root / "workspace" / "x", canary)
    files = SandboxFiles(root)
    started = time.monotonic()
    with pytest.raises(Refused) as refused:
        files.read("workspace/x")
    assert found in str(refused.value)
    with pytest.raises(Refused):
        files.digest("workspace/x")
    assert time.monotonic() - started < 5  # a FIFO never blocked the open


def test_a_huge_file_is_read_up_to_the_limit(tmp_path: Path, canary: tuple[Path, Path]) -> None:
    root = tmp_path / "box"
    _plant("huge", root / "workspace" / "x", canary)
    read = SandboxFiles(root).read("workspace/x", limit=1000)
    assert len(read.data) == 1000 and read.size == 64 * 1024 ** 3 and read.truncated
    assert "(first 1024 of 68719476736 bytes)" in SandboxFiles(root).digest("workspace/x",
                                                                            limit=1024)


def test_a_walk_lists_links_and_special_files_without_entering_them(
        tmp_path: Path, canary: tuple[Path, Path]) -> None:
    root = tmp_path / "box"
    (canary[1] / "outside.txt").write_text("outside")
    _plant("symlink-dir", root / "p" / "linked", canary)
    _plant("fifo", root / "p" / "pipe", canary)
    (root / "p" / "deep").mkdir()
    (root / "p" / "deep" / "a.txt").write_text("a")
    entries = {e.relative: e.kind for e in SandboxFiles(root).walk("p")}
    assert entries == {"p/deep": "a directory", "p/deep/a.txt": "a regular file",
                       "p/linked": "a symbolic link", "p/pipe": "a FIFO"}


def test_a_walk_stops_at_its_limits(tmp_path: Path) -> None:
    root = tmp_path / "box"
    (root / "many").mkdir(parents=True)
    for n in range(30):
        (root / "many" / f"{n:02d}").write_text("")
    walked = list(SandboxFiles(root).walk("many", limit=10))
    assert len(walked) == 11 and walked[-1].kind == "more than 10 names: the walk stopped"
    deep = root / "deep"
    for _ in range(sandbox_files.DEPTH_LIMIT + 3):
        deep = deep / "d"
    deep.mkdir(parents=True)
    kinds = [e.kind for e in SandboxFiles(root).walk("deep")]
    assert kinds[-1] == f"more than {sandbox_files.DEPTH_LIMIT} folders deep: not entered"


@pytest.mark.parametrize("path", ["/etc/passwd", "../x", "a/../../x", "a\0b"])
def test_paths_leaving_the_root_are_refused(tmp_path: Path, path: str) -> None:
    with pytest.raises(Refused, match="expected a path relative to the sandbox"):
        SandboxFiles(tmp_path).write(path, "x")


# ---- every path a run touches, attacked from inside the run --------------------------------

class _Touched:
    """Records every path the harness hands to ``SandboxFiles`` during a run."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch):
        self.paths: set[str] = set()
        for method in ("write", "make_dirs", "read", "digest", "kind", "walk"):
            original = getattr(SandboxFiles, method)
            monkeypatch.setattr(SandboxFiles, method, self._wrap(original))

    def _wrap(self, original: Any) -> Any:
        def recorded(files: SandboxFiles, relative: Any = "", *args: Any, **kwargs: Any) -> Any:
            self.paths.add(str(relative))
            return original(files, relative, *args, **kwargs)
        return recorded


def _bubblewrap() -> Bubblewrap:
    return bubblewrap()  # type: ignore[no-any-return]


def _run(probe: Any, tmp_path: Path, client: FakeLoopClient | None = None) -> ProbeOutcome:
    """Contained: the client cannot reach the host itself, so whatever reaches it went
    through the harness."""
    client = client or FakeLoopClient()
    return run_probe(probe, client, client.install("1"), tmp_path, containment=_bubblewrap())


def _targets(paths: set[str]) -> list[str]:
    """Each path the harness touched, and its parent folders inside home/ and workspace/,
    deepest first (a planted folder link must not hide the paths beneath it)."""
    found = set()
    for path in paths:
        parts = PurePosixPath(path).parts
        for depth in range(2, len(parts) + 1):
            found.add("/".join(parts[:depth]))
    attackable = {p for p in found if p.split("/")[-1] not in ("attack.sh", "targets.txt")}
    return sorted(attackable, key=lambda p: (-p.count("/"), p))


@pytest.fixture(scope="module")
def touched(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The sandbox paths a clean two-run probe with hooks touches (enumerated, not listed)."""
    monkeypatch = pytest.MonkeyPatch()
    try:
        recorder = _Touched(monkeypatch)
        outcome = _run(attack_probe("echo attack:done\n", hooks=True),
                       tmp_path_factory.mktemp("clean"))
    finally:
        monkeypatch.undo()
    assert outcome.evidence is not None and outcome.passed, (outcome.error, outcome.checks)
    targets = _targets(recorder.paths)
    # what the fake loop keeps: its home and its transcripts (runs 1 and 2)
    assert "home/.fakeloop/sessions" in targets
    assert sum(p.startswith("home/.fakeloop/sessions/") for p in targets) == 2
    return targets


def _assert_held(outcome: ProbeOutcome, canary: tuple[Path, Path], kind: str) -> None:
    assert canary[0].read_text() == CANARY_TEXT, f"{kind}: a host file was overwritten"
    assert list(canary[1].iterdir()) == [], f"{kind}: a file was written into a host folder"
    shown = json.dumps([outcome.error, outcome.evidence and {
        "session": outcome.evidence.session_files,
        "workspace": outcome.evidence.workspace_files,
        "runs": {n: [r.stdout, r.stderr] for n, r in outcome.evidence.runs.items()}}],
        default=str)
    assert CANARY_TEXT.strip() not in shown, f"{kind}: a host file was read into the evidence"
    assert SECRET not in shown, f"{kind}: the caller's environment reached the evidence"


@pytest.mark.parametrize("kind", PLANTS)
def test_no_plant_at_any_touched_path_reaches_the_host(tmp_path: Path, touched: list[str],
                                                       canary: tuple[Path, Path], kind: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    started = time.monotonic()
    outcome = _run(attack_probe(plant_script(kind, str(canary[0]), str(canary[1])),
                                targets=touched, hooks=True), tmp_path / "work")
    assert time.monotonic() - started < 120
    _assert_held(outcome, canary, kind)
    assert outcome.evidence is not None, outcome.error
    assert any("planted:" in run.stdout for run in outcome.evidence.runs.values()), \
        "the attack ran"
    if kind != "hardlink":
        assert outcome.evidence.sandbox_refusals, "what the harness refused is recorded"


def _following_reads(files: SandboxFiles, relative: Any, *, limit: int = 1 << 20) -> Any:
    return sandbox_files.Read((files.root / str(relative)).read_bytes()[:limit], limit)


def _following_walk(files: SandboxFiles, relative: Any = "", **_: Any) -> Any:
    top = files.root / str(relative)
    for path in sorted(top.rglob("*")) if top.is_dir() else []:
        if path.is_file():  # follows links, as a naive harness would
            yield sandbox_files.Entry(str(path.relative_to(files.root)), "a regular file", 1)


def _following_writes(files: SandboxFiles, relative: Any, data: Any, **_: Any) -> None:
    target = files.root / str(relative)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(data if isinstance(data, str) else data.decode())


@pytest.mark.parametrize(("kind", "what"), [("symlink-file", "overwritten"),
                                            ("symlink-environ", "environment")])
def test_the_same_attack_on_a_harness_that_follows_links_gets_out(
        tmp_path: Path, touched: list[str], canary: tuple[Path, Path], kind: str, what: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The counterfactual: with reads and writes that follow links, the assertions above
    fail (a host file is overwritten, the caller's secret is read into the evidence)."""
    monkeypatch.setattr(SandboxFiles, "read", _following_reads)
    monkeypatch.setattr(SandboxFiles, "write", _following_writes)
    monkeypatch.setattr(SandboxFiles, "walk", _following_walk)
    # a settings-like file the harness writes before run 2 (the fake loop takes none) and a
    # workspace file it reads after the runs
    targets = [*touched, "workspace/notes.txt"] + (
        ["workspace/written-by-harness.txt"] if kind == "symlink-file" else [])
    probe = attack_probe(plant_script(kind, str(canary[0]), str(canary[1])), targets=targets,
                         hooks=True)
    client = FakeLoopClient()
    original = client.command

    def command(binary: Any, invocation: Any, context: Any) -> Any:
        made = original(binary, invocation, context)
        if invocation.name == "run2":
            made.files[str(context.box.workspace / "written-by-harness.txt")] = "harness\n"
        return made
    monkeypatch.setattr(client, "command", command)
    outcome = _run(probe, tmp_path / "work", client)
    with pytest.raises(AssertionError, match=what):
        _assert_held(outcome, canary, kind)


# ---- no access bypasses the module --------------------------------------------------------

_watch: dict[str, Any] = {"prefix": None, "bypasses": []}
_EVENTS = {"open", "os.listdir", "os.scandir", "os.mkdir", "os.rename", "os.remove",
           "os.rmdir", "os.utime", "os.chmod", "os.chown", "os.symlink", "os.link",
           "os.truncate", "os.chdir", "shutil.rmtree", "shutil.copyfile", "glob.glob",
           "subprocess.Popen"}


def _paths_of(event: str, args: tuple[Any, ...]) -> list[str]:
    if event == "subprocess.Popen":
        return [str(args[2])] if len(args) > 2 and args[2] is not None else []
    return [os.fsdecode(a) for a in args[:2] if isinstance(a, (str, bytes, os.PathLike))]


def _audit(event: str, args: tuple[Any, ...]) -> None:
    prefix = _watch["prefix"]
    if prefix is None or event not in _EVENTS:
        return
    for path in _paths_of(event, args):
        if not re.match(re.escape(prefix) + r"/[^/]+/sandbox(/|$)", path):
            continue
        frames = []
        frame = sys._getframe(1)
        while frame is not None:
            frames.append(frame.f_code.co_filename)
            frame = frame.f_back
        if sandbox_files.__file__ not in frames:
            _watch["bypasses"].append((event, path, [f for f in frames if "/probes/" in f][:3]))


sys.addaudithook(_audit)


def test_every_access_to_the_clients_part_goes_through_the_module(tmp_path: Path) -> None:
    work = tmp_path / "work"
    _watch.update(prefix=str(work), bypasses=[])
    try:
        outcome = _run(attack_probe("echo attack:done\n", hooks=True), work)
    finally:
        _watch["prefix"] = None
    assert outcome.passed, (outcome.error, outcome.checks)
    assert _watch["bypasses"] == []


def test_a_bypass_is_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The counterfactual: a harness reading a workspace file directly is caught."""
    client = FakeLoopClient()
    original = client.session_folder

    def peeking(box: Any) -> Any:
        if (box.workspace / "attack.sh").exists():
            (box.workspace / "attack.sh").read_text()
        return original(box)
    monkeypatch.setattr(client, "session_folder", peeking)
    work = tmp_path / "work"
    _watch.update(prefix=str(work), bypasses=[])
    try:
        run_probe(attack_probe("echo attack:done\n"), client, client.install("1"), work,
                  containment=NoContainment())
    finally:
        _watch["prefix"] = None
    assert any(event == "open" and path.endswith("/sandbox/workspace/attack.sh")
               for event, path, _ in _watch["bypasses"])


def test_the_sandbox_is_enterable_whatever_the_umask(tmp_path: Path) -> None:
    """Probes run in threads and the umask is the process's: a folder made under another
    thread's umask must still let the client (without capabilities) in."""
    from mockapi.serve.server import bind_unix_socket
    from probes.sandbox.folders import Sandbox
    previous = os.umask(0o177)
    try:
        box = Sandbox.create(tmp_path, "probe")
        box.files.make_dirs("home/.claude/projects")
    finally:
        os.umask(previous)
    for folder in (box.client_root, box.home, box.workspace, box.home / ".claude" / "projects",
                   box.inputs):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o755, folder
    sock = bind_unix_socket(tmp_path / "s.sock")
    try:
        assert os.umask(previous) == previous, "binding a socket leaves the umask alone"
        assert stat.S_IMODE((tmp_path / "s.sock").stat().st_mode) == 0o600
    finally:
        sock.close()
