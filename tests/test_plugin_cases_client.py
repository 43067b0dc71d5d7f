"""The example plugin's case file on the real client, through ``loopprobe check`` as a plugin
author runs it: every expectation holds on the default version; a copy of the plugin whose
hook scripts lost their exec bit (the mistake a plain copy makes) fails exactly the
expectations that rest on the hook, with the hook's own stderr observed; a baseline listing
those failures passes the gate, and an entry listing one that passes fails it as stale."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Any

import pytest
import yaml

from probes.cli import main
from tests.conftest import DEFAULT_CLIENT_VERSION

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.client


def _check(cases: Path, out: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    code = main(["check", str(cases), "--versions", DEFAULT_CLIENT_VERSION, "--out", str(out),
                 "--junit", str(out / "junit.xml"), "--ctrf", str(out / "ctrf.json"),
                 "--summary", str(out / "summary.md"), "--github-output", str(out / "outputs"),
                 "-j", "2", *extra])
    return code, json.loads((out / "check.json").read_text())


def _outcomes(check: dict[str, Any]) -> dict[str, str]:
    return {f"{r['case']}.{r['expectation']}": r["outcome"] for r in check["results"]}


def test_the_example_plugin_holds_its_contract(claude_code_binary: Any, tmp_path: Path) -> None:
    code, check = _check(ROOT / "examples" / "plugin-cases" / "cases.yaml", tmp_path,
                         "--baseline", str(ROOT / "examples" / "plugin-cases" / "baseline.yaml"))
    assert code == 0, (tmp_path / "summary.md").read_text()
    assert set(_outcomes(check).values()) == {"passed"}
    assert len(check["results"]) >= 20
    suites = ElementTree.parse(tmp_path / "junit.xml").getroot()
    assert len(suites.findall(".//testcase")) == len(check["results"])
    assert json.loads((tmp_path / "ctrf.json").read_text())["results"]["summary"]["failed"] == 0
    assert "failed=false" in (tmp_path / "outputs").read_text()
    report = json.loads((tmp_path / DEFAULT_CLIENT_VERSION / "guard-rails.json").read_text())
    hooks = [h for p in report["probes"] for h in p.get("hook_runs", [])]
    assert {h["event"] for h in hooks} >= {"PreToolUse", "PostToolUse", "Stop"}


def _broken_copy(tmp_path: Path) -> Path:
    """The example's plugin and cases, the PreToolUse script no longer executable; the
    folder a repository (its ``.git``), so the cases reach the plugin beside them."""
    (tmp_path / ".git").mkdir()
    shutil.copytree(ROOT / "examples" / "plugin", tmp_path / "plugin", symlinks=True)
    shutil.copytree(ROOT / "examples" / "plugin-cases", tmp_path / "plugin-cases", symlinks=True)
    (tmp_path / "plugin" / "scripts" / "block-rm-rf.py").chmod(0o644)
    return tmp_path / "plugin-cases" / "cases.yaml"


def test_a_hook_that_cannot_run_fails_what_rests_on_it_and_a_baseline_decides_the_gate(
        claude_code_binary: Any, tmp_path: Path) -> None:
    cases = _broken_copy(tmp_path)
    code, check = _check(cases, tmp_path / "plain")
    failed = sorted(k for k, v in _outcomes(check).items() if v == "failed")
    assert code == 1
    assert "blocks-rm-rf.tool-not-called-1" in failed and "blocks-rm-rf.hook-result-1" in failed
    assert all(name.startswith("blocks-rm-rf.") for name in failed), failed
    hook = next(r for r in check["results"] if r["claim"] == "blocks-rm-rf.hook-result-1")
    assert "Permission denied" in json.dumps(hook["observed"])  # the hook's stderr, shown
    baseline = tmp_path / "baseline.yaml"
    entries = [{"case": "blocks-rm-rf", "expectation": name.split(".", 1)[1],
                "versions": f">={DEFAULT_CLIENT_VERSION}", "reason": "the hook is broken"}
               for name in failed]
    baseline.write_text(yaml.safe_dump({"loopprobe": "baseline/1", "expected_failures": entries}))
    code, check = _check(cases, tmp_path / "listed", "--baseline", str(baseline))
    assert code == 0 and "expected_failure" in _outcomes(check).values()
    stale = [*entries, {"case": "greet-command", "expectation": "*",
                        "versions": f">={DEFAULT_CLIENT_VERSION}", "reason": "stale"}]
    baseline.write_text(yaml.safe_dump({"loopprobe": "baseline/1", "expected_failures": stale}))
    code, check = _check(cases, tmp_path / "stale", "--baseline", str(baseline))
    assert code == 1 and "stale" in _outcomes(check).values()


SECRET = "host-secret-3f9c1e"


@pytest.mark.parametrize("named_by", ["setup.workspace", "--workspace"])
def test_a_workspace_committed_as_a_link_to_a_host_folder_is_refused_and_nothing_leaks(
        claude_code_binary: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        named_by: str) -> None:
    """A fork's pull request commits ``ws`` as a link to a folder of the runner holding a
    secret; its case file names it (``setup.workspace``), or the workflow's ``workspace:``
    input does (the action passes it as ``--workspace``). The scripted model has the real
    client's Bash print the file and an expectation keeps its text: copied, the secret lands
    in the journal and check.json, which the action uploads. It is refused when the case
    file loads, naming the field and the root, and no file of the evidence holds it."""
    host = tmp_path / "runner-home"
    host.mkdir()
    (host / "secret.txt").write_text(SECRET + "\n")
    fork = tmp_path / "fork"
    (fork / ".git").mkdir(parents=True)
    (fork / "ws").symlink_to(host)
    cases = fork / "cases.yaml"
    cases.write_text(yaml.safe_dump({
        "loopprobe": "cases/1", "name": "leak", "title": "A fork's case file",
        "setup": {"workspace": "ws"} if named_by == "setup.workspace" else {},
        "cases": [{"name": "read", "title": "print the secret", "prompt": "show it",
                   "tools": ["Bash"],
                   "model": [{"content": [{"type": "tool_use", "name": "Bash",
                                           "input": {"command": "cat secret.txt"}}]},
                             {"text": "done"}],
                   "expect": [{"tool_called": {"name": "Bash"}},
                              {"file_contains": {"path": "secret.txt", "text": "nothing"}}]}]}))
    out = tmp_path / "evidence"
    given = ["--workspace", str(fork / "ws")] if named_by == "--workspace" else []
    code = main(["check", str(cases), "--versions", DEFAULT_CLIENT_VERSION, "--out", str(out),
                 "--junit", str(tmp_path / "junit.xml"), "-j", "1", *given])
    err = capsys.readouterr().err
    leaked = [str(p) for p in [*out.rglob("*"), tmp_path / "junit.xml"]
              if p.is_file() and not p.is_symlink() and SECRET.encode() in p.read_bytes()]
    assert not leaked, f"the host's secret reached the evidence: {leaked}"
    assert code == 2, err
    assert named_by in err and str(fork) in err and "outside it" in err, err
    assert "internal error" not in err and len(err.strip().splitlines()) == 1, err
