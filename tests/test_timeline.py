"""Timing evidence is committed: each report names its ``<report>.timing.json``, which holds a
timeline per client run, in ms from the run's start, from which the order of requests, hook
calls and response ends can be recomputed without anything else."""

from __future__ import annotations

import json
from pathlib import Path

from probes import cli
from tests.fakeloop import FakeLoopClient
from tests.fakeloop.catalog import REPORTS


def test_a_timeline_lets_a_reader_recompute_the_order_of_a_run(tmp_path: Path) -> None:
    assert cli.run_suite((FakeLoopClient(), "1"), tmp_path, catalog=REPORTS) == 0
    report = json.loads((tmp_path / "fake-tools.json").read_text())
    timing = json.loads((tmp_path / report["timing"]).read_text())  # named by the report
    deny = next(p for p in report["probes"] if p["name"] == "pretooluse-deny")
    run = next(r for r in deny["runs"] if r["name"] == "deny")
    timeline = timing["probes"]["pretooluse-deny"]["timelines"]["deny"]
    assert timing["probes"]["pretooluse-deny"]["runs"]["deny"]["duration_ms"] > 0
    requests = [e for e in timeline if e["what"] == "request"]
    assert [e["seq"] for e in requests] == run["requests"]  # every request of the run
    ends = [e for e in timeline if e["what"] == "response_end"]
    assert [e["seq"] for e in ends] == run["requests"] and all(e["write_offsets_ms"]
                                                               for e in ends)
    times = [e["t_ms"] for e in timeline]
    assert times == sorted(times) and times[0] >= 0
    # recomputed from the file alone: the PreToolUse hook ran after the first response
    # ended and before the second request (the tool_result) was sent
    pre = next(e for e in timeline if e["what"] == "hook_start" and e["event"] == "PreToolUse")
    pre_end = next(e for e in timeline if e["what"] == "hook_end" and e["event"] == "PreToolUse")
    assert pre["tool_use_id"] == pre_end["tool_use_id"] == "toolu_bash"
    assert ends[0]["t_ms"] <= pre["t_ms"] <= pre_end["t_ms"] <= requests[1]["t_ms"]
