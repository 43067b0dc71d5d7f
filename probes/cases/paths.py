"""Where the paths of a case file may lead: only inside the case file's repository.

A case file may come from a pull request of a fork, and so may every link in its
repository. Its repository root is the enclosing git work tree (the nearest folder above
the case file holding ``.git``, a folder or a file; git itself is not run), or the case
file's own folder when there is none. Every path the case file names (``setup.workspace``,
``setup.home_config``, ``setup.plugin_dirs``) is relative to the case file's folder and must
stay inside that root at every step, links resolved: no absolute path, no ``~``, no ``..``
above the root, no link (at any step, the last included) whose target leads out of it. Nor
may it reach the root's ``.git`` (where a CI checkout keeps its token) or name the root
itself, which holds it.

A path given on the command line (``--workspace``, ``--home-config``, ``--plugin-dir``,
``--baseline``, the case file itself) is the user's to hand over and may name any folder,
but a link inside the root on its way must hold to the same rule: a link there is the pull
request's, not the user's. Links inside a folder that is copied are not followed here: they
are copied as links and resolve inside the sandbox (``probes.sandbox.user_setup``).
"""

from __future__ import annotations

import os
from pathlib import Path

from probes.cases.format import CaseFileError

__all__ = ["GIT_MARKER", "given_path", "repository_root", "setup_path"]

GIT_MARKER = ".git"


def repository_root(case_file: Path) -> Path:
    """The real path of the case file's repository root (see the module's docstring)."""
    folder = Path(os.path.abspath(case_file)).parent
    for candidate in (folder, *folder.parents):
        if os.path.lexists(candidate / GIT_MARKER):
            return Path(os.path.realpath(candidate))
    return Path(os.path.realpath(folder))


def _inside(path: str, folder: Path) -> bool:
    return path == str(folder) or path.startswith(str(folder).rstrip("/") + "/")


def _refusal(real: str, root: Path, *, root_itself: bool) -> str | None:
    """Why a step that really leads to ``real`` may not be taken, or None. The root's
    ``.git`` is the repository's metadata, where a CI checkout keeps its token: never
    reached, nor copied with the root itself (``root_itself``: a step that may end there)."""
    if not _inside(real, root):
        return "outside it"
    if _inside(real, root / GIT_MARKER):
        return f"inside its {GIT_MARKER} (the repository's metadata, where a checkout keeps " \
               "its credentials)"
    if not root_itself and real == str(root) and os.path.lexists(root / GIT_MARKER):
        return f"its root itself, whose {GIT_MARKER} would be copied with it (name a folder " \
               "below it)"
    return None


def _step(step: Path, real: str, problem: str) -> str:
    return f"{step} is a link to {real}, {problem}" if os.path.islink(step) \
        else f"{step} leads to {real}, {problem}"


def setup_path(case_file: Path, root: Path, field: str, given: str) -> Path:
    """The real path of ``given`` (a field of the case file, relative to its folder), or a
    CaseFileError naming the field, the path and the root."""
    where = f"{case_file}: {field}: expected a path relative to the case file's folder " \
            f"that stays inside its repository root {root}, found {given!r}"
    if "\0" in given:
        raise CaseFileError(f"{where}: a NUL byte")
    if given.startswith("~"):
        raise CaseFileError(f"{where}: a home folder (~ is not expanded; a case file "
                            "reaches only its repository)")
    if os.path.isabs(given):
        raise CaseFileError(f"{where}: an absolute path (a case file reaches only its "
                            "repository; give a folder outside it with the command line's "
                            "flag)")
    real = os.path.realpath(Path(case_file).parent)
    parts = given.split("/")
    for number, part in enumerate(parts, start=1):
        step = Path(real) / part  # each step from where the last one really led
        real = os.path.realpath(step)
        # a plain step may pass through the root (../other); the folder named may not be it
        passing = number < len(parts) and not os.path.islink(step)
        if problem := _refusal(real, root, root_itself=passing):
            raise CaseFileError(f"{where}: {_step(step, real, problem)}")
    return Path(real)


def given_path(root: Path, what: str, given: str | Path) -> Path:
    """``given`` (a path from the command line) as the user named it, made absolute; a
    CaseFileError when a link of ``root`` on its way leads out of ``root``, into its
    ``.git`` or to the root itself."""
    text = str(given)
    if "\0" in text:
        raise CaseFileError(f"{what} {text!r}: expected a path, found a NUL byte in it")
    path = Path(os.path.abspath(text))
    step = Path(path.anchor)
    for part in path.parts[1:]:
        inner = _inside(os.path.realpath(step), root)
        step = step / part
        real = os.path.realpath(step)
        if inner and os.path.islink(step) and (
                problem := _refusal(real, root, root_itself=False)):
            raise CaseFileError(f"{what} {text}: expected a path whose links inside the "
                                f"case file's repository {root} stay inside it, but "
                                f"{_step(step, real, problem)}")
    return path
