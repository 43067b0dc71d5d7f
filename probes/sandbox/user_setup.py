"""The user's own setup copied into a probe's sandbox: its workspace, its ``~/.claude``, its
plugin folders, each as it is (file modes, binary files, the links inside it), and each of
their ``command`` hooks wrapped so that the harness sees every run of it.

The user hands these folders over on purpose; nothing else of theirs is read (which folders
a case file may name is decided when it loads: ``probes.cases.paths``). They are read once,
before any run, without following a link: a link inside is copied as a link, its target as
written, and resolves inside the sandbox, where nothing of the caller is; the harness never
reads through it. A FIFO, a device or a socket in them is refused, and so is a tree over
``TREE_LIMIT`` entries or ``BYTES_LIMIT`` bytes (``check_tree`` says so at load). The
workspace and the config folder go into the client's part through ``SandboxFiles``; a plugin
folder goes beside it (``inputs/plugins/<name>``), shown to the client read-only.
"""

from __future__ import annotations

import json
import os
import shlex
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Any

from probes.core.setup import UserSetup
from probes.sandbox.files import kind_of
from probes.sandbox.folders import Sandbox

__all__ = [
    "BYTES_LIMIT",
    "HOOK_FILES",
    "PLUGIN_MANIFEST",
    "TREE_LIMIT",
    "InstalledSetup",
    "Item",
    "SetupError",
    "Wrap",
    "check_tree",
    "install_setup",
    "read_tree",
    "wrap_hooks",
    "wrapper_command",
]

TREE_LIMIT = 20_000
BYTES_LIMIT = 512 * 1024 * 1024
# where the hooks of each folder are declared (Claude Code's settings and plugin layout)
HOOK_FILES = {"workspace": (".claude/settings.json", ".claude/settings.local.json"),
              "home config": ("settings.json",),
              "plugin": ("hooks/hooks.json",)}
PLUGIN_MANIFEST = ".claude-plugin/plugin.json"


class SetupError(ValueError):
    """A folder of the user's setup that cannot be handed over as it is."""


@dataclass(frozen=True)
class Item:
    """One entry of a folder: a directory, a regular file (its bytes) or a link (its target)."""

    relative: str
    kind: str  # "dir" | "file" | "link"
    mode: int
    mtime: float
    data: bytes = b""
    target: str = ""


def read_tree(source: Path, what: str) -> list[Item]:
    """Every entry under ``source``, parents first, no link followed (but ``source`` itself:
    the folder the user named)."""
    source = source.resolve()
    items: list[Item] = []
    for relative, info in _checked(source, what):
        mode = stat.S_IMODE(info.st_mode) & 0o777  # no set-id bits into the sandbox
        if stat.S_ISDIR(info.st_mode):
            items.append(Item(relative, "dir", mode, info.st_mtime))
        elif stat.S_ISLNK(info.st_mode):
            items.append(Item(relative, "link", mode, info.st_mtime,
                              target=os.readlink(source / relative)))
        else:
            items.append(Item(relative, "file", mode, info.st_mtime,
                              data=(source / relative).read_bytes()))
    return items


def check_tree(source: Path, what: str) -> None:
    """A ``SetupError`` now for what ``read_tree`` would refuse (a FIFO, too many entries or
    bytes), without reading any file: so a setup is refused before any client starts."""
    for _ in _checked(source.resolve(), what):
        pass


def _checked(source: Path, what: str) -> Iterator[tuple[str, os.stat_result]]:
    """The entries of ``read_tree``, each a folder, a regular file or a link, within bounds."""
    try:
        top = os.lstat(source)
    except OSError as error:
        raise SetupError(f"{what} {source}: expected a folder, but {error.strerror}") from None
    if not stat.S_ISDIR(top.st_mode):
        raise SetupError(f"{what} {source}: expected a folder, found {kind_of(top.st_mode)}")
    count = total = 0
    for relative, info in _entries(source):
        count += 1
        if count > TREE_LIMIT:
            raise SetupError(f"{what} {source}: expected at most {TREE_LIMIT} entries, found more")
        if stat.S_ISREG(info.st_mode):
            total += info.st_size
            if total > BYTES_LIMIT:
                raise SetupError(f"{what} {source}: expected at most {BYTES_LIMIT} bytes of "
                                 "files, found more")
        elif not (stat.S_ISDIR(info.st_mode) or stat.S_ISLNK(info.st_mode)):
            raise SetupError(f"{what} {source / relative}: expected a file, a folder or a link, "
                             f"found {kind_of(info.st_mode)}")
        yield relative, info


def _entries(root: Path, prefix: str = "") -> Iterator[tuple[str, os.stat_result]]:
    with os.scandir(root / prefix if prefix else root) as listing:
        entries = sorted(listing, key=lambda e: e.name)
    for entry in entries:
        relative = f"{prefix}{entry.name}"
        info = entry.stat(follow_symlinks=False)
        yield relative, info
        if stat.S_ISDIR(info.st_mode):
            yield from _entries(root, relative + "/")


# (source label, the hook's command) -> the command the client is given instead
Wrap = Callable[[str, str], str]


