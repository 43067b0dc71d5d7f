"""``counterfactuals.json``: what each counterfactual did on this client version.

A claim's counterfactuals are the variants of its probe in which the stated behaviour cannot
happen. "Shown able to fail" is a fact about one binary: the variant ran to its end (no harness
failure), reached the mechanism, and a behaviour check of every claim it names failed, with
the value observed. The file keeps, per counterfactual and claim, the verdict the variant's
evidence gives and the checks that failed, normalised like the reports (no machine paths),
so a reader of a version folder sees on which evidence each "able to fail" rests.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from probes.clients.base import ClientBinary
from probes.core.files import write_json
from probes.core.outcome import ProbeOutcome
from probes.core.probe import Counterfactual, Probe
from probes.core.verdicts import AGAINST, decide_claim, is_harness_failure
from probes.report.format import COUNTERFACTUALS_FILE, ReportError, load_json_file
from probes.report.normalise import Normaliser

__all__ = [
    "COUNTERFACTUALS_FILE",
    "COUNTERFACTUALS_SCHEMA_VERSION",
    "claim_counterfactuals",
    "counterfactual_entry",
    "load_counterfactuals",
    "merge_counterfactuals",
    "shown_able_to_fail",
    "write_counterfactuals",
]

COUNTERFACTUALS_SCHEMA_VERSION = 1
_OBSERVED = 300  # characters of an observed value kept


def _short(value: Any) -> Any:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True,
                                                            ensure_ascii=False)
    return value if len(text) <= _OBSERVED else text[:_OBSERVED] + "…"


def counterfactual_entry(probe: Probe, counterfactual: Counterfactual,
                         outcome: ProbeOutcome) -> dict[str, Any]:
    """One counterfactual's run, judged by the reports' rule: ``able_to_fail`` when every
    claim it names came out contradicted (or differing from its baseline) — not absent, not
    reached, not an error."""
    norm = Normaliser(outcome.evidence)
    variant = f"{outcome.probe.name}."
    # named as the original probe's checks, which a reader finds in the reports
    checks = [{**norm(c.to_json()), "id": f"{probe.name}.{c.id.removeprefix(variant)}"}
              for c in outcome.checks]
    claims: dict[str, Any] = {}
    for claim in probe.claims:
        if claim.id not in counterfactual.claims:
            continue
        own = [c for c in checks if c["claim"] == claim.id]
        verdict, reason = decide_claim(own, checks, not_applicable=outcome.not_applicable,
                                       absent=outcome.absent,
                                       error=norm(outcome.error) if outcome.error else None,
                                       baseline=claim.source.kind == "baseline")
        claims[claim.id] = {
            "verdict": verdict, "reason": reason,
            "failed_checks": [{"id": c["id"], "expected": _short(c["expected"]),
                               "observed": _short(c["observed"])}
                              for c in own if c["status"] == "failed"]}
    harness = [{"id": c["id"], "observed": _short(c["observed"])}
               for c in checks if is_harness_failure(c)]
    return {"probe": probe.name, "counterfactual": counterfactual.name,
            "description": counterfactual.description, "claims": claims,
            "harness_failures": harness,
            "able_to_fail": bool(claims) and all(c["verdict"] in AGAINST
                                                 for c in claims.values())}


def write_counterfactuals(out: Path, binary: ClientBinary,
                          entries: list[dict[str, Any]]) -> Path:
    entries = sorted(entries, key=lambda e: (e["probe"], e["counterfactual"]))
    return write_json(out / COUNTERFACTUALS_FILE, {
        "schema_version": COUNTERFACTUALS_SCHEMA_VERSION, "kind": "counterfactuals",
        "client": {"name": binary.name, "version": binary.version,
                   "binary_sha256": binary.sha256},
        "counterfactuals": entries,
        "able_to_fail": sum(e["able_to_fail"] for e in entries), "run": len(entries)})


def merge_counterfactuals(out: Path, binary: ClientBinary, entries: list[dict[str, Any]],
                          probes_run: set[str]) -> Path:
    """``entries`` written over the folder's earlier record of the same binary: the probes run
    now replace theirs, the others' are kept (a record of another binary is replaced)."""
    try:
        earlier = load_counterfactuals(out)
    except ReportError:
        earlier = None
    if earlier is not None and earlier["client"].get("binary_sha256") == binary.sha256:
        entries = [e for e in earlier["counterfactuals"] if e.get("probe") not in probes_run] \
            + entries
    return write_counterfactuals(out, binary, entries)


def load_counterfactuals(folder: Path) -> dict[str, Any] | None:
    """The folder's counterfactuals.json, or None when its counterfactuals were not run."""
    path = folder / COUNTERFACTUALS_FILE
    if not path.exists() and not path.is_symlink():
        return None
    data = load_json_file(path, "counterfactuals", (COUNTERFACTUALS_SCHEMA_VERSION,),
                          within=folder)
    if not isinstance(data.get("counterfactuals"), list):
        raise ReportError(f"{path}: expected a list under 'counterfactuals'")
    return data


def shown_able_to_fail(record: dict[str, Any] | None, claim: str) -> list[dict[str, Any]]:
    """The counterfactuals of ``record`` that made ``claim`` fail on that binary."""
    if record is None:
        return []
    return [e for e in record["counterfactuals"]
            if e["claims"].get(claim, {}).get("verdict") in AGAINST]


def claim_counterfactuals(record: dict[str, Any] | None, claim: Mapping[str, Any]) -> dict[str, Any]:
    """What a reader is told of a claim's counterfactuals: those declared, whether they were
    run on this folder's binary, and what each did there (its verdict for the claim and the
    check that decided it)."""
    declared = list(claim.get("counterfactuals") or [])
    if record is None:
        return {"declared": declared, "run": False, "results": []}
    results = []
    for entry in record["counterfactuals"]:
        outcome = entry["claims"].get(claim["id"])
        if outcome is None:
            continue
        failed = outcome.get("failed_checks") or []
        results.append({"description": entry["description"], "verdict": outcome["verdict"],
                        "able_to_fail": outcome["verdict"] in AGAINST,
                        "deciding": (f"{failed[0]['id']} observed {failed[0]['observed']}"
                                     if failed else outcome.get("reason", ""))})
    return {"declared": declared, "run": bool(results), "results": results}
