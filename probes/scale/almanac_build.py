"""An almanac build: the search's runs made, recorded, and the search asked again.

``build`` loops: ask the search (``probes.scale.almanac_search``) what it needs, run it
(grouped per version and attempt: one suite run of the probes needed there, each in its
own fresh sandbox, into a new folder), append each finished run to the state
(``probes.scale.almanac_state``), until nothing is needed or the budget of runs is spent.
The running itself is handed in (``RunBatch``), so the tests drive it with synthetic
verdicts and the CLI with real clients.

The screen (``screen_digest``) is the request shape of one short probe, without the text
that changes in almost every release (the system prompt, tool descriptions, the version in
the user agent): which beta flags, body keys per request kind, tools and the hash of each
input schema, request configuration, header names, requests per kind, and the verdict of
each of the probe's checks.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from probes.core.probe import ReportSpec
from probes.core.safe_read import ReadRefused, read_json
from probes.report.format import journal_path, read_journal_lines
from probes.scale.almanac_search import SCREEN_ERROR, Need, SearchResult, search
from probes.scale.almanac_state import AlmanacState

__all__ = ["BuildStats", "RunBatch", "build", "cells_from_folder", "claims_of", "revisions_of",
           "screen_digest"]

# (version, probes, folder) -> the binary's SHA-256 ("" when the run could not say)
RunBatch = Callable[[str, list[str], Path], str]


@dataclass
class BuildStats:
    batches: int = 0  # suite runs made (each installs or finds its version)
    probe_runs: int = 0  # probes run, one sandbox each
    screens: int = 0
    versions: set[str] = field(default_factory=set)
    seconds: float = 0.0
    waited: float = 0.0  # seconds a RunBatch spent waiting for a shared lock (it adds them)

    def to_json(self) -> dict[str, Any]:
        return {"suite_runs": self.batches, "probe_runs": self.probe_runs,
                "screens": self.screens, "versions_run": len(self.versions),
                "wall_s": round(self.seconds, 1), "lock_wait_s": round(self.waited, 1)}


def _reports(folder: Path, say: Callable[[str], None] = lambda _: None) -> list[dict[str, Any]]:
    """The reports a run wrote into ``folder``; one no reader accepts (too large, not JSON) is
    said and left out, so its probes' claims are harness errors (run again, then skipped),
    never the end of the build."""
    found = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        if path.name.endswith(".timing.json") or path.name in ("fingerprint.json",
                                                                "counterfactuals.json"):
            continue
        try:
            data = read_json(path, within=folder)
        except (ReadRefused, ValueError) as error:
            say(f"almanac: {path} not read ({error}): its probes count as harness errors")
            continue
        if isinstance(data, dict) and "claims" in data and "report" in data:
            found.append({**data, "_path": path})
    return found


def claims_of(catalog: Sequence[ReportSpec]) -> dict[str, list[str]]:
    """probe -> its claims, in catalog order."""
    return {probe.name: [claim.id for claim in probe.claims]
            for spec in catalog for probe in spec.probes}


def revisions_of(catalog: Sequence[ReportSpec]) -> dict[str, int]:
    """probe -> its revision (runs of an earlier one are superseded)."""
    return {probe.name: probe.revision for spec in catalog for probe in spec.probes}


def cells_from_folder(folder: Path, claims_of: Mapping[str, Sequence[str]],
                      probes: Sequence[str],
                      say: Callable[[str], None] = lambda _: None) -> dict[str, dict[str, Any]]:
    """Per probe run into ``folder``: its claims' verdicts and, per claim, its checks'
    statuses; a claim
    no report holds is ``error`` (the harness did not finish it)."""
    statuses: dict[str, str] = {}
    checks: dict[str, dict[str, str]] = {}
    for report in _reports(folder, say):
        for claim in report["claims"]:
            statuses[claim["id"]] = str(claim.get("status"))
        for check in report.get("checks", []):
            if check.get("claim"):
                checks.setdefault(check["claim"], {})[check["id"]] = str(check.get("status"))
    return {probe: {"claims": {c: statuses.get(c, "error") for c in claims_of[probe]},
                    "checks": {c: dict(sorted(checks.get(c, {}).items()))
                               for c in claims_of[probe]}}
            for probe in probes}


def _tool_shape(tool: Any) -> Any:
    if not isinstance(tool, dict):
        return None
    return [tool.get("name"), tool.get("type"), _hash(tool.get("input_schema"))]


def _hash(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]


def screen_digest(folder: Path, probe: str) -> str:
    """The screen of a version: the request shape of ``probe``'s run in ``folder`` (see the
    module docstring), as a SHA-256; ``error`` when the run left no report of it."""
    for report in _reports(folder):
        if not any(p.get("name") == probe for p in report.get("probes", [])):
            continue
        own = {c["id"] for c in report["claims"] if c.get("probe") == probe}
        shape: dict[str, Any] = {"checks": sorted(
            (c["id"], c.get("status")) for c in report.get("checks", [])
            if c.get("claim") in own), "requests": {}}
        lines = read_journal_lines(journal_path(folder, report), within=folder)  # type: ignore[arg-type]
        for line in lines:
            record = json.loads(line)
            if record.get("type") != "request" or record.get("probe") != probe:
                continue
            body = record.get("body") if isinstance(record.get("body"), dict) else {}
            headers = record.get("headers") or {}
            kind = f"{record.get('method')} {record.get('path')} {record.get('kind')}"
            seen = shape["requests"].setdefault(kind, {"count": 0, "shapes": []})
            seen["count"] += 1
            one = {"keys": sorted(body), "headers": sorted(headers),
                   "beta": sorted(b.strip() for b in str(headers.get("anthropic-beta", ""))
                                  .split(",") if b.strip()),
                   "tools": [_tool_shape(t) for t in body.get("tools") or []],
                   "config": {k: body[k] for k in ("thinking", "context_management",
                                                   "max_tokens", "output_config",
                                                   "tool_choice", "temperature")
                              if k in body},
                   "system_blocks": len(body["system"]) if isinstance(body.get("system"),
                                                                       list) else 1}
            if one not in seen["shapes"]:
                seen["shapes"].append(one)
        return hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()
    return SCREEN_ERROR


def _folder(work: Path, version: str, attempt: int, recorded: set[str]) -> Path:
    """A fresh report folder: neither in ``work`` (an interrupted run's folder stays; the run
    again gets another) nor named by a run of the state (made on another machine, whose work
    folder is not here: a witness is published under its run's folder name)."""
    base = work / version
    number = 1
    while (base / f"a{attempt}-{number}").exists() or \
            f"{version}/a{attempt}-{number}" in recorded:
        number += 1
    return base / f"a{attempt}-{number}"


def build(state: AlmanacState, versions: Sequence[str], claims_of: Mapping[str, Sequence[str]],
          grid: int, screen_probe: str, run_batch: RunBatch, *, work: Path,
          max_batches: int | None = None, say: Callable[[str], None] = lambda _: None,
          stats: BuildStats | None = None) -> SearchResult:
    """Run what the search needs until it needs nothing (the result is complete) or
    ``max_batches`` suite runs were made (then it is not, and a later build goes on)."""
    stats = stats or BuildStats()
    started = time.monotonic()
    try:
        while True:
            result = search(versions, claims_of, grid, state.cell, state.screen)
            if result.complete:
                return result
            groups: dict[tuple[str, int], list[Need]] = {}
            for need in result.needs:
                groups.setdefault((need.version, need.attempt), []).append(need)
            for (version, attempt), needs in groups.items():
                if max_batches is not None and stats.batches >= max_batches:
                    return search(versions, claims_of, grid, state.cell, state.screen)
                screen = any(n.probe is None for n in needs)
                probes = sorted({n.probe for n in needs if n.probe is not None}
                                | ({screen_probe} if screen else set()))
                folder = _folder(work, version, attempt,
                                 {str(r.get("folder")) for r in state.records()})
                say(f"almanac: {version} attempt {attempt}: "
                    f"{'screen + ' if screen else ''}{len(probes)} probe(s)")
                began, waited = time.monotonic(), stats.waited
                binary = run_batch(version, probes, folder)
                # how long the runs took, without waiting for the machine
                took = round(time.monotonic() - began - (stats.waited - waited), 1)
                stats.batches += 1
                stats.probe_runs += len(probes)
                stats.versions.add(version)
                where = str(folder.relative_to(work))
                common = {"version": version, "binary_sha256": binary, "folder": where,
                          "batch_s": took, "batch_probes": len(probes)}
                if screen:
                    stats.screens += 1
                    state.add({**common, "screen": screen_digest(folder, screen_probe)})
                cells = cells_from_folder(folder, claims_of, probes, say)
                for probe in probes:
                    if probe == screen_probe and screen and attempt == 1 and \
                            not any(n.probe == probe for n in needs) and \
                            state.cell(version, probe, 1) is not None:
                        continue  # already known; the screen's run adds nothing new
                    state.add({**common, "probe": probe, "attempt": attempt, **cells[probe]})
    finally:
        stats.seconds += time.monotonic() - started
