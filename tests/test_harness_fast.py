"""The fast tier: the harness end to end (runner -> evidence -> checks -> report -> guide -> diff)
with the fake loop, a stdlib-only stand-in for a client, in seconds and without a client binary.

What the fake loop does is what these tests scripted; nothing here is evidence about a
real client (``tests/test_client_runs.py`` runs the real one).
"""

from __future__ import annotations

import copy
import json
import os
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from mockapi import Match, Message, Rule, Scenario, TextBlock, ToolUseBlock, text, tool_use
from mockapi.script.replies import StreamError
from probes import cli
from probes.clients import registry
from probes.core.checks import CheckResult, Checks
from probes.core.evidence import Evidence, blocks_of_type, messages
from probes.core.outcome import ProbeOutcome
from probes.core.probe import Claim, Hooks, Invocation, Probe, ReportSpec
from probes.core.verdicts import check_evidence
from probes.report.build import build_report, write_fingerprint, write_report
from probes.report.diff import diff_directories, render_markdown
from probes.report.format import TIMING_SUFFIX, load_folder
from probes.report.guide import write_guide
from probes.run.runner import run_probe
from tests.fakeloop import FakeLoopClient
from tests.fakeloop import catalog as fake_catalog
from tests.fakeloop.catalog import DENY_REASON, READ, REPORTS, STOP_REASON, read_probe

CLIENT = FakeLoopClient()
BINARY = CLIENT.install("1")
CATALOG_FILE = Path(fake_catalog.__file__)


def _run(probe: Probe, work: Path, *, keep: bool = True) -> ProbeOutcome:
    return run_probe(probe, CLIENT, BINARY, work, keep=keep)


def _check(outcome: ProbeOutcome, suffix: str) -> CheckResult:
    return next(c for c in outcome.checks if c.id == f"{outcome.probe.name}.{suffix}")


def _failed(outcome: ProbeOutcome) -> list[str]:
    return [c.id for c in outcome.checks if not c.passed]


def _probe(name: str, scenario: Scenario, *invocations: Invocation,
           check: Callable[[Evidence, Checks], None] | None = None) -> Probe:
    def answered(ev: Evidence, c: Checks) -> None:
        c.equal("answered", "test.fake", "the loop made one request", expected=1,
                observed=len(ev.requests()), evidence="journal")

    return Probe(name=name, title=name, claims=(Claim("test.fake", "a harness test"),),
                 scenario=scenario, invocations=invocations, check=check or answered)


def _write(out: Path, spec: ReportSpec, outcomes: list[ProbeOutcome]) -> dict[str, Any]:
    report, journal, timing = build_report(spec, outcomes, BINARY)
    write_report(report, journal, out, timing)
    write_fingerprint([o.evidence for o in outcomes if o.evidence], BINARY, out)
    write_guide(out)
    return dict(report)


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ProbeOutcome]:
    """One run of every probe of the fake catalog."""
    work = tmp_path_factory.mktemp("catalog")
    return {probe.name: _run(probe, work) for spec in REPORTS for probe in spec.probes}


# ---- one run, all the way through ----------------------------------------------------------

def test_a_read_loop_leaves_paired_evidence_and_passes(catalog: dict[str, ProbeOutcome]) -> None:
    outcome = catalog["read-file"]
    assert outcome.status == "passed", _failed(outcome)
    ev = outcome.evidence
    assert ev is not None
    first, second = ev.requests("read")
    assert [m["role"] for m in messages(first)] == ["user"]
    assert [(i, b["id"]) for i, b in blocks_of_type(second, "tool_use")] == [(1, "toolu_read")]
    results = [(i, b) for i, b in blocks_of_type(second, "tool_result")]
    assert [(i, b["tool_use_id"], b["content"]) for i, b in results] == [
        (2, "toolu_read", "NOTE_CONTENT\n")]
    run = ev.runs["read"]
    assert [e["type"] for e in run.output.events] == [
        "system", "assistant", "user", "assistant", "result"]
    assert run.output.tool_results() == [results[0][1]]
    transcript = f"home/.fakeloop/sessions/{run.session_id}.jsonl"
    assert list(ev.session_files) == [transcript]
    assert run.files_changed[transcript]["before"] is None
    assert run.files_changed[transcript]["after"]
    assert ev.placeholders["/sandbox/home/.fakeloop"] == "$FAKELOOP_DIR"  # as the client sees it


