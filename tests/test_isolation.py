"""Trust: nothing of the caller's leaks in, nothing escapes, nothing is left running.

Each test plants what a broken promise would reveal (canary secrets and hooks,
an outside host, a leftover process) and runs the real client.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from probes.catalog.subagents import PROBE as SUBAGENT_PROBE
from probes.catalog.tool_result_resume import PROBE as LOOP_PROBE
from probes.clients.claude_code import ClaudeCode
from probes.clients.npm import cache_root
from probes.run.runner import run_probe

pytestmark = pytest.mark.client

ROOT = Path(__file__).resolve().parent.parent
CANARY_KEY = "sk-ant-CANARY-caller-key-7f3a"
CANARY_TOKEN = "CANARY-caller-oauth-token-91bc"
CANARY_URL = "http://canary-base-url.invalid"


def _processes_mentioning(needle: str) -> list[int]:
    """PIDs whose environment or command line mentions ``needle`` (our sandbox path)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        for part in ("environ", "cmdline"):
            try:
                if needle.encode() in (entry / part).read_bytes():
                    found.append(int(entry.name))
                    break
            except OSError:
                continue
    return found


def _listing(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_mtime_ns, p.stat().st_size)
            for p in sorted(root.rglob("*"))}


def test_egress_guard_catches_a_run_with_nonessential_traffic(claude_code_binary,
                                                              tmp_path: Path) -> None:
    leaky = replace(LOOP_PROBE, invocations=(replace(
        LOOP_PROBE.invocations[0], env={"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": None}),))
    outcome = run_probe(leaky, ClaudeCode(), claude_code_binary, tmp_path)
    guard = next(c for c in outcome.checks if c.id.endswith("harness.no-egress"))
    assert not guard.passed
    assert "api.anthropic.com:443" in guard.observed
    tight = replace(LOOP_PROBE, invocations=LOOP_PROBE.invocations[:1])
    outcome = run_probe(tight, ClaudeCode(), claude_code_binary, tmp_path)
    guard = next(c for c in outcome.checks if c.id.endswith("harness.no-egress"))
    assert (guard.passed, guard.observed) == (True, [])
    # observed on 2.1.235: with a proxy configured the client skips its HEAD /api/hello
    assert outcome.evidence is not None
    paths = [r["path"] for r in outcome.evidence.journal if r.get("type") == "request"]
    assert "/api/hello" not in paths


def test_the_callers_environment_and_home_do_not_leak(claude_code_binary,
                                                      tmp_path: Path) -> None:
    home = tmp_path / "caller-home"
    claude = home / ".claude"
    claude.mkdir(parents=True)
    hook_ran = tmp_path / "CANARY_HOOK_RAN"
    (claude / "settings.json").write_text(json.dumps({"hooks": {event: [{"matcher": "*", "hooks": [
        {"type": "command", "command": f"touch {hook_ran}"}]}] for event in (
        "PreToolUse", "PostToolUse", "Stop", "UserPromptSubmit", "SessionStart")}}))
    (claude / ".credentials.json").write_text(json.dumps(
        {"claudeAiOauth": {"accessToken": CANARY_TOKEN}}))
    (home / ".claude.json").write_text(json.dumps({"primaryApiKey": CANARY_KEY}))
    before = _listing(home)
    tmp_before = {p.name for p in Path("/tmp").iterdir() if p.name.startswith("claude")}
    out, work = tmp_path / "reports", tmp_path / "work"
    env = {**os.environ, "HOME": str(home), "ANTHROPIC_API_KEY": CANARY_KEY,
           "ANTHROPIC_AUTH_TOKEN": CANARY_TOKEN, "ANTHROPIC_BASE_URL": CANARY_URL,
           "CLAUDE_CONFIG_DIR": str(claude), "LOOPPROBE_CACHE": str(cache_root())}
    done = subprocess.run(
        [sys.executable, "-m", "probes", "run", "--client", claude_code_binary.version,
         "--probe", "tool-result-resume", "--out", str(out), "--work-dir", str(work)],
        capture_output=True, text=True, timeout=600, cwd=ROOT, env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    # the run really happened against the mock, with the harness's own key
    journals = list(work.glob("*/evidence/journal.jsonl"))
    assert len(journals) == 1
    recorded = journals[0].read_bytes() + b"".join(p.read_bytes() for p in out.iterdir())
    for canary in (CANARY_KEY, CANARY_TOKEN, "canary-base-url"):
        assert canary.encode() not in recorded
    requests = [json.loads(line) for line in journals[0].read_text().splitlines()]
    assert any(r.get("path") == "/v1/messages" for r in requests)
    assert not hook_ran.exists(), "the caller's hook ran"
    assert _listing(home) == before, "the caller's home changed"
    tmp_after = {p.name for p in Path("/tmp").iterdir() if p.name.startswith("claude")}
    assert tmp_after - tmp_before == set(), "the client wrote to the shared /tmp"
    sandbox = next(work.iterdir())
    assert list((sandbox / "sandbox" / "home" / ".claude" / "projects").iterdir()), \
        "the transcripts are inside the sandbox"


def test_no_client_process_outlives_its_probe(claude_code_binary, tmp_path: Path) -> None:
    outcome = run_probe(SUBAGENT_PROBE, ClaudeCode(), claude_code_binary, tmp_path)
    assert outcome.sandbox is not None and outcome.evidence is not None
    assert _processes_mentioning(str(outcome.sandbox)) == []
    for run in outcome.evidence.runs.values():
        with pytest.raises(ProcessLookupError):
            os.killpg(run.pid, 0)


def test_ctrl_c_stops_client_and_mock_and_writes_an_incomplete_report(claude_code_binary,
                                                                      tmp_path: Path) -> None:
    out, work = tmp_path / "reports", tmp_path / "work"
    process = subprocess.Popen(
        [sys.executable, "-m", "probes", "run", "--client", claude_code_binary.version,
         "--catalog", "tests.fixtures.hanging_catalog", "--out", str(out),
         "--work-dir", str(work)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
        # a test run started in the background inherits SIGINT ignored; Ctrl-C is the point
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 120
        while not any(j.stat().st_size for j in work.glob("*/evidence/journal.jsonl")
                      if "/v1/messages" in j.read_text()):
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the client never reached the mock"
            time.sleep(0.2)
        sandbox = next(work.iterdir())
        assert _processes_mentioning(str(sandbox)) != []  # the client is waiting
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
    assert process.returncode == 130, stdout[-2000:] + stderr[-2000:]
    assert "interrupted" in stdout
    report = json.loads((out / "hanging.json").read_text())
    assert (report["status"], report["complete"]) == ("incomplete", False)
    assert _processes_mentioning(str(sandbox)) == []
