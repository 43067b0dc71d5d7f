"""A case file as a catalog: one report, one probe per case, one claim per expectation.

So a user's cases run, are judged and are reported exactly as the built-in claims are: the
same sandbox, evidence, verdicts, EVIDENCE.md, HTML page, matrix, diff and bisect.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

from mockapi.scenario import Scenario
from probes.cases.expectations import check_expectation, statement
from probes.cases.format import Case, CaseFile, CaseFileError, expectation_ids, load_case_file
from probes.core.checks import Checks
from probes.core.evidence import Evidence
from probes.core.invocation import Invocation
from probes.core.probe import Claim, Probe, ReportSpec
from probes.core.provenance import project_expectation
from probes.core.setup import UserSetup

__all__ = ["case_catalog", "case_report", "user_setup"]


def user_setup(cases: CaseFile, folder: Path, *, workspace: Path | None = None,
               home_config: Path | None = None,
               plugin_dirs: tuple[Path, ...] = ()) -> UserSetup:
    """The setup the case file names (paths relative to its folder), each given folder
    replacing its own (plugin folders are added); every folder must exist."""
    named = cases.setup
    chosen = UserSetup(
        workspace=workspace or (folder / named.workspace if named.workspace else None),
        home_config=home_config or (folder / named.home_config if named.home_config else None),
        plugin_dirs=tuple(dict.fromkeys([*(folder / p for p in named.plugin_dirs),
                                         *plugin_dirs])))
    for what, path in chosen.folders():
        if not path.is_dir():
            raise CaseFileError(f"setup: the {what} folder {path} is "
                                f"{'not a folder' if path.exists() else 'missing'}; expected "
                                "a folder (paths in the case file are relative to it)")
    return chosen


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
    """The catalog of the case file at ``path``; ``folders`` as ``user_setup`` takes them."""
    cases = load_case_file(path)
    setup = user_setup(cases, path.resolve().parent, **folders)  # type: ignore[arg-type]
    return (case_report(cases, path.name, setup),)