def test_a_report_round_trips_and_two_runs_diff_clean(catalog: dict[str, ProbeOutcome],
                                                      tmp_path: Path) -> None:
    spec = ReportSpec("fake-read", "Fake read", (READ,))
    report = _write(tmp_path / "a", spec, [catalog["read-file"]])
    assert (report["status"], [c["status"] for c in report["claims"]]) == ("passed", ["confirmed"])
    folder = load_folder(tmp_path / "a")
    assert folder.reports == {"fake-read": json.loads(json.dumps(report))}
    assert folder.fingerprint is not None and folder.client["name"] == "fake-loop"
    guide = (tmp_path / "a" / "EVIDENCE.md").read_text()
    assert "### `fake.read-loop` — CONFIRMED" in guide
    assert "| fake-read | read-file | read | completed | success | False | 0 |" in guide

    _write(tmp_path / "b", spec, [_run(READ, tmp_path / "work")])
    diff = diff_directories(tmp_path / "a", tmp_path / "b")
    assert [c["change"] for c in diff["claims"]] == ["same"]
    assert diff["checks_flipped"] == [] and diff["request_sequences"] == []
    assert diff.regressions == []


def test_two_full_runs_write_byte_identical_reports(tmp_path: Path) -> None:
    for side in ("a", "b"):
        code = cli.run_suite((CLIENT, "1"), tmp_path / side, catalog=REPORTS,
                             work_dir=str(tmp_path / f"work-{side}"))
        assert code == cli.EXIT_PASSED
    names = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "b").iterdir())
    assert "EVIDENCE.md" in names and "fake-tools.journal.jsonl" in names
    compared = [n for n in names if not n.endswith(TIMING_SUFFIX)]
    different = [n for n in compared
                 if (tmp_path / "a" / n).read_bytes() != (tmp_path / "b" / n).read_bytes()]
    assert different == []
    assert len(compared) < len(names)  # the timing files were written, and left out


# ---- what the runner turns into verdicts -----------------------------------------------------

def test_a_probe_needing_fork_is_not_applicable(tmp_path: Path) -> None:
    probe = _probe("forks", Scenario(), Invocation("first", "P"),
                   Invocation("fork", "P", session="resume", resume_from="first", fork=True))
    outcome = _run(probe, tmp_path)
    assert outcome.not_applicable == (
        "fake-loop 1 lacks what this probe needs: fork (the fake loop has no fork)")
    assert outcome.evidence is None and outcome.checks == []
    report, _, _ = build_report(ReportSpec("r", "r", (probe,)), [outcome], BINARY)
    assert report["status"] == "not_applicable"
    assert [(c["status"], c["reason"]) for c in report["claims"]] == [
        ("not_applicable", outcome.not_applicable)]
    assert list(tmp_path.iterdir()) == []  # no sandbox was made


def test_a_stop_block_reenters_the_loop(catalog: dict[str, ProbeOutcome]) -> None:
    outcome = catalog["stop-block"]
    assert outcome.status == "passed", _failed(outcome)
    ev = outcome.evidence
    assert ev is not None
    first, second = ev.requests("stop")
    assert messages(second)[0] == messages(first)[0]
    assert messages(second)[1] == {"role": "assistant",
                                   "content": [{"type": "text", "text": "FIRST_ANSWER"}]}
    assert messages(second)[-1] == {"role": "user",
                                    "content": [{"type": "text", "text": STOP_REASON}]}
    calls = [(h["input"]["stop_hook_active"], h["decision"]) for h in ev.hooks("Stop")]
    assert calls == [(False, {"decision": "block", "reason": STOP_REASON}), (True, None)]
    assert ev.runs["stop"].output.result["result"] == "SECOND_ANSWER"  # type: ignore[index]


