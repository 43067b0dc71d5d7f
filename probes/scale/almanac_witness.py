"""The almanac's witnesses: the evidence folders copied beside ``almanac.json`` for the two
sides of each change and for the anchors, checked to show what their runs recorded, and
those that witness nothing any more removed.

``<out>/almanac/witnesses/<version>/<run>/`` holds the copied reports; their journals' blobs
go to one store, ``<out>/almanac/blobs/`` (``probes.core.blob_store``). A run writes regular
files only: anything else in a folder to copy was put there, and is refused.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from probes.core.blob_store import store_blobs
from probes.core.safe_read import read_json
from probes.scale.almanac_state import AlmanacState

__all__ = ["WITNESS_DIR", "PublishError", "check_witness", "copy_witness",
           "drop_stale_witnesses", "reports_in", "witness_run", "witnesses_of"]

WITNESS_DIR = "almanac"  # <out>/almanac/witnesses/<version>/<run>/, <out>/almanac/blobs/


class PublishError(ValueError):
    """The state does not make a complete almanac (said in one line)."""


def reports_in(folder: Path) -> list[dict[str, Any]]:
    found = []
    for path in sorted(folder.glob("*.json")):
        try:
            data = read_json(path, within=folder)  # bounded, regular, inside: or refused
        except ValueError:
            continue
        if isinstance(data, dict) and "report" in data and isinstance(data.get("claims"), list):
            found.append(data)
    return found


def _reports_of(folder: Path, probes: set[str] | None) -> set[str]:
    """The names of the reports in ``folder`` holding one of ``probes`` (None: every one)."""
    return {str(data["report"]) for data in reports_in(folder)
            if probes is None or any(p.get("name") in probes for p in data.get("probes", []))}


def copy_witness(work: Path, out: Path, version: str, folders: Mapping[str, set[str] | None],
                  say: Callable[[str], None]) -> str | None:
    """Copy the reports of ``folders`` (a run's folder -> the probes to keep the reports of;
    None: all) to the witnesses; the witness's path relative to ``out``, None when no folder
    is there to copy."""
    target = out / WITNESS_DIR / "witnesses" / version
    store = out / WITNESS_DIR / "blobs"
    copied = False
    for folder, probes in sorted(folders.items()):
        source = work / folder  # the run's folder, relative to the build's --work
        destination = target / Path(folder).name
        if destination.is_dir():
            copied = True  # published before: kept as it is
            continue
        if not source.is_dir():
            say(f"almanac: the report folder {folder} of {version} is not in {work}: "
                "its witness is missing")
            continue
        strays = [p.name for p in source.iterdir() if p.is_symlink() or not p.is_file()]
        if strays:  # a run writes regular files only: anything else was put there
            raise PublishError(f"{source}: {', '.join(sorted(strays))} not a regular file: "
                               "refused as a witness")
        reports = _reports_of(source, probes)
        destination.mkdir(parents=True)
        for path in sorted(source.iterdir()):
            whole = probes is None and path.is_file() and not path.name.endswith(".html")
            if whole or path.name.split(".")[0] in reports:
                shutil.copy2(path, destination / path.name)
        for journal in sorted(destination.glob("*.journal.jsonl*")):
            store_blobs(journal, store)
        copied = True
    return str(target.relative_to(out)) if copied else None


def witness_run(state: AlmanacState, version: str, probe: str) -> list[dict[str, Any]]:
    """The run a change side's witness comes from: the first attempt (the second where the
    first was a harness error run again), as a list of none or one."""
    return (state.runs(version, probe) or state.runs(version, probe, 2))[:1]


def check_witness(out: Path, state: AlmanacState, claim: Mapping[str, Any],
                   version: str) -> None:
    """Refuse a witness that does not show what its run recorded: a folder published before
    under the same name by another run (two machines' builds) holds other evidence."""
    probe = claim["probe"]
    for run in witness_run(state, version, probe):
        folder = out / WITNESS_DIR / "witnesses" / version / Path(str(run["folder"])).name
        if not folder.is_dir():
            continue  # not here to copy: said when copying
        recorded = run["claims"].get(claim["id"])
        shown = [c.get("status") for report in reports_in(folder)
                 for c in report["claims"] if c.get("id") == claim["id"]]
        if shown != [recorded]:
            raise PublishError(
                f"{folder}: expected the witness of {claim['id']} on {version} to show its run's "
                f"verdict {recorded!r}, found {shown or 'no report of it'}: the folder holds "
                "another run's evidence; withdraw that run (loopprobe almanac retract "
                f"--version {version} --folder {run['folder']} --probe {probe} --reason ...) "
                "and build again")


def drop_stale_witnesses(out: Path, versions: Sequence[str],
                          witnesses: Mapping[str, Mapping[str, Any]],
                          say: Callable[[str], None]) -> None:
    """Remove the witness folders of this range's versions that witness nothing now (a change
    that a probe's later revision no longer finds, an anchor moved): the almanac links only
    the kept ones, and their runs stay in the state and the build's work folder. Versions
    outside the range (a build ``--from`` a later version) keep theirs."""
    root = out / WITNESS_DIR / "witnesses"
    if not root.is_dir():
        return
    for version in versions:
        folder = root / version
        if folder.is_symlink() or not folder.is_dir():
            continue
        kept = {Path(run).name for run in witnesses.get(version, {})}
        for run in sorted(folder.iterdir()):
            if run.name in kept:
                continue
            if run.is_symlink() or not run.is_dir():
                run.unlink()
            else:
                shutil.rmtree(run)
            say(f"almanac: {version}/{run.name} witnesses nothing now: removed")
        if not any(folder.iterdir()):
            folder.rmdir()


def witnesses_of(state: AlmanacState, claims: list[dict[str, Any]],
               probe_claims: Mapping[str, Sequence[str]],
               anchors: list[str]) -> dict[str, dict[str, set[str] | None]]:
    """version -> run folder -> the probes whose reports are kept (None: the whole folder):
    each probe's first run on an anchor, the changed probe's on both sides of a change."""
    witnesses: dict[str, dict[str, set[str] | None]] = {}
    for anchor in anchors:
        for probe in probe_claims:
            for run in state.runs(anchor, probe)[:1]:
                witnesses.setdefault(anchor, {})[str(run["folder"])] = None
    for claim in claims:
        for change in claim["changes"]:
            for side in ("before", "after"):
                for run in witness_run(state, change[side], claim["probe"]):
                    kept = witnesses.setdefault(change[side], {})
                    if kept.get(str(run["folder"]), set()) is not None:
                        kept.setdefault(str(run["folder"]), set()).add(claim["probe"])  # type: ignore[union-attr]
    return witnesses
