"""Which probes a command runs: the catalog (built in, a client kind's own, or ``--catalog``)
and the reports and probes chosen from it."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

from probes.catalog import REPORTS
from probes.cli.common import HarnessInputError, did_you_mean
from probes.clients import parse_client_spec
from probes.core.probe import ReportSpec
from probes.sandbox.folders import fixture_problem

__all__ = ["catalog_for", "load_catalog", "select"]


def load_catalog(name: str | None) -> tuple[ReportSpec, ...]:
    """The built-in reports, or ``REPORTS`` of your own module: a dotted name
    (``--catalog my.probes``) or a file (``--catalog probes/mine.py``)."""
    if name is None:
        return REPORTS
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
    except Exception as error:  # the user's module: any failure of it is their input's
        where = f" (line {error.lineno})" if isinstance(error, SyntaxError) else ""
        raise HarnessInputError(f"--catalog {name!r}: expected a module defining REPORTS, "
                                f"but importing it failed{where}: {type(error).__name__}: "
                                f"{error}") from None
    reports = getattr(module, "REPORTS", None)
    if not isinstance(reports, tuple) or not all(isinstance(r, ReportSpec) for r in reports):
        raise HarnessInputError(f"{name!r}: expected a REPORTS tuple of ReportSpec, "
                                f"found {type(reports).__name__}")
    return reports


def catalog_for(client_spec: str, name: str | None) -> tuple[ReportSpec, ...]:
    """``--catalog`` if given, else the client kind's own catalog (its ``catalog`` module,
    e.g. the tool runner's), else the built-in reports."""
    if name is None:
        client, _ = parse_client_spec(client_spec)
        name = getattr(client, "catalog", None)
    return load_catalog(name)


def select(reports: tuple[ReportSpec, ...], probe: str | None,
           report: str | None) -> list[ReportSpec]:
    chosen = []
    for spec in reports:
        if report and spec.name != report:
            continue
        probes = tuple(p for p in spec.probes if probe is None or p.name == probe)
        if probes:
            chosen.append(ReportSpec(spec.name, spec.title, probes, spec.summary))
    if not chosen:
        known = sorted({p.name for s in reports for p in s.probes})
        names = [s.name for s in reports]
        guess = did_you_mean(probe, known) or did_you_mean(report, names)
        raise HarnessInputError(f"no probe matches --probe {probe!r} --report {report!r}"
                                f"{guess}; expected one of the probes: {', '.join(known)}; or "
                                f"reports: {', '.join(names)}")
    for spec in chosen:
        for one in spec.probes:
            for relative in one.fixtures:
                if problem := fixture_problem(relative):
                    raise HarnessInputError(f"probe {one.name}: {problem}")
    return chosen