def test_a_pretooluse_deny_answers_an_error_and_runs_nothing(
        catalog: dict[str, ProbeOutcome]) -> None:
    outcome = catalog["pretooluse-deny"]
    assert outcome.status == "passed", _failed(outcome)
    ev = outcome.evidence
    assert ev is not None
    results = [b for _, b in blocks_of_type(ev.request("deny", 1), "tool_result")]
    assert results == [{"type": "tool_result", "tool_use_id": "toolu_bash",
                        "content": DENY_REASON, "is_error": True}]
    assert "ran.txt" not in ev.workspace_files and not (Path(str(outcome.sandbox), "workspace")
                                                         / "ran.txt").exists()
    assert [h["input"]["tool_input"] for h in ev.hooks("PreToolUse")] == [
        {"command": "touch /sandbox/workspace/ran.txt"}]  # the path the client sees
    assert ev.hooks("PostToolUse") == []


def test_a_resumed_session_sends_the_first_exchange_again(
        catalog: dict[str, ProbeOutcome]) -> None:
    outcome = catalog["resume"]
    assert outcome.status == "passed", _failed(outcome)
    ev = outcome.evidence
    assert ev is not None
    (first,), (second,) = ev.requests("first"), ev.requests("second")
    assert messages(second)[:1] == messages(first)
    assert [m["role"] for m in messages(second)] == ["user", "assistant", "user"]
    session = ev.runs["first"].session_id
    assert ev.runs["second"].session_id == session
    assert ev.runs["second"].argv[-1].count(f'"resume": "{session}"') == 1
    path = f"home/.fakeloop/sessions/{session}.jsonl"
    assert ev.runs["second"].files_changed[path]["before"] == \
        ev.runs["first"].files_changed[path]["after"]
    assert len(ev.transcript(session)) == 4


def test_a_hanging_client_is_killed_with_its_process_group(tmp_path: Path) -> None:
    probe = _probe("hang", Scenario(), Invocation("wait", "HANG", extra_args=("--hang",),
                                                  timeout=1.0))
    outcome = _run(probe, tmp_path)
    assert outcome.evidence is not None
    run = outcome.evidence.runs["wait"]
    assert (run.timed_out, run.exit_code) == (True, None)
    assert run.last_events() == ["system/init"]
    finished = _check(outcome, "harness.wait.finished")
    assert not finished.passed and "killed at the 1.0s timeout" in finished.observed
    assert outcome.status == "error"  # the harness stopped it: the run decides nothing
    # the fake's sleeping child was in the group too; allow init a moment to reap it
    deadline = time.monotonic() + 5
    while True:
        try:
            os.killpg(run.pid, 0)
        except ProcessLookupError:
            break
        assert time.monotonic() < deadline, f"process group {run.pid} outlived its run"
        time.sleep(0.05)


def test_a_check_that_raises_is_a_harness_error(tmp_path: Path) -> None:
    def raising(ev: Evidence, c: Checks) -> None:
        raise KeyError("no-such-field")

    probe = _probe("raises", Scenario(rules=[Rule(reply=text("HI"))]),
                   Invocation("run", "HELLO"), check=raising)
    outcome = _run(probe, tmp_path)
    assert outcome.error is not None
    assert outcome.error.startswith("a check raised instead of failing: ")
    assert "KeyError: 'no-such-field'" in outcome.error
    assert outcome.status == "error"
    report, _, _ = build_report(ReportSpec("r", "r", (probe,)), [outcome], BINARY)
    assert report["status"] == "error" and report["claims"][0]["status"] == "error"


