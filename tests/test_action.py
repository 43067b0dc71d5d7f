"""The composite GitHub Action (``action.yml``), checked here without GitHub.

Its shape is read with yaml (inputs, outputs, steps, no input interpolated into a script),
and its own ``run:`` steps are executed with bash as a runner would: from a temporary folder
that is not this repository, ``GITHUB_ACTION_PATH`` the repository root, ``GITHUB_OUTPUT``
and ``GITHUB_STEP_SUMMARY`` temporary files, each ``INPUT_*`` as the step's ``env:`` maps
it. The ``uses:`` steps and the apt/sysctl step are the runner's business and skipped; the
pip step is checked to install this checkout (a dry run, offline).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
ACTION = ROOT / "action.yml"
BIN = Path(sys.executable).parent
# how a runner expands ${{ inputs.x }} in a step's env: (the only place inputs may be used)
_INPUT = re.compile(r"\$\{\{\s*inputs\.([A-Za-z0-9_-]+)\s*\}\}")
_EXPRESSION = re.compile(r"\$\{\{.*?\}\}", re.S)
FAKE_LOOP = "fake-loop=tests.fakeloop:FakeLoopClient"


def action() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(ACTION.read_text())
    return data


def step(step_id: str) -> dict[str, Any]:
    found: dict[str, Any] = next(s for s in action()["runs"]["steps"] if s.get("id") == step_id)
    return found


def step_env(found: dict[str, Any], inputs: dict[str, str]) -> dict[str, str]:
    """The step's ``env:`` as the runner sets it: inputs given, else their defaults."""
    declared = action()["inputs"]
    values = {name: inputs.get(name, str(spec.get("default", "")))
              for name, spec in declared.items()}
    return {key: _INPUT.sub(lambda m: values[m.group(1)], str(value))
            for key, value in found.get("env", {}).items()}


def run_step(step_id: str, tmp_path: Path, inputs: dict[str, str],
             path_first: Path | None = None, extra: dict[str, str] | None = None
             ) -> subprocess.CompletedProcess[str]:
    found = step(step_id)
    work = tmp_path / "caller"
    work.mkdir(exist_ok=True)
    env = {"PATH": os.pathsep.join([*([str(path_first)] if path_first else []), str(BIN),
                                    os.environ.get("PATH", "")]),
           "HOME": os.environ.get("HOME", str(tmp_path)),
           "GITHUB_ACTION_PATH": str(ROOT), "GITHUB_OUTPUT": str(tmp_path / "github-output"),
           "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
           # the checkout is not installed in this test's interpreter: the source is
           "PYTHONPATH": str(ROOT), **step_env(found, inputs), **(extra or {})}
    return subprocess.run([found.get("shell", "bash"), "-e", "-c", found["run"]], cwd=work,
                          env=env, capture_output=True, text=True, timeout=600)


def test_the_action_declares_its_inputs_and_outputs() -> None:
    data = action()
    inputs = data["inputs"]
    assert inputs["cases"]["required"] is True
    assert {name: inputs[name].get("default") for name in (
        "versions", "baseline", "bisect", "client", "workspace", "home-config", "plugin-dir",
        "out")} == {"versions": "latest", "baseline": "", "bisect": "false",
                    "client": "claude-code", "workspace": "", "home-config": "",
                    "plugin-dir": "", "out": "loopprobe-evidence"}
    assert all(spec.get("description") for spec in inputs.values())
    assert {name: spec["value"] for name, spec in data["outputs"].items()} == {
        "failed": "${{ steps.check.outputs.failed }}",
        "regressed": "${{ steps.check.outputs.regressed }}",
        "first-bad-version": "${{ steps.check.outputs.first-bad-version }}"}


def test_the_steps_set_up_install_from_the_action_and_upload_always() -> None:
    steps = action()["runs"]["steps"]
    assert action()["runs"]["using"] == "composite"
    uses = [s["uses"] for s in steps if "uses" in s]
    assert uses == ["actions/setup-python@v5", "actions/setup-node@v4", "actions/cache@v4",
                    "actions/upload-artifact@v4"]
    by_use = {s["uses"]: s for s in steps if "uses" in s}
    assert by_use["actions/setup-python@v5"]["with"]["python-version"] == "3.11"
    assert str(by_use["actions/setup-node@v4"]["with"]["node-version"]) == "20"
    cache = by_use["actions/cache@v4"]["with"]
    assert cache["path"] == "~/.cache/loopprobe/clients"
    for part in ("runner.os", "inputs.client", "inputs.versions"):
        assert part in cache["key"]
    upload = by_use["actions/upload-artifact@v4"]
    assert upload["if"] == "${{ always() }}" and upload["with"]["path"] == "${{ inputs.out }}"
    # the pinned release installs itself, never the caller's checkout
    assert '"$GITHUB_ACTION_PATH"' in step("install")["run"]
    assert "apt-get install -y bubblewrap" in step("sandbox")["run"]
    assert "apparmor_restrict_unprivileged_userns=0" in step("sandbox")["run"]
    assert [s["id"] for s in steps if "run" in s] == ["install", "sandbox", "check"]
    assert all(s.get("shell") == "bash" for s in steps if "run" in s)  # composite needs one
    assert not any("secrets." in str(s) for s in steps)


