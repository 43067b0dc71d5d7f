"""An isolated place for one probe: its own home, temp dir and workspace, and beside them
what the harness gives the runs and what it keeps of them.

    <root>/sandbox/   the client's: home, tmp, workspace (contained: bound at /sandbox)
    <root>/inputs/    the harness's, read-only to the client (MCP specs and configs)
    <root>/evidence/  the harness's, never shown to the client: the journal, each run's
                      output, the hook, MCP and egress records

Everything under ``sandbox/`` is the client's to write, so the harness reaches it only
through ``files`` (``probes.sandbox.files``: no link followed, reads capped). What a client
keeps inside the home (its config dir) is the client's business (``Client.prepare``).

The client's environment is built from an allow-list (``base_environment``);
nothing of the caller's environment is copied, so no ``ANTHROPIC_*`` variable,
HOME or credential of the user reaches the client.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from probes.sandbox.files import SandboxFiles

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
    def client_root(self) -> Path:
        """The client's part: what a contained run sees as /sandbox."""
        return self.root / "sandbox"

    @property
    def home(self) -> Path:
        return self.client_root / "home"

    @property
    def tmp(self) -> Path:
        return self.client_root / "tmp"

    @property
    def workspace(self) -> Path:
        return self.client_root / "workspace"

    @property
    def inputs(self) -> Path:
        return self.root / "inputs"

    @property
    def evidence(self) -> Path:
        return self.root / "evidence"

    @property
    def files(self) -> SandboxFiles:
        """The only way into the client's part."""
        return SandboxFiles(self.client_root)

    def inside(self, path: Path) -> PurePosixPath:
        """``path`` (beneath the client's part) relative to it, for ``files``."""
        return PurePosixPath(path.relative_to(self.client_root))

    @classmethod
    def create(cls, parent: Path | None, name: str) -> Sandbox:
        if parent is not None:
            parent.mkdir(parents=True, exist_ok=True)
        root = Path(tempfile.mkdtemp(prefix=f"{name}.", dir=parent)).resolve()
        box = cls(root)
        SandboxFiles.create(box.client_root)
        box.inputs.mkdir()
        box.inputs.chmod(0o755)  # the client reads it (read-only), whatever the umask
        box.evidence.mkdir(mode=0o700)
        for directory in (box.home, box.tmp, box.workspace):
            box.files.make_dirs(box.inside(directory))
        return box

    def write_files(self, files: dict[str, str]) -> None:
        """Write the fixtures, each with a fixed modification time, a second apart in the
        order given: a tool that shows or sorts by mtime sees the same on every run."""
        for position, (relative, content) in enumerate(files.items()):
            if problem := fixture_problem(relative):
                raise ValueError(problem)
            self.files.write(self.inside(self.workspace) / relative, content,
                             mtime=FIXTURE_MTIME + position)

    def remove(self) -> None:
        SandboxFiles(self.root).remove()

    def placeholders(self) -> dict[str, str]:
        """Sandbox paths and how reports show them (longest first, so paths nest correctly)."""
        pairs = {
            str(self.workspace): "$WORKSPACE",
            str(self.home): "$HOME",
            str(self.tmp): "$TMPDIR",
            str(self.client_root): "$SANDBOX",
            str(self.inputs): "$INPUTS",
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
