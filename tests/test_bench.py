"""scripts/bench end to end in its smoke mode: structure only, never speed."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_quick_bench_measures_both_servers_in_every_case(tmp_path: Path) -> None:
    out = tmp_path / "bench-results.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--duration", "0.5", "--warmup", "0.1",
         "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results = json.loads(out.read_text())

    assert results["ok"] is True and results["errors"] == 0
    assert results["bodies"]["count"] > 0
    assert set(results["servers"]) == {"ours", "aimock"}
    for server in results["servers"].values():
        assert server["replies"]["stream"]["events"][-1] == "message_stop"
    cases = {(c["stream"], c["concurrency"]) for c in results["cases"]}
    assert cases == {(True, 1), (False, 1), (True, 16), (False, 16)}
    for case in results["cases"]:
        for name in ("ours", "aimock"):
            measured = case["results"][name]
            assert measured["requests"] > 0 and measured["errors"] == 0, (case["name"], name)
            assert measured["p50_ms"] is not None and measured["p99_ms"] is not None
        for ratio in ("throughput_ours_over_aimock", "p50_aimock_over_ours",
                      "p99_aimock_over_ours"):
            value = case["ratios"][ratio]
            assert isinstance(value, float) and math.isfinite(value) and value > 0, (
                case["name"], ratio, value)
    assert "ratio" in done.stdout  # the table was printed