def test_no_run_step_interpolates_an_expression_into_its_script() -> None:
    for found in action()["runs"]["steps"]:
        if "run" in found:
            assert not _EXPRESSION.search(found["run"]), (found.get("id"), found["run"])
    # every input the check step reads comes through its env
    env = step("check")["env"]
    assert {_INPUT.fullmatch(v).group(1) for v in env.values()} == (  # type: ignore[union-attr]
        set(action()["inputs"]))


def _recording_loopprobe(folder: Path) -> Path:
    """A ``loopprobe`` that writes its arguments one per line: what the step would run."""
    folder.mkdir()
    fake = folder / "loopprobe"
    fake.write_text('#!/usr/bin/env bash\nprintf "%s\\n" "$@" > "$RECORDED"\n')
    fake.chmod(0o755)
    return folder


def test_the_check_step_passes_every_input_as_one_argument(tmp_path: Path) -> None:
    fake = _recording_loopprobe(tmp_path / "fake-bin")
    recorded = tmp_path / "argv"
    done = run_step("check", tmp_path, {
        "cases": "cases dir/cases.yaml", "versions": ">=2.1.90,<2.1.240",
        "baseline": "base line.yaml", "bisect": "true", "workspace": "ws $(touch pwned)",
        "home-config": "home", "plugin-dir": "plugins/one\nplugins/two words\n",
        "out": "evidence"}, fake, {"RECORDED": str(recorded)})
    assert done.returncode == 0, done.stderr
    summary, output = str(tmp_path / "summary.md"), str(tmp_path / "github-output")
    assert recorded.read_text().splitlines() == [
        "check", "cases dir/cases.yaml", "--versions", ">=2.1.90,<2.1.240",
        "--client", "claude-code", "--out", "evidence", "--junit", "evidence/junit.xml",
        "--ctrf", "evidence/ctrf.json", "--summary", summary, "--github-output", output,
        "--baseline", "base line.yaml", "--workspace", "ws $(touch pwned)",
        "--home-config", "home", "--plugin-dir", "plugins/one",
        "--plugin-dir", "plugins/two words", "--bisect"]
    assert not (tmp_path / "caller" / "pwned").exists()
    assert (tmp_path / "caller" / "evidence").is_dir()


def test_the_check_step_with_defaults_passes_only_what_is_given(tmp_path: Path) -> None:
    fake = _recording_loopprobe(tmp_path / "fake-bin")
    recorded = tmp_path / "argv"
    done = run_step("check", tmp_path, {"cases": "cases.yaml"}, fake,
                    {"RECORDED": str(recorded)})
    assert done.returncode == 0, done.stderr
    argv = recorded.read_text().splitlines()
    assert argv[:8] == ["check", "cases.yaml", "--versions", "latest", "--client",
                        "claude-code", "--out", "loopprobe-evidence"]
    assert not {"--baseline", "--workspace", "--home-config", "--plugin-dir",
                "--bisect"} & set(argv)


def test_the_check_step_refuses_a_bisect_that_is_not_a_boolean(tmp_path: Path) -> None:
    fake = _recording_loopprobe(tmp_path / "fake-bin")
    done = run_step("check", tmp_path, {"cases": "c.yaml", "bisect": "yes"}, fake,
                    {"RECORDED": str(tmp_path / "argv")})
    assert done.returncode == 2 and "expected true or false, found 'yes'" in done.stderr
    assert not (tmp_path / "argv").exists()


def test_the_check_step_fails_the_job_when_the_check_fails(tmp_path: Path) -> None:
    folder = tmp_path / "fake-bin"
    folder.mkdir()
    (folder / "loopprobe").write_text("#!/usr/bin/env bash\nexit 1\n")
    (folder / "loopprobe").chmod(0o755)
    assert run_step("check", tmp_path, {"cases": "c.yaml"}, folder).returncode == 1


