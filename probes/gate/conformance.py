"""The conformance table: the generic agent-loop claims × client versions, scored and tiered.

Each client version's folder of agent-loop conformance reports (``loopprobe conformance``
writes ``OUT/conformance/<kind>-<version>/``) gives one column of verdicts. Per column a
**score**: the share of its applicable claims confirmed, where a claim is applicable unless
its verdict is *not applicable* (the kind lacks the capability) or *error* (the harness
failed: never counted against a client); and a **tier**, as the MCP conformance suite tiers
SDKs: ``tier 1`` at 100 %, ``tier 2`` at 80 % or more, none below. Per kind the oldest and
newest versions probed and the claims whose verdict changed between them (``claim_change``).

A baseline file (``probes.gate.baseline``'s format, with ``case`` naming the client kind and
``expectation`` the claim id) lists each kind's known failures: a listed failure passes the
gate, a listed entry whose claim is confirmed is stale and fails it, as in ``loopprobe
check`` (``probes.gate.gate.outcome_of``). ``conformance.json`` (schema ``conformance``)
holds it all; ``CONFORMANCE.md`` says it in Markdown.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from probes.core.verdicts import AGAINST, LABELS, claim_change
from probes.gate.baseline import Baseline
from probes.gate.gate import outcome_of
from probes.report.format import load_folder, verdict
from probes.report.schemas import ConformanceFile

__all__ = ["CONFORMANCE_FILE", "CONFORMANCE_MD", "CONFORMANCE_REPORT",
           "CONFORMANCE_SCHEMA_VERSION", "CONFORMANCE_SUBDIR", "NOT_SCORED",
           "build_conformance", "render_conformance", "tier_of"]

CONFORMANCE_FILE = "conformance.json"
CONFORMANCE_MD = "CONFORMANCE.md"
CONFORMANCE_SUBDIR = "conformance"
CONFORMANCE_REPORT = "agent-loop-conformance"
CONFORMANCE_SCHEMA_VERSION = 1
NOT_SCORED = ("not_applicable", "error")  # never counted for or against a client


def tier_of(score: float | None) -> str | None:
    """``tier 1`` (100 %), ``tier 2`` (>= 80 %), else None; None too with nothing scored."""
    if score is None:
        return None
    return "tier 1" if score >= 1.0 else "tier 2" if score >= 0.8 else None


def _version_key(version: str) -> tuple[int, Any]:
    try:
        return (0, Version(version))
    except InvalidVersion:
        return (1, version)


def _column(folder: Path) -> tuple[dict[str, Any], dict[str, dict[str, Any]],
                                   dict[str, dict[str, Any]]]:
    """A folder's client, its claims' cells, and the claims' statements and sources."""
    loaded = load_folder(folder)
    report = loaded.reports.get(CONFORMANCE_REPORT)
    if report is None:
        raise ValueError(f"{folder}: no {CONFORMANCE_REPORT}.json (run loopprobe conformance)")
    cells, claims = {}, {}
    checks = {c["id"]: c for c in report["checks"]}
    for claim in report["claims"]:
        failed = [checks[i] for i in claim.get("checks", []) if i in checks
                  and not checks[i].get("passed")]
        cells[claim["id"]] = {"status": verdict(claim["status"]), "reason": claim["reason"],
                              "probe": claim["probe"],
                              "check": failed[0]["id"] if failed else None}
        claims[claim["id"]] = {"id": claim["id"], "statement": claim["statement"],
                               "citation": claim["source"]["citation"]}
    return dict(report["client"]), cells, claims


def build_conformance(folders: Sequence[Path], baseline: Baseline | None = None
                      ) -> ConformanceFile:
    """The table of the given client version folders (each ``<kind>-<version>``)."""
    columns = []
    claims: dict[str, dict[str, Any]] = {}
    for folder in folders:
        client, cells, statements = _column(folder)
        claims.update({k: v for k, v in statements.items() if k not in claims})
        columns.append((client, cells, folder))
    columns.sort(key=lambda c: (c[0]["name"], _version_key(c[0]["version"])))
    clients = []
    for client, cells, folder in columns:
        scored = [c["status"] for c in cells.values() if c["status"] not in NOT_SCORED]
        confirmed = scored.count("confirmed")
        score = round(confirmed / len(scored), 4) if scored else None
        clients.append({"label": f"{client['name']}@{client['version']}",
                        "kind": client["name"], "version": client["version"],
                        "dir": folder.name, "binary_sha256": client["binary_sha256"],
                        "entry": client["entry"], "applicable": len(scored),
                        "confirmed": confirmed, "score": score, "tier": tier_of(score),
                        "cells": cells})
    kinds = []
    for kind in dict.fromkeys(c["kind"] for c in clients):
        mine = [c for c in clients if c["kind"] == kind]
        oldest, newest = mine[0], mine[-1]
        deltas = [{"claim": claim, "oldest": oldest["cells"].get(claim, {}).get("status"),
                   "newest": newest["cells"].get(claim, {}).get("status"),
                   "change": claim_change(oldest["cells"].get(claim, {}).get("status"),
                                          newest["cells"].get(claim, {}).get("status"))}
                  for claim in claims]
        kinds.append({"kind": kind, "oldest": oldest["version"], "newest": newest["version"],
                      "versions": [c["version"] for c in mine],
                      "deltas": [d for d in deltas if d["change"] != "same"]})
    gate = _judge(clients, baseline)
    return {"schema_version": CONFORMANCE_SCHEMA_VERSION, "kind": "conformance",
            "report": CONFORMANCE_REPORT, "claims": list(claims.values()),
            "clients": clients, "kinds": kinds, **gate}  # type: ignore[typeddict-item]


