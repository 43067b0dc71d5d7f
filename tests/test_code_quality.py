"""The code stays typed, linted, acyclic and honest about what it exports (settings in
pyproject.toml)."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("mockapi", "probes")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True,
                          timeout=600, cwd=ROOT)


def test_ruff_finds_nothing() -> None:
    done = _run("ruff", "check", "mockapi", "probes", "tests", "docs/hooks")
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_strict_finds_nothing() -> None:
    done = _run("mypy")
    assert done.returncode == 0, done.stdout + done.stderr


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


SOURCES = {_module_name(p): p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))}
TREES = {name: ast.parse(path.read_text(), str(path)) for name, path in SOURCES.items()}


def _is_program(tree: ast.Module) -> bool:
    """A script run as a program (``if __name__ == "__main__":``), not a library module."""
    return any(isinstance(node, ast.If) and "__main__" in ast.unparse(node.test)
               for node in tree.body)


LIBRARY = sorted(name for name, tree in TREES.items()
                 if not _is_program(tree) and not name.endswith("__main__"))


def _defined(tree: ast.Module) -> set[str]:
    """Public names a module defines at top level (not the ones it imports)."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {n for n in names if not n.startswith("_")}


@pytest.mark.parametrize("name", LIBRARY)
def test_all_lists_exactly_what_the_module_defines(name: str) -> None:
    module = importlib.import_module(name)
    declared = getattr(module, "__all__", None)
    assert isinstance(declared, list), f"{name} has no __all__ list"
    assert sorted(declared) == sorted(set(declared)), "duplicates in __all__"
    assert [n for n in declared if not hasattr(module, n)] == [], "listed but missing"
    assert sorted(_defined(TREES[name]) - set(declared)) == [], \
        "public names defined here but not in __all__ (make them _private or export them)"


def _imports(name: str, tree: ast.Module) -> set[str]:
    """Project modules ``name`` imports anywhere: top level, in functions, under TYPE_CHECKING."""
    found: set[str] = set()
    package = name if SOURCES[name].name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            found.add(base)
            found |= {f"{base}.{alias.name}" for alias in node.names}
    return {m for m in found if m in SOURCES and m != name}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle_anywhere() -> None:
    graph = {name: _imports(name, tree) for name, tree in TREES.items()}
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


HEAVY = ("uvicorn", "starlette", "sse_starlette", "httpx")


def test_reading_and_diffing_reports_loads_no_server() -> None:
    reports = ROOT / "reports"
    script = (
        "import sys, io, contextlib\n"
        "from pathlib import Path\n"
        "from probes.cli import main\n"
        "from probes.report.format import load_folder\n"
        "from probes.report.matrix import build_matrix\n"
        f"load_folder(Path({str(reports / '2.1.235')!r}))\n"
        f"build_matrix([Path({str(reports / '2.1.235')!r})])\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    code = main(['diff', {str(reports / '2.1.235')!r}, {str(reports / '2.1.332')!r}])\n"
        f"heavy = sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})\n"
        "print(code, heavy)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    code, heavy = done.stdout.strip().split(" ", 1)
    assert code in ("0", "1") and heavy == "[]", done.stdout


def _third_party(tree: ast.Module) -> set[str]:
    """The top-level names of what a module imports that is neither ours nor the standard
    library's (imports under ``if TYPE_CHECKING:`` never run and are left out)."""
    typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                   and "TYPE_CHECKING" in ast.unparse(node.test) for n in ast.walk(node)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return {n for n in found if n not in sys.stdlib_module_names and n not in PACKAGES}


def test_every_import_of_the_package_is_a_declared_dependency() -> None:
    """A wheel installed alone (no test extras, which bring their own dependencies along)
    must import: every third-party module the library imports is in [project]
    dependencies."""
    import tomllib
    from importlib.metadata import packages_distributions

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {canonicalize_name(Requirement(r).name) for r in project["dependencies"]}
    owners = packages_distributions()
    # the pytest plugin is imported by pytest alone, which is there whenever it is
    missing = sorted(
        (module, name) for name in LIBRARY if name != "mockapi.testing"
        for module in _third_party(TREES[name])
        if not {canonicalize_name(d) for d in owners.get(module, [module])} & declared)
    assert missing == [], "imported by the package, not in pyproject's dependencies"
