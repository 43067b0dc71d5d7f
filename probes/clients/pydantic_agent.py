"""pydantic-ai (PyPI ``pydantic-ai-slim[anthropic]``): an ``Agent`` on its Anthropic model.

Each version is installed into a venv of its own in the cache; the file the reports cite (its
SHA-256) is the agent's loop, ``pydantic_ai/_agent_graph.py``. A run is
``pydantic_ai_driver.py`` in that venv: the agent with the driver's tools
(``probes.clients.loop_driver``).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from probes.clients.base import ClientBinary, scan_installs
from probes.clients.loop_driver import DriverLoop
from probes.clients.npm import InstallError, cache_root
from probes.clients.pypi import install_venv, newest, published_versions, venv_binary
from probes.clients.specs import LATEST, check_version, install_folder

__all__ = ["DRIVER", "ENTRY", "EXTRA", "IMPORTS", "PACKAGE", "PydanticAi"]

PACKAGE = "pydantic-ai-slim"
EXTRA = "anthropic"
ENTRY = "pydantic_ai/_agent_graph.py"
DRIVER = Path(__file__).with_name("pydantic_ai_driver.py")
IMPORTS = ("import pydantic_ai.models.anthropic, pydantic_ai.providers.anthropic, "
           "pydantic_ai.usage")


class PydanticAi(DriverLoop):
    name = "pydantic-ai"
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

        def agent_graph(venv: Path) -> tuple[Path, dict[str, Any]]:
            found = sorted(venv.glob(f"lib/python*/site-packages/{ENTRY}"))
            if not found:
                raise InstallError(f"{PACKAGE}=={version} has no agent graph ({ENTRY})")
            # what the driver imports must import: a version whose dependencies resolved to
            # releases it cannot use is refused here, never run
            done = subprocess.run([str(venv / "bin" / "python"), "-c", IMPORTS],
                                  capture_output=True, text=True, timeout=120)
            if done.returncode != 0:
                raise InstallError(f"{PACKAGE}=={version} installed but does not import: "
                                   f"{(done.stderr.strip().splitlines() or ['?'])[-1]}")
            return found[0], {}

        directory = install_venv(self.cache, f"{PACKAGE}[{EXTRA}]", version, agent_graph)
        binary = self._binary(directory)
        if binary is None:
            raise InstallError(f"{PACKAGE}=={version} installed into {directory} but is unusable")
        return binary
