"""A LangGraph agent (PyPI ``langgraph`` with ``langchain-anthropic``): ``create_react_agent``.

Each version of ``langgraph`` is installed into a venv of its own in the cache with the
newest ``langchain-anthropic`` of the day (its version is in the install's manifest,
``companions``); the file the reports cite (its SHA-256) is the ReAct agent's module,
``langgraph/prebuilt/chat_agent_executor.py``. A run is ``langgraph_driver.py`` in that venv:
the agent with the driver's tools (``probes.clients.loop_driver``).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from probes.clients.base import ClientBinary, scan_installs
from probes.clients.loop_driver import DriverLoop
from probes.clients.npm import InstallError, cache_root
from probes.clients.pypi import install_venv, newest, published_versions, venv_binary
from probes.clients.specs import LATEST, check_version, install_folder

__all__ = ["COMPANION", "DRIVER", "ENTRY", "PACKAGE", "LangGraph"]

PACKAGE = "langgraph"
COMPANION = "langchain-anthropic"
ENTRY = "langgraph/prebuilt/chat_agent_executor.py"
DRIVER = Path(__file__).with_name("langgraph_driver.py")
# what the driver imports must import (langgraph-prebuilt, a package of its own, may resolve
# to a release this langgraph cannot load); then the companions' versions, for the manifest
_VERSIONS = ("import langgraph.prebuilt, langchain_anthropic, importlib.metadata as m, json; "
             "print(json.dumps({n: m.version(n) for n in ('langgraph-prebuilt', "
             "'langchain-anthropic', 'langchain-core', 'anthropic')}))")


class LangGraph(DriverLoop):
    name = "langgraph"
    package = PACKAGE
    registry = "pypi"  # the grammar of its versions (probes.clients.specs)

    def __init__(self, cache: Path | None = None):
        self.cache = (cache or cache_root()) / "clients" / self.name

    def _binary(self, directory: Path) -> ClientBinary | None:
        return venv_binary(self.name, PACKAGE, directory, DRIVER)

    def installed(self) -> list[ClientBinary]:
        return scan_installs(self.cache, self._binary)

    def published(self) -> list[str]:
        return published_versions(PACKAGE)

    def resolve(self, version: str) -> str:
        """``latest`` as the newest version published; any other version as it is."""
        check_version(self, version)
        return newest(self.published()) if version == LATEST else version

    def install(self, version: str) -> ClientBinary:
        version = self.resolve(version)
        check_version(self, version, exact=True)  # the index's answer is input too
        existing = self._binary(install_folder(self.cache, version))
        if existing is not None:
            return existing

        def react_agent(venv: Path) -> tuple[Path, dict[str, Any]]:
            found = sorted(venv.glob(f"lib/python*/site-packages/{ENTRY}"))
            if not found:
                raise InstallError(f"{PACKAGE}=={version} has no ReAct agent ({ENTRY})")
            done = subprocess.run([str(venv / "bin" / "python"), "-c", _VERSIONS],
                                  capture_output=True, text=True, timeout=120)
            if done.returncode != 0:
                raise InstallError(f"{PACKAGE}=={version} installed but does not import: "
                                   f"{(done.stderr.strip().splitlines() or ['?'])[-1]}")
            return found[0], {"companions": json.loads(done.stdout)}

        directory = install_venv(self.cache, PACKAGE, version, react_agent, (COMPANION,))
        binary = self._binary(directory)
        if binary is None:
            raise InstallError(f"{PACKAGE}=={version} installed into {directory} but is unusable")
        return binary
