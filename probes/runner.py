"""Run one probe: sandbox -> mock -> client invocations -> evidence -> checks.

Data flows one way. The mock is started for the probe and stopped after it; the
client runs once per invocation in the probe's sandbox, each run under a hard
timeout that kills its whole process group.
"""

from __future__ import annotations

import hashlib
import json
import platform
import shlex
import sys
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

from mockapi.journal import Journal, read_journal
from mockapi.scenario import Scenario
from probes import hook_recorder
from probes.clients.base import Client, ClientBinary, Command, HookCommand, RunContext
from probes.containment import Containment, Place, find_containment
from probes.evidence import Evidence, RunRecord
from probes.invocation import Invocation
from probes.mcp import read_calls
from probes.mcp_runtime import McpRuntime, install_mcp_runtime
from probes.model import Probe, served_scenario, shown_scenario
from probes.outcome import ProbeOutcome
from probes.process import Dialogue, ProcessResult, run_conversation, run_process
from probes.sandbox import Sandbox
from probes.streamed import Conversation
from probes.verdicts import check_evidence

__all__ = ["HOOK_EVENTS_RECORDED", "SECRET_ENV", "Serve", "Served", "run_probe", "session_id_for"]

SECRET_ENV = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
HOOK_EVENTS_RECORDED = ("PreToolUse", "PostToolUse", "Stop", "SubagentStop")


class Served(Protocol):
    """What answers a probe's runs: its mock, or a stand-in journaling the same way."""

    url: str
    journal: Journal

    def __enter__(self) -> Served: ...

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None: ...


# (place, the probe's scenario, the journal's path, the run's context) -> what answers
Serve = Callable[[Place, Scenario, Path, Mapping[str, str]], Served]


def _serve_mock(place: Place, scenario: Scenario, journal_path: Path,
                context: Mapping[str, str]) -> Served:
    return place.serve(scenario, journal_path, context=context)


def session_id_for(probe: str, invocation: str) -> str:
    """Fixed per probe and invocation, so two runs of a probe send the same ids."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"loopprobe:{probe}:{invocation}"))


def _hook_command(probe: Probe, box: Sandbox, context: Mapping[str, str]) -> HookCommand | None:
    """The recorder as a hook command, with the probe's policy (placeholders filled in)."""
    if probe.hooks is None:
        return None
    policy = box.artefacts / "hook-policy.json"
    rendered = json.dumps(dict(probe.hooks.policy), indent=2, sort_keys=True)
    for name, value in context.items():
        rendered = rendered.replace("{" + name + "}", value)
    policy.write_text(rendered)
    log = box.artefacts / "hooks.jsonl"
    command = " ".join(shlex.quote(part) for part in (
        sys.executable, "-I", "-S", hook_recorder.__file__, str(policy), str(log)))
    events = tuple(sorted(set(HOOK_EVENTS_RECORDED) | set(probe.hooks.policy)))
    return HookCommand(command, events)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _redact_env(env: dict[str, str]) -> dict[str, str]:
    return {k: ("[redacted]" if k in SECRET_ENV else v) for k, v in sorted(env.items())}


def _not_applicable(probe: Probe, client: Client, binary: ClientBinary,
                    binaries: Mapping[str, ClientBinary]) -> str | None:
    capabilities = client.capabilities(binary)
    needed = probe.capabilities()
    if capabilities.lacking(needed):
        return (f"{binary.name} {binary.version} lacks what this probe needs: "
                f"{capabilities.explain(needed)}")
    for invocation in probe.invocations:
        other = binaries[invocation.name]
        if other == binary:
            continue
        capabilities = client.capabilities(other)
        needed = sorted(invocation.capabilities())
        if capabilities.lacking(needed):
            return (f"{other.name} {other.version} (run {invocation.name}) lacks what it "
                    f"needs: {capabilities.explain(needed)}")
    return None


