"""Each mockapi module declares exactly its public names, and the light ones load no server."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import mockapi

PACKAGE = Path(mockapi.__file__).parent
MODULES = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem not in ("__init__", "__main__"))
SERVER_STACK = ("uvicorn", "starlette", "httpx", "sse_starlette")


def _defined_public_names(source: str) -> set[str]:
    names: set[str] = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {n for n in names if not n.startswith("_")}


@pytest.mark.parametrize("name", MODULES)
def test_all_is_every_public_name_the_module_defines(name: str) -> None:
    module = importlib.import_module(f"mockapi.{name}")
    defined = _defined_public_names((PACKAGE / f"{name}.py").read_text())
    assert sorted(module.__all__) == sorted(defined)


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
        "import mockapi, mockapi.scenario, mockapi.records, mockapi.journal, mockapi.plan\n"
        "import argparse\nfrom mockapi.cli import add_serve_arguments\n"
        "add_serve_arguments(argparse.ArgumentParser())") == []


def test_mock_server_is_still_importable_from_the_package() -> None:
    # also shows that the check above would see the server stack if it were loaded
    loaded = _loaded_after("from mockapi import MockServer\nassert MockServer.__name__ == "
                           "'MockServer'\nimport mockapi\nassert 'MockServer' in dir(mockapi)")
    assert {"uvicorn", "starlette", "httpx"} <= set(loaded)
