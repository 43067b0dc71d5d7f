"""The case file (probes.cases): its format's refusals, each expectation's check on evidence
where it holds and where it does not, the hook wrapper's record, and the user's setup copied
into a sandbox as it is (modes, binary files, links; FIFOs refused; hooks wrapped)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from probes.cases.catalog import case_catalog
from probes.cases.expectations import check_expectation, tool_runs
from probes.cases.format import DEFAULT_RULE, CaseFileError, Expectation, load_case_file
from probes.core.checks import Checks
from probes.core.evidence import Evidence, Output, RunRecord
from probes.core.invocation import Invocation
from probes.inside import hook_wrapper
from probes.run.collector import Collector
from probes.sandbox.folders import Sandbox
from probes.sandbox.user_setup import SetupError, install_setup, read_tree, wrapper_command
from tests.conftest import one_line_error

CASE = {
    "loopprobe": "cases/1", "name": "demo", "title": "Demo",
    "cases": [{"name": "one", "title": "One", "prompt": "hi",
               "model": [{"content": [{"type": "tool_use", "name": "Bash",
                                       "input": {"command": "ls"}}]}, {"text": "done"}],
               "expect": [{"tool_called": {"name": "Bash"}}]}],
}


def _write(tmp_path: Path, data: Any, name: str = "cases.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


def _case(**changes: Any) -> dict[str, Any]:
    return {**CASE, "cases": [{**CASE["cases"][0], **changes}]}  # type: ignore[dict-item]


# ---- the format -------------------------------------------------------------------------

def test_a_case_file_becomes_one_report_with_a_claim_per_expectation(tmp_path: Path) -> None:
    (spec,) = case_catalog(_write(tmp_path, _case(expect=[
        {"tool_called": {"name": "Bash"}}, {"tool_called": {"name": "Read"}},
        {"id": "mine", "max_requests": 3}])))
    (probe,) = spec.probes
    assert spec.name == "demo" and probe.name == "one"
    assert [c.id for c in probe.claims] == ["one.tool-called-1", "one.tool-called-2", "one.mine"]
    assert probe.claims[0].source.kind == "project"
    assert "cases.yaml, case one, expectation tool-called-1" in probe.claims[0].source.cite()
    rules = probe.scenario.rules
    assert [r.id for r in rules] == ["turn-1", "turn-2", DEFAULT_RULE]
    assert rules[-1].match.kind == "any" and rules[-1].repeat == "always"


@pytest.mark.parametrize(("change", "said"), [
    ({"loopprobe": "cases/9"}, "expected a case file (a mapping with loopprobe: cases/1), found 'cases/9'"),
    ({"name": "Bad Name"}, "at name: String should match pattern"),
    ({"cases": []}, "at cases: List should have at least 1 item"),
])
def test_a_malformed_file_is_refused_in_one_line_naming_the_place(
        tmp_path: Path, change: dict[str, Any], said: str) -> None:
    with pytest.raises(CaseFileError, match=r"cases\.yaml") as refused:
        load_case_file(_write(tmp_path, {**CASE, **change}))
    assert said in str(refused.value) and "\n" not in str(refused.value)


@pytest.mark.parametrize(("case", "said"), [
    ({"command": "/greet"}, "expected exactly one of prompt and command"),
    ({"expect": [{"tool_called": {"name": "Bash"}, "file_exists": "a"}]},
     "expected exactly one of tool_called"),
    ({"expect": [{"tool_calld": {"name": "Bash"}}]}, "Extra inputs are not permitted"),
    ({"expect": [{"result": {}}]}, "expected at least one of subtype"),
    ({"expect": [{"id": "x", "max_requests": 1}, {"id": "x", "max_requests": 2}]},
     "expectation ids must be unique"),
    ({"rules": [], "model": []}, "expected model (replies in order) or rules"),
    ({"model": [{"txt": "hi"}]}, "at cases.0.model.0"),
])
def test_a_case_s_mistake_is_refused(tmp_path: Path, case: dict[str, Any], said: str) -> None:
    with pytest.raises(CaseFileError) as refused:
        load_case_file(_write(tmp_path, _case(**case)))
    assert said in str(refused.value)


def test_a_setup_folder_that_is_missing_is_refused_before_any_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, {**CASE, "setup": {"plugin_dirs": ["nowhere"]}})
    said = one_line_error(["check", str(path), "--versions", "2.1.235",
                           "--out", str(tmp_path / "out")], capsys)
    assert f"setup.plugin_dirs[0]: expected a folder, but {tmp_path / 'nowhere'} is missing" \
        in said, said


@pytest.mark.parametrize("which", ["cases", "baseline"])
def test_a_fifo_or_an_alias_bomb_given_as_a_case_file_or_baseline_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], which: str) -> None:
    good = _write(tmp_path, CASE)
    os.mkfifo(tmp_path / "pipe.yaml")
    (tmp_path / "bomb.yaml").write_text("a: &a [1, 2]\nb: [*a, *a]\n")
    for hostile in ("pipe.yaml", "bomb.yaml"):
        path = str(tmp_path / hostile)
        argv = ["check", path] if which == "cases" else ["check", str(good), "--baseline", path]
        said = one_line_error([*argv, "--versions", "2.1.235", "--out", str(tmp_path / "o")],
                              capsys)
        assert "refused" in said, said


def test_validate_checks_a_case_file_against_its_schema(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from probes.cli import main
    assert main(["validate", str(_write(tmp_path, CASE))]) == 0
    bad = _write(tmp_path, _case(expect=[{"tool_called": {"name": "B"}, "file_exists": "a"}]),
                 "bad.yaml")
    assert main(["validate", str(bad)]) == 2
    assert "/cases/0/expect/0" in capsys.readouterr().out


# ---- each expectation, where it holds and where it does not ------------------------------

def _request(seq: int, messages: list[dict[str, Any]], system: str = "") -> dict[str, Any]:
    return {"type": "request", "seq": seq, "path": "/v1/messages", "kind": "main",
            "body": {"system": system, "messages": messages}}


def _evidence(*, hooks: list[dict[str, Any]] | None = None,
              files: dict[str, str] | None = None) -> Evidence:
    ask = {"role": "assistant", "content": [
        {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "rm -rf build"}},
        {"type": "tool_use", "id": "t2", "name": "Read", "input": {"file_path": "/w/a"}}]}
    back = {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t1", "is_error": True,
         "content": "blocked: rm -rf is not allowed"},
        {"type": "tool_result", "tool_use_id": "t2", "content": "hello"}]}
    journal = [_request(1, [{"role": "user", "content": "clean up"}], system="be kind"),
               _request(2, [{"role": "user", "content": "clean up"}, ask, back])]
    run = RunRecord("run", Invocation("run", "clean up"), [], {}, 0, False, 1.0, "", "",
                    Output(events=[{"type": "result", "subtype": "success", "is_error": False}],
                           unparsed=[]),
                    None, (0, 2))
    return Evidence("one", {}, {"run": run}, journal,  # type: ignore[arg-type]
                    hook_runs=hooks or [], workspace_files=files or {})


HOOK = {"event": "PreToolUse", "exit_code": 2, "stdout": "", "stderr": "blocked: rm -rf",
        "command": "$PLUGIN/no-rm.sh", "input": {"tool_name": "Bash",
                                                  "tool_input": {"command": "rm -rf build"}}}
HOLDS = [
    {"tool_called": {"name": "Read", "input": {"file_path": "{workspace}/a"}}},
    {"tool_not_called": {"name": "Bash", "input": {"command": "rm -rf build"}}},
    {"tool_order": ["Read"]},
    {"tool_result": {"name": "Bash", "is_error": True, "contains": "not allowed"}},
    {"request_contains": {"request": 1, "text": "be kind"}},
    {"request_contains": {"text": "not allowed"}},
    {"hook_ran": {"event": "PreToolUse", "input": {"tool_name": "Bash"}}},
    {"hook_not_ran": {"event": "Stop"}},
    {"hook_result": {"event": "PreToolUse", "exit_code": 2, "stderr_contains": "blocked"}},
    {"file_exists": "build/keep.txt"},
    {"file_absent": "gone.txt"},
    {"file_contains": {"path": "build/keep.txt", "text": "keep"}},
    {"result": {"subtype": "success", "exit_code": 0}},
    {"max_requests": 2},
]
# each of HOLDS, changed so that the same evidence contradicts it
FAILS = [
    {"tool_called": {"name": "Bash"}},
    {"tool_not_called": {"name": "Read"}},
    {"tool_order": ["Read", "Bash"]},
    {"tool_result": {"name": "Bash", "is_error": False}},
    {"request_contains": {"request": 1, "text": "not allowed"}},
    {"request_contains": {"text": "never said"}},
    {"hook_ran": {"event": "PreToolUse", "input": {"tool_name": "Read"}}},
    {"hook_not_ran": {"event": "PreToolUse"}},
    {"hook_result": {"event": "PreToolUse", "exit_code": 0}},
    {"file_exists": "build/other.txt"},
    {"file_absent": "build/keep.txt"},
    {"file_contains": {"path": "build/keep.txt", "text": "gone"}},
    {"result": {"subtype": "error_max_turns"}},
    {"max_requests": 1},
]


def _checked(expectation: dict[str, Any]) -> list[dict[str, Any]]:
    checks = Checks("one")
    check_expectation(Expectation.model_validate(expectation), "e", "one.e",
                      _evidence(hooks=[HOOK], files={"build/keep.txt": "keep me"}), checks,
                      {"workspace": "/w"})
    return [r.to_json() for r in checks.results]


@pytest.mark.parametrize("expectation", HOLDS, ids=lambda e: next(iter(e)))
def test_each_expectation_passes_where_it_holds(expectation: dict[str, Any]) -> None:
    assert all(c["passed"] for c in _checked(expectation))


@pytest.mark.parametrize("expectation", FAILS, ids=lambda e: next(iter(e)))
def test_each_expectation_fails_where_it_does_not_with_what_was_observed(
        expectation: dict[str, Any]) -> None:
    (check,) = _checked(expectation)
    assert not check["passed"] and check["status"] == "failed"
    assert check["observed"] not in (None, "", [])


def test_every_expectation_kind_is_shown_holding_and_failing() -> None:
    from probes.cases.format import EXPECTATION_KINDS
    assert {next(iter(e)) for e in HOLDS} == {next(iter(e)) for e in FAILS} == set(EXPECTATION_KINDS)


def test_a_terminal_reason_a_version_never_reports_is_not_observable() -> None:
    checks = Checks("one")
    check_expectation(Expectation.model_validate({"result": {"terminal_reason": "completed"}}),
                      "e", "one.e", _evidence(), checks, {})
    (check,) = [r.to_json() for r in checks.results]
    assert check["status"] == "not_observable"


def test_tool_runs_pair_each_call_with_its_result() -> None:
    runs = tool_runs(_evidence())
    assert [(r["name"], r["is_error"]) for r in runs] == [("Bash", True), ("Read", False)]


# ---- the hook wrapper ---------------------------------------------------------------------

def test_the_wrapper_passes_a_hook_through_and_reports_its_run(tmp_path: Path) -> None:
    evidence = tmp_path / "evidence"
    evidence.mkdir()
    with Collector(tmp_path / "r.sock", evidence) as collector:
        done = subprocess.run(
            [sys.executable, "-I", "-S", hook_wrapper.__file__, str(tmp_path / "r.sock"),
             "plugin:p/hooks/hooks.json:PreToolUse", "--",
             'read x; echo "out:$x"; echo err >&2; exit 3'],
            input=json.dumps({"hook_event_name": "PreToolUse", "tool_name": "Bash"}) + "\n",
            capture_output=True, text=True, timeout=30)
        deadline = time.monotonic() + 10  # the record arrives on the collector's own thread
        while not collector.hook_runs and time.monotonic() < deadline:
            time.sleep(0.02)
    assert (done.returncode, done.stderr) == (3, "err\n")
    assert done.stdout.startswith("out:{")
    (record,) = collector.hook_runs
    assert record["event"] == "PreToolUse" and record["exit_code"] == 3
    assert record["stderr"] == "err\n" and record["stdout"] == done.stdout
    assert record["source"] == "plugin:p/hooks/hooks.json:PreToolUse"
    assert record["input"]["tool_name"] == "Bash" and record["duration"] >= 0


def test_the_wrapper_runs_the_hook_when_the_harness_is_unreachable(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-I", "-S", hook_wrapper.__file__,
                           str(tmp_path / "none.sock"), "s", "--", "echo ran; exit 2"],
                          input="{}", capture_output=True, text=True, timeout=30)
    assert (done.returncode, done.stdout) == (2, "ran\n")
    assert "the harness is unreachable" in done.stderr


# ---- the setup copied in as it is ---------------------------------------------------------

def _plugin(root: Path) -> Path:
    plugin = root / "plug"
    (plugin / "hooks").mkdir(parents=True)
    (plugin / "scripts").mkdir()
    script = plugin / "scripts" / "guard.sh"
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(0o755)
    (plugin / "hooks" / "hooks.json").write_text(json.dumps({"hooks": {"PreToolUse": [
        {"matcher": "Bash", "hooks": [{"type": "command",
                                       "command": "${CLAUDE_PLUGIN_ROOT}/scripts/guard.sh"},
                                      {"type": "prompt", "prompt": "is it safe?"}]}]}}))
    (plugin / "logo.bin").write_bytes(bytes(range(256)))
    (plugin / "link").symlink_to("scripts/guard.sh")
    return plugin


def test_a_setup_is_copied_with_modes_binaries_and_links_and_its_hooks_wrapped(
        tmp_path: Path) -> None:
    from probes.core.setup import UserSetup
    workspace = tmp_path / "ws"
    (workspace / ".claude").mkdir(parents=True)
    (workspace / "run.sh").write_text("#!/bin/sh\n")
    (workspace / "run.sh").chmod(0o750)
    (workspace / "out").symlink_to("/etc/hostname")
    (workspace / ".claude" / "settings.json").write_text("{not json")
    home = tmp_path / "home-claude"
    (home / "commands").mkdir(parents=True)
    (home / "commands" / "hi.md").write_text("Say hi")
    (home / "settings.json").write_text(json.dumps({"model": "x", "hooks": {"Stop": [
        {"hooks": [{"type": "command", "command": "echo stop"}]}]}}))
    box = Sandbox.create(tmp_path / "boxes", "p")
    wrap = wrapper_command("/py", "/tools/hook_wrapper.py", "/run/r.sock")
    installed = install_setup(box, UserSetup(workspace=workspace, home_config=home,
                                             plugin_dirs=(_plugin(tmp_path),)),
                              box.home / ".claude", str, wrap)
    settings = json.loads((box.home / ".claude" / "settings.json").read_text())
    assert settings["model"] == "x"
    assert settings["hooks"]["Stop"][0]["hooks"][0]["command"].endswith("-- 'echo stop'")
    assert (box.home / ".claude" / "commands" / "hi.md").read_text() == "Say hi"
    assert stat.S_IMODE(os.stat(box.workspace / "run.sh").st_mode) == 0o750
    assert os.readlink(box.workspace / "out") == "/etc/hostname"  # kept, never followed
    plugin = box.inputs / "plugins" / "plug"
    assert installed.plugin_dirs == (str(plugin),)
    assert os.access(plugin / "scripts" / "guard.sh", os.X_OK)
    assert (plugin / "logo.bin").read_bytes() == bytes(range(256))
    assert os.readlink(plugin / "link") == "scripts/guard.sh"
    hooks = json.loads((plugin / "hooks" / "hooks.json").read_text())["hooks"]["PreToolUse"][0]
    command, prompt = hooks["hooks"]
    assert command["command"].startswith("/py -I -S /tools/hook_wrapper.py /run/r.sock ")
    assert command["command"].endswith("-- '${CLAUDE_PLUGIN_ROOT}/scripts/guard.sh'")
    assert prompt == {"type": "prompt", "prompt": "is it safe?"}  # not a command: left alone
    assert any("settings.json: not JSON" in note for note in installed.notes or [])


def test_a_fifo_in_a_setup_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    os.mkfifo(tmp_path / "ws" / "pipe")
    with pytest.raises(SetupError, match="expected a file, a folder or a link, found a FIFO"):
        read_tree(tmp_path / "ws", "workspace")


# ---- check --bisect ---------------------------------------------------------------------

def test_bisect_finds_the_first_release_where_an_expectation_fails(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The search itself, on the fake loop's published versions 1…9 (its runs replaced by
    report folders in which the expectation fails from version 6 on): only that case runs
    on the versions between, and the first failing one becomes first-bad-version."""
    from probes.cli import cases as check_command
    from probes.cli import main
    from tests.test_cases_gate import make_report_folder
    monkeypatch.setenv("LOOPPROBE_CLIENTS", "fake-loop=tests.fakeloop:FakeLoopClient")
    ran: list[tuple[str, str | None]] = []

    def runs(spec: str, out: Path, *, probe: str | None = None, **_: Any) -> None:
        version = spec.split("@")[-1]
        ran.append((version, probe))
        verdict = "confirmed" if int(version) < 6 else "contradicted"
        make_report_folder(out.parent, out.name, {"one.tool-called-1": verdict}, name="demo")

    monkeypatch.setattr(check_command, "execute_suite", runs)
    out = tmp_path / "out"
    code = main(["check", str(_write(tmp_path, CASE)), "--client", "fake-loop",
                 "--versions", "1,9", "--bisect", "--out", str(out),
                 "--github-output", str(tmp_path / "outputs")])
    assert code == 1
    (found,) = json.loads((out / "bisect.json").read_text())["bisects"]
    assert (found["last_same"], found["first_changed"]) == ("5", "6")
    assert "first-bad-version=6" in (tmp_path / "outputs").read_text().splitlines()
    assert ran[:2] == [("1", None), ("9", None)]
    assert all(probe == "one" for _, probe in ran[2:]) and len(ran) <= 2 + 3


def test_a_workspace_file_too_large_to_keep_exists_and_its_text_is_not_observable() -> None:
    evidence = _evidence()
    evidence.workspace_large_files = {"big.bin": 10_000_000}
    results = {}
    for name, expectation in (("exists", {"file_exists": "big.bin"}),
                              ("absent", {"file_absent": "big.bin"}),
                              ("contains", {"file_contains": {"path": "big.bin", "text": "x"}})):
        checks = Checks("one")
        check_expectation(Expectation.model_validate(expectation), "e", "one.e", evidence,
                          checks, {})
        results[name] = checks.results[0].to_json()["status"]
    assert results == {"exists": "passed", "absent": "failed", "contains": "not_observable"}
