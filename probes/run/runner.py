"""Run one probe: sandbox -> mock -> client invocations -> evidence -> checks.

Data flows one way. The mock is started for the probe and stopped after it; the
client runs once per invocation in the probe's sandbox, each run under a hard
timeout that kills its whole process group.
"""

from __future__ import annotations

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

from mockapi.journal.read import read_journal
from mockapi.journal.write import Journal
from mockapi.script.scenario import Scenario
from probes.clients.base import (
    Client,
    ClientBinary,
    Command,
    HookCommand,
    RunContext,
)
from probes.clients.mentions import look_up
from probes.core.evidence import Evidence, RunRecord
from probes.core.files import write_text
from probes.core.invocation import Invocation
from probes.core.outcome import ProbeOutcome
from probes.core.probe import Probe, shown_scenario
from probes.core.verdicts import check_evidence
from probes.inside import hook_recorder, hook_wrapper
from probes.run.applicable import decide_before_running
from probes.run.collector import Collector
from probes.run.containment import Containment, Place, find_containment
from probes.run.conversation import Conversation, streamed_record
from probes.run.mcp_runtime import McpRuntime, install_mcp_runtime
from probes.run.process import Dialogue, ProcessResult, run_conversation, run_process
from probes.sandbox.client_files import ClientFiles
from probes.sandbox.files import Refused
from probes.sandbox.folders import Sandbox
from probes.sandbox.user_setup import InstalledSetup, install_setup, wrapper_command

__all__ = [
    "HOOK_EVENTS_RECORDED",
    "SECRET_ENV",
    "Serve",
    "Served",
    "run_probe",
    "session_id_for",
]

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


def _hook_policy(probe: Probe, context: Mapping[str, str]) -> dict[str, Any]:
    """The probe's hook policy, placeholders filled in (applied by the collector)."""
    rendered = json.dumps(dict(probe.hooks.policy) if probe.hooks else {}, sort_keys=True)
    for name, value in context.items():
        rendered = rendered.replace("{" + name + "}", value)
    policy: dict[str, Any] = json.loads(rendered)
    return policy


def _hook_command(probe: Probe, place: Place) -> HookCommand | None:
    """The recorder as a hook command: a relay to the collector's socket."""
    if probe.hooks is None:
        return None
    command = " ".join(shlex.quote(part) for part in (
        sys.executable, "-I", "-S", hook_recorder.__file__, str(place.record_socket())))
    events = tuple(sorted(set(HOOK_EVENTS_RECORDED) | set(probe.hooks.policy)))
    return HookCommand(command, events)


def _redact_env(env: dict[str, str]) -> dict[str, str]:
    return {k: ("[redacted]" if k in SECRET_ENV else v) for k, v in sorted(env.items())}


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
    decided = decide_before_running(probe, client, binary)
    if isinstance(decided, ProbeOutcome):
        return decided
    probe, binaries, tool_names = decided
    containment = containment or find_containment(no_sandbox=False)
    box = Sandbox.create(work_dir, probe.name)
    box.write_files(probe.fixtures)
    journal_path = box.evidence / "journal.jsonl"
    scenario = probe.scenario
    started = time.time()
    try:
        # the loop tools reach a CLI client as an MCP server too (probes.core.loop_tools)
        mcp = install_mcp_runtime() if any(i.mcp or (i.loop_tools and tool_names)
                                           for i in probe.invocations) else None
        others = sorted({b.version: b for b in binaries.values() if b != binary}.values(),
                        key=lambda b: b.version)
        with containment.enter(box, binary, egress_guard, readonly=[mcp.venv] if mcp else [],
                               others=others) as place:
            client_paths = client.prepare(box, place.seen)
            installed = _install_setup(probe, client, box, place)
            context = {"workspace": place.seen(box.workspace), "home": place.seen(box.home)}
            scenario = probe.scenario.render(context)
            hooks = _hook_command(probe, place)
            with Collector(place.record_socket(), box.evidence,
                           _hook_policy(probe, context)) as collector, \
                    serve(place, probe.scenario, journal_path, context) as mock:
                runs, not_started = _run_invocations(
                    probe, client, binaries, box, mock, hooks, place, progress, context, mcp,
                    collector, installed.plugin_dirs)
            evidence = _gather(probe, client, binary, box, runs, journal_path, place,
                               client_paths, started, collector)
            _complete(evidence, not_started, collector, installed, mock, place, egress_guard,
                      containment, probe, binary, box)
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


