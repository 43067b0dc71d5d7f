"""Shared fixtures and the test tiers. Mock servers come from the mockapi plugin (``mock_api``).

Tiers, by marker: fast (no marker: in-process, a real uvicorn mock, the fake loop
client), ``sdk`` (the official anthropic SDK lines against the mock), ``client`` (real
client binaries installed from npm/PyPI), ``slow`` (soak and kill loops). A tier whose
installs are missing is skipped with the command that installs them, unless
``LOOPPROBE_REQUIRE_TIERS=1`` (set by ``./scripts/test``, so CI runs every tier): then a
missing install fails. The run ends with a line per tier saying what ran.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.mock_process import read_line

# loopprobe stops GitHub's workflow commands around everything it prints when it runs in
# Actions (probes.report.github_ci): the tests that say so set it themselves, the rest
# read loopprobe's output as it is anywhere else
os.environ.pop("GITHUB_ACTIONS", None)

DEFAULT_CLIENT_VERSION = "2.1.235"
NEWEST_CLIENT_VERSION = "2.1.332"
TIERS = {
    "fast": "in-process, real uvicorn mock, fake loop client",
    "sdk": "official anthropic SDK lines",
    "client": "real client binaries",
    "slow": "soak and kill loops",
}
_outcomes: dict[str, Counter[str]] = {tier: Counter() for tier in TIERS}
_skips: dict[str, set[str]] = {tier: set() for tier in TIERS}


def tiers_required() -> bool:
    return os.environ.get("LOOPPROBE_REQUIRE_TIERS") == "1"


def one_line_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """What ``loopprobe ARGV`` printed when it refused its input: exit 2, one line, no
    traceback."""
    from probes import cli
    code = cli.main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def missing_install(what: str, command: str) -> None:
    """Skip (or, when every tier is required, fail) a test whose install is missing."""
    message = f"{what} is not installed; run `{command}` (or ./scripts/test, which installs it)"
    if tiers_required():
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def bubblewrap(bounds: Any = None) -> Any:
    """The installed bubblewrap, proven to start a sandbox here (with ``bounds``, when
    given, instead of the default ones)."""
    from dataclasses import replace

    from probes.run.containment import Bubblewrap, ContainmentUnavailable
    try:
        found = Bubblewrap.find()
    except ContainmentUnavailable as error:
        missing_install(f"a working bubblewrap ({error})", "apt-get install bubblewrap")
        raise
    return found if bounds is None else replace(found, bounds=bounds)


def installed_client(spec: str) -> Any:
    """The client and its install of ``KIND@VERSION``, installed into the cache by
    ./scripts/test (a missing one skips, or fails where every tier is required)."""
    from probes.clients import parse_client_spec
    client, version = parse_client_spec(spec)
    found = [b for b in client.installed() if b.version == version]
    if not found:
        missing_install(spec, f"loopprobe clients install {spec}")
    return client, found[0]


def _claude_code(version: str) -> Any:
    return installed_client(f"claude-code@{version}")[1]


@pytest.fixture(scope="session")
def claude_code_binary():  # type: ignore[no-untyped-def]
    """The real Claude Code client, installed into the cache by ./scripts/test."""
    return _claude_code(DEFAULT_CLIENT_VERSION)


@pytest.fixture(scope="session")
def newest_claude_code_binary():  # type: ignore[no-untyped-def]
    """The newest Claude Code with committed reports, for what the default version lacks."""
    return _claude_code(NEWEST_CLIENT_VERSION)


@pytest.fixture(scope="session")
def real_suite(claude_code_binary, tmp_path_factory):  # type: ignore[no-untyped-def]
    """One run of the built-in suite on the default client as ``loopprobe run`` makes it (-j
    the cores), without the /loop probe (tests.fixtures.suite_without_clock): its report
    folder and each probe's outcome. The tests that read it share one run: they are in the
    xdist group ``REAL_SUITE``, so under ``--dist loadgroup`` they share a worker too."""
    from probes.cli.suite import execute_suite
    from probes.clients.claude_code import ClaudeCode
    from probes.scale.schedule import default_jobs
    from tests.fixtures.suite_without_clock import REPORTS
    folder = tmp_path_factory.mktemp("real-suite")
    return execute_suite((ClaudeCode(), claude_code_binary.version), folder / "out",
                         work_dir=str(folder / "work"), catalog=REPORTS, jobs=default_jobs())


REAL_SUITE = "real-suite"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under ``--dist loadgroup`` (./scripts/test's client tier) a test file is one group, as
    under ``loadfile``, so its module fixtures run once, unless a test names its own group
    (``REAL_SUITE``: the tests sharing one real run of the suite)."""
    # a worker is told by its own flag (xdist sets its dist to "no")
    if not (getattr(config.option, "loadgroup", False)
            or getattr(config.option, "dist", None) == "loadgroup"):
        return
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))


def _tier(keywords: Any) -> str:
    return next((tier for tier in ("client", "sdk", "slow") if tier in keywords), "fast")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call" or (report.when == "setup" and not report.passed):
        tier = _tier(report.keywords)
        _outcomes[tier][report.outcome] += 1
        if report.skipped and isinstance(report.longrepr, tuple):
            _skips[tier].add(str(report.longrepr[2]).removeprefix("Skipped: "))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    terminalreporter.section("loopprobe test tiers")
    for tier, description in TIERS.items():
        counts = _outcomes[tier]
        ran = ", ".join(f"{n} {outcome}" for outcome, n in sorted(counts.items())) \
            or "not run (deselected or none collected)"
        terminalreporter.write_line(f"{tier:<7} {ran}  [{description}]")
        for reason in sorted(_skips[tier])[:3]:
            terminalreporter.write_line(f"        skipped: {reason}")
    required = "every tier required (LOOPPROBE_REQUIRE_TIERS=1)" if tiers_required() \
        else "missing installs skip; ./scripts/test requires every tier"
    terminalreporter.write_line(required)


@pytest.fixture
def serve_process(tmp_path: Path) -> Iterator[Callable[..., tuple[subprocess.Popen[bytes], str]]]:
    """Start ``python -m mockapi`` (own session, killed by its process group at the end),
    optionally under a soft descriptor limit ``nofile``; gives (process, url)."""
    started: list[subprocess.Popen[bytes]] = []

    def start(scenario: dict[str, Any], journal: Path, *,
              nofile: int | None = None) -> tuple[subprocess.Popen[bytes], str]:
        file = tmp_path / f"scenario-{len(started)}.json"
        file.write_bytes(orjson.dumps(scenario))

        def limit_descriptors() -> None:
            if nofile is not None:
                hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, hard))

        process = subprocess.Popen(
            [sys.executable, "-m", "mockapi", "--scenario", str(file), "--journal", str(journal),
             "--admin-open"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            start_new_session=True, preexec_fn=limit_descriptors if nofile else None)
        started.append(process)
        line = read_line(process, 30)
        return process, line.split()[3]

    yield start
    for process in started:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)
