"""What the client kinds installed from PyPI share: one venv per version in the cache.

``install_venv`` creates ``<cache>/<version>/venv`` with ``package==version`` and an
``install.json`` naming the file the reports cite (its SHA-256); ``venv_binary`` reads an
install back; ``published_versions`` lists what the configured index publishes;
``VenvInstalls`` is the install side of such a kind, built from them.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from probes.clients.base import ClientBinary, read_manifest, scan_installs
from probes.clients.npm import InstallError, cached_or_made, sha256_file
from probes.clients.specs import LATEST, check_version, expected_version, install_folder

__all__ = ["PIP_TIMEOUT", "EntryFinder", "VenvInstalls", "install_venv", "newest",
           "published_versions", "venv_binary"]

PIP_TIMEOUT = 900

# given the staged venv: the file the reports cite, and any more manifest fields
EntryFinder = Callable[[Path], tuple[Path, dict[str, Any]]]


def published_versions(package: str) -> list[str]:
    """From the package index pip is configured with (``pip index versions``)."""
    try:
        done = subprocess.run([sys.executable, "-m", "pip", "index", "versions", package],
                              capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        raise InstallError(f"pip index versions {package} took over 120 s") from None
    for line in done.stdout.splitlines():
        if line.strip().startswith("Available versions:"):
            return [v.strip() for v in line.split(":", 1)[1].split(",") if v.strip()]
    raise InstallError(f"cannot list the versions of {package}: "
                       f"{(done.stderr.strip().splitlines() or ['pip found none'])[-1]}")


def newest(published: list[str]) -> str:
    """The highest of ``published`` by PEP 440 (what ``latest`` names; ``matrix`` resolves
    it the same way), ignoring what is no PEP 440 version."""
    versions = []
    for version in published:
        try:
            versions.append((Version(version), version))
        except InvalidVersion:
            continue
    if not versions:
        raise InstallError(f"latest: expected published PEP 440 versions, found "
                           f"{published[:5]!r}")
    return max(versions)[1]


def venv_binary(kind: str, package: str, directory: Path, driver: Path) -> ClientBinary | None:
    """The install in ``directory``, run as ``venv python driver``; None if incomplete."""
    manifest = read_manifest(directory)
    python = directory / "venv" / "bin" / "python"
    if manifest is None or not python.is_file():
        return None
    return ClientBinary(kind, manifest["version"], manifest["platform"], package, directory,
                        directory / manifest["entry"], (str(python), str(driver)),
                        manifest["sha256"])


def install_venv(cache: Path, package: str, version: str, entry: EntryFinder,
                 companions: tuple[str, ...] = ()) -> Path:
    """Install ``package==version`` into ``cache/version`` (staged, then moved into place),
    with ``companions`` (requirement specs installed beside it, e.g. a model provider)."""
    if (expected := expected_version("pypi", version, exact=True)) is not None:
        raise InstallError(f"{package}=={version}: expected {expected}, found {version!r}")
    directory = install_folder(cache, version)
    cache.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{version}.", dir=cache))
    try:
        subprocess.run(["python3", "-m", "venv", str(staging / "venv")], check=True,
                       capture_output=True, timeout=300)
        done = subprocess.run(
            [str(staging / "venv" / "bin" / "python"), "-m", "pip", "install", "--quiet",
             "--disable-pip-version-check", f"{package}=={version}", *companions],
            capture_output=True, text=True, timeout=PIP_TIMEOUT)
        if done.returncode != 0:
            lines = [ln for ln in done.stderr.splitlines() if "WARNING" not in ln]
            raise InstallError(f"pip install {package}=={version} failed: "
                               f"{' '.join(lines)[-400:]}")
        cited, extra = entry(staging / "venv")
        manifest = {
            "package": package, "version": version,
            "platform": f"{platform.system().lower()}-{platform.machine()}",
            "entry": str(cited.relative_to(staging)), "sha256": sha256_file(cited), **extra,
            "installed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        (staging / "install.json").write_text(json.dumps(manifest, indent=2, sort_keys=True))
        if directory.exists():
            shutil.rmtree(directory)
        os.replace(staging, directory)
    except subprocess.TimeoutExpired:
        raise InstallError(f"installing {package}=={version} took over {PIP_TIMEOUT}s") \
            from None
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return directory


class VenvInstalls:
    """The install side of a kind from PyPI: each version of ``package`` in a venv of its own
    under ``cache``, run as ``venv python driver``."""

    name: str
    package: str
    driver: Path
    cache: Path

    def _binary(self, directory: Path) -> ClientBinary | None:
        return venv_binary(self.name, self.package, directory, self.driver)

    def installed(self) -> list[ClientBinary]:
        return scan_installs(self.cache, self._binary)

    def published(self) -> list[str]:
        return published_versions(self.package)

    def resolve(self, version: str) -> str:
        """``latest`` as the newest version published; any other version as it is, checked
        (the index's answer is input too)."""
        check_version(self, version)
        exact = newest(self.published()) if version == LATEST else version
        check_version(self, exact, exact=True)
        return exact

    def cached_or_installed(self, version: str, entry: EntryFinder, requirement: str = "",
                            companions: tuple[str, ...] = ()) -> ClientBinary:
        """The install of ``version`` (exact), made by ``install_venv`` if there is none."""
        binary, _ = cached_or_made(
            install_folder(self.cache, version), self._binary,
            lambda: install_venv(self.cache, requirement or self.package, version, entry,
                                 companions),
            f"{self.package}=={version}")
        return binary
