"""The package users install: a wheel built from this checkout, installed into a fresh venv,
gives the CLI, the mock and the pytest plugin with no repository anywhere in sight.

The wheel is built from a copy of the checkout's sources (so no ``build/`` is left behind in
the checkout and no stale ``build/lib`` can supply a file the package data forgot), the venv
is a new one made by ``python -m venv`` (not the project's), and everything then runs with
its cwd in a temporary directory outside the checkout and without PYTHONPATH. The client
comes from the same cache as the rest of the suite (``LOOPPROBE_CACHE`` set to it), so the
real 2.1.235 binary is not installed again.

The wheel is also installed alone, without extras and without pytest beside it (which once
supplied a dependency the package did not declare), and every command's --help and
``loopprobe probes`` must run there.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from probes.clients.npm import cache_root
from tests.conftest import DEFAULT_CLIENT_VERSION, tiers_required

# the tests of the wheel installed with pytest and anthropic are of the client tier (one runs
# the cached client); the wheel installed alone needs no client
client = pytest.mark.client

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("mockapi", "probes")
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
# what a copy of the checkout leaves out: artefacts, caches, other venvs, the evidence
# folders (the wheel is built from pyproject.toml, README.md and the packages)
NOT_COPIED = shutil.ignore_patterns(".git", ".venv*", "build", "dist", "*.egg-info", "__pycache__",
                                    "*.pyc", ".*_cache", ".hypothesis", "runs", ".loopprobe",
                                    "reports", "bench-results*", "node_modules")
# pip's words when the environment (not the project) is the problem: no index reachable
UNREACHABLE = re.compile(r"No matching distribution found|Could not find a version that satisfies|"
                         r"Failed to establish a new connection|Temporary failure in name "
                         r"resolution|Network is unreachable|ensurepip is not available")
STEP_TIMEOUT = 600

# what the installed package reads from its own directory at run time: the tools mounted
# into the sandbox, the drivers and the MCP server run beside a client, the JSON schemas,
# the templates when there are some; printed by the installed package itself
READ_AT_RUN_TIME = """
import json, sys
from pathlib import Path
import mockapi, probes, mockapi.testing
from probes.core import mcp
from probes.report import schemas
from probes.run import containment
from probes.clients import (agent_sdk, agent_sdk_ts, langgraph_agent, pydantic_agent,
                             tool_runner, ts_tool_runner, vercel_ai)
drivers = [k.DRIVER for k in (agent_sdk, agent_sdk_ts, langgraph_agent, pydantic_agent,
                              tool_runner, ts_tool_runner, vercel_ai)]
paths = [*containment.TOOLS, *drivers, mcp.SERVER_SCRIPT,
         *sorted(schemas.SCHEMA_DIR.glob("*.schema.json")),
         *sorted((Path(probes.__file__).parent / "templates").glob("*")),
         Path(probes.__file__).with_name("py.typed"), Path(mockapi.__file__).with_name("py.typed")]
print(json.dumps({"site": str(Path(probes.__file__).parent.parent), "paths": [str(p) for p in paths],
                  "schemas": len(list(schemas.SCHEMA_DIR.glob("*.schema.json"))),
                  "plugin": mockapi.testing.__file__,
                  "versions": [probes.__version__, mockapi.__version__]}))
