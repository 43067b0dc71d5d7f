"""The sandbox's filesystem view keeps what it binds visible: a fresh filesystem mounted
later over a folder would hide what was bound beneath it.

pytest's ``tmp_path`` is under /tmp, as a cache given by ``LOOPPROBE_CACHE=/tmp/...`` would
be: a harness runtime bound from there must still be there for the client (before, the
sandbox's own /tmp was mounted after it and hid it, so an MCP server's runtime vanished and
OpenCode ran with no tools, a harness fault that read as the client's).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from probes.clients.base import ClientBinary
from probes.run.containment import _SandboxPlace
from probes.sandbox.folders import Sandbox

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")

_FRESH = ("--tmpfs", "--proc", "--dev")


def _place(tmp_path: Path) -> tuple[_SandboxPlace, Path]:
    root = tmp_path / "client"
    root.mkdir()
    binary = ClientBinary("claude-code", "2.1.235", "linux-x64", "p", root, root / "claude.exe",
                          (str(root / "claude.exe"),), "0" * 64)
    run_dir = tmp_path / "run"
    (run_dir / "etc").mkdir(parents=True)
    for name in ("hosts", "resolv.conf", "hostname"):
        (run_dir / "etc" / name).write_text("")
    runtime = tmp_path / "venv"
    runtime.mkdir()
    (runtime / "marker").write_text("bound\n")
    box = Sandbox.create(tmp_path / "work", "probe")
    return _SandboxPlace(box, binary, run_dir, "bwrap", False, readonly=[runtime]), runtime


def test_no_fresh_filesystem_is_mounted_over_what_was_bound_before(tmp_path: Path) -> None:
    mounts = _place(tmp_path)[0]._mounts()
    bound: list[str] = []  # the destinations bound so far, in order
    for flag, *operands in zip(mounts, mounts[1:], mounts[2:], strict=False):
        if flag in ("--bind", "--ro-bind"):
            bound.append(operands[1])
        elif flag in _FRESH:
            hidden = [d for d in bound if (d + "/").startswith(operands[0].rstrip("/") + "/")]
            assert hidden == [], f"{flag} {operands[0]} hides {hidden}"


def test_a_runtime_bound_from_under_tmp_is_there_inside(tmp_path: Path) -> None:
    place, runtime = _place(tmp_path)
    done = subprocess.run(["bwrap", "--unshare-all", "--die-with-parent", *place._mounts(),
                           "--", "/bin/cat", str(runtime / "marker")],
                          capture_output=True, text=True, timeout=30)
    assert (done.returncode, done.stdout) == (0, "bound\n"), done.stderr
