"""One rule decides every claim's verdict (``probes.core.verdicts.decide_claim``): each case
planted on the fake loop, and the rule itself on check entries.

The fake loop stands in for a client so that each case can be made to happen: a feature the
version lacks, the probe's input refused, a harness failure, an egress attempt, a field the
version never reports, a real behaviour change. Nothing here is about a real client.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from mockapi import Match, Rule, Scenario, text, tool_use
from probes.core.checks import Checks
from probes.core.evidence import Evidence, block_text, blocks_of_type
from probes.core.probe import Claim, Invocation, Probe, ReportSpec
from probes.core.provenance import baseline, project_expectation
from probes.core.verdicts import CHANGES, CLAIM_VERDICTS, claim_change, decide_claim
from probes.report.build import build_report
from probes.report.junit import junit_xml
from probes.run.runner import run_probe
from tests.fakeloop import FakeLoopClient

CLIENT = FakeLoopClient()
BINARY = CLIENT.install("1")
CLAIM = "test.verdict"
SOURCE = project_expectation("a harness test of the verdict rule", "tests/test_verdicts.py")


def _result(ev: Evidence, run: str) -> dict[str, Any]:
    record = ev.runs.get(run)
    return dict(record.result or {}) if record else {}


def _tool_result(ev: Evidence, run: str) -> dict[str, Any]:
    """The first tool_result the client sent back in ``run``."""
    for record in ev.requests(run):
        for _, block in blocks_of_type(record, "tool_result"):
            return dict(block)
    return {}


def _offered(ev: Evidence, run: str) -> list[str]:
    record = ev.runs.get(run)
    init = next((e for e in (record.output.events if record else [])
                 if e.get("type") == "system"), {})
    return list(init.get("tools") or [])


def _write_probe(tool: str, tool_input: dict[str, Any], *, expected_text: str = "WRITTEN",
                 source: Any = SOURCE, run_args: tuple[str, ...] = (), timeout: float | None = None,
                 rules: list[Rule] | None = None,
                 reporting: tuple[str, Any] | None = None) -> Probe:
    """A probe of the claim "the client writes the file the model asks for": reach is the tool
    offered and its input accepted; behaviour is the file's text in the tool result's wake."""

    def check(ev: Evidence, c: Checks) -> None:
        offered = _offered(ev, "run")
        if c.reach("tool-offered", CLAIM, f"the client offers {tool}", held=tool in offered,
                   absent=bool(offered), expected=f"{tool} among the tools offered",
                   observed=offered or None, evidence="run run: system/init tools"):
            result = _tool_result(ev, "run")
            c.reach("input-accepted", CLAIM, "the client accepted the scripted tool input",
                    held=bool(result) and not result.get("is_error"), absent=False,
                    expected="a tool_result that is not an error",
                    observed=block_text(result) if result else None,
                    evidence="request 2: tool_result")
        c.equal("final-text", CLAIM, "the run ends with the model's last text",
                expected=expected_text, observed=_result(ev, "run").get("result"),
                evidence="run run: result.result")
        if reporting is not None:
            field, value = reporting
            c.reports("reported", CLAIM, f"the result reports {field}", expected=value,
                      observed=_result(ev, "run").get(field), evidence=f"run run: result.{field}")

    scenario = Scenario(rules=rules or [
        Rule(id="write", match=Match(last_user_text_contains="GO"),
             reply=tool_use(tool, tool_input, id="toolu_w")),
        Rule(id="done", match=Match(tool_result_for="toolu_w"), reply=text("WRITTEN")),
    ])
    return Probe(name="verdict", title="verdict", claims=(Claim(CLAIM, "a harness test", source=source),),
                 scenario=scenario,
                 invocations=(Invocation("run", "GO", tools=("Read", "Write", tool),
                                         extra_args=run_args,
                                         **({"timeout": timeout} if timeout else {})),),
                 check=check)


GOOD_INPUT = {"file_path": "out.txt", "content": "hello"}


def _verdict(probe: Probe, tmp_path: Path) -> tuple[str, str, dict[str, Any]]:
    outcome = run_probe(probe, CLIENT, BINARY, tmp_path)
    report, _, _ = build_report(ReportSpec("verdicts", "Verdicts", (probe,)), [outcome], BINARY)
    (claim,) = report["claims"]
    return claim["status"], claim["reason"], dict(report)


# ---- each case, planted -----------------------------------------------------------------------

def test_reach_held_and_behaviour_as_stated_is_confirmed(tmp_path: Path) -> None:
    status, reason, report = _verdict(_write_probe("Write", GOOD_INPUT), tmp_path)
    assert (status, report["status"]) == ("confirmed", "passed"), reason


def test_a_tool_the_version_lacks_is_absent_not_contradicted(tmp_path: Path) -> None:
    # the fake loop has no Edit tool: it is not offered, and the behaviour check fails too
    status, reason, report = _verdict(_write_probe("Edit", GOOD_INPUT, expected_text="OTHER"),
                                      tmp_path)
    assert status == "absent", reason
    assert "verdict.tool-offered observed" in reason and "Read" in reason
    assert report["status"] == "passed"  # an absent feature is no contradiction
    checks = {c["id"]: c for c in report["checks"]}
    assert (checks["verdict.tool-offered"]["role"], checks["verdict.tool-offered"]["status"]) == (
        "reach", "absent")
    assert checks["verdict.final-text"]["status"] == "failed"  # it decides nothing


def test_the_probes_input_refused_is_not_reached(tmp_path: Path) -> None:
    # the version has the tool but refuses the scripted input (no content): not triggered
    status, reason, _ = _verdict(_write_probe("Write", {"file_path": "out.txt"}), tmp_path)
    assert status == "not_reached", reason
    assert "KeyError" in reason


def test_a_real_behaviour_change_is_contradicted_and_cannot_pass_as_absent(tmp_path: Path) -> None:
    # reach holds (Write offered, input accepted); the model's last text differs from the claim's
    status, reason, report = _verdict(_write_probe("Write", GOOD_INPUT, expected_text="OTHER"),
                                      tmp_path)
    assert (status, report["status"]) == ("contradicted", "failed"), reason
    assert reason == "verdict.final-text expected OTHER, observed WRITTEN"


def test_a_baseline_claim_that_differs_is_not_contradicted(tmp_path: Path) -> None:
    probe = _write_probe("Write", GOOD_INPUT, expected_text="OTHER",
                         source=baseline("fakeloop 1", "the run ended with OTHER"))
    status, reason, report = _verdict(probe, tmp_path)
    assert (status, report["status"]) == ("differs_from_baseline", "failed"), reason
    assert report["claims"][0]["source"]["citation"].startswith("baseline, as recorded on")


def test_a_timeout_is_an_error_never_contradicted(tmp_path: Path) -> None:
    probe = _write_probe("Write", GOOD_INPUT, run_args=("--hang",), timeout=3)
    status, reason, report = _verdict(probe, tmp_path)
    assert (status, report["status"]) == ("error", "error"), reason
    assert reason.startswith("the harness failed, so this run decides nothing about the claim: "
                             "verdict.harness.run.finished observed killed at the 3")


def test_an_unscripted_request_is_an_error_never_contradicted(tmp_path: Path) -> None:
    rules = [Rule(id="other", match=Match(last_user_text_contains="NOT_THE_PROMPT"),
                  reply=text("never"))]
    status, reason, _ = _verdict(_write_probe("Write", GOOD_INPUT, rules=rules), tmp_path)
    assert status == "error", reason
    assert "verdict.harness.script-covered" in reason


def test_an_egress_attempt_is_reported_and_decides_no_verdict(tmp_path: Path) -> None:
    probe = _write_probe("Write", GOOD_INPUT, run_args=("--egress", "example.invalid:443"))
    status, reason, report = _verdict(probe, tmp_path)
    assert (status, report["status"]) == ("confirmed", "passed"), reason
    assert report["trust"]["egress_refused"] == ["example.invalid:443"]
    egress = next(c for c in report["checks"] if c["id"].endswith("harness.no-egress"))
    assert egress["passed"] is False


@pytest.mark.parametrize(("reported", "verdict"), [
    (("terminal_reason", "completed"), "confirmed"),
    (("stop_details", "completed"), "not_observable"),  # a field this version never reports
    (("terminal_reason", "max_turns"), "contradicted"),  # reported, and another value
])
def test_a_reporting_field_missing_is_not_observable_and_wrong_is_contradicted(
        tmp_path: Path, reported: tuple[str, Any], verdict: str) -> None:
    status, reason, _ = _verdict(_write_probe("Write", GOOD_INPUT, reporting=reported), tmp_path)
    assert status == verdict, reason


def test_junit_counts_only_contradictions_as_failures(tmp_path: Path) -> None:
    _, _, absent = _verdict(_write_probe("Edit", GOOD_INPUT), tmp_path / "a")
    _, _, changed = _verdict(_write_probe("Write", GOOD_INPUT, expected_text="OTHER"),
                             tmp_path / "b")
    xml = junit_xml([absent, changed]).decode()  # type: ignore[list-item]
    assert 'failures="0" errors="0" skipped="1"' in xml
    assert 'failures="1" errors="0" skipped="0"' in xml
    assert '<skipped message="absent: this version lacks the feature' in xml


def test_junit_holds_what_xml_cannot(tmp_path: Path) -> None:
    """A reason quotes what the client printed: control characters and lone surrogates
    are escaped, so the file still parses (ElementTree would write them as they are)."""
    import xml.etree.ElementTree as ET
    _, _, changed = _verdict(_write_probe("Write", GOOD_INPUT, expected_text="OTHER"), tmp_path)
    hostile = dict(changed)
    hostile["claims"] = [{**c, "reason": c["reason"] + " \x00\x1b[31m\x08 \ud800 \ufffe"}
                         for c in changed["claims"]]
    xml = junit_xml([hostile])  # type: ignore[list-item]
    failure = ET.fromstring(xml).find(".//failure")
    assert failure is not None and "\\u0000\\u001b[31m\\u0008 \\ud800 \\ufffe" in failure.get("message", "")


# ---- the rule itself ----------------------------------------------------------------------------

def _entry(check_id: str, status: str, claim: str | None = CLAIM, **more: Any) -> dict[str, Any]:
    return {"id": check_id, "claim": claim, "status": status, "passed": status == "passed",
            "expected": "E", "observed": "O", **more}


Case = tuple[list[dict[str, Any]], list[dict[str, Any]], str]
RULE_CASES: dict[str, Case] = {
    "all passed": ([_entry("p.a", "passed")], [], "confirmed"),
    "absent before not reached before contradicted": (
        [_entry("p.r1", "not_reached"), _entry("p.r2", "absent"), _entry("p.b", "failed")], [],
        "absent"),
    "not reached before contradicted": (
        [_entry("p.r", "not_reached"), _entry("p.b", "failed")], [], "not_reached"),
    "a harness failure before everything": (
        [_entry("p.b", "failed")], [_entry("p.harness.run.finished", "failed", claim=None)],
        "error"),
    "an egress attempt decides nothing": (
        [_entry("p.a", "passed")], [_entry("p.harness.no-egress", "failed", claim=None)],
        "confirmed"),
    "a client protocol fault decides nothing by itself": (
        [_entry("p.a", "passed")], [_entry("p.client.run.protocol", "failed", claim=None)],
        "confirmed"),
    "a refused reporter poser decides nothing": (
        [_entry("p.a", "passed")], [_entry("p.client.reporter-posers", "failed", claim=None)],
        "confirmed"),
    "lost evidence is a harness failure": (
        [_entry("p.a", "passed")], [_entry("p.harness.evidence-intact", "failed", claim=None)],
        "error"),
    "failed before not observable": (
        [_entry("p.b", "failed"), _entry("p.h", "not_observable")], [], "contradicted"),
    "not observable": ([_entry("p.a", "passed"), _entry("p.h", "not_observable")], [],
                       "not_observable"),
    "no check": ([], [], "error"),
}


@pytest.mark.parametrize("case", list(RULE_CASES))
def test_decide_claim_applies_one_order(case: str) -> None:
    own, harness, expected = RULE_CASES[case]
    status, reason = decide_claim(own, own + harness)
    assert status == expected, reason
    assert status in CLAIM_VERDICTS


def test_decide_claim_not_applicable_and_error_come_first() -> None:
    own = [_entry("p.b", "failed")]
    assert decide_claim(own, own, not_applicable="no fork") == ("not_applicable", "no fork")
    assert decide_claim(own, own, error="boom") == ("error", "boom")


def test_a_deciding_reason_names_the_check_and_its_observed_value() -> None:
    own = [_entry("p.r", "absent", observed="Unknown command: /goal", expected="accepted")]
    status, reason = decide_claim(own, own)
    assert (status, reason) == ("absent", "this version lacks the feature: p.r observed "
                                          "Unknown command: /goal (expected accepted)")
    long = [_entry("p.b", "failed", observed="x" * 500)]
    assert decide_claim(long, long)[1].endswith("x" * 200 + "…")


CHANGE_CASES: list[tuple[str | None, str | None, str]] = [
    ("confirmed", "confirmed", "same"),
    ("confirmed", "contradicted", "regressed"),
    ("not_observable", "differs_from_baseline", "regressed"),
    ("absent", "contradicted", "changed"),
    ("confirmed", "error", "error"),
    ("error", "confirmed", "error"),
    ("confirmed", "absent", "removed"),
    ("absent", "confirmed", "introduced"),
    ("not_applicable", "confirmed", "newly applicable"),
    ("not_reached", "confirmed", "now reached"),
    ("contradicted", "confirmed", "fixed"),
    (None, "confirmed", "not run"),
    ("confirmed", "not_reached", "changed"),
]


@pytest.mark.parametrize(("before", "after", "change"), CHANGE_CASES)
def test_claim_change_names_what_happened(before: str | None, after: str | None,
                                          change: str) -> None:
    assert claim_change(before, after) == change
    assert change in CHANGES


def test_every_verdict_pair_has_a_change() -> None:
    changes: Callable[[str, str], str] = claim_change
    for before in CLAIM_VERDICTS:
        for after in CLAIM_VERDICTS:
            assert changes(before, after) in CHANGES


# ---- a capability: lacking in this version, or in the client kind -------------------------------

class _OldFakeLoop(FakeLoopClient):
    """The fake loop as a version before ``--fork-session``: the kind has it, this one not."""

    def capabilities(self, binary: Any) -> Any:
        base = super().capabilities(binary)
        return replace(base, version_lacks=frozenset({"fork"}))


def _forking_probe() -> Probe:
    return Probe(name="forking", title="forking",
                 claims=(Claim(CLAIM, "a harness test", source=SOURCE),),
                 scenario=Scenario(rules=[Rule(reply=text("HI"))]),
                 invocations=(Invocation("first", "HELLO", session="new"),
                              Invocation("forked", "AGAIN", session="resume",
                                         resume_from="first", fork=True)),
                 check=lambda ev, c: None)


@pytest.mark.parametrize(("client", "verdict"), [(FakeLoopClient(), "not_applicable"),
                                                 (_OldFakeLoop(), "absent")])
def test_a_flag_this_version_lacks_is_absent_one_the_kind_lacks_not_applicable(
        tmp_path: Path, client: FakeLoopClient, verdict: str) -> None:
    probe = _forking_probe()
    outcome = run_probe(probe, client, BINARY, tmp_path)
    report, _, _ = build_report(ReportSpec("verdicts", "Verdicts", (probe,)), [outcome], BINARY)
    (claim,) = report["claims"]
    assert (claim["status"], report["status"]) == (verdict, "not_applicable" if verdict ==
                                                   "not_applicable" else "passed")
    assert "lacks what this probe needs: fork" in claim["reason"]
