"""Names a catalog gives (probes, invocations, MCP servers) become file and folder names in a
probe's sandbox, so each must be a simple name: never a path, never hidden, never empty.

A leaf module: the declarations (``probes.core.invocation``, ``probes.core.mcp``, ``probes.core.probe``)
check their names with it when a catalog loads.
"""

from __future__ import annotations

import re

__all__ = ["NAME_LENGTH", "simple_name_problem"]

NAME_LENGTH = 64
_SIMPLE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def simple_name_problem(kind: str, name: object, longest: int = NAME_LENGTH) -> str | None:
    """Why ``name`` cannot name a file or folder of the harness (``None`` when it can)."""
    if isinstance(name, str) and len(name) <= longest and _SIMPLE.fullmatch(name):
        return None
    return (f"{kind} name {name!r}: expected a simple name (letters, digits, '.', '_', '-', "
            f"at most {longest}, not starting with '.' or '-')")
