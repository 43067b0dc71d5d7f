"""Containment: a scripted model asks the client to break out, and nothing gets out.

Each escape is tried twice: contained (bubblewrap, the default), where it must fail, and
uncontained (``NoContainment``, what ``--no-sandbox`` runs), where it succeeds, so every
assertion here is shown to be able to fail. The fast tier drives the fake loop; the client
tier drives the real Claude Code and plants canary CLAUDE.md files where a caller would
have them. Traffic goes to loopback only.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from probes import cli
from probes.clients import registry
from probes.core.outcome import ProbeOutcome
from probes.inside.egress import dns_question
from probes.run.containment import (
    Bubblewrap,
    Containment,
    ContainmentUnavailable,
    NoContainment,
    find_containment,
)
from probes.run.runner import run_probe
from tests.conftest import bubblewrap
from tests.fakeloop import FakeLoopClient
from tests.fixtures.escape_catalog import escape_probe

ROOT = Path(__file__).resolve().parent.parent
CANARY = "CANARY-CALLER-INSTRUCTIONS-5d21"


def _bubblewrap() -> Bubblewrap:
    return bubblewrap()  # type: ignore[no-any-return]


class Listener:
    """A TCP listener on the host's loopback that counts who reached it."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.hits = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.hits += 1
            try:
                conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n")
            except OSError:
                pass
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    served = Listener()
    yield served
    served.close()


def _sleepers(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "cmdline").read_bytes() == f"sleep\0{marker}\0".encode():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _kill(pids: list[int]) -> None:
    for pid in pids:  # sleepers this test's own run started
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _marker() -> str:
    return f"{4000 + uuid.uuid4().int % 1000}.{uuid.uuid4().int % 10**6:06d}"


def _tool_output(outcome: ProbeOutcome) -> str:
    assert outcome.evidence is not None, outcome.error
    answered = outcome.evidence.requests()
    assert len(answered) == 2, (outcome.error, [c.observed for c in outcome.checks])
    return json.dumps(answered[1].get("body"))


def _escape(containment: Containment, tmp_path: Path, listener: Listener,
            marker: str) -> tuple[ProbeOutcome, str]:
    client = FakeLoopClient()
    outcome = run_probe(escape_probe(listener.port, marker), client, client.install("1"),
                        tmp_path, containment=containment)
    return outcome, _tool_output(outcome)


def _plant_canaries(directory: Path) -> list[Path]:
    """A CLAUDE.md (and rules) in ``directory`` and every ancestor this test may write."""
    planted = []
    for place in (directory, *directory.parents):
        if not os.access(place, os.W_OK) or place == Path("/"):
            continue
        if (place / "CLAUDE.md").exists():
            continue
        (place / "CLAUDE.md").write_text(f"{CANARY} in {place}\n")
        planted.append(place / "CLAUDE.md")
    return planted


@pytest.fixture
def canaries(tmp_path: Path) -> Iterator[Path]:
    """Canary CLAUDE.md files in tmp_path and its ancestors under the system temp dir."""
    planted = _plant_canaries(tmp_path)
    yield tmp_path
    for path in planted:
        path.unlink(missing_ok=True)


def test_contained_run_reaches_nothing_and_leaves_nothing(canaries: Path,
                                                         listener: Listener) -> None:
    marker = _marker()
    outcome, output = _escape(_bubblewrap(), canaries, listener, marker)
    survivors = _sleepers(marker)
    _kill(survivors)
    assert survivors == [], "a setsid process outlived the contained run"
    assert listener.hits == 0, "a direct socket reached the host's loopback"
    assert "curl:failed" in output and "devtcp:failed" in output, output
    assert "dns:failed" in output
    assert CANARY not in output, "a CLAUDE.md above the workspace was visible"
    assert "escape:done" in output
    assert outcome.evidence is not None
    lookups = [a for a in outcome.evidence.egress if a["method"] == "DNS"]
    assert [a["host"] for a in lookups] == ["loopprobe-canary.example"] * len(lookups)
    assert lookups, "the refused lookup is recorded"
    assert outcome.evidence.containment["mode"] == "bubblewrap"


def test_uncontained_run_shows_the_same_escapes_succeed(canaries: Path,
                                                        listener: Listener) -> None:
    """The counterfactual: without the sandbox each attempt above works, so the contained
    test's assertions can fail."""
    marker = _marker()
    outcome, output = _escape(NoContainment(), canaries, listener, marker)
    survivors = _sleepers(marker)
    _kill(survivors)
    assert survivors, "the setsid sleeper survives an uncontained run"
    assert listener.hits >= 2 and "curl:reached" in output and "devtcp:reached" in output
    assert CANARY in output
    assert outcome.evidence is not None
    assert outcome.evidence.containment["mode"] == "none"


def test_the_contained_client_sees_fixed_paths(tmp_path: Path, listener: Listener) -> None:
    outcome, _ = _escape(_bubblewrap(), tmp_path, listener, _marker())
    assert outcome.evidence is not None
    run = outcome.evidence.runs["escape"]
    assert run.env["HOME"] == "/sandbox/home"
    assert run.env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:8080"
    assert str(tmp_path) not in json.dumps([run.argv, run.env])
    request = outcome.evidence.requests()[0]
    assert request["headers"].get("host") == "127.0.0.1:8080"


