"""Install exact published versions of npm packages into a per-version cache outside the repo.

npm runs no script of the packages it installs (``--ignore-scripts``): a package's
preinstall, install and postinstall would run on the host as the caller, and a client is
trusted for nothing. What a client's postinstall does that its kind needs, the kind does
itself (``probes.clients.claude_code`` places Claude Code's native executable); every run of
the installed code is contained (``probes.clients.info_run``, the probe runs).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["NPM_TIMEOUT", "VERSION_PATTERN", "InstallError", "cache_root", "cached_or_installed",
           "cached_or_made", "install_package", "published_versions", "resolve_version",
           "sha256_file"]

NPM_TIMEOUT = 600
# an exact version, by semver.org's grammar (2.0.0): no leading zeros, dot-separated
# identifiers, ASCII only (anything else is a dist-tag to resolve, or refused)
_NUMBER = r"(?:0|[1-9][0-9]*)"
_PRE = rf"(?:{_NUMBER}|[0-9]*[A-Za-z-][0-9A-Za-z-]*)"
VERSION_PATTERN = re.compile(rf"{_NUMBER}\.{_NUMBER}\.{_NUMBER}(?:-{_PRE}(?:\.{_PRE})*)?"
                             r"(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?")


class InstallError(RuntimeError):
    pass


def cache_root() -> Path:
    """``$LOOPPROBE_CACHE``, else ``$XDG_CACHE_HOME/loopprobe``, else ``~/.cache/loopprobe``."""
    if explicit := os.environ.get("LOOPPROBE_CACHE"):
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "loopprobe"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _npm(*args: str, cwd: Path | None = None,
         timeout: float = NPM_TIMEOUT) -> subprocess.CompletedProcess[str]:
    npm = shutil.which("npm")
    if npm is None:
        raise InstallError("npm is not on PATH; install Node.js (20+) and npm to install clients")
    try:
        return subprocess.run([npm, *args], cwd=cwd, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise InstallError(f"npm {' '.join(args)} did not finish within {timeout}s") from None


def published_versions(package: str) -> list[str]:
    done = _npm("view", package, "versions", "--json", timeout=120)
    if done.returncode != 0:
        raise InstallError(f"cannot list the versions of {package}: {_npm_error(done.stderr)}")
    versions = json.loads(done.stdout)
    return [versions] if isinstance(versions, str) else list(versions)


def resolve_version(package: str, wanted: str) -> str:
    """``latest`` or another dist-tag to a version; an exact version is checked to exist."""
    if not VERSION_PATTERN.fullmatch(wanted):
        done = _npm("view", f"{package}@{wanted}", "version", timeout=120)
        found = done.stdout.strip().splitlines()
        if done.returncode != 0 or not found:
            raise InstallError(f"{package}@{wanted}: not a published version or dist-tag "
                               f"({_npm_error(done.stderr) or 'npm found nothing'})")
        return found[-1].strip().strip("'")
    return wanted


def _npm_error(stderr: str) -> str:
    lines = [ln.removeprefix("npm error ").strip() for ln in stderr.splitlines()
             if ln.startswith("npm error") and "complete log" not in ln]
    return "; ".join(dict.fromkeys(ln for ln in lines if ln))[:400]


_Install = TypeVar("_Install")


def cached_or_made(target: Path, read: Callable[[Path], _Install | None],
                   make: Callable[[], object], what: str) -> tuple[_Install, bool]:
    """The usable install in ``target`` (``read`` it), made first by ``make`` when there is
    none; and whether it was made just now (what a kind checks once, e.g. the version its
    binary prints). ``what`` names the install in the refusal of one that is not usable."""
    existing = read(target)
    if existing is not None:
        return existing, False
    make()
    made = read(target)
    if made is None:
        raise InstallError(f"{what} installed into {target} but is not usable")
    return made, True


def cached_or_installed(package: str, version: str, target: Path,
                        read: Callable[[Path], _Install | None], locate_entry: Any,
                        describe: Callable[[Path], Mapping[str, Any]] | None = None,
                        ) -> tuple[_Install, bool]:
    """``cached_or_made`` for an npm package installed by ``install_package``."""
    return cached_or_made(
        target, read, lambda: install_package(package, version, target, locate_entry, describe),
        f"{package}@{version}")


def install_package(package: str, version: str, target: Path, locate_entry: Any,
                    describe: Callable[[Path], Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """Install ``package@version`` into ``target`` atomically and describe what was installed.

    ``locate_entry(prefix) -> (entry_path, launcher_argv)`` finds the executed file (raising
    ``InstallError`` refuses the install); ``describe(prefix)``, if given, adds fields to the
    manifest. The install happens in a sibling temporary directory that is renamed into
    place, so an interrupted or refused install never looks installed.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        done = _npm("install", "--no-audit", "--no-fund", "--no-save", "--ignore-scripts",
                    "--prefix", str(staging), f"{package}@{version}")
        if done.returncode != 0:
            detail = _npm_error(done.stderr)
            if "E404" in done.stderr or "ETARGET" in done.stderr or "No match" in done.stderr:
                raise InstallError(f"{package}@{version} is not a published version ({detail})")
            raise InstallError(f"npm install {package}@{version} failed: {detail}")
        entry, launcher = locate_entry(staging)
        installed = json.loads(
            (staging / "node_modules" / package / "package.json").read_text())["version"]
        if installed != version:
            raise InstallError(f"asked npm for {package}@{version} but it installed {installed}")
        manifest = {
            "package": package, "version": version,
            "platform": f"{platform.system().lower()}-{platform.machine()}",
            "entry": str(entry.relative_to(staging)),
            "launcher": [str(a) if not isinstance(a, Path) else str(a.relative_to(staging))
                         for a in launcher],
            "sha256": sha256_file(entry),
            "size": entry.stat().st_size,
            "installed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "node": _node_version(),
            **(describe(staging) if describe is not None else {}),
        }
        (staging / "install.json").write_text(json.dumps(manifest, indent=2, sort_keys=True))
        if target.exists():
            shutil.rmtree(target)
        os.replace(staging, target)
        return manifest
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


def _node_version() -> str | None:
    node = shutil.which("node")
    if node is None:
        return None
    done = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30)
    return done.stdout.strip() or None
