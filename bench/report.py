"""Numbers from load results, ratios against aimock and the floor, the printed table and the
JSON file."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import orjson

from bench.load import LoadResult

__all__ = ["FLOOR", "OURS", "PEER", "SERVERS", "case_ratios", "merge", "percentile", "summarize",
           "table", "write_json"]

OURS, PEER, FLOOR = "ours", "aimock", "floor"
SERVERS = (OURS, PEER, FLOOR)  # the order of the first round; each round starts one later


def percentile(sorted_values: list[float], fraction: float) -> float:
    """Nearest-rank percentile of an ascending list (NaN when empty)."""
    if not sorted_values:
        return math.nan
    rank = max(1, math.ceil(fraction * len(sorted_values)))
    return sorted_values[rank - 1]


def merge(results: list[LoadResult]) -> LoadResult:
    """Several rounds of one server and case as one measurement."""
    merged = LoadResult(server_cpu=0.0)
    for r in results:
        merged.requests += r.requests
        merged.elapsed += r.elapsed
        merged.generator_cpu += r.generator_cpu
        merged.bytes_received += r.bytes_received
        merged.latencies.extend(r.latencies)
        for kind, count in r.error_kinds.items():
            merged.errors += count
            merged.error_kinds[kind] = merged.error_kinds.get(kind, 0) + count
        if r.server_cpu is None or merged.server_cpu is None:
            merged.server_cpu = None
        else:
            merged.server_cpu += r.server_cpu
    return merged


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None or math.isnan(value) else round(value, digits)


def summarize(result: LoadResult, rounds: list[LoadResult]) -> dict[str, Any]:
    latencies = sorted(result.latencies)
    per_request = 1000 / result.requests if result.requests else math.nan
    elapsed = result.elapsed or math.nan
    return {
        "requests": result.requests,
        "errors": result.errors,
        "error_kinds": result.error_kinds,
        "seconds": _round(result.elapsed),
        "requests_per_s": _round(result.requests / elapsed, 1),
        "p50_ms": _round(percentile(latencies, 0.50) * 1000),
        "p99_ms": _round(percentile(latencies, 0.99) * 1000),
        "mean_ms": _round(sum(latencies) / len(latencies) * 1000 if latencies else math.nan),
        "server_cpu_ms_per_request": _round(
            result.server_cpu * per_request if result.server_cpu is not None else None),
        "server_cpu_share": _round(
            result.server_cpu / elapsed if result.server_cpu is not None else None),
        "generator_cpu_ms_per_request": _round(result.generator_cpu * per_request),
        "generator_cpu_share": _round(result.generator_cpu / elapsed),
        "response_bytes_mean": round(result.bytes_received / result.requests)
        if result.requests else None,
        "rounds_requests_per_s": [_round(r.requests / r.elapsed, 1) if r.elapsed else None
                                  for r in rounds],
    }


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or denominator is None or denominator == 0:
        return None
    return round(numerator / denominator, 3)


def case_ratios(ours: dict[str, Any], other: dict[str, Any], name: str = PEER) -> dict[str, Any]:
    """Ours against the server ``name``; every ratio reads "higher is better for ours", 1.0 is
    parity (against the floor, the share of the bare server stack's speed ours reaches)."""
    return {
        f"throughput_ours_over_{name}": _ratio(ours["requests_per_s"], other["requests_per_s"]),
        f"p50_{name}_over_ours": _ratio(other["p50_ms"], ours["p50_ms"]),
        f"p99_{name}_over_ours": _ratio(other["p99_ms"], ours["p99_ms"]),
        f"server_cpu_per_request_{name}_over_ours": _ratio(
            other["server_cpu_ms_per_request"], ours["server_cpu_ms_per_request"]),
    }


def _cell(value: Any, width: int, digits: int = 2) -> str:
    if value is None:
        text = "-"
    elif isinstance(value, float):
        text = f"{value:.{digits}f}"
    else:
        text = str(value)
    return text.rjust(width)


def _spread(by_round: list[float | None]) -> str:
    values = [v for v in by_round if v is not None]
    if len(values) < 2:
        return ""
    return f"   req/s ratio by round {min(values):.2f}..{max(values):.2f}"


def table(cases: list[dict[str, Any]]) -> str:
    """One row per server and case, then one ratios row per other server ("vs aimock",
    "vs floor": ours/other req/s, other/ours ms)."""
    header = (f"{'case':<14}{'server':<11}{'req/s':>10}{'p50 ms':>9}{'p99 ms':>9}"
              f"{'errors':>8}{'srv cpu ms/req':>16}{'gen cpu':>9}{'journal B/req':>15}")
    lines = [header, "-" * len(header)]
    for case in cases:
        for name in SERVERS:
            if name not in case["results"]:
                continue
            r = case["results"][name]
            lines.append(
                f"{case['name']:<14}{name:<11}{_cell(r['requests_per_s'], 10, 1)}"
                f"{_cell(r['p50_ms'], 9)}{_cell(r['p99_ms'], 9)}{_cell(r['errors'], 8)}"
                f"{_cell(r['server_cpu_ms_per_request'], 16, 3)}"
                f"{_cell(r['generator_cpu_share'], 9)}"
                f"{_cell(r.get('journal_bytes_per_request'), 15, 0) if name == OURS else ''}")
        ratios = case["ratios"]
        for other in (PEER, FLOOR):
            if f"throughput_ours_over_{other}" not in ratios:
                continue
            lines.append(
                f"{case['name']:<14}{'vs ' + other:<11}"
                f"{_cell(ratios[f'throughput_ours_over_{other}'], 10, 3)}"
                f"{_cell(ratios[f'p50_{other}_over_ours'], 9, 3)}"
                f"{_cell(ratios[f'p99_{other}_over_ours'], 9, 3)}{'':>8}"
                f"{_cell(ratios[f'server_cpu_per_request_{other}_over_ours'], 16, 3)}"
                f"{_spread(ratios.get(f'throughput_ours_over_{other}_by_round', []))}")
        lines.append("")
    lines.append("vs rows: req/s ours/other; p50, p99 and server CPU per request other/ours "
                 "(every ratio: > 1 means ours is better, 1 is parity)")
    lines.append("floor: a bare ASGI app on our uvicorn configuration sending our reply bytes "
                 "(vs floor: the share of it ours reaches)")
    lines.append("gen cpu: share of one core the load generator used (near 1.0: it was the limit)")
    lines.append("journal B/req: bytes our mock's journal grew by per request answered (the "
                 "others keep no journal on disk)")
    return "\n".join(lines)


def write_json(path: Path, document: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n")
