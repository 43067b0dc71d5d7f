"""The client's output is input, shown on the real client: its own Bash tool prints into the
stdout and stderr the harness reads (``/proc/<client>/fd/1``, same user, same namespaces).

- 300 MB on stdout and 50 MB on stderr: kept up to the cap, the rest counted; the run ends
  and the harness's memory stays flat (it took 1.9 GB and wrote a 306 MB report before);
- control requests of impossible shapes on a streamed run: each recorded as the client's
  protocol fault (``client.<run>.protocol``), no harness error (an AttributeError before);
- 20,000 control requests, then the client stopped so it never reads the answers: the run
  still ends at its timeout (the harness's answering ``write`` blocked forever before).
"""

from __future__ import annotations

import json
import resource
import time
from pathlib import Path
from typing import Any

import pytest

from probes.clients.claude_code import ClaudeCode
from probes.core.outcome import ProbeOutcome
from probes.core.probe import ReportSpec
from probes.report.build import build_report
from probes.run.pipes import OUTPUT_CAP
from probes.run.runner import run_probe
from tests.fixtures.attack_catalog import attack_probe, client_output_script
from tests.test_sandbox_files import _bubblewrap

pytestmark = pytest.mark.client


def _run(binary: Any, tmp_path: Path, action: str, *, streamed: bool,
         timeout: float = 120) -> ProbeOutcome:
    probe = attack_probe(client_output_script(action), runs=1, streamed=streamed,
                         timeout=timeout, name=f"output-{action}")
    return run_probe(probe, ClaudeCode(), binary, tmp_path, containment=_bubblewrap())


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def test_a_flood_of_output_is_kept_up_to_the_cap(claude_code_binary: Any,
                                                 tmp_path: Path) -> None:
    before = _peak_rss_mib()
    outcome = _run(claude_code_binary, tmp_path, "flood", streamed=False)
    assert outcome.evidence is not None, outcome.error
    run = outcome.evidence.runs["run1"]
    assert not run.timed_out
    assert len(run.stdout.encode()) <= OUTPUT_CAP and len(run.stderr.encode()) <= OUTPUT_CAP
    assert run.stdout_dropped >= 314572800 - OUTPUT_CAP
    assert run.stderr_dropped >= 52428800 - OUTPUT_CAP
    assert _peak_rss_mib() - before < 400, "the harness held the flood in memory"
    report, _, _ = build_report(ReportSpec("flood", "flood", (outcome.probe,)), [outcome],
                                claude_code_binary)
    shown = json.dumps(report)
    assert len(shown) < 3 * OUTPUT_CAP + 1_000_000
    entry = report["probes"][0]["runs"][0]
    assert entry["stdout_dropped_bytes"] == run.stdout_dropped


def test_malformed_control_requests_are_the_clients_fault(claude_code_binary: Any,
                                                          tmp_path: Path) -> None:
    outcome = _run(claude_code_binary, tmp_path, "malformed", streamed=True)
    assert outcome.error is None and outcome.evidence is not None
    run = outcome.evidence.runs["run1"]
    faults = [f["fault"] for f in run.protocol_faults]
    assert faults == [
        'request: expected an object, got a string: "x"',
        "request_id: expected a string or a number, got an array: [1]; request.subtype: "
        "expected a string, got a number: 5",
        'can_use_tool request.input: expected an object, got a string: "rm"'], faults
    protocol = next(c for c in outcome.checks if c.id.endswith("client.run1.protocol"))
    assert not protocol.passed and len(protocol.observed) == 3


def test_a_client_that_never_reads_its_answers_cannot_hang_the_harness(
        claude_code_binary: Any, tmp_path: Path) -> None:
    started = time.monotonic()
    outcome = _run(claude_code_binary, tmp_path, "stall", streamed=True, timeout=30)
    assert time.monotonic() - started < 30 + 30
    assert outcome.evidence is not None, outcome.error
    run = outcome.evidence.runs["run1"]
    assert run.timed_out
    assert run.stdout.count('"type":"control_request"') >= 10_000, "the attack ran"
    assert any(entry.get("write_error") or entry.get("not_written")
               for entry in run.stdin), "some answers could not be written"