def run_probe(probe: Probe, client: Client, binary: ClientBinary, work_dir: Path | None, *,
              keep: bool = True, egress_guard: bool = True,
              containment: Containment | None = None,
              progress: Callable[[str], None] = lambda _: None,
              serve: Serve = _serve_mock) -> ProbeOutcome:
    """Run one probe in a fresh sandbox, each client run contained (``containment``; by
    default bubblewrap, which must be available). ``egress_guard=False`` runs without the
    refusing proxy (a proxy changes client behaviour: 2.1.235 then skips its HEAD /api/hello
    warm-up). ``serve``: what answers the runs, listening where ``place.listen()`` says and
    journaling to the path given (default: the mock on the probe's scenario; e.g. a
    ``mockapi.record.RecordingProxy`` in front of another endpoint)."""
    try:
        binaries = _binaries(probe, client, binary)
    except Exception as error:  # an install of another version failed
        return ProbeOutcome(probe, None, [], None, error=f"{type(error).__name__}: {error}")
    # its Claude Code requests told apart as ever (probes.model.HARNESS_CLASSIFIER)
    probe = replace(probe, scenario=served_scenario(probe.scenario))
    not_applicable = _not_applicable(probe, client, binary, binaries)
    if not_applicable:
        return ProbeOutcome(probe, None, [], None, not_applicable=not_applicable)
    containment = containment or find_containment(no_sandbox=False)
    box = Sandbox.create(work_dir, probe.name)
    box.write_files(probe.fixtures)
    journal_path = box.artefacts / "journal.jsonl"
    session_ids: dict[str, str] = {}
    runs: dict[str, RunRecord] = {}
    scenario = probe.scenario
    started = time.time()
    try:
        mcp = install_mcp_runtime() if any(i.mcp for i in probe.invocations) else None
        others = sorted({b.version: b for b in binaries.values() if b != binary}.values(),
                        key=lambda b: b.version)
        with containment.enter(box, binary, egress_guard, readonly=[mcp.venv] if mcp else [],
                               others=others) as place:
            client_paths = client.prepare(box, place.seen)
            context = {"workspace": place.seen(box.workspace), "home": place.seen(box.home)}
            scenario = probe.scenario.render(context)
            hooks = _hook_command(probe, box, context)
            with serve(place, probe.scenario, journal_path, context) as mock:
                for invocation in probe.invocations:
                    runs[invocation.name] = _run_one(probe, invocation, client,
                                                     binaries[invocation.name], box, mock,
                                                     session_ids, hooks, place, progress,
                                                     context, mcp)
            evidence = _gather(probe, client, binary, box, runs, journal_path, place,
                               client_paths, started)
            evidence.mock_url = mock.url
            evidence.egress_guarded = egress_guard
            evidence.egress = place.egress_attempts()
            evidence.containment = containment.describe()
            evidence.client_paths = {name: place.seen(Path(host))
                                     for host, name in box.placeholders().items()}
    except KeyboardInterrupt:
        raise
    except Exception as error:
        return ProbeOutcome(probe, None, [], box.root, scenario=_scripted(scenario),
                            error=f"{type(error).__name__}: {error}")
    results, check_error = check_evidence(probe, evidence)
    if not keep:
        box.remove()
    return ProbeOutcome(probe, evidence, results, box.root if keep else None,
                        error=check_error, scenario=_scripted(scenario))


def _binaries(probe: Probe, client: Client, binary: ClientBinary) -> dict[str, ClientBinary]:
    """The binary of each invocation: the probe's, or the other version it names."""
    found = {binary.version: binary}
    for invocation in probe.invocations:
        version = invocation.client_version
        if version is not None and version not in found:
            found[version] = client.install(version)
    return {i.name: found[i.client_version or binary.version] for i in probe.invocations}


def _scripted(scenario: Any) -> dict[str, Any]:
    """The scenario as the report shows it: what was scripted, without the defaults."""
    return shown_scenario(scenario)


def _run_one(probe: Probe, invocation: Invocation, client: Client, binary: ClientBinary,
             box: Sandbox, mock: Served, session_ids: dict[str, str],
             hooks: HookCommand | None, place: Place,
             progress: Callable[[str], None], placeholders: Mapping[str, str],
             mcp: McpRuntime | None) -> RunRecord:
    if invocation.session == "new":
        session_ids[invocation.name] = session_id_for(probe.name, invocation.name)
    context = RunContext(box, mock.url, dict(session_ids), place.proxy_environment(), hooks,
                         str(mcp.python) if mcp else None)
    command = place.wrap(client.command(binary, invocation, context))
    for path, content in command.files.items():
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(content)
    before = {str(p): _digest(p) for p in client.session_files(box)}
    first_seq = mock.journal.last_seq
    progress(f"  run {invocation.name}: {invocation.prompt[:40]!r}")
    started = time.time()
    conversation: list[Conversation] = []
    if invocation.streamed is None:
        result = run_process(command.argv, env=command.env, cwd=command.cwd,
                             timeout=invocation.timeout)
    else:
        result = _converse(invocation, command, box, mock, first_seq, started, placeholders,
                           conversation)
    last_seq = mock.journal.last_seq
    after = {str(p): _digest(p) for p in client.session_files(box)}
    changed = {path: {"before": before.get(path), "after": after.get(path)}
               for path in sorted(set(before) | set(after)) if before.get(path) != after.get(path)}
    output = client.read_output(result.stdout)
    if output.session_id:
        session_ids[invocation.name] = output.session_id
    runs_dir = box.artefacts / "runs" / invocation.name
    runs_dir.mkdir(parents=True, exist_ok=True)
    (runs_dir / "stdout").write_text(result.stdout)
    (runs_dir / "stderr").write_text(result.stderr)
    (runs_dir / "argv.json").write_text(json.dumps(command.argv, indent=1))
    return RunRecord(
        name=invocation.name, invocation=invocation, argv=command.client_argv,
        client=binary.identity() if invocation.client_version is not None else None,
        env=_redact_env(command.env), exit_code=result.exit_code, timed_out=result.timed_out,
        duration=result.duration, stdout=result.stdout, stderr=result.stderr, output=output,
        session_id=session_ids.get(invocation.name), seqs=(first_seq, last_seq), pid=result.pid,
        started=started,
        stdin=[dict(entry) for c in conversation for entry in c.transcript],
        stdin_pending=[step for c in conversation for step in c.pending],
        files_changed={_relative(box, p): v for p, v in changed.items()},
        stdout_dropped=result.stdout_dropped, stderr_dropped=result.stderr_dropped,
        stopped=result.stopped, protocol_faults=[f for c in conversation for f in c.protocol_faults],
    )


