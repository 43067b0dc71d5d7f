"""mockapi's light modules load no server, and the lazily exported ``MockServer`` still resolves.

(``__all__`` of every module is checked in tests/test_code_quality.py.)
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import mockapi

PACKAGE = Path(mockapi.__file__).parent
SERVER_STACK = ("uvicorn", "starlette", "httpx", "sse_starlette")


def test_the_package_exports_resolve() -> None:
    assert [n for n in mockapi.__all__ if not hasattr(mockapi, n)] == []


def _loaded_after(code: str) -> list[str]:
    check = (f"{code}\nimport sys\n"
             f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({SERVER_STACK!r})))")
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True,
                          timeout=60, cwd=PACKAGE.parent)
    assert done.returncode == 0, done.stderr
    return list(ast.literal_eval(done.stdout.strip()))


def test_scenarios_records_journals_and_the_cli_arguments_load_no_server() -> None:
    assert _loaded_after(
        "import mockapi, mockapi.script.scenario, mockapi.journal.records, mockapi.journal.write\n"
        "import mockapi.journal.read, mockapi.script.plan\n"
        "import argparse\nfrom mockapi.serve.cli import add_serve_arguments\n"
        "add_serve_arguments(argparse.ArgumentParser())") == []


def test_mock_server_is_still_importable_from_the_package() -> None:
    # also shows that the check above would see the server stack if it were loaded
    loaded = _loaded_after("from mockapi import MockServer\nassert MockServer.__name__ == "
                           "'MockServer'\nimport mockapi\nassert 'MockServer' in dir(mockapi)")
    assert {"uvicorn", "starlette", "httpx"} <= set(loaded)
