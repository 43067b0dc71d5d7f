"""A client flooding the collector from inside its sandbox: the report stays small and the
flood is the client's account, never a harness error.

The client's own Bash tool reaches the collector's socket (``/run/loopprobe/record.sock``,
read-only mounted but connectable) and floods it: 800 KB of ``1\\n`` on an MCP relay stream,
20,000 connections with a bad header, 140 idle connections held at once. The run's claims
are judged as if nothing happened (``harness.evidence-intact`` holds), the flood is listed
by ``client.reporter-faults`` (deciding no verdict) with what was not kept counted, and
``loopprobe check`` exits 0, not 2 ("never your failure"). The fake loop's Bash shows it in
the fast tier through ``loopprobe check``; the real Claude Code's in the client tier.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from probes.clients.claude_code import ClaudeCode
from probes.core.probe import ReportSpec
from probes.report.build import build_report, write_report
from probes.run.containment import Bubblewrap
from probes.run.runner import run_probe
from tests.conftest import bubblewrap
from tests.fixtures.attack_catalog import attack_probe

MiB = 1 << 20
SOCKET = "/run/loopprobe/record.sock"


def flood_script(*, mcp_lines: int = 400_000, bad_headers: int = 20_000, idle: int = 140,
                 hold: float = 3.0) -> str:
    """Python the client's Bash runs: each flood in turn, then ``idle`` connections held
    ``hold`` seconds at once."""
    return f"""\
import socket, time
def connect():
    channel = socket.socket(socket.AF_UNIX)
    channel.connect({SOCKET!r})
    return channel
relay = connect()
relay.sendall(b'{{"stream": "mcp", "run": "run1"}}\\n' + b"1\\n" * {mcp_lines})
relay.shutdown(socket.SHUT_WR)
relay.recv(1)
for _ in range({bad_headers}):
    with connect() as channel:
        channel.sendall(b'{{"stream": "telemetry"}}\\n')
held = [connect() for _ in range({idle})]
time.sleep({hold})
print("flood:done", flush=True)
"""


def _case(tmp_path: Path, script: str) -> Path:
    path = tmp_path / "cases" / "cases.yaml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump({
        "loopprobe": "cases/1", "name": "flood", "title": "A client flooding the collector",
        "cases": [{"name": "one", "title": "One", "prompt": "run the script",
                   "model": [{"content": [{"type": "tool_use", "name": "Bash", "input": {
                       "command": f"python3 - <<'PY'\n{script}PY"}}]}, {"text": "done"}],
                   "expect": [{"tool_called": {"name": "Bash"}}]}]}))
    return path


def test_140_idle_reporter_connections_are_the_client_s_act_and_check_exits_0(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fails on the old code: harness.evidence-intact failed ("more than 128 reporters at
    once: refused"), the expectation became a harness problem and check exited 2."""
    from probes.cli import main
    monkeypatch.setenv("LOOPPROBE_CLIENTS", "fake-loop=tests.fakeloop:FakeLoopClient")
    case = _case(tmp_path, flood_script(mcp_lines=2000, bad_headers=300))
    out = tmp_path / "out"
    code = main(["check", str(case), "--client", "fake-loop", "--versions", "1",
                 "--out", str(out)])
    assert code == 0, json.loads((out / "check.json").read_text())["results"]
    report = json.loads((out / "1" / "flood.json").read_text())
    checks = {c["id"]: c for c in report["checks"]}
    assert checks["one.harness.evidence-intact"]["passed"], checks["one.harness.evidence-intact"]
    client = checks["one.client.reporter-faults"]
    assert not client["passed"] and client["claim"] is None
    observed = json.dumps(client["observed"])
    assert "reporters at once" in observed and "not kept" in observed
    assert [c["status"] for c in report["claims"]] == ["confirmed"]
    assert [n["what"] for n in report["not_kept"]] == ["client faults (header)",
                                                       "client faults (mcp)"]
    guide = (out / "1" / "EVIDENCE.md").read_text()
    assert "**Not kept:**" in guide and report["not_kept"][1]["said"] in guide


@pytest.mark.client
def test_the_real_client_s_flood_of_the_collector_leaves_a_small_report(
        claude_code_binary: Any, tmp_path: Path) -> None:
    """Fails on the old code: the faults were kept one by one (400,000 of the MCP stream
    alone: a 55 MiB faults file, a 93 MiB report) and the run was a harness error."""
    box: Bubblewrap = bubblewrap()
    outcome = run_probe(attack_probe(f"python3 - <<'PY'\n{flood_script()}PY\n"
                                     "echo attack:done\n", runs=1, timeout=300),
                        ClaudeCode(), claude_code_binary, tmp_path / "work", containment=box)
    assert outcome.evidence is not None, outcome.error
    run = outcome.evidence.runs["run1"]
    assert "flood:done" in json.dumps(outcome.evidence.journal), run.stdout[-2000:]
    assert outcome.sandbox is not None
    assert (outcome.sandbox / "evidence" / "collector-faults.jsonl").stat().st_size < 1 * MiB
    left_out = {n["what"]: n for n in outcome.evidence.not_kept}
    assert left_out["client faults (mcp)"]["more"] > 399_000, left_out
    assert left_out["client faults (header)"]["more"] > 19_000, left_out
    checks = {c.id.split(".", 1)[1]: c for c in outcome.checks}
    assert checks["harness.evidence-intact"].passed, checks["harness.evidence-intact"].observed
    assert not checks["client.reporter-faults"].passed
    observed = json.dumps(checks["client.reporter-faults"].observed)
    assert left_out["client faults (mcp)"]["said"] in observed
    assert "reporters at once" in observed
    report, lines, timing = build_report(ReportSpec("flood", "flood", (outcome.probe,)),
                                         [outcome], claude_code_binary)
    written = write_report(report, lines, tmp_path / "report", timing)
    assert written.stat().st_size < 1 * MiB
    assert [c["status"] for c in report["claims"]] == ["confirmed"]
    assert report["status"] != "error"
