"""The sandbox holds against the real client: Claude Code's own Bash tool, scripted by the
mock, attacks every path the harness touches and tries to forge the evidence.

The paths are enumerated from a clean run of the same probe (hooks on, so the harness also
writes the client's settings file before each run): the transcripts, the config folder,
the settings file, and where the harness once kept each run's output (``artefacts/``).
Each plant (a link to a host file or folder, a link to ``/proc/self/environ``, a FIFO, a
64 GiB file, a hard link) is made at all of them in run 1 and again in run 2; afterwards no
host file has changed, nothing of the host is in the evidence, and every run ended.
``tests/test_sandbox_files.py`` shows with the fake loop that a harness following links
fails these same assertions.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from probes.clients.claude_code import ClaudeCode
from probes.containment import PROXY_PORT, Bubblewrap
from probes.outcome import ProbeOutcome
from probes.runner import run_probe
from tests.fixtures.attack_catalog import PLANTS, attack_probe, forge_script, plant_script
from tests.test_sandbox_files import _assert_held, _bubblewrap, _targets, _Touched, canary

pytestmark = pytest.mark.client

__all__ = ["canary"]  # the fixture, used by name
LEGACY = ["artefacts/runs/run1/stdout", "artefacts/runs/run1/stderr",
          "artefacts/runs/run2/stdout", "artefacts/journal.jsonl", "artefacts/hooks.jsonl",
          "artefacts/hook-policy.json"]


def _run(probe: Any, binary: Any, work: Path, containment: Bubblewrap) -> ProbeOutcome:
    return run_probe(probe, ClaudeCode(), binary, work, containment=containment)


@pytest.fixture(scope="module")
def touched(claude_code_binary: Any, tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    monkeypatch = pytest.MonkeyPatch()
    try:
        recorder = _Touched(monkeypatch)
        outcome = _run(attack_probe("echo attack:done\n", hooks=True), claude_code_binary,
                       tmp_path_factory.mktemp("clean"), _bubblewrap())
    finally:
        monkeypatch.undo()
    assert outcome.passed, (outcome.error, [c for c in outcome.checks if not c.passed])
    targets = _targets(recorder.paths)
    assert "home/.claude/settings.json" in targets and any(
        t.startswith("home/.claude/projects/") and t.endswith(".jsonl") for t in targets)
    return targets + LEGACY


@pytest.mark.parametrize("kind", PLANTS)
def test_no_plant_by_the_real_client_reaches_the_host(claude_code_binary: Any, tmp_path: Path,
                                                      touched: list[str],
                                                      canary: tuple[Path, Path],
                                                      kind: str) -> None:
    outcome = _run(attack_probe(plant_script(kind, str(canary[0]), str(canary[1])),
                                targets=touched, hooks=True),
                   claude_code_binary, tmp_path / "work", _bubblewrap())
    _assert_held(outcome, canary, kind)
    assert outcome.evidence is not None, outcome.error
    output = "".join(run.stdout for run in outcome.evidence.runs.values())
    assert "planted:home/.claude/settings.json" in output, output[-3000:]
    assert not any(run.timed_out for run in outcome.evidence.runs.values())


def test_the_real_client_cannot_forge_the_evidence(claude_code_binary: Any,
                                                   tmp_path: Path) -> None:
    outcome = _run(attack_probe(forge_script(f"127.0.0.1:{PROXY_PORT}"), runs=1),
                   claude_code_binary, tmp_path / "work", _bubblewrap())
    assert outcome.evidence is not None, outcome.error
    output = json.dumps(outcome.evidence.journal)
    assert "attack:done" in output and "journal-forged" not in output
    assert "egress-log-erased" not in output and "socket-reached" in output
    assert not any(r.get("forged") or r.get("seq") == 999 for r in outcome.evidence.journal)
    assert any("exfiltrate" in a.get("target", "") for a in outcome.evidence.egress)
    assert "forged.example:443" not in [a.get("host") for a in outcome.evidence.egress]
    intact = next(c for c in outcome.checks if c.id.endswith("harness.evidence-intact"))
    assert not intact.passed and "a second egress reporter" in json.dumps(intact.observed)
