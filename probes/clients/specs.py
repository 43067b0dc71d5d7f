"""What a client version may be, checked before anything is installed or run.

A version reaches the code from the command line (``--client``, ``--clients``, ``bisect
--good``, ``versions --since``…), from a registry's answer (``latest`` resolved, a published
list) and from the cache; it becomes a folder name and an installer's argument. Each
registry has its grammar: semver 2.0.0 (or a dist-tag such as ``latest``) for npm kinds, PEP
440 in its normal form (or ``latest``) for PyPI kinds, and for a kind that names no registry
(a plugin's) one plain name of letters, digits and ``. _ + -``. Whatever the grammar let
through, an install folder must still be one folder directly inside its kind's cache folder.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from probes.clients.npm import VERSION_PATTERN, InstallError

__all__ = ["DIST_TAG", "LATEST", "PLAIN_VERSION", "SEMVER", "check_version", "expected_version",
           "install_folder", "resolve_versions"]

LATEST = "latest"
SEMVER = VERSION_PATTERN  # npm's versions: semver.org's grammar (probes.clients.npm)
# an npm dist-tag (latest, next, stable): one lowercase word, never a path or a range
DIST_TAG = re.compile(r"[a-z][a-z0-9-]{0,63}")
PLAIN_VERSION = re.compile(r"[0-9A-Za-z][0-9A-Za-z._+-]{0,127}")
_MAX_LENGTH = 256
# latest~N: the newest release and the N before it
_LATEST_N = re.compile(r"latest~([0-9]{1,4})")
_RANGE_START = ("<", ">", "=", "!", "~=")
_VERSIONS_EXPECTED = ("expected a comma-separated list of exact versions (2.1.235,2.1.332), "
                      "latest, latest~N (the N+1 newest) or a PEP 440 range (>=2.1.90,<2.1.240)")

_EXPECTED = {
    "npm": "a semver version such as 2.1.235 (MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD])",
    "pypi": "a PEP 440 version in its normal form such as 0.2.140",
    None: "a version of letters, digits and . _ + - such as 1.0.0",
}
_TAGS = {"npm": ", or a dist-tag such as latest", "pypi": ", or latest", None: ", or latest"}


def expected_version(registry: str | None, version: str, *, exact: bool = False) -> str | None:
    """None when ``version`` fits ``registry``'s grammar (``npm``, ``pypi``, None: a kind
    naming none), else what was expected. ``exact``: a tag (``latest``) does not fit."""
    grammar = registry if registry in _EXPECTED else None
    expected = _EXPECTED[grammar] + ("" if exact else _TAGS[grammar])
    if len(version) > _MAX_LENGTH:
        return expected
    if grammar == "npm":
        fits = bool(SEMVER.fullmatch(version) or (not exact and DIST_TAG.fullmatch(version)))
    elif grammar == "pypi":
        fits = version == LATEST and not exact
        if not fits:
            try:
                normal = str(Version(version))
            except InvalidVersion:
                normal = None
            if normal is not None and normal != version and PLAIN_VERSION.fullmatch(version):
                return f"{expected} (this one's normal form is {normal})"
            fits = normal == version
    else:
        fits = bool(PLAIN_VERSION.fullmatch(version)) and (version != LATEST or not exact)
    return None if fits else expected


def check_version(client: Any, version: str, *, exact: bool = False) -> None:
    """Refuse ``version`` of ``client`` (its ``registry`` names the grammar) in one line."""
    expected = expected_version(getattr(client, "registry", None), version, exact=exact)
    if expected is not None:
        raise InstallError(f"{client.name}@{version}: expected {expected}, found {version!r}")


def install_folder(cache: Path, version: str) -> Path:
    """``cache/version``, refused unless it is one folder directly inside ``cache`` once
    links are followed (a version that is a path, or a cache entry linked elsewhere)."""
    folder = cache / version
    try:
        inside = folder.name == version and folder.resolve().parent == cache.resolve()
    except (OSError, RuntimeError):  # a link loop
        inside = False
    if not inside:
        raise InstallError(f"{version!r}: expected an install folder directly inside "
                           f"{cache}, found {folder} (resolved: {_resolved(folder)})")
    return folder


def _resolved(path: Path) -> str:
    try:
        return str(path.resolve())
    except (OSError, RuntimeError) as error:
        return f"unresolvable: {error}"


def _releases(published: Sequence[str]) -> list[str]:
    """The published versions that are releases (no prerelease), oldest first; a version
    that is not PEP 440 has no place in an order and is left out."""
    parsed = []
    for version in dict.fromkeys(published):
        try:
            parsed.append((Version(version), version))
        except InvalidVersion:
            continue
    return [version for key, version in sorted(parsed) if not key.is_prerelease]


def resolve_versions(spec: str, published: Sequence[str]) -> list[str]:
    """The client versions ``spec`` names among ``published``, oldest first (the order a
    regression is read in; ``latest~2`` is the three newest releases, the newest last).

    ``spec`` is one of: a comma-separated list of exact versions (each must be published;
    kept in the order given, duplicates dropped); ``latest`` (the newest release: prereleases
    are left out, as npm's ``latest`` tag leaves them out); ``latest~N`` (the N+1 newest
    releases); a PEP 440 range such as ``>=2.1.90,<2.1.240`` (every published release in
    it). Anything else, or a range or list that names nothing published, is an InstallError
    saying what was expected.
    """
    text = spec.strip()
    if not text or len(text) > 4096:
        raise InstallError(f"--versions: {_VERSIONS_EXPECTED}, found {spec!r}")
    releases = _releases(published)
    latest = _LATEST_N.fullmatch(text)
    if text == LATEST or latest:
        count = int(latest.group(1)) + 1 if latest else 1
        if not releases:
            raise InstallError(f"--versions {text}: no published release to choose from")
        return releases[-count:]
    if text.startswith(_RANGE_START):
        try:
            wanted = SpecifierSet(text)
        except InvalidSpecifier:
            raise InstallError(f"--versions: {_VERSIONS_EXPECTED}, found {spec!r} (not a PEP "
                               "440 range)") from None
        found = list(wanted.filter(releases))
        if not found:
            shown = f"{releases[0]} to {releases[-1]}" if releases else "none"
            raise InstallError(f"--versions {text}: expected a range holding at least one "
                               f"published release, found none in it (published: {shown})")
        return found
    items = [item.strip() for item in text.split(",")]
    known = set(published)
    for item in items:
        if not item or item.startswith(_RANGE_START) or item.startswith(LATEST):
            raise InstallError(f"--versions: {_VERSIONS_EXPECTED}, found {spec!r} (a list "
                               f"holds exact versions only: {item!r})")
        if item not in known:
            newest = ", ".join(releases[-3:]) or "none"
            raise InstallError(f"--versions: {item!r} is not a published version (expected "
                               f"one such as {newest})")
    return list(dict.fromkeys(items))
