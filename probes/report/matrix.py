"""The matrix: claims × client versions, from several report directories.

Columns are client versions keyed by kind and version (``claude-code@2.1.235``), so two
client kinds that share a version number stay apart.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from probes.clients.base import ClientKey
from probes.core.verdicts import LABELS
from probes.report.format import load_folder

__all__ = ["MATRIX_SCHEMA_VERSION", "READABLE_MATRIX_VERSIONS", "SYMBOL", "build_matrix", "render_matrix"]

# 2: columns keyed by client kind and version; 3: claim verdicts (confirmed, contradicted, …);
# 4: absent, not_reached and differs_from_baseline cells
MATRIX_SCHEMA_VERSION = 4
READABLE_MATRIX_VERSIONS = (3, 4)


def build_matrix(directories: list[Path]) -> dict[str, Any]:
    versions: list[dict[str, Any]] = []
    cells: dict[str, dict[str, dict[str, str]]] = {}
    statements: dict[str, str] = {}
    for directory in directories:
        folder = load_folder(directory, require_reports=False)
        if not folder.reports:
            continue
        client = folder.client
        label = ClientKey(client["name"], client["version"]).label
        versions.append({"client": label, "kind": client["name"], "version": client["version"],
                         "dir": directory.name, "binary_sha256": client["binary_sha256"]})
        for report in folder.reports.values():
            for claim in report["claims"]:
                statements[claim["id"]] = claim["statement"]
                cells.setdefault(claim["id"], {})[label] = {
                    "status": claim["status"], "reason": claim["reason"],
                    "report": report["report"]}
    return {"schema_version": MATRIX_SCHEMA_VERSION, "kind": "matrix", "versions": versions,
            "claims": [{"id": cid, "statement": statements[cid], "results": cells[cid]}
                       for cid in sorted(cells)]}


SYMBOL = {**LABELS, "contradicted": "**contradicted**",
          "differs_from_baseline": "**differs from baseline**", "not_applicable": "n/a"}


def render_matrix(matrix: dict[str, Any]) -> str:
    versions = [v["client"] for v in matrix["versions"]]
    out = ["# Claims × client versions", "",
           "— : the claim was not run on that version (its reports predate the probe).", "",
           "| claim | " + " | ".join(versions) + " |",
           "|---|" + "---|" * len(versions)]
    for claim in matrix["claims"]:
        row = [SYMBOL.get(claim["results"].get(v, {}).get("status", ""), "—") for v in versions]
        out.append(f"| `{claim['id']}` | " + " | ".join(row) + " |")
    out += ["", "Reasons for every verdict other than confirmed:", ""]
    for claim in matrix["claims"]:
        for version in versions:
            cell = claim["results"].get(version)
            if cell and cell["status"] != "confirmed":
                out.append(f"- `{claim['id']}` on {version}: {cell['status']} — {cell['reason']}")
    out += ["", "Binaries: " + "; ".join(f"{v['client']} `{v['binary_sha256']}`"
                                         for v in matrix["versions"]), ""]
    return "\n".join(out)
