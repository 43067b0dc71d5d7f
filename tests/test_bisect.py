"""``loopprobe bisect`` and ``loopprobe versions``: which release changed a claim.

The search is tested as a pure function (skips, ranges, either direction); end to end it runs
on the fake loop, whose "versions" 6 and later drop hooks (a regression planted in
``tests/fakeloop/client.py``), so the Stop-hook claim flips exactly there.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from probes import cli
from probes.clients import registry
from probes.core.verdicts import CHANGES, CLAIM_VERDICTS
from probes.report.schemas import validate_path
from probes.scale.bisect import (
    TRANSITION_KINDS,
    BisectError,
    bisect_versions,
    order_versions,
    side_of,
    transition_kind,
    versions_between,
)
from tests.fakeloop import FakeLoopClient
from tests.fakeloop.client import DROPS_HOOKS_FROM

VERSIONS = [str(v) for v in range(1, 33)]


def _oracle(first_bad: int, skip: frozenset[int] = frozenset(),
            calls: list[str] | None = None):  # type: ignore[no-untyped-def]
    def verdict(version: str) -> str:
        if calls is not None:
            calls.append(version)
        if int(version) in skip:
            return "not_applicable"
        return "contradicted" if int(version) >= first_bad else "confirmed"
    return verdict


@pytest.mark.parametrize("first_bad", [2, 3, 17, 31, 32])
def test_finds_the_first_changed_version_in_log_steps(first_bad: int) -> None:
    calls: list[str] = []
    result = bisect_versions(VERSIONS, _oracle(first_bad, calls=calls))
    assert (result.first_changed, result.last_same) == (str(first_bad), str(first_bad - 1))
    assert (result.good_verdict, result.changed_verdict) == ("confirmed", "contradicted")
    assert len(calls) == len(set(calls)) <= 2 + 5  # both ends, then log2(32)


def test_newest_first_finds_where_a_fix_arrived() -> None:
    result = bisect_versions(list(reversed(VERSIONS)), _oracle(12))
    assert (result.first_changed, result.last_same) == ("11", "12")


def test_skipped_versions_are_stepped_around_and_reported() -> None:
    result = bisect_versions(VERSIONS, _oracle(17, skip=frozenset({8, 24})))
    assert result.first_changed == "17" and result.last_same == "16"
    calls: list[str] = []
    result = bisect_versions(VERSIONS, _oracle(17, skip=frozenset({16}), calls=calls))
    assert result.skipped == ["16"] and "16" in calls


def test_a_skip_next_to_the_change_leaves_a_range() -> None:
    result = bisect_versions(VERSIONS, _oracle(17, skip=frozenset({16})))
    assert result.first_changed is None and result.candidates == ["16", "17"]
    result = bisect_versions(VERSIONS, _oracle(17, skip=frozenset({15, 16})))
    assert result.first_changed is None and result.candidates == ["15", "16", "17"]
    assert result.skipped == ["15", "16"]


def test_ends_must_differ_and_have_verdicts() -> None:
    with pytest.raises(BisectError, match="confirmed on both"):
        bisect_versions(VERSIONS, _oracle(99))
    with pytest.raises(BisectError, match="not_applicable on 1"):
        bisect_versions(VERSIONS, _oracle(5, skip=frozenset({1})))


def _history(*spans: tuple[int, str]):  # type: ignore[no-untyped-def]
    """An oracle from (first version, verdict) spans, oldest first."""
    def verdict(version: str) -> str:
        return [found for first, found in spans if int(version) >= first][-1]
    return verdict


# absent until 5 (the feature is not there), not reached until 10 (a gate off), confirmed
# until 20, then contradicted: each kind of bisect dates its own change
FEATURE = _history((1, "absent"), (5, "not_reached"), (10, "confirmed"), (20, "contradicted"))


@pytest.mark.parametrize(("kind", "start", "first", "transition", "change"), [
    ("presence", 0, "5", "presence", "introduced"),
    ("reach", 4, "10", "reach", "now reached"),
    ("behaviour", 9, "20", "behaviour", "regressed"),
    ("any", 0, "5", "presence", "introduced"),
])
def test_each_kind_dates_its_own_transition(kind: str, start: int, first: str,
                                            transition: str, change: str) -> None:
    result = bisect_versions(VERSIONS[start:], FEATURE, kind)
    assert (result.first_changed, result.kind) == (first, kind)
    assert (result.transition, result.change) == (transition, change)
    assert result.to_json()["transition"] == transition


def test_a_behaviour_bisect_does_not_date_a_feature_appearing() -> None:
    with pytest.raises(BisectError, match=r"absent on 1, which says nothing of a behaviour "
                       r"transition.*--kind presence follows what changed"):
        bisect_versions(VERSIONS, FEATURE)
    # a result field that appears (terminal_reason in 2.1.91): reporting, not behaviour
    field_appears = _history((1, "not_observable"), (10, "confirmed"))
    with pytest.raises(BisectError, match="--kind reporting"):
        bisect_versions(VERSIONS, field_appears)
    assert bisect_versions(VERSIONS, field_appears, "reporting").first_changed == "10"
    with pytest.raises(BisectError, match="one side \\(present\\) of a presence transition"):
        bisect_versions(VERSIONS[9:], FEATURE, "presence")
    with pytest.raises(BisectError, match="expected a transition kind"):
        bisect_versions(VERSIONS, FEATURE, "colour")


def test_versions_that_say_nothing_of_the_kind_are_skipped() -> None:
    # the mechanism is not reached on 10-14: the change is in a range
    hidden = _history((1, "confirmed"), (10, "not_reached"), (15, "contradicted"))
    result = bisect_versions(VERSIONS, hidden)
    assert result.first_changed is None and result.candidates == [str(v) for v in range(10, 16)]
    assert set(result.skipped) <= set(result.candidates)


def test_every_pair_of_telling_verdicts_has_one_kind() -> None:
    telling = [v for v in CLAIM_VERDICTS if v not in ("error", "not_applicable")]
    for before in telling:
        for after in telling:
            kind = transition_kind(before, after)
            assert (kind is None) == (before == after), (before, after)
            if kind in TRANSITION_KINDS:  # the two verdicts are on its two sides
                assert None not in (side_of(before, kind), side_of(after, kind))
                assert side_of(before, kind) != side_of(after, kind)
    assert transition_kind("contradicted", "differs_from_baseline") == "source"
    assert transition_kind("error", "confirmed") is None
    assert side_of("a=absent, b=confirmed", "presence") == "a=absent, b=present"
    assert side_of("a=error, b=confirmed", "any") is None
    assert "introduced" in CHANGES


def test_versions_are_ordered_by_number_and_bounded() -> None:
    published = ["2.0.9", "2.0.77", "2.1.0", "2.0.10", "1.0.128"]
    assert order_versions(published) == ["1.0.128", "2.0.9", "2.0.10", "2.0.77", "2.1.0"]
    assert versions_between(published, "2.1.0", "2.0.10") == ["2.0.10", "2.0.77", "2.1.0"]
    with pytest.raises(BisectError, match="not a published version"):
        versions_between(published, "2.0.8", "2.1.0")


def test_bisect_on_the_fake_loop_finds_the_planted_regression(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(registry.CLIENT_KINDS, "fake-loop", FakeLoopClient)
    out = tmp_path / "bisect"
    code = cli.main(["bisect", "--client", "fake-loop", "--good", "1", "--bad", "9",
                     "--claim", "fake.stop-block", "--catalog", "tests.fakeloop.catalog",
                     "--out", str(out), "-j", "1", "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured
    result = json.loads((out / "bisect-fake.stop-block.json").read_text())
    summary = json.loads(captured.out)  # --json: the one summary on stdout
    assert summary["exit_code"] == 0 and summary["first_changed"] == result["first_changed"]
    assert summary["result"] == str(out / "bisect-fake.stop-block.json")
    assert result["first_changed"] == str(DROPS_HOOKS_FROM)
    assert result["last_same"] == str(DROPS_HOOKS_FROM - 1)
    assert result["good_verdict"] == "confirmed" and result["changed_verdict"] == "contradicted"
    assert (result["kind"], result["transition"], result["change"]) == (
        "behaviour", "behaviour", "regressed")
    assert validate_path(out / "bisect-fake.stop-block.json") == (1, [])
    assert result["flipped_checks"], "the checks that flipped are named"
    assert len(result["tested"]) <= 5
    # both sides' reports are there to cite
    assert (out / f"fake-loop-{DROPS_HOOKS_FROM}").is_dir()
    assert (out / f"fake-loop-{DROPS_HOOKS_FROM - 1}").is_dir()


def test_bisect_input_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(registry.CLIENT_KINDS, "fake-loop", FakeLoopClient)
    base = ["bisect", "--client", "fake-loop", "--catalog", "tests.fakeloop.catalog",
            "--out", str(tmp_path)]
    assert cli.main([*base, "--good", "1", "--bad", "9", "--claim", "no.such"]) == 2
    assert "no probe makes it" in capsys.readouterr().err
    assert cli.main([*base, "--good", "1", "--bad", "99", "--claim", "fake.stop-block"]) == 2
    assert "99 is not a published version" in capsys.readouterr().err
    assert cli.main([*base, "--good", "1", "--bad", "3", "--claim", "fake.stop-block"]) == 2
    assert "confirmed on both" in capsys.readouterr().err
    assert cli.main([*base, "--good", "1", "--bad", "9", "--claim", "fake.stop-block",
                     "--kind", "presence"]) == 2
    assert "one side (present) of a presence transition" in capsys.readouterr().err


def test_committed_bisects_still_validate() -> None:
    """Results written before bisect followed kinds (no kind, transition, change) still load."""
    checked, problems = validate_path(Path("reports/bisect"))
    assert checked >= 4 and not [p for p in problems if "bisect" in p.message], problems


def test_versions_lists_oldest_first(monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(registry.CLIENT_KINDS, "fake-loop", FakeLoopClient)
    assert cli.main(["versions", "fake-loop", "--since", "3", "--latest", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"client": "fake-loop", "versions": ["8", "9"]}


def test_prune_keeps_the_most_recently_used_installs(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from probes.clients.registry import prune_installs
    monkeypatch.setenv("LOOPPROBE_CACHE", str(tmp_path))
    root = tmp_path / "clients" / "claude-code"
    for age, version in enumerate(["2.0.1", "2.0.2", "2.0.3"]):
        folder = root / version / "bin"
        folder.mkdir(parents=True)
        (folder / "claude").write_text("")
        (root / version / "install.json").write_text(json.dumps(
            {"version": version, "platform": "linux-x64", "entry": "bin/claude",
             "launcher": ["bin/claude"], "sha256": "0" * 64}))
        (root / version / "last-used").touch()
        os.utime(root / version / "last-used", (1000 - age, 1000 - age))  # 2.0.1 newest
    assert sorted(b.version for b in prune_installs(2, dry_run=True)) == ["2.0.3"]
    assert (root / "2.0.3").exists()
    assert sorted(b.version for b in prune_installs(1)) == ["2.0.2", "2.0.3"]
    assert sorted(p.name for p in root.iterdir()) == ["2.0.1"]


def test_matrix_cache_budget_must_keep_one(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["matrix", "--clients", "2.1.235", "--out", str(tmp_path),
                     "--cache-budget", "0", "--skip-run"]) == 2
    assert "--cache-budget: expected a count >= 1" in capsys.readouterr().err


def test_not_observable_is_upheld_behaviour() -> None:
    """Its behaviour checks passed (only a field the version does not report was unseen): a
    contradicted version before it is a behaviour change, dated as one (max-turns on 2.1.84
    contradicted, 2.1.90 not observable, 2.1.91 confirmed: two changes, two kinds)."""
    assert transition_kind("contradicted", "not_observable") == "behaviour"
    assert transition_kind("not_observable", "confirmed") == "reporting"
    history = _history((1, "contradicted"), (10, "not_observable"), (15, "confirmed"))
    assert bisect_versions(VERSIONS, history).first_changed == "10"
    assert bisect_versions(VERSIONS[9:], history, "reporting").first_changed == "15"