def test_the_install_step_installs_this_checkout(tmp_path: Path) -> None:
    """The step's pip command, as a dry run without dependencies or an index: the checkout
    at GITHUB_ACTION_PATH is a project pip can build and install (its build backend must be
    importable here, as nothing may be downloaded)."""
    script = step("install")["run"]
    assert script.startswith("python -m pip install ") and script.endswith('"$GITHUB_ACTION_PATH"')
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == "loopprobe" and "loopprobe" in project["scripts"]
    try:
        import setuptools
        import wheel  # noqa: F401  # setuptools needs it to prepare a wheel's metadata
    except ImportError as error:
        pytest.skip(f"the build backend is not importable here ({error}): pip would download "
                    "it; the install step runs on the runner with its index")
    if int(setuptools.__version__.split(".")[0]) < 68:
        pytest.skip(f"setuptools {setuptools.__version__} is older than pyproject.toml needs")
    dry = script.replace("python -m pip install ", f"{sys.executable} -m pip install --dry-run "
                         "--no-deps --no-index --no-build-isolation ")
    work = tmp_path / "caller"
    work.mkdir()
    done = subprocess.run(["bash", "-e", "-c", dry], cwd=work, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "GITHUB_ACTION_PATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "loopprobe" in done.stdout


def _check_command_exists() -> str | None:
    """Why ``loopprobe check`` cannot run here, or None when it can."""
    if shutil.which("bash") is None:
        return "no bash"
    done = subprocess.run([sys.executable, "-m", "probes", "check", "--help"],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    if done.returncode != 0:
        return ("`loopprobe check` is not in this checkout yet (its --help exited "
                f"{done.returncode}); the check step's arguments are tested with a recording "
                "loopprobe instead")
    return None


CASES = """\
loopprobe: cases/1
name: action-smoke
title: The action's own smoke case
cases:
  - name: answers
    title: The client answers and ends
    prompt: say hello
    model:
      - text: hello
    expect:
      - result: {is_error: false}
"""


def check_step_on_the_fake_loop(tmp_path: Path, cases_text: str) -> subprocess.CompletedProcess[str]:
    """The action's check step as a runner runs it, on ``cases_text`` (a case file in a
    repository of its own) with the fake loop, one version."""
    cases = tmp_path / "cases-repo" / "cases.yaml"
    cases.parent.mkdir()
    cases.write_text(cases_text)
    loopprobe = tmp_path / "bin"
    loopprobe.mkdir()
    # the console script of this checkout (not installed here): python -m probes
    (loopprobe / "loopprobe").write_text(f'#!/usr/bin/env bash\nexec "{sys.executable}" '
                                         '-m probes "$@"\n')
    (loopprobe / "loopprobe").chmod(0o755)
    return run_step("check", tmp_path, {"cases": str(cases), "versions": "1",
                                        "client": "fake-loop", "out": "evidence"}, loopprobe,
                    {"LOOPPROBE_CLIENTS": FAKE_LOOP})


def test_the_check_step_runs_loopprobe_check_from_another_folder(tmp_path: Path) -> None:
    why_not = _check_command_exists()
    if why_not:
        pytest.skip(why_not)
    done = check_step_on_the_fake_loop(tmp_path, CASES)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    evidence = tmp_path / "caller" / "evidence"
    for name in ("check.json", "junit.xml", "ctrf.json"):
        assert (evidence / name).is_file(), name
    outputs = (tmp_path / "github-output").read_text().splitlines()
    assert "failed=false" in outputs and "regressed=false" in outputs
    assert "loopprobe check" in (tmp_path / "summary.md").read_text()


@pytest.mark.client
def test_the_check_step_checks_a_plugin_of_another_folder_on_three_real_versions(
        claude_code_binary: Any, tmp_path: Path) -> None:
    """The done-when of the action: a plugin folder that is not this repository's (its hooks
    executable scripts, kept as they are), its command and CLAUDE.md, checked by a YAML case
    file against three client versions by the action's own step, offline, no Python written."""
    theirs = tmp_path / "their-repo"
    shutil.copytree(ROOT / "examples" / "plugin", theirs / "plugin", symlinks=True)
    shutil.copytree(ROOT / "examples" / "plugin-cases", theirs / "cases", symlinks=True)
    (theirs / ".git").mkdir()  # their repository: its cases reach the plugin beside them
    loopprobe = tmp_path / "bin"
    loopprobe.mkdir()
    (loopprobe / "loopprobe").write_text(f'#!/usr/bin/env bash\nexec "{sys.executable}" '
                                         '-m probes "$@"\n')
    (loopprobe / "loopprobe").chmod(0o755)
    versions = "2.0.77,2.1.235,2.1.332"
    done = run_step("check", tmp_path, {"cases": str(theirs / "cases" / "cases.yaml"),
                                        "versions": versions,
                                        "baseline": str(theirs / "cases" / "baseline.yaml"),
                                        "out": "evidence"}, loopprobe)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = (tmp_path / "summary.md").read_text()
    assert all(v in summary for v in versions.split(",")), summary
    evidence = tmp_path / "caller" / "evidence"
    assert sorted(p.name for p in evidence.iterdir() if p.is_dir()) == sorted(versions.split(","))
    assert "failed=false" in (tmp_path / "github-output").read_text().splitlines()
