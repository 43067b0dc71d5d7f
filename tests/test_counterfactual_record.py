"""``loopprobe run --counterfactuals`` records, per version folder, what each counterfactual did:
the evidence "shown able to fail" rests on (fake loop, fast tier)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from probes import cli
from probes.clients import registry
from probes.report.counterfactuals import COUNTERFACTUALS_FILE, load_counterfactuals
from tests.fakeloop import FakeLoopClient

CATALOG = '''
from dataclasses import replace

from mockapi import Match, Rule, Scenario, text, tool_use
from probes.model import Claim, Counterfactual, Invocation, Probe, ReportSpec
from probes.provenance import project_expectation

CLAIM = "cf.writes"

def check(ev, c):
    init = next((e for e in ev.runs["run"].output.events if e.get("type") == "system"), {})
    offered = init.get("tools") or []
    c.reach("offered", CLAIM, "Write is offered", held="Write" in offered, absent=True,
            expected="Write offered", observed=offered, evidence="init")
    c.equal("final", CLAIM, "the run ends with WRITTEN", expected="WRITTEN",
            observed=(ev.runs["run"].result or {}).get("result"), evidence="result")

def _reply(text_):
    def change(p):
        rules = [r if r.id != "done" else Rule(id="done", match=r.match, reply=text(text_))
                 for r in p.scenario.rules]
        return replace(p, scenario=Scenario(rules=rules))
    return change

def _no_write(p):
    return replace(p, invocations=tuple(replace(i, tools=("Read",)) for i in p.invocations))

PROBE = Probe(
    name="cf-write", title="writes",
    claims=(Claim(CLAIM, "the run ends with the model's text after Write",
                  source=project_expectation("a test", "tests/test_counterfactual_record.py")),),
    scenario=Scenario(rules=[
        Rule(id="write", match=Match(last_user_text_contains="GO"),
             reply=tool_use("Write", {"file_path": "o.txt", "content": "x"}, id="toolu_w")),
        Rule(id="done", match=Match(tool_result_for="toolu_w"), reply=text("WRITTEN"))]),
    invocations=(Invocation("run", "GO", tools=("Read", "Write")),),
    check=check,
    counterfactuals=(
        Counterfactual("other-text", "the model ends with another text", (CLAIM,),
                       _reply("OTHER")),
        Counterfactual("no-write", "Write is not offered", (CLAIM,), _no_write)))

REPORTS = (ReportSpec("cf", "Counterfactual record", (PROBE,)),)
'''


@pytest.fixture
def fake_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry.CLIENT_KINDS, "fake-loop", FakeLoopClient)


def test_each_counterfactual_is_recorded_with_its_verdict(fake_kind: None, tmp_path: Path) -> None:
    catalog = tmp_path / "cf_catalog.py"
    catalog.write_text(CATALOG)
    out = tmp_path / "out"
    code = cli.main(["run", "--client", "fake-loop@1", "--catalog", str(catalog), "--out",
                     str(out), "--work-dir", str(tmp_path / "work"), "--counterfactuals", "-q"])
    assert code == 0
    record = load_counterfactuals(out)
    assert record is not None
    assert (record["client"]["name"], record["run"], record["able_to_fail"]) == ("fake-loop", 2, 1)
    by_name = {e["counterfactual"]: e for e in record["counterfactuals"]}
    other = by_name["other-text"]
    assert other["able_to_fail"] is True
    assert other["claims"]["cf.writes"]["verdict"] == "contradicted"
    assert other["claims"]["cf.writes"]["failed_checks"] == [
        {"id": "cf-write.final", "expected": "WRITTEN", "observed": "OTHER"}]
    # removing the feature does not show the behaviour checks can fail: it is absent
    gone = by_name["no-write"]
    assert (gone["able_to_fail"], gone["claims"]["cf.writes"]["verdict"]) == (False, "absent")
    text = (out / COUNTERFACTUALS_FILE).read_text()
    assert str(tmp_path) not in text  # machine-independent, like the reports
    assert json.loads(text) == record


def test_a_folder_without_the_record_says_so(tmp_path: Path) -> None:
    assert load_counterfactuals(tmp_path) is None


def test_the_guide_says_able_to_fail_only_where_the_record_shows_it(fake_kind: None,
                                                                    tmp_path: Path) -> None:
    catalog = tmp_path / "cf_catalog.py"
    catalog.write_text(CATALOG)
    out = tmp_path / "out"
    base = ["run", "--client", "fake-loop@1", "--catalog", str(catalog), "--out", str(out),
            "--work-dir", str(tmp_path / "work"), "-q"]
    assert cli.main(base) == 0
    guide = (out / "EVIDENCE.md").read_text()
    assert "**Counterfactuals** (not run here):" in guide and "able to fail" not in guide
    assert cli.main([*base, "--counterfactuals"]) == 0
    guide = (out / "EVIDENCE.md").read_text()
    assert ("- able to fail: the model ends with another text — contradicted: "
            "final observed OTHER") in guide
    assert "- did NOT make it fail: Write is not offered — absent: " in guide


def test_the_record_validates_against_its_schema(fake_kind: None, tmp_path: Path) -> None:
    from probes.report.schemas import validate_path
    catalog = tmp_path / "cf_catalog.py"
    catalog.write_text(CATALOG)
    out = tmp_path / "out"
    assert cli.main(["run", "--client", "fake-loop@1", "--catalog", str(catalog), "--out",
                     str(out), "--work-dir", str(tmp_path / "work"), "--counterfactuals",
                     "-q"]) == 0
    assert validate_path(out / COUNTERFACTUALS_FILE) == (1, [])
    broken = json.loads((out / COUNTERFACTUALS_FILE).read_text())
    broken["counterfactuals"][0]["claims"]["cf.writes"]["verdict"] = "maybe"
    (out / COUNTERFACTUALS_FILE).write_text(json.dumps(broken))
    checked, problems = validate_path(out / COUNTERFACTUALS_FILE)
    assert checked == 1 and "maybe" in problems[0].message