"""

PLUGIN_TEST = '''
import sys
from pathlib import Path

import anthropic
import httpx
import mockapi
from mockapi import Match, Rule, Scenario, text, tool_use


def test_the_plugin_and_the_mock_come_from_the_installed_wheel():
    assert Path(mockapi.__file__).resolve().is_relative_to(Path(sys.prefix).resolve())


def test_the_sdk_gets_the_scripted_replies(mock_api):
    mock = mock_api(Scenario(classifier="plain", rules=[
        Rule(id="read", match=Match(turn=1), reply=tool_use("Read", {"file_path": "a.txt"},
                                                          id="toolu_w")),
        Rule(id="done", match=Match(tool_result_for="toolu_w"), reply=text("WHEEL_DONE")),
    ]))
    client = anthropic.Anthropic(base_url=mock.url, api_key="test", max_retries=0)
    first = client.messages.create(model="claude-sonnet-4-5", max_tokens=100,
                                   messages=[{"role": "user", "content": "read a.txt"}])
    assert (first.stop_reason, first.content[0].input) == ("tool_use", {"file_path": "a.txt"})
    second = client.messages.create(model="claude-sonnet-4-5", max_tokens=100, messages=[
        {"role": "user", "content": "read a.txt"},
        {"role": "assistant", "content": [b.model_dump() for b in first.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_w",
                                      "content": "hello"}]},
    ])
    assert second.content[0].text == "WHEEL_DONE"
    assert [r["rule"] for r in mock.requests()] == ["read", "done"]


def test_httpx_gets_the_scripted_reply(mock_api):
    mock = mock_api(Scenario(classifier="plain", rules=[Rule(reply=text("PLAIN_HTTP"))]))
    reply = httpx.post(f"{mock.url}/v1/messages", timeout=30, headers={
        "x-api-key": "test", "anthropic-version": "2023-06-01"}, json={
        "model": "claude-sonnet-4-5", "max_tokens": 10,
        "messages": [{"role": "user", "content": "hi"}]})
    assert reply.status_code == 200, reply.text
    assert reply.json()["content"] == [{"type": "text", "text": "PLAIN_HTTP"}]
    assert mock.requests()[0]["body"]["messages"][0]["content"] == "hi"
'''


@dataclass(frozen=True)
class Installed:
    wheel: Path
    source: Path  # the copy of the checkout the wheel was built from
    venv: Path
    cwd: Path  # outside the checkout
    env: dict[str, str]

    def run(self, *argv: str, timeout: float = STEP_TIMEOUT) -> subprocess.CompletedProcess[str]:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=self.cwd,
                              env=self.env, stdin=subprocess.DEVNULL)

    def bin(self, name: str) -> str:
        return str(self.venv / "bin" / name)


def _environment(venv: Path) -> dict[str, str]:
    """The caller's environment with the fresh venv first on PATH and nothing of the checkout."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV", "PYTHONSAFEPATH")
           and not k.startswith("PYTEST_")}
    kept = [p for p in env.get("PATH", "").split(os.pathsep)
            if p and not Path(p).resolve().is_relative_to(ROOT)]
    env["PATH"] = os.pathsep.join([str(venv / "bin"), *kept])
    env["VIRTUAL_ENV"] = str(venv)
    env["LOOPPROBE_CACHE"] = str(cache_root())  # the suite's client cache: nothing reinstalled
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _step(what: str, argv: list[str], cwd: Path, env: dict[str, str]) -> None:
    """Run one preparation step; when the environment cannot do it (no venv module, no index
    reachable), skip, or fail when every tier is required; any other failure fails."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=STEP_TIMEOUT, cwd=cwd,
                              env=env, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        done = subprocess.CompletedProcess(argv, -1, "", f"timed out after {STEP_TIMEOUT}s")
    if done.returncode == 0:
        return
    output = (done.stdout + done.stderr)[-4000:]
    message = f"cannot {what}: `{' '.join(argv)}` exited {done.returncode}\n{output}"
    if UNREACHABLE.search(output):
        if tiers_required():
            pytest.fail(f"{message}\n(LOOPPROBE_REQUIRE_TIERS=1: the wheel test must run)",
                        pytrace=False)
        pytest.skip(f"cannot {what} here (no package index reachable?); ./scripts/test requires it")
    pytest.fail(message, pytrace=False)


def _build(base: Path) -> tuple[Installed, str, Path]:
    """The wheel built from a copy of the checkout and a fresh venv, nothing installed yet;
    the venv's python and the folder the wheel is in."""
    assert not base.resolve().is_relative_to(ROOT), "the temporary directory is in the checkout"
    source, wheels, venv, cwd = base / "source", base / "wheels", base / "venv", base / "cwd"
    shutil.copytree(ROOT, source, ignore=NOT_COPIED)
    cwd.mkdir()
    env = _environment(venv)
    _step("create a venv", [sys.executable, "-m", "venv", str(venv)], base, env)
    python = str(venv / "bin" / "python")
    assert Path(python).is_file(), "the new venv has no python"
    home = next(line.split("=", 1)[1].strip() for line in (venv / "pyvenv.cfg").read_text()
                .splitlines() if line.startswith("home"))
    assert not Path(home).resolve().is_relative_to(ROOT), f"the new venv is based on {home}"
    _step("build the wheel", [python, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w",
                              str(wheels), str(source)], cwd, env)
    (wheel,) = wheels.glob("loopprobe-*.whl")
    return Installed(wheel, source, venv, cwd, env), python, wheels


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    built, python, wheels = _build(tmp_path_factory.mktemp("wheel"))
    _step("install the wheel, pytest and anthropic", [
        python, "-m", "pip", "install", "--quiet", "--find-links", str(wheels), str(built.wheel),
        "pytest", "anthropic"], built.cwd, built.env)
    return built


