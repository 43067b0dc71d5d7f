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
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from probes.clients.claude_code import ClaudeCode
from probes.core.outcome import ProbeOutcome
from probes.core.probe import ReportSpec
from probes.report.build import build_report
from probes.run.bounds import Bounds
from probes.run.containment import PROXY_PORT, Bubblewrap
from probes.run.runner import run_probe
from tests.fixtures.attack_catalog import PLANTS, attack_probe, forge_script, plant_script
from tests.test_bounds import _needs_cgroup
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
    for refused in ("init-fds", "init-environ", "init-mem"):
        assert f"{refused}:refused" in output and f"{refused}:read" not in output, refused
    assert "remounted:" not in output and "unmounted:" not in output
    assert "capabilities:CapEff:0000000000000400" in output
    assert not any(r.get("forged") or r.get("seq") == 999 for r in outcome.evidence.journal)
    assert any("exfiltrate" in a.get("target", "") for a in outcome.evidence.egress)
    assert "forged.example:443" not in [a.get("host") for a in outcome.evidence.egress]
    # refused, it cost no evidence: the client's act is reported, the evidence is intact
    posers = next(c for c in outcome.checks if c.id.endswith("client.reporter-posers"))
    assert not posers.passed and "a second egress reporter" in json.dumps(posers.observed)
    intact = next(c for c in outcome.checks if c.id.endswith("harness.evidence-intact"))
    assert intact.passed, intact.observed


# ---- bounds: a run that reaches one ends with a report naming it ------------------------

MiB = 1 << 20
BOUND_ATTACKS = {
    # bound: (the bounds, the script, needs a cgroup controller)
    "memory": (Bounds(memory_bytes=512 * MiB),
               "python3 -c 'b = bytearray(900 * 1024 * 1024); print(len(b))'; echo $?", "memory"),
    "processes": (Bounds(processes=64),
                  "for i in $(seq 200); do sleep 3 & done 2>&1 | tail -1; wait", "pids"),
    "tmp": (Bounds(tmp_bytes=64 * MiB), "head -c 200M /dev/zero > /tmp/big; echo $?", None),
    "tmp:/dev/shm": (Bounds(tmp_bytes=64 * MiB),
                     "head -c 200M /dev/zero > /dev/shm/big; echo $?; echo x > /dev/new; "
                     "echo $?", None),
    "file": (Bounds(file_bytes=32 * MiB),
             "head -c 100M /dev/zero > /sandbox/workspace/big; echo $?", None),
    "sandbox": (Bounds(sandbox_bytes=64 * MiB, file_bytes=32 * MiB),
                "for i in 1 2 3 4 5 6; do head -c 30M /dev/zero > /sandbox/workspace/f$i; "
                "sleep 1; done; sleep 20", None),
    # what a walk of the names never saw: a file with no name, held open past the bound
    "sandbox:unlinked-open": (Bounds(sandbox_bytes=64 * MiB),
                              "exec 3> /sandbox/workspace/held; rm /sandbox/workspace/held; "
                              "head -c 200M /dev/zero >&3; echo $?; sleep 20", None),
    "sandbox:sparse-filled": (Bounds(sandbox_bytes=64 * MiB),
                              "truncate -s 500M /sandbox/workspace/sparse; dd if=/dev/zero "
                              "of=/sandbox/workspace/sparse bs=1M count=200 conv=notrunc; "
                              "echo $?; sleep 20", None),
    "sandbox:hard-links": (Bounds(sandbox_names=2000),
                           "echo x > /sandbox/workspace/one; for i in $(seq 5000); do "
                           "ln /sandbox/workspace/one /sandbox/workspace/l$i || break; done; "
                           "echo linked $i; sleep 20", None),
    "sandbox:small-files": (Bounds(sandbox_names=2000),
                            "for i in $(seq 5000); do echo x > /sandbox/workspace/f$i || break; "
                            "done; echo wrote $i; sleep 20", None),
}
# the same kinds holding little: sparse files, hard links to one file, small files
HOLDING_LITTLE = ("for i in $(seq 10); do truncate -s 500M /sandbox/workspace/sparse$i; done; "
                  "head -c 30M /dev/zero > /sandbox/workspace/one; for i in $(seq 300); do "
                  "ln /sandbox/workspace/one /sandbox/workspace/l$i; done; "
                  "for i in $(seq 300); do echo x > /sandbox/workspace/f$i; done; echo held-little")


