"""The changelog joined to the almanac: each mapped entry agrees, is near, is not seen by the
probe or disagrees (with the runs that decided), on a small almanac; releases the changelog
skips and sections never published are named; publish and attach-changelog write it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from probes import cli
from probes.report.schemas import validate_path
from probes.scale.almanac_changelog import NEAR_WINDOW, SEEN_WINDOW, join, with_changelog
from probes.scale.almanac_doc import publish, read_almanac
from probes.scale.changelog_map import mapping_text
from tests.test_almanac_publish import PUBLISHED, _state
from tests.test_almanac_search import VERSIONS as BUILT

# 2.1.0 .. 2.1.60 without 2.1.5 (a section never published) and with 2.1.7 (a release the
# changelog skips)
VERSIONS = [f"2.1.{n}" for n in range(0, 61) if n != 5]
SECTIONS = [f"2.1.{n}" for n in range(60, -1, -1) if n != 7]
COMMIT = "5cfc0a1905ce0c0a9bd81d8a90fe6b62ff614357"


def _almanac() -> dict[str, Any]:
    """claim.a: contradicted to 2.1.4, confirmed from 2.1.6 (located); claim.b never
    changes; claim.c changes somewhere in 2.1.30–2.1.38 (not located)."""
    def segment(first: str, last: str, verdict: str) -> dict[str, Any]:
        inside = VERSIONS[VERSIONS.index(first):VERSIONS.index(last) + 1]
        return {"first": first, "last": last, "verdict": verdict, "probed": [*inside[::4], last]}

    def change(before: str, after: str, located: bool = True) -> dict[str, Any]:
        return {"before": before, "after": after, "from": "contradicted", "to": "confirmed",
                "located": located, "kind": "behaviour", "change": "fixed", "verified": located,
                "flipped_checks": [], "witnesses": {
                    "before": f"almanac/witnesses/{before}" if located else None,
                    "after": f"almanac/witnesses/{after}" if located else None}}
    claims = [
        {"id": "claim.a", "probe": "p-a", "area": "x", "statement": "A holds",
         "introduced": None, "segments": [segment("2.1.0", "2.1.4", "contradicted"),
                                          segment("2.1.6", "2.1.60", "confirmed")],
         "changes": [change("2.1.4", "2.1.6")]},
        {"id": "claim.b", "probe": "p-b", "area": "x", "statement": "B holds",
         "introduced": None, "segments": [segment("2.1.0", "2.1.60", "confirmed")],
         "changes": []},
        {"id": "claim.c", "probe": "p-c", "area": "y", "statement": "C holds",
         "introduced": None, "segments": [segment("2.1.0", "2.1.30", "contradicted"),
                                          segment("2.1.38", "2.1.60", "confirmed")],
         "changes": [change("2.1.30", "2.1.38", located=False)]},
    ]
    return {"schema_version": 1, "kind": "almanac", "generator": "loopprobe test",
            "client": "claude-code",
            "method": {"grid": 8, "screen_probe": "s", "grid_versions": [], "guarantee": "g"},
            "range": {"first": VERSIONS[0], "last": VERSIONS[-1], "count": len(VERSIONS)},
            "not_built": [],
            "versions": [{"version": v, "binary_sha256": "", "screen": "", "probes_run": 3,
                          "witness": f"almanac/witnesses/{v}" if v == "2.1.18" else None}
                         for v in VERSIONS],
            "claims": claims,
            "cost": {"builds": 1, "suite_runs": 1, "probe_runs": 1, "screens": 1,
                     "installs": 0, "wall_s": 1.0}}


def _entry(release: str, text: str, **review: Any) -> dict[str, Any]:
    return {"release": release, "text": text, "topics": ["hooks"], **review}


def _mapping(*entries: dict[str, Any], newest: str = "2.1.60") -> dict[str, Any]:
    sections = {s: 1 for s in SECTIONS}
    sections["2.1.61"] = 1  # sections newer than the almanac's range
    return {"kind": "changelog-map", "format": 1, "client": "claude-code",
            "source": {"repository": "anthropics/claude-code", "path": "CHANGELOG.md",
                       "commit": COMMIT, "newest": newest, "loop_entries": len(entries),
                       "sections": sections},
            "entries": list(entries)}


ENTRIES = [
    # a section never published (2.1.5) falls on the release that shipped it (2.1.6), the
    # change's after side: agrees
    _entry("2.1.5", "Fixed A", claims=["claim.a"]),
    _entry("2.1.8", "Fixed A again", claims=["claim.a"]),  # 2 releases after it: near
    _entry("2.1.2", "Fixed A early", claims=["claim.a", "claim.b"]),  # 3 before it: near
    _entry("2.1.20", "Fixed A later", claims=["claim.a"]),  # 14 releases away: disagrees
    _entry("2.1.50", "Fixed B", claims=["claim.b"]),  # claim.b never moves: not seen
    _entry("2.1.50", "Fixed A much later", claims=["claim.a"]),  # 44 away: not seen
    _entry("2.1.33", "Fixed C", claims=["claim.c"]),  # inside an interval not located: near
    _entry("2.1.6", "Fixed the picker", not_probed="interactive only"),
    _entry("2.1.11", "Fixed something", ),  # not reviewed yet
    _entry("2.1.61", "Fixed A in the future", claims=["claim.a"]),  # after the range
]


def test_each_mapped_entry_agrees_is_near_is_not_seen_or_disagrees() -> None:
    block, per_change = join(_almanac(), _mapping(*ENTRIES))
    said = {e["text"]: e for e in block["entries"]}
    assert said["Fixed A"]["status"] == "agrees"
    assert (said["Fixed A again"]["status"], said["Fixed A again"]["releases_away"]) == (
        "near", 2)
    assert (said["Fixed A early"]["status"], said["Fixed A early"]["releases_away"]) == (
        "near", 3)
    assert said["Fixed C"]["status"] == "near" and said["Fixed C"]["releases_away"] == 0
    assert said["Fixed B"]["status"] == "not seen by the probe"
    assert said["Fixed A much later"]["status"] == "not seen by the probe"
    disagrees = said["Fixed A later"]
    assert disagrees["status"] == "disagrees"
    [decided] = disagrees["decided_by"]
    # the verdict held across 2.1.20, probed on both sides, the change located at 2.1.6
    assert decided["claim"] == "claim.a" and decided["verdict"] == "confirmed"
    assert decided["probed"] == ["2.1.18", "2.1.22"]
    assert decided["located_at"] == ["2.1.4", "2.1.6"]
    assert decided["witnesses"] == ["almanac/witnesses/2.1.18", "almanac/witnesses/2.1.4",
                                    "almanac/witnesses/2.1.6"]
    assert "Fixed A in the future" not in said and "Fixed the picker" not in said
    assert block["counts"] == {"loop_entries": 10, "mapped": 8, "not_probed": 1, "unmapped": 1,
                               "outside_range": 1, "agrees": 1, "near": 3,
                               "not seen by the probe": 2, "disagrees": 1}
    assert (block["near_window"], block["seen_window"]) == (NEAR_WINDOW, SEEN_WINDOW)
    # the releases one side has and the other not
    assert block["skipped"] == ["2.1.7"] and block["unpublished"] == ["2.1.5"]
    assert NEAR_WINDOW == 3 and SEEN_WINDOW == 16  # the windows the cases above are made for
    assert block["after_newest"] == 0
    # the change of claim.a: the loop entries of (2.1.4, 2.1.6], with what is said of each
    shown = per_change[("claim.a", "2.1.4", "2.1.6")]
    assert [(e["text"], e.get("status"), e.get("not_probed")) for e in shown] == [
        ("Fixed A", "agrees", None), ("Fixed the picker", None, "interactive only")]
    assert [e["text"] for e in per_change[("claim.c", "2.1.30", "2.1.38")]] == ["Fixed C"]


def test_a_changelog_older_than_the_range_says_how_many_versions_it_does_not_reach() -> None:
    block, _ = join(_almanac(), _mapping(_entry("2.1.40", "x", claims=["claim.b"]),
                                         newest="2.1.40"))
    assert block["after_newest"] == 20 and block["skipped"] == ["2.1.7"]


def test_with_changelog_leaves_its_input_alone_and_validates(tmp_path: Path) -> None:
    document = _almanac()
    before = json.dumps(document, sort_keys=True)
    joined = with_changelog(document, _mapping(*ENTRIES), mapping_name="changelog/cc.yaml")
    assert json.dumps(document, sort_keys=True) == before
    assert joined["changelog"]["mapping"] == "changelog/cc.yaml"
    assert joined["claims"][1]["changes"] == []
    assert [e["text"] for e in joined["claims"][0]["changes"][0]["changelog"]] == [
        "Fixed A", "Fixed the picker"]
    path = tmp_path / "almanac.json"
    path.write_text(json.dumps(joined))
    assert read_almanac(path)["changelog"]["counts"]["agrees"] == 1
    assert validate_path(path) == (1, [])


def _mapping_beside(out: Path, entries: list[dict[str, Any]]) -> Path:
    sections = {v: 1 for v in reversed(BUILT)}
    mapping = _mapping(*entries)
    mapping["source"].update(newest=BUILT[-1], sections=sections)
    path = out / "changelog" / "claude-code.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(mapping_text(mapping))
    return path


def test_publish_joins_the_mapping_beside_the_almanac(tmp_path: Path) -> None:
    state = _state(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    _mapping_beside(out, [_entry("2.1.113", "Broke B2", claims=["claim.b2"]),
                          _entry("2.1.113", "Changed the theme", not_probed="UI only")])
    path = publish(state, tmp_path / "state" / "w", out, PUBLISHED, BUILT[-1], ())
    document = json.loads(path.read_text())
    assert document["changelog"]["counts"]["agrees"] == 1
    assert document["changelog"]["mapping"] == "changelog/claude-code.yaml"
    [change] = next(c for c in document["claims"] if c["id"] == "claim.b2")["changes"]
    assert [(e["text"], e.get("status")) for e in change["changelog"]] == [
        ("Broke B2", "agrees"), ("Changed the theme", None)]
    assert validate_path(path) == (1, [])


def test_publish_refuses_a_mapping_naming_a_claim_the_almanac_does_not_have(
        tmp_path: Path, capsys: Any) -> None:
    state = _state(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    _mapping_beside(out, [_entry("2.1.113", "Broke B2", claims=["claim.b3"])])
    try:
        publish(state, tmp_path / "state" / "w", out, PUBLISHED, BUILT[-1], ())
    except ValueError as error:
        assert "claims: expected a claim id of the catalog, found 'claim.b3'" in str(error)
    else:
        raise AssertionError("published with an unknown claim id")
    assert not (out / "almanac.json").exists()


def test_attach_changelog_rewrites_an_almanac_and_its_page_without_a_rebuild(
        tmp_path: Path, capsys: Any) -> None:
    out = tmp_path / "reports"
    out.mkdir()
    path = out / "almanac.json"
    document = _almanac()
    document["claims"][0]["id"] = "probe.session-resume"  # a claim of the built-in catalog
    path.write_text(json.dumps(document))
    _mapping_beside(out, [])
    mapping = _mapping(_entry("2.1.6", "Fixed resume", claims=["probe.session-resume"]))
    (out / "changelog" / "claude-code.yaml").write_text(mapping_text(mapping))
    assert cli.main(["almanac", "attach-changelog", "--almanac", str(path)]) == 0
    joined = json.loads(path.read_text())
    assert joined["changelog"]["counts"]["agrees"] == 1
    assert "Fixed resume" in (out / "almanac.html").read_text()
    assert "1 entr(ies) mapped to claims (1 agree" in capsys.readouterr().out
    # the built-in catalog refuses a claim it does not have, in one line, exit 2
    mapping["entries"][0]["claims"] = ["claim.a"]
    (out / "changelog" / "claude-code.yaml").write_text(mapping_text(mapping))
    assert cli.main(["almanac", "attach-changelog", "--almanac", str(path)]) == 2
    err = capsys.readouterr().err
    assert "expected a claim id of the catalog, found 'claim.a'" in err
    assert len(err.strip().splitlines()) == 1
    shutil.rmtree(out / "changelog")
    assert cli.main(["almanac", "attach-changelog", "--almanac", str(path)]) == 2
    assert "no such file" in capsys.readouterr().err
