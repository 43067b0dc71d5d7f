"""An isolated place for one probe: its own home, temp dir, workspace and artefacts.

What a client keeps inside the home (its config dir) is the client's business
(``Client.prepare``).

The client's environment is built from an allow-list (``base_environment``);
nothing of the caller's environment is copied, so no ``ANTHROPIC_*`` variable,
HOME or credential of the user reaches the client.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["BASE_PATH", "FIXTURE_MTIME", "Sandbox", "base_environment", "fixture_problem"]

BASE_PATH = "/usr/local/bin:/usr/bin:/bin"
FIXTURE_MTIME = 946684800  # 2000-01-01T00:00:00Z


def fixture_problem(relative: str) -> str | None:
    """Why a fixture path cannot be written into a workspace (``None`` when it can)."""
    parts = Path(relative).parts
    if not relative or Path(relative).is_absolute() or ".." in parts:
        return (f"fixture path {relative!r}: expected a relative path inside the workspace "
                "(no leading /, no ..)")
    return None


@dataclass(frozen=True)
class Sandbox:
    root: Path

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def tmp(self) -> Path:
        return self.root / "tmp"

    @property
    def workspace(self) -> Path:
        return self.root / "workspace"

    @property
    def artefacts(self) -> Path:
        return self.root / "artefacts"

    @classmethod
    def create(cls, parent: Path | None, name: str) -> Sandbox:
        if parent is not None:
            parent.mkdir(parents=True, exist_ok=True)
        root = Path(tempfile.mkdtemp(prefix=f"{name}.", dir=parent)).resolve()
        box = cls(root)
        for directory in (box.home, box.tmp, box.workspace, box.artefacts):
            directory.mkdir(parents=True, exist_ok=True)
        return box

    def write_files(self, files: dict[str, str]) -> None:
        """Write the fixtures, each with a fixed modification time, a second apart in the
        order given: a tool that shows or sorts by mtime sees the same on every run."""
        for position, (relative, content) in enumerate(files.items()):
            target = (self.workspace / relative).resolve()
            if (problem := fixture_problem(relative)) or not target.is_relative_to(
                    self.workspace):
                raise ValueError(problem or f"fixture path {relative!r} leaves the workspace")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content)
            stamp = FIXTURE_MTIME + position
            os.utime(target, (stamp, stamp))

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def placeholders(self) -> dict[str, str]:
        """Sandbox paths and how reports show them (longest first, so paths nest correctly)."""
        pairs = {
            str(self.workspace): "$WORKSPACE",
            str(self.home): "$HOME",
            str(self.tmp): "$TMPDIR",
            str(self.root): "$SANDBOX",
        }
        return dict(sorted(pairs.items(), key=lambda kv: -len(kv[0])))


def base_environment(box: Sandbox) -> dict[str, str]:
    """The variables every client process gets, whatever the caller's environment holds."""
    return {
        "HOME": str(box.home),
        "PATH": BASE_PATH,
        "TERM": "dumb",
        "LANG": "C.UTF-8",
        "TMPDIR": str(box.tmp),
        "USER": "loopprobe",
        "SHELL": "/bin/bash",
    }