@pytest.fixture(scope="module")
def alone(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """The wheel and only what it declares (its dependencies, from the index)."""
    built, python, _ = _build(tmp_path_factory.mktemp("wheel-alone"))
    _step("install the wheel alone", [python, "-m", "pip", "install", "--quiet",
                                      str(built.wheel)], built.cwd, built.env)
    return built


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[list[str]]:
    """Every subcommand and sub-subcommand of ``parser``, as the words that name it."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield [*path, name]
                yield from _commands(sub, (*path, name))


@pytest.mark.slow
def test_the_wheel_alone_runs_every_command_s_help_and_lists_the_probes(alone: Installed) -> None:
    from probes.cli import build_parser
    nothing_else = alone.run(alone.bin("python"), "-c", "import pytest")
    assert nothing_else.returncode != 0, "pytest is in the venv: the wheel is not alone"
    commands = list(_commands(build_parser()))
    assert ["run"] in commands and ["clients", "install"] in commands
    for argv in [["--help"], *([*words, "--help"] for words in commands), ["probes"]]:
        done = alone.run(alone.bin("loopprobe"), *argv)
        shown = f"loopprobe {' '.join(argv)} exited {done.returncode}:\n{done.stderr[-3000:]}"
        assert done.returncode == 0 and "Traceback" not in done.stderr, shown
        assert done.stdout.strip(), shown


def _in_checkout(text: str) -> list[str]:
    return sorted({line.strip() for line in text.splitlines() if str(ROOT) in line})


@client
def test_the_installed_cli_prints_the_package_version(installed: Installed) -> None:
    done = installed.run(installed.bin("loopprobe"), "--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"loopprobe {VERSION}"
    module = installed.run(installed.bin("python"), "-m", "probes", "--version")
    assert module.stdout.strip() == f"loopprobe {VERSION}", module.stderr
    shown = installed.run(installed.bin("python"), "-c",
                          "import importlib.metadata as m, mockapi, probes; "
                          "print(m.version('loopprobe'), mockapi.__version__, probes.__version__)")
    assert shown.stdout.split() == [VERSION] * 3, shown.stderr
    assert installed.wheel.name.startswith(f"loopprobe-{VERSION}-")


@client
def test_the_installed_cli_runs_a_probe_on_the_cached_client(installed: Installed,
                                                             claude_code_binary) -> None:
    out, work = installed.cwd / "out", installed.cwd / "work"
    manifest = claude_code_binary.root / "install.json"
    installed_at = manifest.stat().st_mtime_ns
    done = installed.run(installed.bin("loopprobe"), "run", "--client", DEFAULT_CLIENT_VERSION,
                         "--probe", "stop-hook-reentry", "--out", str(out), "--work-dir", str(work))
    shown = done.stdout[-3000:] + done.stderr[-3000:]
    assert done.returncode in (0, 1), f"a harness error, not a verdict:\n{shown}"
    # the suite's cached install, not a new one
    assert f"binary {claude_code_binary.entry} sha256 {claude_code_binary.sha256}" in shown
    assert manifest.stat().st_mtime_ns == installed_at, "the client was installed again"
    (report_path,) = [p for p in out.glob("*.json") if not p.name.endswith(".timing.json")]
    report = json.loads(report_path.read_text())
    assert report["client"]["version"] == DEFAULT_CLIENT_VERSION
    assert report["client"]["binary_sha256"] == claude_code_binary.sha256
    assert report["generator"] == {"name": "loopprobe", "version": VERSION}
    assert [p["name"] for p in report["probes"]] == ["stop-hook-reentry"]
    written = {p.name: p.read_text(errors="replace") for p in out.iterdir() if p.is_file()}
    assert {name: _in_checkout(text) for name, text in written.items()
            if _in_checkout(text)} == {}, "the report points into the checkout"
    assert _in_checkout(shown) == []
    # the harness's tools came from the installed package: the checkout's are nowhere
    assert not any(_in_checkout(p.read_text(errors="replace"))
                   for p in work.rglob("*") if p.is_file() and p.stat().st_size < 1 << 20)


@client
def test_the_pytest_plugin_is_loaded_from_the_installed_entry_point(installed: Installed) -> None:
    tests = installed.cwd / "plugin_tests"
    tests.mkdir()
    (tests / "test_with_mock_api.py").write_text(PLUGIN_TEST)
    done = installed.run(installed.bin("python"), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                         str(tests))
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "3 passed" in done.stdout
    plugins = installed.run(installed.bin("python"), "-c",
                            "import importlib.metadata as m; print(sorted(e.value for e in "
                            "m.entry_points(group='pytest11') if e.name == 'mockapi'))")
    assert plugins.stdout.strip() == "['mockapi.testing']"


@client
def test_the_wheel_holds_every_file_the_package_reads(installed: Installed) -> None:
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    dist_info = f"loopprobe-{VERSION}.dist-info"
    # only the two packages and their metadata: nothing else of the repository
    assert {n.split("/")[0] for n in names} == {*PACKAGES, dist_info}
    # every file of the packages' source directories (data files included)
    sources = sorted(str(p.relative_to(installed.source)) for package in PACKAGES
                     for p in (installed.source / package).rglob("*")
                     if p.is_file() and "__pycache__" not in p.parts)
    assert [s for s in sources if s not in names] == []
    assert {"probes/py.typed", "mockapi/py.typed"} <= names
    schemas = {n for n in names if n.startswith("probes/report/json_schemas/") and n.endswith(".json")}
    assert schemas and schemas == {s for s in sources if s.startswith("probes/report/json_schemas/")}
    entry_points = zipfile.ZipFile(installed.wheel).read(f"{dist_info}/entry_points.txt").decode()
    assert "loopprobe = probes.cli:main" in entry_points
    assert "mockapi = mockapi.testing" in entry_points
    # and what the installed package reads at run time is installed, from the wheel
    done = installed.run(installed.bin("python"), "-c", READ_AT_RUN_TIME)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    site = Path(found["site"])
    assert site.is_relative_to(installed.venv) and not site.is_relative_to(ROOT)
    assert found["versions"] == [VERSION, VERSION]
    assert found["schemas"] == len(schemas)
    assert Path(found["plugin"]).is_relative_to(site)
    for path in map(Path, found["paths"]):
        assert path.is_file(), f"{path} is read at run time and is not installed"
        assert path.is_relative_to(site), f"{path} is outside the installed package"
        assert str(path.relative_to(site)) in names, f"{path} is not in the wheel"
