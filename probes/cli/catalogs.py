"""Which probes a command runs: the catalog (built in, a client kind's own, or ``--catalog``)
and the reports and probes chosen from it."""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Sequence
from pathlib import Path

from probes.cases.catalog import case_catalog
from probes.cases.format import CaseFileError
from probes.catalog import REPORTS
from probes.cli.common import HarnessInputError, did_you_mean
from probes.clients import parse_client_spec
from probes.core.probe import CatalogError, ReportSpec
from probes.sandbox.folders import fixture_problem
from probes.sandbox.user_setup import SetupError, check_tree

__all__ = ["catalog_for", "load_cases", "load_catalog", "names", "select"]


def load_catalog(name: str | None) -> tuple[ReportSpec, ...]:
    """The built-in reports, or ``REPORTS`` of your own module: a dotted name
    (``--catalog my.probes``) or a file (``--catalog probes/mine.py``)."""
    if name is None:
        return REPORTS
    if name.endswith((".yaml", ".yml")):  # a case file (probes.cases): data, not code
        return load_cases(name)
    if name.endswith(".py") and not Path(name).is_file():
        raise HarnessInputError(f"--catalog {name!r}: expected a Python file defining REPORTS, "
                                "but there is no such file")
    try:
        if name.endswith(".py"):
            spec = importlib.util.spec_from_file_location(Path(name).stem, name)
            if spec is None or spec.loader is None:
                raise ImportError(f"no Python module at {name}")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(name)
    except CatalogError as error:  # a declaration's mistake, found as the module loaded
        raise HarnessInputError(f"--catalog {name!r}: {error}") from None
    except (Exception, SystemExit) as error:  # the user's module: its failure is their input's
        where = f" (line {error.lineno})" if isinstance(error, SyntaxError) else ""
        raise HarnessInputError(f"--catalog {name!r}: expected a module defining REPORTS, "
                                f"but importing it failed{where}: {type(error).__name__}: "
                                f"{error}") from None
    reports = getattr(module, "REPORTS", None)
    if not isinstance(reports, tuple) or not all(isinstance(r, ReportSpec) for r in reports):
        raise HarnessInputError(f"{name!r}: expected a REPORTS tuple of ReportSpec, "
                                f"found {type(reports).__name__}")
    return reports


def load_cases(path: str, workspace: str | None = None, home_config: str | None = None,
               plugin_dirs: list[str] | None = None) -> tuple[ReportSpec, ...]:
    """The catalog of a case file, its setup's folders checked (where they lead, and what
    they hold); a one-line error otherwise."""
    try:
        catalog = case_catalog(Path(path), workspace=Path(workspace) if workspace else None,
                               home_config=Path(home_config) if home_config else None,
                               plugin_dirs=tuple(Path(p) for p in plugin_dirs or ()))
        setup = catalog[0].probes[0].setup
        for what, folder in setup.folders() if setup is not None else ():
            check_tree(folder, what)
    except (CaseFileError, SetupError) as error:
        raise HarnessInputError(f"{error}" if isinstance(error, CaseFileError)
                                else f"{path}: setup: {error}") from None
    return catalog


def catalog_for(client_spec: str, name: str | None) -> tuple[ReportSpec, ...]:
    """``--catalog`` if given, else the client kind's own catalog (its ``catalog`` module,
    e.g. the tool runner's), else the built-in reports."""
    if name is None:
        client, _ = parse_client_spec(client_spec)
        name = getattr(client, "catalog", None)
    return load_catalog(name)


def names(given: str | Sequence[str] | None) -> tuple[str, ...]:
    """A repeatable flag's values, each once, in the order given."""
    if given is None:
        return ()
    return (given,) if isinstance(given, str) else tuple(dict.fromkeys(given))


def select(reports: tuple[ReportSpec, ...], probe: str | Sequence[str] | None,
           report: str | Sequence[str] | None) -> list[ReportSpec]:
    """The reports (``--report``, repeatable) and the probes in them (``--probe``,
    repeatable): each flag a union, both together what both name. Reports come in the order
    first named; a report's probes keep the catalog's order, the order of its file."""
    probes, wanted = names(probe), names(report)
    known = sorted({p.name for s in reports for p in s.probes})
    report_names = [s.name for s in reports]
    for flag, kind, given, valid in (("--probe", "probe", probes, known),
                                     ("--report", "report", wanted, report_names)):
        for name in given:
            if name not in valid:
                raise HarnessInputError(
                    f"no {kind} matches {flag} {name!r}{did_you_mean(name, valid)}; expected "
                    f"one of the probes: {', '.join(known)}; or reports: {', '.join(report_names)}")
    chosen = []
    for spec in reports:
        if wanted and spec.name not in wanted:
            continue
        kept = tuple(p for p in spec.probes if not probes or p.name in probes)
        if kept:
            chosen.append(ReportSpec(spec.name, spec.title, kept, spec.summary))
    if not chosen:
        raise HarnessInputError(f"no probe matches --probe {', '.join(probes)} in --report "
                                f"{', '.join(wanted)}: expected probes of those reports: "
                                + "; ".join(f"{s.name}: {', '.join(p.name for p in s.probes)}"
                                            for s in reports if s.name in wanted))
    report_of = {p.name: s.name for s in reports for p in s.probes}
    first = [*wanted, *(report_of[name] for name in probes)]
    chosen.sort(key=lambda spec: first.index(spec.name) if spec.name in first else len(first))
    for spec in chosen:
        for one in spec.probes:
            for relative in one.fixtures:
                if problem := fixture_problem(relative):
                    raise HarnessInputError(f"probe {one.name}: {problem}")
    return chosen
