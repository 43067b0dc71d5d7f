"""Names a catalog gives (reports, probes, invocations, MCP servers) become file and folder names
in a probe's sandbox, so each must be a simple name: never a path, never hidden, never empty.

A leaf module: the declarations (``probes.core.invocation``, ``probes.core.mcp``,
``probes.core.probe``, ``probes.core.provenance``, ``probes.core.streamed``) check their names
with it when a catalog loads, and raise ``CatalogError`` for every mistake they find then,
before any probe runs.
"""

from __future__ import annotations

import re

__all__ = ["NAME_LENGTH", "CatalogError", "described", "simple_name_problem"]

NAME_LENGTH = 64
_SIMPLE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_SHOWN = 60  # how much of a wrong value a message quotes


class CatalogError(ValueError):
    """A catalog declares something the harness cannot run; found when the catalog is loaded.

    The message names the object (``Claim 'x.y'``), what was expected and what arrived.
    """


def described(value: object) -> str:
    """A wrong value as a message shows it: its type and a short repr (``str 'README'``)."""
    shown = repr(value)
    if len(shown) > _SHOWN:
        shown = shown[:_SHOWN] + "…"
    return f"{type(value).__name__} {shown}"


def simple_name_problem(kind: str, name: object, longest: int = NAME_LENGTH) -> str | None:
    """Why ``name`` cannot name a file or folder of the harness (``None`` when it can)."""
    if isinstance(name, str) and len(name) <= longest and _SIMPLE.fullmatch(name):
        return None
    return (f"{kind} name {name!r}: expected a simple name (letters, digits, '.', '_', '-', "
            f"at most {longest}, not starting with '.' or '-')")
