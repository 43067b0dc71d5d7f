"""Client kinds from outside loopprobe: ``LOOPPROBE_CLIENTS=kind=module:Class,...``.

Each entry is checked in one line before it is used: its form, a kind name of its own (a
plugin cannot take a built-in kind's name, nor one twice), a module that imports, a class
that makes an object with the ``Client`` protocol's members and the kind's name. What it
installs must bear the kind's name, and carries the entry's ``module:Class`` (``plugin`` in
the binary's identity), so a report made with a plugin names the code that ran.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Callable, Collection
from dataclasses import replace
from pathlib import Path
from typing import Any

from probes.clients.base import Capabilities, Client, ClientBinary, Command, RunContext
from probes.clients.npm import InstallError
from probes.clients.specs import check_version
from probes.core.evidence import Output
from probes.core.invocation import Invocation
from probes.sandbox.folders import Sandbox

__all__ = ["ENTRY_FORM", "KIND_NAME", "PLUGINS_ENV", "PROTOCOL", "PluginClient", "load_plugins"]

PLUGINS_ENV = "LOOPPROBE_CLIENTS"
ENTRY_FORM = "kind=module:Class"
# a kind names report folders (<kind>-<version>) and is the KIND of KIND@VERSION
KIND_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
_TARGET = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*")
# the members of probes.clients.base.Client
PROTOCOL = ("name", "package", "install", "installed", "published", "capabilities", "prepare",
            "command", "read_output", "session_folder")


class PluginClient:
    """A plugin's client under its kind: the plugin's own object does the work; the binaries
    it installs must bear the kind's name and carry the plugin's ``module:Class``. Members
    beyond the protocol (``catalog``, ``registry``, ``resolve``…) are the plugin's."""

    def __init__(self, inner: Any, kind: str, origin: str):
        self.inner = inner
        self.name = kind
        self.package: str = inner.package
        self.origin = origin

    def __getattr__(self, member: str) -> Any:
        return getattr(self.inner, member)

    def _stamped(self, binary: ClientBinary) -> ClientBinary:
        if binary.name != self.name:
            raise InstallError(f"{PLUGINS_ENV}: {self.name}={self.origin} installed "
                               f"{binary.name}@{binary.version}: expected a binary named "
                               f"{self.name!r}, found one named {binary.name!r}")
        return replace(binary, plugin=self.origin)

    def install(self, version: str) -> ClientBinary:
        check_version(self, version)
        return self._stamped(self.inner.install(version))

    def installed(self) -> list[ClientBinary]:
        return [self._stamped(binary) for binary in self.inner.installed()]

    def published(self) -> list[str]:
        return list(self.inner.published())

    def capabilities(self, binary: ClientBinary) -> Capabilities:
        found: Capabilities = self.inner.capabilities(binary)
        return found

    def prepare(self, box: Sandbox, seen: Callable[[Path], str] = str) -> dict[str, str]:
        shown: dict[str, str] = self.inner.prepare(box, seen)
        return shown

    def command(self, binary: ClientBinary, invocation: Invocation,
                context: RunContext) -> Command:
        made: Command = self.inner.command(binary, invocation, context)
        return made

    def read_output(self, stdout: str) -> Output:
        output: Output = self.inner.read_output(stdout)
        return output

    def session_folder(self, box: Sandbox) -> Path | None:
        folder: Path | None = self.inner.session_folder(box)
        return folder


def load_plugins(built_in: Collection[str]) -> dict[str, Callable[[], Client]]:
    """The kinds ``$LOOPPROBE_CLIENTS`` adds, each a maker of its ``PluginClient``."""
    found: dict[str, Callable[[], Client]] = {}
    for entry in filter(None, (e.strip() for e in os.environ.get(PLUGINS_ENV, "").split(","))):
        kind, _, target = (part.strip() for part in entry.partition("="))
        where = f"{PLUGINS_ENV} entry {entry!r}"
        problem = ("no '='" if "=" not in entry
                   else f"the kind {kind!r} is not a name of a-z, 0-9, '.', '_', '-'"
                   if not KIND_NAME.fullmatch(kind)
                   else f"{target!r} is not module:Class (a dotted module, a name)"
                   if not _TARGET.fullmatch(target) else None)
        if problem is not None:
            raise InstallError(f"{PLUGINS_ENV}: expected comma-separated {ENTRY_FORM} entries, "
                               f"found {entry!r}: {problem}")
        if kind in built_in:
            raise InstallError(f"{where}: expected a kind of its own, found the built-in kind "
                               f"{kind!r} (a plugin cannot replace one of "
                               f"{', '.join(built_in)})")
        if kind in found:
            raise InstallError(f"{where}: expected each kind once, found {kind!r} twice")
        found[kind] = _maker(where, kind, target)
    return found


def _maker(where: str, kind: str, target: str) -> Callable[[], Client]:
    module, _, attribute = target.partition(":")
    try:
        loaded = importlib.import_module(module)
    except Exception as error:  # the plugin's own code, whatever it raises
        raise InstallError(f"{where}: expected an importable module {module!r}, but importing "
                           f"it raised {type(error).__name__}: {error}") from None
    if not hasattr(loaded, attribute):
        raise InstallError(f"{where}: expected {module!r} to define {attribute!r}, found no "
                           f"attribute {attribute!r} in it")
    factory = getattr(loaded, attribute)

    def make() -> Client:
        try:
            made = factory()
        except Exception as error:
            raise InstallError(f"{where}: expected {target} to make a client when called "
                               f"with no arguments, but it raised {type(error).__name__}: "
                               f"{error}") from None
        missing = [member for member in PROTOCOL if not hasattr(made, member)]
        if missing:
            raise InstallError(f"{where}: expected a Client (probes.clients.base.Client), found "
                               f"a {type(made).__name__} without {', '.join(missing)}")
        if made.name != kind:
            raise InstallError(f"{where}: expected a client named {kind!r}, found one named "
                               f"{made.name!r}")
        return PluginClient(made, kind, target)

    return make