def test_no_bubblewrap_is_a_clear_refusal_unless_no_sandbox(monkeypatch: pytest.MonkeyPatch,
                                                            tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]
                                                            ) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(ContainmentUnavailable, match=r"bubblewrap.*--no-sandbox"):
        find_containment(no_sandbox=False)
    assert isinstance(find_containment(no_sandbox=True), NoContainment)
    monkeypatch.setitem(registry.CLIENT_KINDS, "fake-loop", FakeLoopClient)
    code = cli.main(["run", "--client", "fake-loop@1", "--catalog", "tests.fakeloop.catalog",
                     "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and "--no-sandbox" in err and not (tmp_path / "out").exists()


@pytest.mark.parametrize("args, expected", [
    (["--probe", "no-such-probe"], "no probe matches --probe 'no-such-probe'"),
    (["--out", "{file}"], "expected a directory, found a file"),
    (["--out", "/proc/loopprobe-cannot-write-here"], "expected a writable directory"),
    (["--catalog", "tests.fixtures.escaping_fixture_catalog"],
     "expected a relative path inside the workspace"),
])
def test_harness_input_errors_exit_2_before_any_probe(args: list[str], expected: str,
                                                      tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(registry.CLIENT_KINDS, "fake-loop", FakeLoopClient)
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    # each option once: a repeated one is refused before these errors could be
    options = {"--catalog": "tests.fakeloop.catalog", "--out": str(tmp_path / "out"),
               **dict(zip(args[::2], [a.format(file=a_file) for a in args[1::2]], strict=True))}
    code = cli.main(["run", "--client", "fake-loop@1", "--work-dir", str(tmp_path / "work"),
                     *[part for option in options.items() for part in option]])
    printed = capsys.readouterr()
    assert code == 2, printed
    assert expected in printed.err
    assert len([line for line in printed.err.splitlines() if line.strip()]) == 1, printed.err
    assert "probe " not in printed.out, "a probe ran before the input was refused"
    assert not (tmp_path / "work").exists()


def test_dns_question_reads_a_query() -> None:
    query = (b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00"
             b"\x07example\x03com\x00\x00\x01\x00\x01")
    assert dns_question(query) == (0x1234, "example.com", query[12:])
    assert dns_question(b"\x00") is None


# ---- the real client -------------------------------------------------------------------


def _run_escape_cli(home: Path, cache: Path, version: str, listener: Listener, marker: str,
                    *extra: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = home / "reports"
    env = {**os.environ, "HOME": str(home), "LOOPPROBE_CACHE": str(cache),
           "LOOPPROBE_TEST_LISTENER": str(listener.port), "LOOPPROBE_TEST_MARKER": marker}
    env.pop("XDG_CACHE_HOME", None)
    done = subprocess.run(
        [sys.executable, "-m", "probes", "run", "--client", version, "--catalog",
         "tests.fixtures.escape_catalog", "--out", str(out), *extra],
        capture_output=True, text=True, timeout=600, cwd=ROOT, env=env)
    return done, out


@pytest.mark.client
@pytest.mark.parametrize("contained", [True, False], ids=["bubblewrap", "no-sandbox"])
def test_real_client_with_caller_canaries(contained: bool, claude_code_binary,  # type: ignore[no-untyped-def]
                                          tmp_path: Path, listener: Listener) -> None:
    """The caller's CLAUDE.md in the home, ~/.claude, ~/.claude/rules and every ancestor of
    the default work dir (under the cache, under the home): contained, none reaches the
    client's requests and no escape works; uncontained, they do (the counterfactual)."""
    if contained:
        _bubblewrap()
    home = tmp_path / "caller-home"
    cache = home / ".cache" / "loopprobe"
    (cache / "runs").mkdir(parents=True)
    real_clients = claude_code_binary.root.parent.parent
    (cache / "clients").symlink_to(real_clients)
    (home / ".claude" / "rules").mkdir(parents=True)
    (home / ".claude" / "CLAUDE.md").write_text(f"{CANARY} in ~/.claude\n")
    (home / ".claude" / "rules" / "canary.md").write_text(f"{CANARY} in ~/.claude/rules\n")
    _plant_canaries(cache / "runs")
    marker = _marker()
    done, out = _run_escape_cli(home, cache, claude_code_binary.version, listener, marker,
                                *(() if contained else ("--no-sandbox",)))
    survivors = _sleepers(marker)
    _kill(survivors)
    assert done.returncode in (0, 1), done.stdout[-2000:] + done.stderr[-2000:]
    journals = list((cache / "runs").glob("*/*/evidence/journal.jsonl"))
    assert len(journals) == 1, done.stdout[-2000:]
    recorded = journals[0].read_text()
    assert "/v1/messages" in recorded
    report = json.loads((out / "escape.json").read_text())
    if contained:
        assert CANARY not in recorded
        assert survivors == [] and listener.hits == 0
        assert "curl:failed" in recorded and "devtcp:failed" in recorded
        assert report["trust"]["containment"]["mode"] == "bubblewrap"
    else:
        assert CANARY in recorded, "uncontained, the client reads the caller's CLAUDE.md"
        assert survivors and listener.hits >= 2
        assert report["trust"]["containment"]["mode"] == "none"


def test_run_dir_is_removed_and_nothing_is_left(tmp_path: Path, listener: Listener,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # a temp folder of this run's own: other runs on the machine (tests side by side, an
    # almanac build) make and remove their own loopprobe-* folders in /tmp meanwhile
    # (short: the run's Unix sockets live in it)
    temp = Path(tempfile.mkdtemp(prefix="lp-"))
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    try:
        _escape(_bubblewrap(), tmp_path / "run", listener, _marker())
        assert list(temp.iterdir()) == []
    finally:
        shutil.rmtree(temp, ignore_errors=True)