def _run_invocations(probe: Probe, client: Client, binaries: Mapping[str, ClientBinary],
                     box: Sandbox, mock: Served, hooks: HookCommand | None, place: Place,
                     progress: Callable[[str], None], context: Mapping[str, str],
                     mcp: McpRuntime | None, collector: Collector,
                     plugin_dirs: tuple[str, ...]) -> tuple[dict[str, RunRecord], dict[str, str]]:
    """Each invocation run in turn, each a run of the collector's; the records of those that
    ran, and why the others were not started."""
    session_ids: dict[str, str] = {}
    runs: dict[str, RunRecord] = {}
    for invocation in probe.invocations:
        collector.begin_run(invocation.name)
        try:
            runs[invocation.name] = _run_one(probe, invocation, client, binaries[invocation.name],
                                             box, mock, session_ids, hooks, place, progress,
                                             context, mcp, collector, plugin_dirs)
        except Refused as refused:
            # an earlier run made a path this run's files go to unusable: this run and the
            # later ones are not started; what ran is kept
            return runs, {i.name: f"the client's sandbox refused a harness write: {refused}"
                          for i in probe.invocations if i.name not in runs}
        finally:
            collector.end_run()
    return runs, {}


def _complete(evidence: Evidence, not_started: dict[str, str], collector: Collector,
              installed: InstalledSetup, mock: Served, place: Place, egress_guard: bool,
              containment: Containment, probe: Probe, binary: ClientBinary,
              box: Sandbox) -> None:
    """What the evidence holds beside the runs: the runs not started, the user's hooks that
    ran, the setup's notes, where the mock was, egress, containment, the client's mentions
    and the paths as the client saw them."""
    evidence.runs_not_started = not_started
    evidence.hook_runs = list(collector.hook_runs)
    evidence.setup_notes = list(installed.notes or [])
    evidence.mock_url = mock.url
    evidence.egress_guarded = egress_guard
    evidence.egress = sorted([*place.egress_attempts(), *collector.egress],
                             key=lambda a: float(a.get("time") or 0))
    evidence.containment = containment.describe()
    if probe.looked_up:
        evidence.client_mentions = look_up(binary, probe.looked_up)
    evidence.client_paths = {name: place.seen(Path(host))
                             for host, name in box.placeholders().items()}


def _install_setup(probe: Probe, client: Client, box: Sandbox, place: Place) -> InstalledSetup:
    """The user's own folders, copied in before the first run, their hooks wrapped so that
    each run of one is recorded (``probes.inside.hook_wrapper``)."""
    if probe.setup is None:
        return InstalledSetup()
    wrap = wrapper_command(place.seen(Path(sys.executable)), place.seen(Path(hook_wrapper.__file__)),
                           place.seen(place.record_socket())) if probe.setup.observe_hooks else None
    config_dir = getattr(client, "config_dir", None)
    return install_setup(box, probe.setup, config_dir(box) if config_dir else box.home / ".claude",
                         place.seen, wrap)


def _scripted(scenario: Any) -> dict[str, Any]:
    """The scenario as the report shows it: what was scripted, without the defaults."""
    return shown_scenario(scenario)


def _run_one(probe: Probe, invocation: Invocation, client: Client, binary: ClientBinary,
             box: Sandbox, mock: Served, session_ids: dict[str, str],
             hooks: HookCommand | None, place: Place,
             progress: Callable[[str], None], placeholders: Mapping[str, str],
             mcp: McpRuntime | None, collector: Collector,
             plugin_dirs: tuple[str, ...] = ()) -> RunRecord:
    if invocation.session == "new":
        session_ids[invocation.name] = session_id_for(probe.name, invocation.name)
    context = RunContext(box, mock.url, dict(session_ids), place.proxy_environment(), hooks,
                         str(mcp.python) if mcp else None, str(place.record_socket()),
                         plugin_dirs)
    command = place.wrap(client.command(binary, invocation, context))
    for path, content in command.files.items():
        _write_input(box, Path(path), content)
    before = ClientFiles(box).session_digests(client.session_folder(box))
    first_seq = mock.journal.last_seq
    progress(f"  run {invocation.name}: {invocation.prompt[:40]!r}")
    started = time.time()
    conversation: list[Conversation] = []
    with place.confine() as bounds:  # the run's own memory, process and disk bounds
        argv = bounds.wrap(command.argv)
        # the run's egress reporter must descend from this process (Collector.launched)
        def launched(pid: int) -> None:
            collector.launched(invocation.name, pid)
        if invocation.streamed is None:
            result = run_process(argv, env=command.env, cwd=command.cwd,
                                 timeout=invocation.timeout, should_stop=bounds.should_stop,
                                 on_start=launched)
        else:
            result = _converse(invocation, replace(command, argv=argv), box, mock, first_seq,
                               started, placeholders, conversation, bounds.should_stop,
                               launched)
        # /tmp full is said by the sandbox's first process, to the collector (not stderr)
        bounds_hit = bounds.hits(str(collector.run_end(invocation.name).get("tmp_full") or ""),
                                 result.exit_code)
    if place.first_process_reports and not collector.claimed(invocation.name):
        raise RuntimeError(f"run {invocation.name}: the sandbox's first process never had its "
                           "egress stream claimed by the collector, so the client was not "
                           f"started (exit {result.exit_code}; stderr: "
                           f"{result.stderr.strip()[-300:]!r})")
    last_seq = mock.journal.last_seq
    after = ClientFiles(box).session_digests(client.session_folder(box))
    changed = {path: {"before": before.get(path), "after": after.get(path)}
               for path in sorted(set(before) | set(after)) if before.get(path) != after.get(path)}
    output = client.read_output(result.stdout)
    if output.session_id:
        session_ids[invocation.name] = output.session_id
    # kept where the client cannot reach (the invocation's name is a simple name)
    runs_dir = box.evidence / "runs" / invocation.name
    write_text(runs_dir / "stdout", result.stdout)
    write_text(runs_dir / "stderr", result.stderr)
    write_text(runs_dir / "argv.json", json.dumps(command.argv, indent=1))
    return RunRecord(
        name=invocation.name, invocation=invocation, argv=command.client_argv,
        client=binary.identity() if invocation.client_version is not None else None,
        env=_redact_env(command.env), exit_code=result.exit_code, timed_out=result.timed_out,
        duration=result.duration, stdout=result.stdout, stderr=result.stderr, output=output,
        session_id=session_ids.get(invocation.name), seqs=(first_seq, last_seq), pid=result.pid,
        started=started, **streamed_record(invocation.name, conversation),
        files_changed={path: v for path, v in changed.items()},
        stdout_dropped=result.stdout_dropped, stderr_dropped=result.stderr_dropped,
        stopped=result.stopped, bounds_hit=bounds_hit,
    )


