"""``pip install`` of the package alone gives a working ``loopprobe``: a fresh venv without
this checkout's environment, the package built from the repository (not editable), then every
module imported and the commands a plugin author starts with run from another folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(argv: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {k: os.environ[k] for k in ("PATH", "HOME", "LANG", "PIP_INDEX_URL",
                                      "PIP_EXTRA_INDEX_URL", "PIP_CACHE_DIR") if k in os.environ}
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=env)


@pytest.mark.slow
def test_pip_install_alone_gives_a_working_loopprobe(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python, loopprobe = venv / "bin" / "python", venv / "bin" / "loopprobe"
    installed = _run([str(python), "-m", "pip", "install", "--quiet", str(ROOT)], tmp_path, 900)
    if installed.returncode != 0 and "Could not find a version" in installed.stderr:
        pytest.skip(f"no package index reachable: {installed.stderr.strip()[-300:]}")
    assert installed.returncode == 0, installed.stderr[-2000:]
    # all but the clients' drivers and the MCP server (run in their own venvs), the __main__ modules
    # (they run), and mockapi.testing: the pytest plugin, loaded by pytest where it is
    every_module = ("import importlib, pkgutil, mockapi, probes\n"
                    "for package in (mockapi, probes):\n"
                    "    for m in pkgutil.walk_packages(package.__path__, package.__name__ + '.'):\n"
                    "        if not m.name.endswith(('_driver', 'mcp_server', '__main__', 'testing')):\n"
                    "            importlib.import_module(m.name)\n")
    imported = _run([str(python), "-c", every_module], tmp_path)
    assert imported.returncode == 0, imported.stderr[-2000:]
    for argv, code in ((["--version"], 0), (["check", "--help"], 0),
                       (["validate", str(ROOT / "examples" / "plugin-cases" / "cases.yaml")], 0),
                       (["schemas", "--out", str(tmp_path / "schemas")], 0),
                       (["check", "missing.yaml", "--out", str(tmp_path / "o")], 2)):
        done = _run([str(loopprobe), *argv], tmp_path)
        assert done.returncode == code, (argv, done.stdout[-500:], done.stderr[-1000:])
    assert (tmp_path / "schemas" / "cases.schema.json").is_file()