def _judge(clients: list[dict[str, Any]], baseline: Baseline | None) -> dict[str, Any]:
    rows, used = [], set()
    for client in clients:
        for claim, cell in client["cells"].items():
            entry = baseline.entry_for(client["kind"], claim, client["version"]) \
                if baseline else None
            if entry is not None and baseline is not None:
                used.add(baseline.expected_failures.index(entry))
            outcome = outcome_of(cell["status"], entry is not None)
            if outcome != "passed":
                rows.append({"client": client["label"], "claim": claim, "outcome": outcome,
                             "verdict": cell["status"],
                             "baseline_reason": entry.reason if entry else None})
    unused = [e.model_dump() for i, e in enumerate(baseline.expected_failures)
              if i not in used] if baseline else []
    failing = [r for r in rows if r["outcome"] in ("failed", "stale")]
    judged = any(c["cells"] for c in clients)
    return {"baseline": baseline.source if baseline else None, "gate": rows,
            "unused_baseline": unused, "exit_code": 2 if not judged else 1 if failing else 0}


def _percent(score: float | None) -> str:
    return "—" if score is None else f"{score * 100:.0f} %"


def _cell(status: str | None) -> str:
    if status is None:
        return "—"
    label = LABELS.get(status, status.replace("_", " "))
    return f"**{label}**" if status in AGAINST else label


def render_conformance(table: ConformanceFile) -> str:
    """``CONFORMANCE.md``: the table, scores and tiers, deltas, the gate, bug reports."""
    clients = table["clients"]
    lines = ["# Agent-loop conformance", "",
             "What every agent loop owes the Messages API (`probes/catalog/agent_loop/`, each "
             "claim citing its documentation), checked on each client version against the "
             "scripted mock. Generated by `loopprobe conformance --out reports`; do not edit. "
             "Score: the share of a client's applicable claims confirmed (not applicable and "
             "harness errors never count); tier 1: 100 %, tier 2: ≥ 80 % (the MCP conformance "
             "suite's tiers).", "",
             "| claim | " + " | ".join(f"`{c['label']}`" for c in clients) + " |",
             "|---|" + "---|" * len(clients)]
    for claim in table["claims"]:
        lines.append(f"| `{claim['id']}` | " + " | ".join(
            _cell(c["cells"][claim["id"]]["status"] if claim["id"] in c["cells"] else None)
            for c in clients) + " |")
    lines.append("| **score** | " + " | ".join(
        f"{_percent(c['score'])} ({c['confirmed']}/{c['applicable']})" for c in clients) + " |")
    lines.append("| **tier** | " + " | ".join(c["tier"] or "—" for c in clients) + " |")
    lines += ["", "## Oldest and newest version of each client", "",
              "| client | oldest | newest | versions probed | changed between them |",
              "|---|---|---|---|---|"]
    for kind in table["kinds"]:
        changed = "; ".join(f"`{d['claim']}`: {d['oldest']} → {d['newest']} ({d['change']})"
                            for d in kind["deltas"]) or "nothing"
        lines.append(f"| {kind['kind']} | {kind['oldest']} | {kind['newest']} | "
                     f"{', '.join(kind['versions'])} | {changed} |")
    lines += ["", "## Claims", ""]
    for claim in table["claims"]:
        lines.append(f"- `{claim['id']}`: {claim['statement']} Source: {claim['citation']}")
    lines += ["", "## The gate", "",
              f"Baseline: {'`' + table['baseline'] + '`' if table['baseline'] else 'none'}. "
              "A listed failure passes; a listed entry whose claim is confirmed is stale and "
              f"fails. Exit code {table['exit_code']}.", ""]
    if table["gate"]:
        lines += ["| client | claim | verdict | outcome | baseline reason |",
                  "|---|---|---|---|---|"]
        lines += [f"| `{r['client']}` | `{r['claim']}` | {r['verdict']} | {r['outcome']} | "
                  f"{r['baseline_reason'] or ''} |" for r in table["gate"]]
    else:
        lines.append("Every claim confirmed on every client.")
    if table["unused_baseline"]:
        lines += ["", "Baseline entries no client judged here: " + "; ".join(
            f"{e['case']} {e['expectation']} ({e['versions']})" for e in table["unused_baseline"])]
    # in the claims' order: the file's cells are keyed, and written with sorted keys
    against = [(c, claim["id"]) for c in clients for claim in table["claims"]
               if claim["id"] in c["cells"] and c["cells"][claim["id"]]["status"] in AGAINST]
    if against:
        lines += ["", "## Bug reports", "",
                  "Each contradicted cell as a self-contained report for the client's tracker:", ""]
        lines += [f"- `loopprobe explain {claim} --client {c['label']}`" for c, claim in against]
    lines += ["", "## Binaries", "", "| client | folder | file cited | SHA-256 |",
              "|---|---|---|---|"]
    lines += [f"| `{c['label']}` | `{CONFORMANCE_SUBDIR}/{c['dir']}` | `{c['entry']}` | "
              f"`{c['binary_sha256']}` |" for c in clients]
    return "\n".join(lines) + "\n"
