"""The code stays typed and linted (settings in pyproject.toml), and exports what it declares."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True,
                          timeout=600, cwd=ROOT)


def test_ruff_finds_nothing() -> None:
    done = _run("ruff", "check", "mockapi", "probes", "tests")
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_strict_finds_nothing() -> None:
    done = _run("mypy")
    assert done.returncode == 0, done.stdout + done.stderr


MODULES = ["mockapi", "mockapi.sse", "mockapi.events", "mockapi.replies", "mockapi.matching",
           "mockapi.scenario", "mockapi.script", "mockapi.journal", "mockapi.app",
           "mockapi.server", "probes.checks", "probes.evidence", "probes.report",
           "probes.diff", "probes.matrix", "probes.fingerprint", "probes.runner",
           "probes.egress", "probes.sandbox", "probes.process", "probes.clients"]


@pytest.mark.parametrize("name", MODULES)
def test_all_lists_exactly_what_exists(name: str) -> None:
    module = importlib.import_module(name)
    declared = module.__all__
    assert sorted(declared) == sorted(set(declared)), "duplicates in __all__"
    missing = [n for n in declared if not hasattr(module, n)]
    assert missing == []
