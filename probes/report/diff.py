"""What changed in the loop between two client versions, from their report directories.

Compares claims and checks (verdict flips, with the observed values on each
side), the request-shape fingerprints (betas, tools, body keys, event types,
result fields, prompt hashes), and the sequence of requests of every probe.
A claim upheld in A and contradicted in B is a regression; a harness error on either side is
"error", never a regression; a feature that appears in B is "introduced" (see
``probes.core.verdicts.claim_change``); a claim run on one side only is "not run".
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from probes.core.verdicts import claim_change
from probes.report.format import load_folder

__all__ = ["SIDE_KINDS", "DiffResult", "diff_directories", "render_markdown"]


class DiffResult(dict[str, Any]):
    @property
    def regressions(self) -> list[dict[str, Any]]:
        return [c for c in self["claims"] if c["change"] == "regressed"]


def _load_dir(directory: Path) -> tuple[dict[str, dict[str, Any]], dict[str, Any] | None]:
    folder = load_folder(directory)
    reports: dict[str, dict[str, Any]] = {name: dict(r) for name, r in folder.reports.items()}
    return reports, dict(folder.fingerprint) if folder.fingerprint else None


def _claim_change(a: str | None, b: str | None) -> str:
    return claim_change(a, b)


def _set_change(a: list[str] | None, b: list[str] | None) -> dict[str, list[str]]:
    left, right = set(a or []), set(b or [])
    return {"added": sorted(right - left), "removed": sorted(left - right)}


def _dict_change(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    return {
        "added": sorted(set(b) - set(a)),
        "removed": sorted(set(a) - set(b)),
        "changed": {k: {"a": a[k], "b": b[k]} for k in sorted(set(a) & set(b)) if a[k] != b[k]},
    }


def _fingerprint_changes(a: dict[str, Any] | None, b: dict[str, Any] | None) -> dict[str, Any]:
    if a is None or b is None:
        return {"missing": [side for side, f in (("a", a), ("b", b)) if f is None]}
    fa, fb = a["fingerprint"], b["fingerprint"]
    return {
        "anthropic_beta": _set_change(fa["anthropic_beta"], fb["anthropic_beta"]),
        "tools": _dict_change(fa["tools"], fb["tools"]),
        "body_keys": {kind: _set_change(fa["body_keys"].get(kind), fb["body_keys"].get(kind))
                      for kind in sorted(set(fa["body_keys"]) | set(fb["body_keys"]))},
        "headers": _dict_change(fa["headers"], fb["headers"]),
        "stream_event_types": _set_change(fa["stream_event_types"], fb["stream_event_types"]),
        "result_fields": _set_change(fa["result_fields"], fb["result_fields"]),
        "system_blocks": {"a": fa["system_blocks"], "b": fb["system_blocks"]}
        if fa["system_blocks"] != fb["system_blocks"] else {},
        "request_config": _dict_change(fa["request_config"], fb["request_config"]),
        "requests_seen": _dict_change(fa["requests_seen"], fb["requests_seen"]),
    }


SIDE_KINDS = ("warmup", "side")


def _request_sequence(report: dict[str, Any]) -> dict[str, list[str]]:
    """The loop's requests per probe; side requests and warm-ups are counted, not listed."""
    sequences = {}
    for probe in report["probes"]:
        requests = probe.get("requests", [])
        loop = [f"{r['run']}: {r['kind']} -> {r['rule'] or r['outcome']}" for r in requests
                if r.get("path") == "/v1/messages" and r.get("kind") not in SIDE_KINDS]
        side = Counter(f"{r['method']} {r['path']} {r.get('kind') or ''}".strip()
                       for r in requests
                       if r.get("path") != "/v1/messages" or r.get("kind") in SIDE_KINDS)
        sequences[probe["name"]] = loop + [f"(also {n}× {what})" for what, n in sorted(side.items())]
    return sequences


def diff_directories(a_dir: Path, b_dir: Path) -> DiffResult:
    a_reports, a_fp = _load_dir(a_dir)
    b_reports, b_fp = _load_dir(b_dir)
    claims, checks, sequences = [], [], []
    for name in sorted(set(a_reports) | set(b_reports)):
        a, b = a_reports.get(name), b_reports.get(name)
        a_claims = {c["id"]: c for c in (a or {}).get("claims", [])}
        b_claims = {c["id"]: c for c in (b or {}).get("claims", [])}
        for claim_id in sorted(set(a_claims) | set(b_claims)):
            ca, cb = a_claims.get(claim_id), b_claims.get(claim_id)
            sa, sb = (ca or {}).get("status"), (cb or {}).get("status")
            claims.append({"report": name, "id": claim_id, "a": sa, "b": sb,
                           "change": _claim_change(sa, sb),
                           "reason_a": (ca or {}).get("reason"), "reason_b": (cb or {}).get("reason")})
        a_checks = {c["id"]: c for c in (a or {}).get("checks", [])}
        b_checks = {c["id"]: c for c in (b or {}).get("checks", [])}
        for check_id in sorted(set(a_checks) | set(b_checks)):
            ka, kb = a_checks.get(check_id), b_checks.get(check_id)
            pa, pb = (ka or {}).get("passed"), (kb or {}).get("passed")
            if pa != pb:
                checks.append({"report": name, "id": check_id, "a": pa, "b": pb,
                               "expected": (kb or ka or {}).get("expected"),
                               "observed_a": (ka or {}).get("observed"),
                               "observed_b": (kb or {}).get("observed")})
        seq_a, seq_b = _request_sequence(a or {"probes": []}), _request_sequence(b or {"probes": []})
        for probe in sorted(set(seq_a) | set(seq_b)):
            left, right = seq_a.get(probe, []), seq_b.get(probe, [])
            if left != right:
                sequences.append({"report": name, "probe": probe, "count_a": len(left),
                                  "count_b": len(right), "a": left, "b": right,
                                  "order_only": sorted(left) == sorted(right)})
    first_a, first_b = next(iter(a_reports.values())), next(iter(b_reports.values()))
    egress_a = sorted({h for r in a_reports.values()
                       for h in r.get("trust", {}).get("egress_refused", [])})
    egress_b = sorted({h for r in b_reports.values()
                       for h in r.get("trust", {}).get("egress_refused", [])})
    return DiffResult({
        "a": {"dir": str(a_dir), "client": first_a["client"]},
        "b": {"dir": str(b_dir), "client": first_b["client"]},
        "claims": claims,
        "checks_flipped": checks,
        "fingerprint": _fingerprint_changes(a_fp, b_fp),
        "request_sequences": sequences,
        "egress": _set_change(egress_a, egress_b),
    })


