"""Evidence the client cannot touch: forging attempts from inside a run fail and are recorded.

The client's Bash tool makes an egress attempt of its own, then tries to append a request to
every place a journal was or could be kept, to erase the egress log, and to pose as the
sandbox's egress reporter on the collector's socket. Contained, the journal holds only what
the mock recorded, the attempt stays recorded, and the forged reporter is refused and listed
(``client.reporter-posers`` fails naming it; ``harness.evidence-intact`` holds: nothing was
lost). Uncontained (``--no-sandbox``, where no first
process claims the egress stream), the forged report is accepted: the assertions can fail.
A process outside the run (elsewhere on the host) that reaches the collector's socket is
refused as an outsider: it claims nothing and forges nothing. The real client runs the same
attack in ``tests/test_sandbox_attacks.py``.
"""

from __future__ import annotations

import json
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

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
from probes.sandbox.folders import Sandbox
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


def test_uncontained_the_forged_report_is_taken(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The counterfactual: with no first process claiming the egress stream (no sandbox),
    a forged reporter's attempt lands in the evidence. The forger runs on the host here, so
    its run's folder is made in a folder of this test's own, and it looks for sockets there
    alone: the sockets of other runs on this machine (another test's) are not its target."""
    with tempfile.TemporaryDirectory(prefix="lp-") as own:  # short: sockets live in it
        monkeypatch.setattr(tempfile, "tempdir", own)
        client = FakeLoopClient()
        probe = attack_probe(forge_script(f"127.0.0.1:{PROXY_PORT}",
                                          sockets=f"{own}/loopprobe-*/record.sock"), runs=1)
        outcome = run_probe(probe, client, client.install("1"), tmp_path,
                            containment=NoContainment())
    assert outcome.evidence is not None
    assert "forged.example:443" in [a.get("host") for a in outcome.evidence.egress]


class _Watched:
    """A containment that tells which places it made (to reach a run's socket from outside)."""

    def __init__(self, inner: Bubblewrap) -> None:
        self.inner = inner
        self.places: list[Any] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    @contextmanager
    def enter(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        with self.inner.enter(*args, **kwargs) as place:
            self.places.append(place)
            yield place


def test_a_process_outside_the_run_claims_nothing_and_forges_nothing(tmp_path: Path) -> None:
    """While a contained run is under way, a process elsewhere on the host (this test)
    reaches the run's collector socket and poses as its egress reporter. It is refused as an
    outsider: the run's own first process claims the run, no forged attempt is kept, the
    evidence is intact, and the client is not blamed (no ``client.reporter-posers``). Before
    the collector knew a run's launch, the first such reporter claimed the run, the run's own
    first process was refused, and the client was never started."""
    watched = _Watched(_bubblewrap())
    client = FakeLoopClient()
    probe = attack_probe("sleep 4\necho attack:done\n", runs=1)
    answers: list[bytes] = []

    def pose() -> None:
        deadline = time.monotonic() + 60
        while not watched.places and time.monotonic() < deadline:
            time.sleep(0.05)
        path = watched.places[0].record_socket()
        while not path.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1)  # the run is under way (its Bash tool sleeps)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as channel:
            channel.settimeout(30)
            channel.connect(str(path))
            channel.sendall(b'{"stream": "egress"}\n{"time": 0, "method": "FORGED", '
                            b'"target": "forged.example:443", "host": "forged.example:443"}\n')
            answers.append(channel.makefile("rb").readline())

    poser = threading.Thread(target=pose, daemon=True)
    poser.start()
    outcome = run_probe(probe, client, client.install("1"), tmp_path, containment=watched)
    poser.join(60)
    assert answers == [b'{"claimed": null}\n']
    assert outcome.evidence is not None, outcome.error
    assert "attack:done" in _bash_output(outcome)
    assert "forged.example:443" not in [a.get("host") for a in outcome.evidence.egress]
    assert [f["kind"] for f in outcome.evidence.evidence_faults] == ["outsider"]
    checks = {c.id.split(".", 1)[1]: c for c in outcome.checks}
    assert not checks["host.outside-reporters"].passed
    assert "from outside the run" in json.dumps(checks["host.outside-reporters"].observed)
    assert checks["harness.evidence-intact"].passed
    assert checks["harness.run1.finished"].passed
    assert "client.reporter-posers" not in checks
    report, _, _ = build_report(ReportSpec("outsider", "outsider", (outcome.probe,)),
                                [outcome], outcome_binary())
    assert [c["status"] for c in report["claims"]] == ["confirmed"]


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


def test_a_record_the_host_would_not_take_is_the_harness_s_loss(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The counterpart of the client's acts (``tests/test_collector_bounds.py``): a genuine
    harness fault, here the host refusing to append a hook record, still fails
    ``harness.evidence-intact``, and the claim is an error, not the client's failure."""
    made = Sandbox.create.__func__  # type: ignore[attr-defined]

    def create(cls: type[Sandbox], parent: Path | None, name: str) -> Sandbox:
        box: Sandbox = made(cls, parent, name)
        (box.evidence / "hooks.jsonl").mkdir()  # the host's folder, where a file should be
        return box

    monkeypatch.setattr(Sandbox, "create", classmethod(create))
    client = FakeLoopClient()
    outcome = run_probe(attack_probe("echo attack:done\n", hooks=True, runs=1), client,
                        client.install("1"), tmp_path, containment=_bubblewrap())
    assert outcome.evidence is not None, outcome.error
    assert {f["kind"] for f in outcome.evidence.evidence_faults} == {"lost"}
    checks = {c.id.split(".", 1)[1]: c for c in outcome.checks}
    assert not checks["harness.evidence-intact"].passed
    assert "could not be written to hooks.jsonl" in json.dumps(
        checks["harness.evidence-intact"].observed)
    assert "client.reporter-faults" not in checks
    report, _, _ = build_report(ReportSpec("lost", "lost", (outcome.probe,)), [outcome],
                                outcome_binary())
    assert [c["status"] for c in report["claims"]] == ["error"]
