"""The packages keep their floors: a package imports only the packages below it.

``probes/__init__.py`` and ``mockapi/__init__.py`` list the floors and what each owns; this
test is those lists as code. Every import counts (module level, inside functions, under
``TYPE_CHECKING``): an upward import is a cycle waiting to happen and a reader's map that lies.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# The mock knows nothing of the harness: all of it is floor 0 of probes' count. Inside it,
# each package has a floor of its own; two on one floor stand side by side, neither
# importing the other.
MOCKAPI_FLOORS: Mapping[str, int] = {
    "mockapi.journal": 1,    # the journal: imports nothing of mockapi
    "mockapi.check": 2,      # a request read and checked
    "mockapi.script": 2,     # the scenario language
    "mockapi.serve": 3,      # the HTTP face: app, transport, server, CLI
    "mockapi.record": 4,     # record, then replay: a proxy on the mock's server
    "mockapi": 5,            # mockapi/__init__.py (the public names), testing, __main__
}
# floor of each part of probes; a module may import its own part and any part on a lower floor
PROBES_FLOORS: Mapping[str, int] = {
    "probes.inside": 1,      # programs run in the sandbox: import nothing of loopprobe
    "probes.core": 2,        # declarations, evidence, checks, verdicts
    "probes.faces": 3,       # probes.model, .checks, .evidence, .provenance: for users' catalogs
    "probes.sandbox": 3,
    "probes.catalog": 3,
    "probes.clients": 4,
    "probes.run": 5,
    "probes.report": 6,
    "probes.scale": 7,
    "probes.cases": 3,       # the user's case files: a catalog, as probes.catalog is
    "probes.gate": 7,        # the gate after the runs of a case file (beside scale)
    "probes.cli": 8,
    "probes.__main__": 9,
    "probes": 1,             # probes/__init__.py: the version, importing nothing
}
# (floor in probes' count, floor inside the mock): compared in that order
FLOORS: Mapping[str, tuple[int, int]] = {
    **{part: (0, floor) for part, floor in MOCKAPI_FLOORS.items()},
    **{part: (floor, 0) for part, floor in PROBES_FLOORS.items()},
}
FACES = {"probes.model", "probes.checks", "probes.evidence", "probes.provenance"}


def part_of(module: str) -> str:
    """The part (a key of FLOORS) a dotted module name belongs to."""
    if module in FACES:
        return "probes.faces"
    parts = module.split(".")
    if parts[-1] == "__version__":
        parts = parts[:-1]
    for length in (2, 1):
        if ".".join(parts[:length]) in FLOORS:
            return ".".join(parts[:length])
    raise AssertionError(f"{module}: in no part of FLOORS; give its package a floor")


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(tree: ast.Module, module: str, is_package: bool) -> Iterable[tuple[int, str]]:
    """(line, module) of every import of loopprobe's own modules, relative ones resolved."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            # `from probes.core import checks` imports probes.core.checks
            names = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            if name.split(".")[0] in ("probes", "mockapi"):
                yield node.lineno, name


def _floor(part: str) -> str:
    outer, inner = FLOORS[part]
    return f"floor {inner} of mockapi" if part in MOCKAPI_FLOORS else f"floor {outer}"


def upward_imports(root: Path) -> list[str]:
    """Every import from a part to a part on the same or a higher floor, one line each."""
    found = []
    for package in ("probes", "mockapi"):
        for path in sorted((root / package).rglob("*.py")):
            module = module_name(path, root)
            here = part_of(module)
            tree = ast.parse(path.read_text(), str(path))
            seen = set()
            for line, target in imported(tree, module, path.name == "__init__.py"):
                try:
                    there = part_of(target)
                except AssertionError:
                    continue  # a name imported from a package (`from probes.core import x`, x a class)
                if (line, there) in seen:
                    continue  # one line per import statement and part
                seen.add((line, there))
                # the faces are for users' catalogs: the harness imports probes.core itself
                if there != here and (FLOORS[there] >= FLOORS[here] or there == "probes.faces"):
                    found.append(f"{path.relative_to(root)}:{line}: {here} ({_floor(here)}) "
                                 f"imports {target} ({there}, {_floor(there)})")
    return found


def test_every_import_points_down() -> None:
    assert upward_imports(ROOT) == []


def test_every_package_of_probes_has_a_floor_and_says_what_it_owns() -> None:
    for init in sorted((ROOT / "probes").glob("*/__init__.py")):
        name = module_name(init, ROOT)
        assert name in FLOORS, f"{name}: a new package; give it a floor here and in probes/__init__.py"
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert "May import" in doc, f"{init.relative_to(ROOT)}: its docstring says what it may import"
        assert name.rpartition(".")[2] in (ast.get_docstring(
            ast.parse((ROOT / "probes/__init__.py").read_text())) or ""), name


def test_every_package_of_mockapi_has_a_floor_and_says_what_it_owns() -> None:
    listed = ast.get_docstring(ast.parse((ROOT / "mockapi/__init__.py").read_text())) or ""
    for init in sorted((ROOT / "mockapi").glob("*/__init__.py")):
        name = module_name(init, ROOT)
        assert name in MOCKAPI_FLOORS, \
            f"{name}: a new package; give it a floor here and in mockapi/__init__.py"
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert "May import" in doc, f"{init.relative_to(ROOT)}: its docstring says what it may import"
        assert f"``{name.rpartition('.')[2]}``" in listed, name
    assert sorted((ROOT / "mockapi").glob("*.py")) == [
        ROOT / "mockapi" / name for name in ("__init__.py", "__main__.py", "testing.py")], \
        "a module of the mock belongs in one of its packages"


@pytest.mark.parametrize(("planted_in", "line"), [
    ("probes/core/planted.py", "from probes.run.runner import run_probe\n"),
    ("probes/catalog/planted.py", "from probes.sandbox.files import SandboxFiles\n"),  # same floor
    ("probes/inside/planted.py", "import probes.core.names\n"),
    ("mockapi/planted.py", "def f():\n    from probes.core import checks\n"),
    ("mockapi/journal/planted.py", "from mockapi.serve.app import MockApp\n"),
    ("mockapi/check/planted.py", "from mockapi.script import scenario\n"),  # beside it
    ("mockapi/serve/planted.py", "if TYPE_CHECKING:\n    from mockapi.record import Recorder\n"),
    ("mockapi/script/planted.py", "from mockapi import text\n"),  # the public names: the top
    ("probes/run/planted.py", "from ..report import build\n"),
    ("probes/core/planted.py", "from probes.model import Probe\n"),
    ("probes/run/planted.py", "from probes.checks import Checks\n"),  # the harness skips the faces
])
def test_a_planted_upward_import_is_found(tmp_path: Path, planted_in: str, line: str) -> None:
    for package in ("probes", "mockapi"):
        for path in (ROOT / package).rglob("*.py"):
            copy = tmp_path / path.relative_to(ROOT)
            copy.parent.mkdir(parents=True, exist_ok=True)
            copy.write_text(path.read_text())
    assert upward_imports(tmp_path) == []
    (tmp_path / planted_in).write_text(line)
    found = upward_imports(tmp_path)
    assert len(found) == 1 and found[0].startswith(planted_in), found