def _show(value: Any, limit: int = 140) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    text = text.replace("\n", "\\n").replace("|", "\\|")
    return text if len(text) <= limit else text[:limit - 1] + "…"


def render_markdown(result: DiffResult) -> str:
    a, b = result["a"]["client"], result["b"]["client"]
    right = b["version"] if b["name"] == a["name"] else f"{b['name']} {b['version']}"
    out = [f"# {a['name']} {a['version']} → {right}: what changed in the loop", "",
           f"A: `{result['a']['dir']}` (sha256 `{a['binary_sha256'][:16]}…`); "
           f"B: `{result['b']['dir']}` (sha256 `{b['binary_sha256'][:16]}…`).", ""]
    regressions = result.regressions
    errors = [c for c in result["claims"] if c["change"] == "error"]
    out += [f"**{len(regressions)} claim(s) regressed** (confirmed or not observable in A, "
            f"contradicted in B); {len(errors)} a harness error on one side.", "",
            "## Claims", "", "| claim | A | B | change |", "|---|---|---|---|"]
    for c in result["claims"]:
        shown = ("regressed", "error", "fixed")
        mark = f"**{c['change']}**" if c["change"] in shown else c["change"]
        out.append(f"| `{c['id']}` | {c['a'] or '—'} | {c['b'] or '—'} | {mark} |")
    out += ["", "## Checks that flipped", ""]
    if not result["checks_flipped"]:
        out.append("None.")
    else:
        out += ["| check | A | B | expected | observed in A | observed in B |",
                "|---|---|---|---|---|---|"]
        for c in result["checks_flipped"]:
            out.append(f"| `{c['id']}` | {c['a']} | {c['b']} | {_show(c['expected'], 70)} | "
                       f"{_show(c['observed_a'])} | {_show(c['observed_b'])} |")
    egress = result["egress"]
    out += ["", "## Egress", "",
            f"Hosts the client tried to reach besides the mock: added {egress['added']}, "
            f"removed {egress['removed']}."]
    out += ["", "## Request shape", ""]
    fp = result["fingerprint"]
    if "missing" in fp:
        out.append(f"No fingerprint on side(s): {', '.join(fp['missing'])}.")
    else:
        for title, key in (("anthropic-beta", "anthropic_beta"),
                           ("stream-json event types", "stream_event_types"),
                           ("result fields", "result_fields")):
            change = fp[key]
            out.append(f"- **{title}**: added {_show(change['added'], 400)}, "
                       f"removed {_show(change['removed'], 400)}")
        tools = fp["tools"]
        out.append(f"- **tools**: added {tools['added']}, removed {tools['removed']}, "
                   f"schema changed {sorted(tools['changed'])}")
        for kind, change in fp["body_keys"].items():
            if change["added"] or change["removed"]:
                out.append(f"- **body keys ({kind})**: added {change['added']}, "
                           f"removed {change['removed']}")
        headers = fp["headers"]
        out.append(f"- **headers**: added {headers['added']}, removed {headers['removed']}, "
                   f"values changed {sorted(headers['changed'])}")
        for key, change in fp["request_config"]["changed"].items():
            out.append(f"- **{key}**: {_show(change['a'], 200)} → {_show(change['b'], 200)}")
        seen = fp["requests_seen"]
        if seen["added"] or seen["removed"] or seen["changed"]:
            out.append(f"- **requests seen**: added {seen['added']}, removed {seen['removed']}, "
                       f"counts changed {_show(seen['changed'], 400)}")
        if fp["system_blocks"]:
            out.append("- **system prompt blocks** changed:")
            for side in ("a", "b"):
                out.append(f"  - {side.upper()}: " + "; ".join(
                    f"{blk['length']} chars {blk['sha256']} {_show(blk['first_line'], 60)}"
                    for blk in fp["system_blocks"][side]))
    out += ["", "## Requests per probe", ""]
    if not result["request_sequences"]:
        out.append("Same requests, in the same order, in every probe.")
    for s in result["request_sequences"]:
        if s["order_only"]:
            out += [f"### {s['probe']}: the same {s['count_a']} requests in another order "
                    "(concurrent requests, e.g. a parent and its subagent, can race)", ""]
            continue
        out += [f"### {s['probe']} ({s['count_a']} → {s['count_b']} requests)", "",
                "| # | A | B |", "|---|---|---|"]
        for i in range(max(len(s["a"]), len(s["b"]))):
            left = s["a"][i] if i < len(s["a"]) else ""
            right = s["b"][i] if i < len(s["b"]) else ""
            out.append(f"| {i + 1} | {_show(left, 80)} | {_show(right, 80)}"
                       f"{' ≠' if left != right else ''} |")
        out.append("")
    return "\n".join(out) + "\n"
