"""The matrix: claims × client versions, from several report directories."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from probes.report import FINGERPRINT_FILE, load_report

__all__ = ["build_matrix", "render_matrix"]


def build_matrix(directories: list[Path]) -> dict[str, Any]:
    versions: list[dict[str, Any]] = []
    cells: dict[str, dict[str, dict[str, str]]] = {}
    statements: dict[str, str] = {}
    for directory in directories:
        reports = [load_report(p) for p in sorted(directory.glob("*.json"))
                   if p.name != FINGERPRINT_FILE]
        if not reports:
            continue
        client = reports[0]["client"]
        versions.append({"version": client["version"], "dir": directory.name,
                         "binary_sha256": client["binary_sha256"]})
        for report in reports:
            for claim in report["claims"]:
                statements[claim["id"]] = claim["statement"]
                cells.setdefault(claim["id"], {})[client["version"]] = {
                    "status": claim["status"], "reason": claim["reason"],
                    "report": report["report"]}
    return {"schema_version": 1, "kind": "matrix", "versions": versions,
            "claims": [{"id": cid, "statement": statements[cid], "results": cells[cid]}
                       for cid in sorted(cells)]}


SYMBOL = {"passed": "pass", "failed": "**FAIL**", "not_applicable": "n/a", "error": "error"}


def render_matrix(matrix: dict[str, Any]) -> str:
    versions = [v["version"] for v in matrix["versions"]]
    out = ["# Claims × client versions", "",
           "| claim | " + " | ".join(versions) + " |",
           "|---|" + "---|" * len(versions)]
    for claim in matrix["claims"]:
        row = [SYMBOL.get(claim["results"].get(v, {}).get("status", ""), "—") for v in versions]
        out.append(f"| `{claim['id']}` | " + " | ".join(row) + " |")
    out += ["", "Reasons for every verdict other than pass:", ""]
    for claim in matrix["claims"]:
        for version in versions:
            cell = claim["results"].get(version)
            if cell and cell["status"] != "passed":
                out.append(f"- `{claim['id']}` on {version}: {cell['status']} — {cell['reason']}")
    out += ["", "Binaries: " + "; ".join(f"{v['version']} `{v['binary_sha256']}`"
                                         for v in matrix["versions"]), ""]
    return "\n".join(out)