def _converse(invocation: Invocation, command: Command, box: Sandbox, mock: Served,
              first_seq: int, started: float, context: Mapping[str, str],
              kept: list[Conversation]) -> ProcessResult:
    """A streamed run: the invocation's script is written as its moments come (each new
    request record of the run is shown to it as the mock journals it)."""
    script = invocation.streamed
    assert script is not None
    seen = [first_seq]

    def new_requests() -> list[Any]:
        if mock.journal.last_seq == seen[0]:
            return []
        contents = mock.journal.read_after(seen[0])
        seqs = [int(r["seq"]) for r in contents.records if r["type"] != "journal_note"]
        seen[0] = max([seen[0], *seqs])
        return list(contents.requests())

    def start(write: Any, close: Any) -> Dialogue:
        conversation = Conversation(invocation.prompt, script, write, close,
                                    lambda: round(time.time() - started, 3),
                                    lambda name: (box.workspace / name).exists(), context)
        kept.append(conversation)
        return conversation

    return run_conversation(command.argv, env=command.env, cwd=command.cwd,
                            timeout=invocation.timeout, start=start, new_requests=new_requests)


def _relative(box: Sandbox, path: str) -> str:
    return str(Path(path).relative_to(box.root))


def _gather(probe: Probe, client: Client, binary: ClientBinary, box: Sandbox,
            runs: dict[str, RunRecord], journal_path: Path, place: Place,
            client_paths: dict[str, str], runs_started: float) -> Evidence:
    journal = read_journal(journal_path)
    # the run's calendar date (clients tell it to the model), as the client may have seen it
    dates = {time.strftime("%Y-%m-%d", clock(moment)) for clock in (time.gmtime, time.localtime)
             for moment in (runs_started, time.time())}
    hook_log = box.artefacts / "hooks.jsonl"
    hook_calls = []
    if hook_log.exists():
        hook_calls = [json.loads(line) for line in hook_log.read_text().splitlines() if line]
    mcp_calls = {name: read_calls(box.artefacts / "mcp" / f"{name}.jsonl")[0]
                 for name, run in runs.items() if run.invocation.mcp is not None}
    session_files = {_relative(box, str(path)): path.read_text(errors="replace")
                     for path in client.session_files(box)}
    workspace_files = {}
    for path in sorted(box.workspace.rglob("*")):
        if path.is_file() and path.stat().st_size < 65536:
            workspace_files[str(path.relative_to(box.workspace))] = path.read_text(
                errors="replace")
    return Evidence(
        probe=probe.name, client=binary.identity(), runs=runs, journal=journal.records,
        hook_calls=hook_calls, session_files=session_files, workspace_files=workspace_files,
        torn_journal=journal.torn_tail, mcp_calls=mcp_calls,
        placeholders={**box.placeholders(), **place.placeholders(),
                      **client_paths,
                      **{seen: name for host, name in (
                          (str(binary.entry), "$CLIENT"), (str(binary.root), "$CLIENT_DIR"),
                          (hook_recorder.__file__, "$HOOK_RECORDER"), (sys.executable, "$PYTHON"))
                         for seen in {host, place.seen(Path(host))}},
                      # the machine's kernel, which clients put in their system prompt
                      platform.release(): "$KERNEL_RELEASE",
                      **dict.fromkeys(sorted(dates), "$RUN_DATE")},
    )