def wrap_hooks(config: Any, wrap: Wrap, source: str) -> tuple[int, int]:
    """Wrap every ``command`` hook of a settings or hooks.json object in place: how many were
    wrapped, and how many command hooks of a shape not known here (a command that is not a
    string) were left to run unobserved."""
    hooks = config.get("hooks") if isinstance(config, dict) else None
    if not isinstance(hooks, dict):
        return 0, 0
    count = left = 0
    for event, matchers in hooks.items():
        for matcher in matchers if isinstance(matchers, list) else []:
            entries = matcher.get("hooks") if isinstance(matcher, dict) else None
            for entry in entries if isinstance(entries, list) else []:
                if isinstance(entry, dict) and entry.get("type") == "command" \
                        and isinstance(entry.get("command"), str):
                    entry["command"] = wrap(f"{source}:{event}", entry["command"])
                    count += 1
                elif isinstance(entry, dict) and entry.get("type") == "command":
                    left += 1
    return count, left


def _wrapped(items: list[Item], files: tuple[str, ...], wrap: Wrap, source: str,
             notes: list[str]) -> list[Item]:
    """``items`` with the hooks of the named JSON files wrapped; a file that is not JSON is
    left as it is (the client says what it makes of it) and noted."""
    changed = []
    for item in items:
        if item.kind == "file" and item.relative in files:
            try:
                config = json.loads(item.data)
            except ValueError as error:
                notes.append(f"{source}/{item.relative}: not JSON ({error}); its hooks are not "
                              "observed")
                changed.append(item)
                continue
            count, left = wrap_hooks(config, wrap, f"{source}/{item.relative}")
            if count:
                notes.append(f"{source}/{item.relative}: {count} command hook(s) observed")
                item = replace(item, data=json.dumps(config, indent=2).encode())
            if left:
                notes.append(f"{source}/{item.relative}: {left} command hook(s) whose command "
                             "is not a string run unobserved")
        changed.append(item)
    return changed


def _plugin_hook_files(items: list[Item]) -> tuple[str, ...]:
    """hooks/hooks.json, and the files a plugin's manifest names in ``hooks``."""
    named = list(HOOK_FILES["plugin"])
    manifest = next((i for i in items if i.relative == PLUGIN_MANIFEST and i.kind == "file"), None)
    if manifest is not None:
        try:
            hooks = json.loads(manifest.data).get("hooks")
        except (ValueError, AttributeError):
            hooks = None
        for path in [hooks] if isinstance(hooks, str) else hooks if isinstance(hooks, list) else []:
            if isinstance(path, str):
                named.append(str(PurePosixPath(os.path.normpath(path))))
        if isinstance(hooks, dict):  # hooks inline in the manifest
            named.append(PLUGIN_MANIFEST)
    return tuple(named)


@dataclass
class InstalledSetup:
    """Where the setup went, as the client sees it, and what the copy did to it."""

    plugin_dirs: tuple[str, ...] = ()
    notes: list[str] | None = None


def install_setup(box: Sandbox, setup: UserSetup, config_dir: Path,
                  seen: Callable[[Path], str], wrap: Wrap | None) -> InstalledSetup:
    """Copy ``setup`` into ``box``: the workspace into its workspace, the home config into
    ``config_dir`` (the client's), each plugin into ``inputs/plugins/<name>``; with ``wrap``,
    every command hook of them wrapped. Returns the plugin folders as the client sees them."""
    notes: list[str] = []
    if setup.workspace is not None:
        items = read_tree(setup.workspace, "workspace")
        if wrap is not None:
            items = _wrapped(items, HOOK_FILES["workspace"], wrap, "workspace", notes)
        _into_sandbox(box, box.workspace, items)
    if setup.home_config is not None:
        items = read_tree(setup.home_config, "home config")
        if wrap is not None:
            items = _wrapped(items, HOOK_FILES["home config"], wrap, "home-config", notes)
        _into_sandbox(box, config_dir, items)
    shown = []
    for plugin in setup.plugin_dirs:
        items = read_tree(plugin, f"plugin {plugin.name}")
        if wrap is not None:
            items = _wrapped(items, _plugin_hook_files(items), wrap, f"plugin:{plugin.name}",
                             notes)
        target = box.inputs / "plugins" / plugin.name
        _into_inputs(target, items)
        shown.append(seen(target))
    return InstalledSetup(tuple(shown), notes)


def _into_sandbox(box: Sandbox, folder: Path, items: list[Item]) -> None:
    base = box.inside(folder)
    files = box.files
    files.make_dirs(base)
    for item in items:
        where = base / item.relative
        if item.kind == "dir":
            files.make_dirs(where)
        elif item.kind == "link":
            files.symlink(where, item.target)
        else:
            files.write(where, item.data, mode=item.mode, mtime=item.mtime)


def _into_inputs(target: Path, items: list[Item]) -> None:
    """A plugin folder beside the sandbox: the harness's, shown read-only to the client."""
    target.parent.mkdir(mode=0o755, exist_ok=True)
    target.mkdir(mode=0o755)
    for item in items:
        where = target / item.relative
        if item.kind == "dir":
            where.mkdir(mode=0o755)
        elif item.kind == "link":
            os.symlink(item.target, where)
        else:
            descriptor = os.open(where, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                                 item.mode)
            with os.fdopen(descriptor, "wb") as out:
                out.write(item.data)
            os.chmod(where, item.mode | 0o444)  # the client reads it, whatever the umask
            os.utime(where, (item.mtime, item.mtime))


def wrapper_command(python: str, wrapper: str, socket_path: str) -> Wrap:
    """The ``Wrap`` that runs a hook through ``probes.inside.hook_wrapper``."""
    def wrap(source: str, command: str) -> str:
        return shlex.join([python, "-I", "-S", wrapper, socket_path, source, "--", command])
    return wrap
