"""A case file as a catalog: one report, one probe per case, one claim per expectation.

So a user's cases run, are judged and are reported exactly as the built-in claims are: the
same sandbox, evidence, verdicts, EVIDENCE.md, HTML page, matrix, diff and bisect.
"""

from __future__ import annotations

import os
from functools import partial
from pathlib import Path

from mockapi.script.scenario import Scenario
from probes.cases.expectations import check_expectation, statement
from probes.cases.format import Case, CaseFile, CaseFileError, expectation_ids, load_case_file
from probes.cases.paths import given_path, repository_root, setup_path
from probes.core.checks import Checks
from probes.core.evidence import Evidence
from probes.core.invocation import Invocation
from probes.core.probe import CatalogError, Claim, Probe, ReportSpec
from probes.core.provenance import project_expectation
from probes.core.setup import UserSetup

__all__ = ["case_catalog", "case_report", "user_setup"]


def user_setup(cases: CaseFile, path: Path, *, workspace: Path | None = None,
               home_config: Path | None = None,
               plugin_dirs: tuple[Path, ...] = ()) -> UserSetup:
    """The setup the case file at ``path`` names (paths relative to its folder, inside its
    repository: ``probes.cases.paths``), each folder given on the command line replacing its
    own (plugin folders are added); every folder must exist."""
    root = repository_root(path)
    named = cases.setup

    def one(flag: str, given: Path | None, field: str, own: str | None) -> tuple[str, Path] | None:
        if given is not None:
            return flag, given_path(root, flag, given)
        return (field, setup_path(path, root, field, own)) if own is not None else None

    chosen_workspace = one("--workspace", workspace, "setup.workspace", named.workspace)
    chosen_home = one("--home-config", home_config, "setup.home_config", named.home_config)
    plugins: dict[str, tuple[str, Path]] = {}  # each real folder once: where it was named
    for field, folder in [*((f"setup.plugin_dirs[{i}]",
                             setup_path(path, root, f"setup.plugin_dirs[{i}]", given))
                            for i, given in enumerate(named.plugin_dirs)),
                          *((f"--plugin-dir {given}", given_path(root, "--plugin-dir", given))
                            for given in plugin_dirs)]:
        plugins.setdefault(os.path.realpath(folder), (field, folder))
    names: dict[str, str] = {}
    for field, folder in plugins.values():
        if (first := names.setdefault(folder.name, field)) != field:
            raise CaseFileError(f"{path}: {field}: expected plugin folders of distinct names "
                                f"(each is shown to the client under its name), found "
                                f"{folder.name!r} again (first named by {first})")
    for field, folder in [c for c in (chosen_workspace, chosen_home) if c] + [*plugins.values()]:
        if not _is_dir(folder):
            raise CaseFileError(f"{path}: {field}: expected a folder, but {folder} is "
                                f"{'not a folder' if os.path.lexists(folder) else 'missing'}")
    return UserSetup(workspace=chosen_workspace[1] if chosen_workspace else None,
                     home_config=chosen_home[1] if chosen_home else None,
                     plugin_dirs=tuple(folder for _, folder in plugins.values()))


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except (OSError, ValueError):
        return False


def _check(case: Case, claims: list[str], evidence: Evidence, checks: Checks) -> None:
    context = {"workspace": evidence.path("$WORKSPACE"), "home": evidence.path("$HOME")}
    for expectation, claim in zip(case.expect, claims, strict=True):
        check_expectation(expectation, claim.split(".", 1)[1], claim, evidence, checks, context)


def _probe(case: Case, source_name: str, setup: UserSetup) -> Probe:
    ids = expectation_ids(case)
    claims = tuple(Claim(
        f"{case.name}.{cid}", statement(expectation),
        project_expectation(expectation.why or "stated by the case file",
                            f"{source_name}, case {case.name}, expectation {cid}"))
        for cid, expectation in zip(ids, case.expect, strict=True))
    invocation = Invocation("run", case.prompt if case.prompt is not None else str(case.command),
                            tools=tuple(case.tools) if case.tools is not None else None,
                            max_turns=case.max_turns, timeout=case.timeout)
    return Probe(case.name, case.title, claims,
                 Scenario(name=case.name, rules=case.scenario_rules()), (invocation,),
                 partial(_check, case, [c.id for c in claims]), setup=setup,
                 fingerprinted=False)


def case_report(cases: CaseFile, source_name: str, setup: UserSetup) -> ReportSpec:
    return ReportSpec(cases.name, cases.title,
                      tuple(_probe(case, source_name, setup) for case in cases.cases),
                      cases.summary)


def case_catalog(path: Path, **folders: object) -> tuple[ReportSpec, ...]:
    """The catalog of the case file at ``path``; ``folders`` as ``user_setup`` takes them.
    Everything refused is a ``CaseFileError`` naming the file."""
    given_path(repository_root(path), "the case file", path)  # not a link out of its repository
    cases = load_case_file(path)
    setup = user_setup(cases, path, **folders)  # type: ignore[arg-type]
    try:
        return (case_report(cases, path.name, setup),)
    except CatalogError as error:  # what the format lets through and a probe refuses
        raise CaseFileError(f"{path}: {error}") from None