@pytest.mark.parametrize("bound", sorted(BOUND_ATTACKS))
def test_a_run_that_reaches_a_bound_ends_with_a_report_naming_it(claude_code_binary: Any,
                                                                 tmp_path: Path,
                                                                 bound: str) -> None:
    bounds, script, controller = BOUND_ATTACKS[bound]
    bound = bound.split(":")[0]
    if controller is not None:
        _needs_cgroup(controller)
    box = _bubblewrap()
    outcome = _run(attack_probe(script + "\necho attack:done\n", runs=1, timeout=90),
                   claude_code_binary, tmp_path / "work", replace(box, bounds=bounds))
    assert outcome.evidence is not None, outcome.error
    run = outcome.evidence.runs["run1"]
    assert bound in [h["bound"] for h in run.bounds_hit], (run.bounds_hit, run.stdout[-2000:])
    assert "Read-only file system" in run.stdout or "/dev/new" not in script, \
        "the rest of /dev is read-only"
    finished = next(c for c in outcome.checks if c.id.endswith("harness.run1.finished"))
    assert not finished.passed and f"the {bound} bound" in str(finished.observed)
    report, _, _ = build_report(ReportSpec("bounds", "bounds", (outcome.probe,)),
                                [outcome], claude_code_binary)
    assert bound in json.dumps(report["probes"][0]["runs"][0]["bounds_hit"])
    assert report["trust"]["containment"]["bounds"][bound]["limit"] == getattr(
        bounds, {"memory": "memory_bytes", "processes": "processes", "tmp": "tmp_bytes",
                 "file": "file_bytes", "sandbox": "sandbox_bytes"}[bound])


def test_the_same_run_under_the_default_bounds_reaches_none(claude_code_binary: Any,
                                                          tmp_path: Path) -> None:
    """The counterfactual: every attack above under the default bounds reaches no bound."""
    script = "\n".join(BOUND_ATTACKS[b][1] for b in ("memory", "processes", "tmp", "file"))
    outcome = _run(attack_probe(script.replace("sleep 3", "sleep 1") + "\necho attack:done\n",
                                runs=1, timeout=90),
                   claude_code_binary, tmp_path / "work", _bubblewrap())
    assert outcome.evidence is not None, outcome.error
    assert outcome.evidence.runs["run1"].bounds_hit == []
    assert outcome.passed, [c for c in outcome.checks if not c.passed]


def test_sparse_files_hard_links_and_small_files_holding_little_reach_no_bound(
        claude_code_binary: Any, tmp_path: Path) -> None:
    """The counterfactual of the sandbox attacks: 5 GiB of holes, 300 names of one 30 MiB
    file and 300 small files hold 32 MiB in 700 names, under a bound of 64 MiB and 2,000."""
    bounds = Bounds(sandbox_bytes=64 * MiB, sandbox_names=2000)
    outcome = _run(attack_probe(HOLDING_LITTLE + "\necho attack:done\n", runs=1, timeout=90),
                   claude_code_binary, tmp_path / "work", replace(_bubblewrap(), bounds=bounds))
    assert outcome.evidence is not None, outcome.error
    run = outcome.evidence.runs["run1"]
    assert "held-little" in run.stdout and run.bounds_hit == [], (run.bounds_hit, run.stdout[-2000:])
    assert outcome.passed, [c for c in outcome.checks if not c.passed]
    kept = next((tmp_path / "work").glob("attack.*/sandbox/workspace"))
    held = {p.lstat().st_ino: p.lstat().st_blocks * 512 for p in kept.iterdir()}
    assert sum(held.values()) < 40 * MiB, "kept as sparse and linked as the client left them"