def test_a_client_that_cannot_build_its_command_is_a_harness_error(tmp_path: Path) -> None:
    probe = _probe("bad-args", Scenario(), Invocation("run", "GO", extra_args=("--bogus",)))
    outcome = _run(probe, tmp_path)
    assert (outcome.status, outcome.evidence, outcome.checks) == ("error", None, [])
    assert outcome.error == ("ValueError: the fake loop takes --egress HOST:PORT, --hang and "
                             "--hook-input-without FIELD, not '--bogus' (extra_args "
                             "['--bogus'])")


def test_a_client_whose_offer_cannot_be_read_is_a_harness_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the client offers (Claude Code: its --help) could not be read: an error, never
    absent or not applicable, and no sandbox is made."""
    def unreadable(binary: object) -> object:
        raise RuntimeError("fake-loop 1: --help exited 1 printing 0 bytes")
    monkeypatch.setattr(CLIENT, "capabilities", unreadable)
    outcome = _run(_probe("offer", Scenario(), Invocation("run", "GO")), tmp_path)
    assert (outcome.status, outcome.evidence, outcome.not_applicable) == ("error", None, None)
    assert outcome.error == "RuntimeError: fake-loop 1: --help exited 1 printing 0 bytes"
    assert list(tmp_path.iterdir()) == []


def test_an_unscripted_request_fails_script_covered(tmp_path: Path) -> None:
    probe = _probe("unscripted", Scenario(rules=[
        Rule(id="other", match=Match(last_user_text_contains="SOMETHING_ELSE"), reply=text("X"))]),
        Invocation("run", "NOBODY_SCRIPTED_ME"))
    outcome = _run(probe, tmp_path, keep=False)
    assert outcome.sandbox is None and list(tmp_path.iterdir()) == []
    covered = _check(outcome, "harness.script-covered")
    assert not covered.passed
    assert covered.observed == [
        "loopprobe mock: no scenario rule matched request #1 (kind=main, turn=1, attempt=1); "
        "nearest rule 'other': last_user_text_contains: expected 'SOMETHING_ELSE', "
        "got 'NOBODY_SCRIPTED_ME'"]
    assert outcome.evidence is not None
    result = outcome.evidence.runs["run"].result or {}
    assert (result["subtype"], result["terminal_reason"]) == (
        "error_during_execution", "api_error")
    assert result["result"].startswith("API Error: 400 ")
    assert outcome.evidence.runs["run"].exit_code == 1


def test_egress_is_refused_and_reported(tmp_path: Path) -> None:
    probe = _probe("egress", Scenario(rules=[Rule(reply=text("HI"))]),
                   Invocation("run", "HELLO", extra_args=("--egress", "example.invalid:443")))
    outcome = _run(probe, tmp_path)
    egress = _check(outcome, "harness.no-egress")
    assert (egress.passed, egress.observed) == (False, ["example.invalid:443"])
    assert _check(outcome, "answered").passed
    report, _, _ = build_report(ReportSpec("r", "r", (probe,)), [outcome], BINARY)
    assert report["trust"]["egress_refused"] == ["example.invalid:443"]
    # the client's act, refused and reported: it decides no verdict (probes.core.verdicts)
    assert [c["status"] for c in report["claims"]] == ["confirmed"]
    assert report["status"] == "passed"


# ---- the fake loop keeps its own contract -----------------------------------------------------

def _then_done(first: Message) -> Scenario:
    return Scenario(rules=[Rule(id="first", match=Match(last_user_text_contains="GO"), reply=first),
                           Rule(id="done", match=Match(tool_result_for="toolu_1"),
                                reply=text("DONE"))])


CONTRACT = [
    ("max-turns: the tools run, then error_max_turns",
     _then_done(tool_use("Bash", {"command": "echo ran"}, id="toolu_1")),
     Invocation("run", "GO", tools=("Bash",), max_turns=1), None,
     ("error_max_turns", "max_turns", 1, [("toolu_1", "ran\n", False)], 1)),
    ("an SSE error event is an API error",
     Scenario(rules=[Rule(reply=Message(text="partial", stream_error=StreamError(after_events=3)))]),
     Invocation("run", "GO"), None, ("error_during_execution", "api_error", 1, [], 1)),
    ("a tool not offered is an error result",
     _then_done(tool_use("Edit", {}, id="toolu_1")), Invocation("run", "GO"), None,
     ("success", "completed", 0, [("toolu_1", "No such tool available: Edit", True)], 2)),
    ("PreToolUse updatedInput is the input that runs",
     _then_done(tool_use("Read", {"file_path": "/nonexistent"}, id="toolu_1")),
     Invocation("run", "GO"),
     Hooks({"PreToolUse": {"action": "update_input", "input": {"file_path": "{workspace}/f"}}}),
     ("success", "completed", 0, [("toolu_1", "F\n", False)], 2)),
    ("continue false ends the run with the last text",
     _then_done(Message(content=[TextBlock(text="BEFORE"),
                                 ToolUseBlock(name="Read", input={"file_path": "f"}, id="toolu_1")])),
     Invocation("run", "GO"), Hooks({"PreToolUse": {"action": "output",
                                                    "output": {"continue": False}}}),
     ("success", "completed", 0, [], 1)),
]


@pytest.mark.parametrize(("scenario", "invocation", "hooks", "expected"),
                         [case[1:] for case in CONTRACT], ids=[case[0] for case in CONTRACT])
def test_the_fake_loop_keeps_its_contract(tmp_path: Path, scenario: Scenario,
                                          invocation: Invocation, hooks: Hooks | None,
                                          expected: tuple[Any, ...]) -> None:
    probe = replace(_probe("contract", scenario, invocation), hooks=hooks,
                    fixtures={"f": "F\n"})
    outcome = _run(probe, tmp_path)
    assert outcome.evidence is not None
    run = outcome.evidence.runs["run"]
    result = run.result or {}
    assert (result.get("subtype"), result.get("terminal_reason"), run.exit_code,
            [(b["tool_use_id"], b["content"], b.get("is_error", False))
             for b in run.output.tool_results()],
            len(outcome.evidence.requests())) == expected, run.stdout[-2000:]


# ---- the command line --------------------------------------------------------------------

def test_the_cli_runs_a_catalog_and_exits_by_verdict(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    failing = (ReportSpec("fake-wrong", "Fake read, wrong answer", (read_probe("WRONG"),)),)
    out = tmp_path / "failing"
    assert cli.run_suite((CLIENT, "1"), out, catalog=failing,
                         work_dir=str(tmp_path / "work")) == cli.EXIT_FAILED
    assert sorted(p.name for p in out.iterdir()) == [
        "EVIDENCE.md", "fake-wrong.journal.jsonl", "fake-wrong.json", "fake-wrong.timing.json",
        "fingerprint.json"]
    assert "### `fake.read-loop` — CONTRADICTED" in (out / "EVIDENCE.md").read_text()

    # a client kind is its module plus one registry entry
    monkeypatch.setitem(registry.CLIENT_KINDS, "fake-loop", FakeLoopClient)
    out = tmp_path / "cli"
    code = cli.main(["run", "--client", "fake-loop@1", "--catalog", str(CATALOG_FILE),
                     "--report", "fake-tools", "--out", str(out),
                     "--work-dir", str(tmp_path / "work")])
    assert code == cli.EXIT_PASSED
    report = json.loads((out / "fake-tools.json").read_text())
    assert report["client"]["name"] == "fake-loop" and report["status"] == "passed"
    assert (out / "EVIDENCE.md").is_file()


def test_a_changed_reply_is_a_regression_in_the_diff(catalog: dict[str, ProbeOutcome],
                                                     tmp_path: Path) -> None:
    spec = ReportSpec("fake-read", "Fake read", (READ,))
    _write(tmp_path / "a", spec, [catalog["read-file"]])
    changed = read_probe("SOMETHING_ELSE")
    _write(tmp_path / "b", replace(spec, probes=(changed,)), [_run(changed, tmp_path / "work")])
    diff = diff_directories(tmp_path / "a", tmp_path / "b")
    assert [(c["id"], c["a"], c["b"]) for c in diff.regressions] == [
        ("fake.read-loop", "confirmed", "contradicted")]
    assert [(c["id"], c["observed_a"], c["observed_b"]) for c in diff["checks_flipped"]] == [
        ("read-file.read.final-text", "NOTE_READ", "SOMETHING_ELSE")]
    assert diff["request_sequences"] == []
    assert "**1 claim(s) regressed**" in render_markdown(diff)


# ---- every check of the fake catalog can fail ------------------------------------------------

def _recheck(outcome: ProbeOutcome, alter: Callable[[Evidence], None]) -> set[str]:
    evidence = copy.deepcopy(outcome.evidence)
    assert evidence is not None
    alter(evidence)
    results, _ = check_evidence(outcome.probe, evidence)
    return {c.id.removeprefix(f"{outcome.probe.name}.") for c in results if not c.passed}


def _tool_results(ev: Evidence, run: str) -> list[dict[str, Any]]:
    return [b for _, b in blocks_of_type(ev.request(run, 1), "tool_result")]


def _drop_last_request(run: str) -> Callable[[Evidence], None]:
    return lambda ev: ev.journal.remove(ev.requests(run)[-1])


def _set_in_results(key: str, value: Any, run: str) -> Callable[[Evidence], None]:
    def alter(ev: Evidence) -> None:
        for block in _tool_results(ev, run):
            block[key] = value
    return alter


def _end_badly(ev: Evidence) -> None:
    for run in ev.runs.values():
        (run.result or {}).update(result="OTHER", subtype="error_during_execution", is_error=True)
        run.exit_code = 1


def _replace_last_user(ev: Evidence) -> None:
    messages(ev.request("stop", 1))[-1]["content"] = [{"type": "text", "text": "no reason"}]


def _stop_never_active(ev: Evidence) -> None:
    for call in ev.hooks("Stop"):
        call["input"]["stop_hook_active"] = False


def _post_tool_use_ran(ev: Evidence) -> None:
    ev.hook_calls.append({"event": "PostToolUse", "input": {"tool_name": "Bash"}})


def _forget_history(ev: Evidence) -> None:
    body = ev.request("second", 0)["body"]
    body["messages"] = body["messages"][-1:]


def _new_session(ev: Evidence) -> None:
    ev.runs["second"].session_id = "another-session"


ENDED = {f"{run}.{what}" for run in ("read", "stop", "deny", "first", "second")
         for what in ("final-text", "subtype", "is-error", "exit-code")}
ALTERATIONS: list[tuple[str, str, Callable[[Evidence], None], set[str]]] = [
    ("read-file", "second request lost", _drop_last_request("read"),
     {"requests", "paired", "file-content"}),
    ("read-file", "result for another id", _set_in_results("tool_use_id", "toolu_other", "read"),
     {"paired"}),
    ("read-file", "file text missing", _set_in_results("content", "empty", "read"),
     {"file-content"}),
    ("read-file", "no transcript", lambda ev: ev.session_files.clear(), {"transcript"}),
    ("stop-block", "no re-entry", _drop_last_request("stop"), {"requests", "reason-sent"}),
    ("stop-block", "reason not sent", _replace_last_user, {"reason-sent"}),
    ("stop-block", "never active", _stop_never_active, {"stop-hook-active"}),
    ("pretooluse-deny", "not an error", _set_in_results("is_error", False, "deny"),
     {"denied-result"}),
    ("pretooluse-deny", "the command ran", lambda ev: ev.workspace_files.update({"ran.txt": ""}),
     {"not-run"}),
    ("pretooluse-deny", "PostToolUse ran", _post_tool_use_ran, {"hook-calls"}),
    ("resume", "history not sent", _forget_history, {"history-sent"}),
    ("resume", "another session", _new_session, {"same-session"}),
    *[(name, "ended badly", _end_badly, {c for c in ENDED if any(
        c.startswith(f"{i.name}.") for i in probe.invocations)})
      for name, probe in ((p.name, p) for s in REPORTS for p in s.probes)],
]


@pytest.mark.parametrize(("probe", "alter", "failing"),
                         [(p, a, f) for p, _, a, f in ALTERATIONS],
                         ids=[f"{p}: {what}" for p, what, _, _ in ALTERATIONS])
def test_altered_evidence_fails_exactly_its_checks(catalog: dict[str, ProbeOutcome], probe: str,
                                                   alter: Callable[[Evidence], None],
                                                   failing: set[str]) -> None:
    assert _recheck(catalog[probe], lambda ev: None) == set()
    assert _recheck(catalog[probe], alter) == failing


def test_every_check_of_the_fake_catalog_is_shown_failing(
        catalog: dict[str, ProbeOutcome]) -> None:
    shown = {f"{p}.{check}" for p, _, _, failing in ALTERATIONS for check in failing}
    claim_checks = {c.id for o in catalog.values() for c in o.checks if c.claim is not None}
    assert claim_checks - shown == set()


# ---- verdicts: what was seen, what this mode hides, where the checks read ---------------------

def _verdict_probe(seen: bool, matches: bool) -> Probe:
    def check(ev: Evidence, c: Checks) -> None:
        c.equal("answered", "test.fake", "the loop made one request", expected=1,
                observed=len(ev.requests()) if matches else 0, evidence="journal")
        c.visible("warning", "test.fake", "a warning this mode may drop", seen=seen,
                  expected="the warning", looked_in="stdout, stderr",
                  hidden_because="print mode drops informational messages")
    return _probe("verdict", Scenario(rules=[Rule(match=Match(), reply=text("hi"))]),
                  Invocation("run", "PROMPT", tools=None), check=check)


@pytest.mark.parametrize(("seen", "matches", "claim", "report_status"), [
    (True, True, "confirmed", "passed"),
    (False, True, "not_observable", "passed"),
    (False, False, "contradicted", "failed"),
])
def test_a_hidden_behaviour_is_not_observable_never_contradicted(
        tmp_path: Path, seen: bool, matches: bool, claim: str, report_status: str) -> None:
    outcome = _run(_verdict_probe(seen, matches), tmp_path / "work")
    report = _write(tmp_path / "out", ReportSpec("verdicts", "Verdicts", (outcome.probe,)),
                    [outcome])
    (entry,) = report["claims"]
    assert (entry["status"], report["status"]) == (claim, report_status), entry["reason"]
    statuses = {c["id"].rsplit(".", 1)[-1]: c["status"] for c in report["checks"]}
    assert statuses["warning"] == ("passed" if seen else "not_observable")
    guide = (tmp_path / "out" / "EVIDENCE.md").read_text()
    assert f"— {claim.replace('_', ' ').upper()}" in guide


def test_checks_name_the_journal_lines_they_read(tmp_path: Path) -> None:
    outcome = _run(_verdict_probe(True, True), tmp_path / "work")
    report = _write(tmp_path / "out", ReportSpec("lines", "Lines", (outcome.probe,)), [outcome])
    lines = (tmp_path / "out" / report["journal"]).read_text().splitlines()
    answered = next(c for c in report["checks"] if c["id"].endswith(".answered"))
    assert answered["journal_lines"], answered
    for number in answered["journal_lines"]:
        record = json.loads(lines[number - 1])
        assert (record["type"], record["path"]) == ("request", "/v1/messages")
    warning = next(c for c in report["checks"] if c["id"].endswith(".warning"))
    assert warning["journal_lines"] == []  # it looked nothing up
