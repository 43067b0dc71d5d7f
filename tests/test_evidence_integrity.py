"""Evidence the client cannot touch: forging attempts from inside a run fail and are recorded.

The client's Bash tool makes an egress attempt of its own, then tries to append a request to
every place a journal was or could be kept, to erase the egress log, and to pose as the
sandbox's egress reporter on the collector's socket. Contained, the journal holds only what
the mock recorded, the attempt stays recorded, and the forged reporter is refused and listed
(``client.reporter-posers`` fails naming it; ``harness.evidence-intact`` holds: nothing was
lost). Uncontained (``--no-sandbox``, where no first
process claims the egress stream), the forged report is accepted: the assertions can fail.
The real client runs the same attack in ``tests/test_sandbox_attacks.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from probes.clients.base import ClientBinary
from probes.core.outcome import ProbeOutcome
from probes.core.probe import ReportSpec
from probes.report.build import build_report, write_report
from probes.run.containment import (
    PROXY_PORT,
    Bubblewrap,
    NoContainment,
)
from probes.run.runner import run_probe
from tests.conftest import bubblewrap
from tests.fakeloop import FakeLoopClient
from tests.fixtures.attack_catalog import attack_probe, forge_script


def _bubblewrap() -> Bubblewrap:
    return bubblewrap()  # type: ignore[no-any-return]


def _forge(tmp_path: Path, containment: object) -> ProbeOutcome:
    client = FakeLoopClient()
    probe = attack_probe(forge_script(f"127.0.0.1:{PROXY_PORT}"), runs=1)
    return run_probe(probe, client, client.install("1"), tmp_path, containment=containment)


def outcome_binary() -> ClientBinary:
    return FakeLoopClient().install("1")


def _bash_output(outcome: ProbeOutcome) -> str:
    assert outcome.evidence is not None, outcome.error
    return "".join(run.stdout for run in outcome.evidence.runs.values())


def test_forging_from_inside_fails_and_is_recorded(tmp_path: Path) -> None:
    outcome = _forge(tmp_path, _bubblewrap())
    output = _bash_output(outcome)
    assert "attack:done" in output and "journal-forged" not in output, output
    assert "egress-log-erased" not in output
    assert "socket-reached:/run/loopprobe/record.sock" in output
    # the sandbox's first process is out of reach though the same user runs it
    assert "init-fds:refused" in output and "init-fds:read" not in output, output
    assert "init-environ:refused" in output and "init-environ:read" not in output
    assert "init-mem:refused" in output and "init-mem:read" not in output
    # no capability to undo the read-only mounts (root's sandbox kept every one before)
    assert "remounted:" not in output and "unmounted:" not in output, output
    assert "capabilities:CapEff:0000000000000400" in output  # CAP_NET_BIND_SERVICE alone
    assert outcome.evidence is not None
    assert not any(r.get("forged") or r.get("seq") == 999 for r in outcome.evidence.journal)
    hosts = [a["host"] for a in outcome.evidence.egress]
    assert any("exfiltrate" in a.get("target", "") for a in outcome.evidence.egress), hosts
    assert "forged.example:443" not in hosts
    faults = [f["fault"] for f in outcome.evidence.evidence_faults]
    assert any("a second egress reporter" in f for f in faults), faults
    # refused, it cost no evidence: the client's act is reported, the evidence is intact
    posers = next(c for c in outcome.checks if c.id.endswith("client.reporter-posers"))
    assert not posers.passed and "a second egress reporter" in json.dumps(posers.observed)
    intact = next(c for c in outcome.checks if c.id.endswith("harness.evidence-intact"))
    assert intact.passed, intact.observed
    # a file name that is not UTF-8 is shown escaped, and the report is written
    assert "odd-name:made" in output
    assert "not-utf8-\\xff-name" in outcome.evidence.workspace_files
    report, lines, timing = build_report(ReportSpec("forge", "forge", (outcome.probe,)),
                                         [outcome], outcome_binary())
    write_report(report, lines, tmp_path / "report", timing)
    json.loads((tmp_path / "report" / "forge.json").read_text())


def test_uncontained_the_forged_report_is_taken(tmp_path: Path) -> None:
    """The counterfactual: with no first process claiming the egress stream (no sandbox),
    a forged reporter's attempt lands in the evidence."""
    outcome = _forge(tmp_path, NoContainment())
    assert outcome.evidence is not None
    assert "forged.example:443" in [a.get("host") for a in outcome.evidence.egress]


@pytest.mark.parametrize("containment", ["bubblewrap", "none"])
def test_a_clean_run_has_intact_evidence(tmp_path: Path, containment: str) -> None:
    client = FakeLoopClient()
    outcome = run_probe(attack_probe("echo attack:done\n", hooks=True), client,
                        client.install("1"), tmp_path,
                        containment=_bubblewrap() if containment == "bubblewrap"
                        else NoContainment())
    assert outcome.passed, (outcome.error, [c for c in outcome.checks if not c.passed])
    assert outcome.evidence is not None and outcome.evidence.evidence_faults == []
    assert outcome.evidence.hook_calls, "the hook relay reached the collector"
