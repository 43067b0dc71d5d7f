"""A user's own setup, handed over on purpose: a workspace, a ``~/.claude`` and plugin folders.

A leaf module: the probe declares it (``Probe.setup``), the runner copies it into the
sandbox (``probes.sandbox.user_setup``). Only what is named here leaves the caller's machine
for the sandbox; the paths are the caller's and are never shown to the client.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from probes.core.names import CatalogError, described

__all__ = ["UserSetup"]


@dataclass(frozen=True)
class UserSetup:
    """``workspace``: copied into the sandbox's workspace (file modes, binary files and the
    symlinks inside it kept as they are); ``home_config``: copied as the client's config
    folder (``~/.claude``: user settings, commands, agents, skills); ``plugin_dirs``: each
    copied read-only beside the sandbox and passed to the client (``--plugin-dir``).
    ``observe_hooks``: every ``command`` hook of the copies runs through the harness's
    wrapper, which records it (``probes.inside.hook_wrapper``)."""

    workspace: Path | None = None
    home_config: Path | None = None
    plugin_dirs: tuple[Path, ...] = ()
    observe_hooks: bool = True

    def __post_init__(self) -> None:
        for name in ("workspace", "home_config"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, Path):
                raise CatalogError(f"UserSetup: {name} must be a Path or None, got "
                                   f"{described(value)}")
        if not isinstance(self.plugin_dirs, tuple) or not all(
                isinstance(p, Path) for p in self.plugin_dirs):
            raise CatalogError(f"UserSetup: plugin_dirs must be a tuple of Paths, got "
                               f"{described(self.plugin_dirs)}")
        names = [p.name for p in self.plugin_dirs]
        if len(set(names)) != len(names):
            raise CatalogError(f"UserSetup: plugin folders must have distinct names (each is "
                               f"shown to the client under its name), got {names}")

    def folders(self) -> list[tuple[str, Path]]:
        """Every folder handed over, with what it is, in a stable order."""
        named = [("workspace", self.workspace), ("home config", self.home_config)]
        return [(what, path) for what, path in named if path is not None] + [
            (f"plugin {p.name}", p) for p in self.plugin_dirs]
