"""The harness's MCP runtime: a venv with the official ``mcp`` SDK, installed once in the cache.

Probes that give the client an MCP server run ``probes/inside/mcp_server.py`` on it, inside the
client's sandbox, where the venv is mounted read-only at its own path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from probes.clients.npm import cache_root
from probes.clients.pypi import install_venv

__all__ = ["MCP_PACKAGE", "MCP_VERSION", "McpRuntime", "install_mcp_runtime"]

MCP_PACKAGE = "mcp"
MCP_VERSION = "2.3.0"


class McpRuntime:
    def __init__(self, directory: Path):
        self.directory = directory

    @property
    def venv(self) -> Path:
        return self.directory / "venv"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"


def _cited(venv: Path) -> tuple[Path, dict[str, Any]]:
    found = sorted(venv.glob("lib/python*/site-packages/mcp/__init__.py"))
    if not found:
        raise FileNotFoundError(f"no mcp package in {venv}")
    return found[0], {}


def install_mcp_runtime(cache: Path | None = None) -> McpRuntime:
    """The cached runtime, installing ``mcp==MCP_VERSION`` if it is not there yet."""
    root = (cache or cache_root()) / "tools" / "mcp-server"
    directory = root / MCP_VERSION
    runtime = McpRuntime(directory)
    if not ((directory / "install.json").is_file() and runtime.python.is_file()):
        install_venv(root, MCP_PACKAGE, MCP_VERSION, _cited)
    return runtime