def _write_input(box: Sandbox, path: Path, content: str) -> None:
    """A file a client's command needs: into the client's part through ``box.files`` (a
    settings file in its home), or into the read-only inputs (MCP specs and configs)."""
    if path.is_relative_to(box.client_root):
        box.files.write(box.inside(path), content)
    elif path.is_relative_to(box.inputs):
        for folder in reversed(path.relative_to(box.inputs).parents[:-1]):
            (box.inputs / folder).mkdir(exist_ok=True)
            (box.inputs / folder).chmod(0o755)  # the client reads it, whatever the umask
        write_text(path, content)
    else:
        raise ValueError(f"a command's file must be in the sandbox or its inputs, not {path}")


def _converse(invocation: Invocation, command: Command, box: Sandbox, mock: Served,
              first_seq: int, started: float, context: Mapping[str, str],
              kept: list[Conversation],
              should_stop: Callable[[], str | None] | None = None,
              on_start: Callable[[int], None] | None = None) -> ProcessResult:
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
                                    lambda name: box.files.exists(
                                        box.inside(box.workspace) / name), context)
        kept.append(conversation)
        return conversation

    return run_conversation(command.argv, env=command.env, cwd=command.cwd,
                            timeout=invocation.timeout, start=start, new_requests=new_requests,
                            should_stop=should_stop, on_start=on_start)


def _gather(probe: Probe, client: Client, binary: ClientBinary, box: Sandbox,
            runs: dict[str, RunRecord], journal_path: Path, place: Place,
            client_paths: dict[str, str], runs_started: float,
            collector: Collector) -> Evidence:
    journal = read_journal(journal_path)
    # the run's calendar date (clients tell it to the model), as the client may have seen it
    dates = {time.strftime("%Y-%m-%d", clock(moment)) for clock in (time.gmtime, time.localtime)
             for moment in (runs_started, time.time())}
    # a loop run's tools served over MCP (a CLI client's, probes.core.loop_tools) too
    mcp_calls = {name: list(collector.mcp.get(name, [])) for name, run in runs.items()
                 if run.invocation.mcp is not None
                 or (run.invocation.loop_tools and name in collector.mcp)}
    left = ClientFiles(box)
    session_files = left.sessions(client.session_folder(box))
    workspace_files = left.workspace()
    return Evidence(
        probe=probe.name, client=binary.identity(), runs=runs, journal=journal.records,
        hook_calls=list(collector.hook_calls), session_files=session_files,
        workspace_files=workspace_files, workspace_large_files=dict(left.large_files),
        torn_journal=journal.torn_tail, mcp_calls=mcp_calls,
        sandbox_refusals=left.refused,
        # a run the harness killed (its timeout) cuts its egress reporter off too
        evidence_faults=[f for f in collector.faults if not (
            f.get("kind") == "cut_off" and f.get("run") in runs
            and runs[str(f["run"])].timed_out)], not_kept=collector.not_kept() + left.not_kept(),
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
