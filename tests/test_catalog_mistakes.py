"""A catalog's mistakes are found when it is loaded: each declaration raises ``CatalogError``
naming the object, what was expected and what arrived; ``loopprobe run --catalog`` says it in
one line and exits 2 before any probe runs."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import probes.cli.run as run_command
from mockapi import Scenario
from probes import cli, model
from probes.core.checks import Checks
from probes.core.evidence import Evidence
from probes.model import CatalogError, Claim, Counterfactual, Invocation, Probe, ReportSpec, Source
from probes.provenance import project_expectation

SOURCE = project_expectation("a test's own expectation", "tests/test_catalog_mistakes.py")


def _check(ev: Evidence, c: Checks) -> None:
    return None


def _probe(**changes: Any) -> Probe:
    fields: dict[str, Any] = {
        "name": "mine", "title": "Mine", "claims": (Claim("mine.claim", "It holds.", SOURCE),),
        "scenario": Scenario(name="mine"), "invocations": (Invocation("run", "PROMPT"),),
        "check": _check}
    return Probe(**{**fields, **changes})


def _counterfactual(**changes: Any) -> Counterfactual:
    fields: dict[str, Any] = {"name": "variant", "description": "It cannot hold here.",
                              "claims": ("mine.claim",), "change": lambda p: p}
    return Counterfactual(**{**fields, **changes})


def test_a_catalog_error_is_a_value_error_of_the_public_face() -> None:
    assert issubclass(CatalogError, ValueError)
    assert "CatalogError" in model.__all__


# ---- Claim, Source ------------------------------------------------------------------------

def test_a_claim_whose_source_is_a_string() -> None:
    with pytest.raises(CatalogError) as caught:
        Claim("tool-scheduling.parallel", "Two reads run at once.", source="README")  # type: ignore[arg-type]
    assert str(caught.value) == (
        "Claim 'tool-scheduling.parallel': source must be a Source(...) (probes.provenance: "
        "from_analysis, project_expectation, unstated), got str 'README'")


@pytest.mark.parametrize("claim_id", ["", "  ", None, 3])
def test_a_claim_without_an_id(claim_id: object) -> None:
    with pytest.raises(CatalogError, match=r"^Claim: id must be a non-empty string, got "):
        Claim(claim_id, "It holds.", SOURCE)  # type: ignore[arg-type]


def test_a_claim_without_a_statement() -> None:
    with pytest.raises(CatalogError, match=r"^Claim 'mine.claim': statement must be a non-empty "
                                           r"string, got str ''$"):
        Claim("mine.claim", "", SOURCE)


def test_a_claim_whose_beyond_source_is_not_text() -> None:
    with pytest.raises(CatalogError, match=r"beyond_source must be a string or None, got list"):
        Claim("mine.claim", "It holds.", SOURCE, beyond_source=["why"])  # type: ignore[arg-type]


def test_a_source_of_an_unknown_kind() -> None:
    with pytest.raises(CatalogError, match=r"^Source: kind must be one of analysis, project, "
                                           r"baseline, unstated, got str 'docs'$"):
        Source("docs", "README", "why")  # type: ignore[arg-type]


def test_a_source_whose_line_is_not_a_number() -> None:
    with pytest.raises(CatalogError, match=r"^Source \(analysis\): line must be a line number or "
                                           r"None, got str '12'$"):
        Source("analysis", "Section", "a quote", "12")  # type: ignore[arg-type]


# ---- Counterfactual ---------------------------------------------------------------------

def test_a_counterfactual_whose_claims_are_one_string() -> None:
    with pytest.raises(CatalogError, match=r"^Counterfactual 'variant': claims must be a tuple of "
                                           r"a claim id \(str\), got str 'mine.claim'$"):
        _counterfactual(claims="mine.claim")


def test_a_counterfactual_naming_no_claim() -> None:
    with pytest.raises(CatalogError, match=r"claims must name at least one claim"):
        _counterfactual(claims=())


def test_a_counterfactual_whose_name_is_a_path() -> None:
    with pytest.raises(CatalogError, match=r"^counterfactual name '\.\./up': expected a simple"):
        _counterfactual(name="../up")


def test_a_counterfactual_whose_change_is_not_a_function() -> None:
    with pytest.raises(CatalogError, match=r"^Counterfactual 'variant': change must be a function "
                                           r"of the probe returning the changed probe, got str"):
        _counterfactual(change="swap the answer")


def test_a_counterfactual_naming_a_claim_the_probe_does_not_have() -> None:
    with pytest.raises(CatalogError, match=r"^Probe 'mine': counterfactual 'variant' names claims "
                                           r"\['mine.other'\] that are not the probe's: "
                                           r"\['mine.claim'\]$"):
        _probe(counterfactuals=(_counterfactual(claims=("mine.other",)),))


def test_counterfactuals_of_one_name() -> None:
    with pytest.raises(CatalogError, match=r"^Probe 'mine': counterfactual names must be unique, "
                                           r"but 'variant' repeat$"):
        _probe(counterfactuals=(_counterfactual(), _counterfactual()))


# ---- Probe ------------------------------------------------------------------------------

def test_a_probe_whose_claims_hold_a_string() -> None:
    with pytest.raises(CatalogError, match=r"^Probe 'mine': claims\[0\] must be a Claim\(\.\.\.\), "
                                           r"got str 'mine.claim'$"):
        _probe(claims=("mine.claim",))


def test_a_probe_whose_claim_ids_repeat() -> None:
    claim = Claim("mine.claim", "It holds.", SOURCE)
    with pytest.raises(CatalogError, match=r"^Probe 'mine': claim ids must be unique, but "
                                           r"'mine.claim' repeat$"):
        _probe(claims=(claim, claim))


def test_a_probe_whose_scenario_is_a_dict() -> None:
    with pytest.raises(CatalogError, match=r"^Probe 'mine': scenario must be a mockapi "
                                           r"Scenario\(\.\.\.\), got dict"):
        _probe(scenario={"rules": []})


def test_a_probe_without_invocations() -> None:
    with pytest.raises(CatalogError, match=r"^Probe 'mine': invocations must hold at least one"):
        _probe(invocations=())


def test_a_probe_whose_invocation_names_repeat() -> None:
    with pytest.raises(CatalogError, match=r"^Probe 'mine': invocation names must be unique, but "
                                           r"'run' repeat$"):
        _probe(invocations=(Invocation("run", "A"), Invocation("run", "B")))


def test_a_probe_resuming_an_invocation_it_does_not_have() -> None:
    with pytest.raises(CatalogError, match=r"^Probe 'mine': invocation 'again' resumes from 'first', "
                                           r"expected one of the invocations before it: \['run'\]$"):
        _probe(invocations=(Invocation("run", "A"),
                            Invocation("again", "B", session="resume", resume_from="first")))


def test_a_probe_whose_check_is_not_a_function() -> None:
    with pytest.raises(CatalogError, match=r"^Probe 'mine': check must be a function"):
        _probe(check=None)


def test_a_probe_whose_fixture_is_not_text() -> None:
    with pytest.raises(CatalogError, match=r"^Probe 'mine': fixtures\['a.txt'\] must be the file's "
                                           r"content \(str\), got bytes"):
        _probe(fixtures={"a.txt": b"bytes"})


def test_a_probe_requiring_an_unknown_capability() -> None:
    with pytest.raises(CatalogError, match=r"^Probe 'mine' requires unknown capabilities "
                                           r"\['telepathy'\]"):
        _probe(requires=("telepathy",))


@pytest.mark.parametrize("revision", [0, -1, True, "2", 1.5])
def test_a_probe_whose_revision_is_not_a_whole_number_from_1(revision: object) -> None:
    with pytest.raises(CatalogError, match=r"^Probe 'mine': revision must be a whole number "
                                           r">= 1, got "):
        _probe(revision=revision)


def test_a_probe_whose_name_is_a_path() -> None:
    with pytest.raises(CatalogError, match=r"^probe name 'a/b': expected a simple name"):
        _probe(name="a/b")


# ---- Invocation -------------------------------------------------------------------------

def test_an_invocation_without_a_prompt() -> None:
    with pytest.raises(CatalogError, match=r"^Invocation 'run': prompt must be a string, got "
                                           r"NoneType None$"):
        Invocation("run", None)  # type: ignore[arg-type]


def test_an_invocation_of_an_unknown_session_kind() -> None:
    with pytest.raises(CatalogError, match=r"^Invocation 'run': session must be 'new', 'resume' or "
                                           r"'none', got str 'continue'$"):
        Invocation("run", "A", session="continue")  # type: ignore[arg-type]


def test_an_invocation_resuming_nothing() -> None:
    with pytest.raises(CatalogError, match=r"^Invocation 'run': resume_from names the invocation "
                                           r"resumed, with session='resume' only"):
        Invocation("run", "A", session="resume")


def test_an_invocation_whose_tools_are_one_string() -> None:
    with pytest.raises(CatalogError, match=r"^Invocation 'run': tools must be a tuple of tool names "
                                           r"or None, got str 'Read'$"):
        Invocation("run", "A", tools="Read")  # type: ignore[arg-type]


# ---- ReportSpec -------------------------------------------------------------------------

def test_a_report_whose_probes_are_not_a_tuple() -> None:
    with pytest.raises(CatalogError, match=r"^ReportSpec 'mine': probes must be a tuple of a "
                                           r"Probe\(\.\.\.\), got Probe"):
        ReportSpec("mine", "Mine", _probe())  # type: ignore[arg-type]


def test_a_report_without_probes() -> None:
    with pytest.raises(CatalogError, match=r"^ReportSpec 'mine': probes must hold at least one"):
        ReportSpec("mine", "Mine", ())


def test_a_report_whose_probe_names_repeat() -> None:
    with pytest.raises(CatalogError, match=r"^ReportSpec 'mine': probe names must be unique, but "
                                           r"'mine' repeat$"):
        ReportSpec("mine", "Mine", (_probe(), _probe()))


def test_a_report_whose_claim_ids_repeat_across_probes() -> None:
    with pytest.raises(CatalogError, match=r"^ReportSpec 'mine': claim ids across its probes must "
                                           r"be unique, but 'mine.claim' repeat$"):
        ReportSpec("mine", "Mine", (_probe(), _probe(name="other")))


def test_a_report_whose_name_is_a_path() -> None:
    with pytest.raises(CatalogError, match=r"^report name '\.hidden': expected a simple"):
        ReportSpec(".hidden", "Mine", (_probe(),))


def test_a_changed_probe_is_checked_again() -> None:
    with pytest.raises(CatalogError, match=r"^Probe 'mine': title must be a non-empty string"):
        replace(_probe(), title="")


# ---- the command line -------------------------------------------------------------------

_STRING_SOURCE = '''
from mockapi import Scenario
from probes.model import Claim, Invocation, Probe, ReportSpec

REPORTS = (ReportSpec("mine", "Mine", (Probe(
    name="tool-scheduling", title="Two reads",
    claims=(Claim("tool-scheduling.parallel", "Two reads run at once.", source="README"),),
    scenario=Scenario(name="mine"), invocations=(Invocation("run", "PROMPT"),),
    check=lambda ev, c: None),)),)
'''


def test_the_cli_says_a_string_source_in_one_line_before_any_probe_runs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    catalog = tmp_path / "mine.py"
    catalog.write_text(_STRING_SOURCE)
    ran: list[object] = []
    monkeypatch.setattr(run_command, "execute_suite", lambda *a, **k: ran.append(a))
    out = tmp_path / "out"
    code = cli.main(["run", "--catalog", str(catalog), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.splitlines() == [
        f"loopprobe: --catalog {str(catalog)!r}: Claim 'tool-scheduling.parallel': source must "
        "be a Source(...) (probes.provenance: from_analysis, project_expectation, unstated), "
        "got str 'README'"]
    assert ran == [] and not out.exists()


_UNKNOWN_CAPABILITY = '''
from mockapi import Scenario
from probes.model import Claim, Invocation, Probe, ReportSpec
from probes.provenance import project_expectation

REPORTS = (ReportSpec("mine", "Mine", (Probe(
    name="mine", title="Mine",
    claims=(Claim("mine.claim", "It holds.", project_expectation("why", "where")),),
    scenario=Scenario(name="mine"), invocations=(Invocation("run", "PROMPT"),),
    check=lambda ev, c: None, requires=("telepathy",)),)),)
'''


def test_the_cli_says_a_mistake_of_a_dotted_catalog_too(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "my_mistaken_catalog.py").write_text(_UNKNOWN_CAPABILITY)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(run_command, "execute_suite", lambda *a, **k: pytest.fail("a probe ran"))
    code = cli.main(["run", "--catalog", "my_mistaken_catalog", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.splitlines()) == 1
    assert err.startswith("loopprobe: --catalog 'my_mistaken_catalog': Probe 'mine' requires "
                          "unknown capabilities ['telepathy']")
