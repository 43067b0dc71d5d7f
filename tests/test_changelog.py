"""The public changelog as data: releases and entries parsed, loop entries found by topic, a
malformed changelog refused in one line; the reviewed mapping checked (schema, unknown claim
ids, counts) and updated from a newer changelog without losing a review (the update command
flags what is not reviewed, exit 1); the committed mapping lists and reviews every loop entry
of its source."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from probes import cli
from probes.catalog import REPORTS
from probes.scale.changelog import ChangelogError, loop_entries, parse_changelog, topics_of
from probes.scale.changelog_map import (
    MappingError,
    claim_ids_of,
    entry_key,
    load_mapping,
    mapping_text,
    unmapped,
    update_mapping,
)

ROOT = Path(__file__).resolve().parent.parent

SMALL = """\
# Changelog

## 2.1.3

- Fixed `--max-turns` counting a retried request as a turn
- Improved the theme picker colours

## 2.1.2

- Added `tools/list_changed` support for MCP servers
  (the tool list is fetched again)
- Fixed a typo in `/help`

## 2.1.1

## 2.0.43

- Added `tool_use_id` to PreToolUse and PostToolUse hook input
"""
SOURCE = {"repository": "anthropics/claude-code", "path": "CHANGELOG.md",
          "commit": "5cfc0a1905ce0c0a9bd81d8a90fe6b62ff614357"}
CLAIMS = ["probe.max-turns-counts-model-turns", "probe.mcp-tool-list-refresh",
          "probe.result-pairing-by-id"]


def test_releases_entries_and_loop_topics() -> None:
    releases = parse_changelog(SMALL)
    assert [r.version for r in releases] == ["2.1.3", "2.1.2", "2.1.1", "2.0.43"]
    assert [len(r.entries) for r in releases] == [2, 2, 0, 1]
    # an indented line continues the entry above
    assert releases[1].entries[0].text == ("Added `tools/list_changed` support for MCP servers "
                                           "(the tool list is fetched again)")
    loop = [(e.release, e.topics) for r in releases for e in r.entries if e.loop]
    assert loop == [("2.1.3", ("turns and limits", "retries and fallback")),
                    ("2.1.2", ("MCP",)), ("2.0.43", ("hooks", "tool calls"))]
    assert topics_of("Improved the theme picker colours") == ()
    assert topics_of("`/goal`: resuming a session restores its goal") == ("resume and fork",
                                                                          "/goal")


@pytest.mark.parametrize(("text", "said"), [
    ("", "expected '## X.Y.Z' release headings, found none"),
    ("# Changelog\n\nJust prose.\n", "line 3: expected a '## X.Y.Z' release heading"),
    ("- an entry before any release\n", "line 1: expected a '## X.Y.Z' release heading"),
    ("## Unreleased\n- x\n", "line 1: expected a release heading '## X.Y.Z', found "
                             "'## Unreleased'"),
    ("## 2.1\n- x\n", "line 1: expected a release heading '## X.Y.Z', found '## 2.1'"),
    ("## 2.1.2\n- x\n## 2.1.2\n- y\n", "line 3: expected each release once, found 2.1.2 "
                                       "again (first on line 1)"),
    ("## 2.1.2\nprose under a release\n", "line 2: expected a '## X.Y.Z' release heading, a "
                                          "'- ' entry under one"),
    ("## 2.1.2\n- " + "x" * 5000 + "\n", "line 2: expected an entry of at most 4000"),
])
def test_a_malformed_changelog_is_refused_in_one_line(text: str, said: str) -> None:
    with pytest.raises(ChangelogError) as caught:
        parse_changelog(text, "CL.md")
    assert said in str(caught.value) and "\n" not in str(caught.value)
    assert str(caught.value).startswith("CL.md")


def _reviewed() -> dict[str, Any]:
    mapping = update_mapping(None, parse_changelog(SMALL), client="claude-code",
                             source=SOURCE).mapping
    first, second, third = mapping["entries"]
    first["claims"] = ["probe.max-turns-counts-model-turns"]
    second["not_probed"] = "no probe's MCP server sends list_changed before 2.1.2"
    third["claims"] = ["probe.result-pairing-by-id"]
    return mapping


def _written(tmp_path: Path, mapping: dict[str, Any]) -> Path:
    path = tmp_path / "claude-code.yaml"
    path.write_text(mapping_text(mapping))
    return path


def test_a_reviewed_mapping_reads_back_as_written(tmp_path: Path) -> None:
    mapping = _reviewed()
    loaded = load_mapping(_written(tmp_path, mapping), CLAIMS)
    assert loaded == mapping
    assert loaded["source"]["sections"] == {"2.1.3": 2, "2.1.2": 2, "2.1.1": 0, "2.0.43": 1}
    assert loaded["source"]["loop_entries"] == 3 and unmapped(loaded) == []
    assert (tmp_path / "claude-code.yaml").read_text().startswith("# The public changelog")


def _broken(change: str) -> dict[str, Any]:
    mapping = _reviewed()
    entries = mapping["entries"]
    if change == "unknown claim":
        entries[0]["claims"] = ["probe.max-turns-count-model-turns"]
    elif change == "both":
        entries[0]["not_probed"] = "also this"
    elif change == "claims not a list":
        entries[0]["claims"] = "probe.max-turns-counts-model-turns"
    elif change == "empty reason":
        entries[1]["not_probed"] = ""
    elif change == "unknown field":
        entries[2]["claim"] = ["probe.result-pairing-by-id"]
    elif change == "twice":
        entries.append(dict(entries[0]))
        mapping["source"]["loop_entries"] = 4
    elif change == "count":
        mapping["source"]["loop_entries"] = 7
    elif change == "release":
        entries[0]["release"] = "2.1.9"
    elif change == "commit":
        mapping["source"]["commit"] = "main"
    return mapping


@pytest.mark.parametrize(("change", "said"), [
    ("unknown claim", "entries[0] (2.1.3 'Fixed `--max-turns` counting a retried request as…'"
                      "): claims: expected a claim id of the catalog, found "
                      "'probe.max-turns-count-model-turns' (close: "
                      "probe.max-turns-counts-model-turns"),
    ("both", "entries[0] (2.1.3 'Fixed `--max-turns` counting a retried request as…'): "
             "expected claims or not_probed, found both"),
    ("claims not a list", "entries[0] (2.1.3 'Fixed `--max-turns` counting a retried request "
                          "as…'): claims: expected a list, found "
                          "'probe.max-turns-counts-model-turns'"),
    ("empty reason", "entries[1] (2.1.2 'Added `tools/list_changed` support for MCP server…'): "
                     "not_probed: expected non-empty text, found ''"),
    ("unknown field", "entries[2] (2.0.43 'Added `tool_use_id` to PreToolUse and "
                      "PostToolUse…'): expected only the fields release, text, topics, "
                      "claims, not_probed, note, found unknown field claim"),
    ("twice", "entries[3] (2.1.3 'Fixed `--max-turns` counting a retried request as…'): "
              "expected each entry once, found it again (first at entries[0])"),
    ("count", "source/loop_entries: expected the number of entries (3), found 7"),
    ("release", "entries[0] (2.1.9 'Fixed `--max-turns` counting a retried request as…'): "
                "release: expected a section of the source (source/sections), found 2.1.9"),
    ("commit", "source/commit: expected text matching ^[0-9a-f]{40}$, found 'main'"),
])
def test_a_broken_mapping_is_refused_naming_file_entry_field_expected_and_found(
        tmp_path: Path, change: str, said: str) -> None:
    path = _written(tmp_path, _broken(change))
    with pytest.raises(MappingError) as caught:
        load_mapping(path, CLAIMS)
    assert str(caught.value).startswith(f"{path}: {said}"), str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_mapping_that_is_not_yaml_or_not_there_is_refused(tmp_path: Path) -> None:
    with pytest.raises(MappingError, match="no such file"):
        load_mapping(tmp_path / "none.yaml", CLAIMS)
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: [changelog-map\n")
    with pytest.raises(MappingError, match=r"bad\.yaml"):
        load_mapping(bad, CLAIMS)
    aliased = tmp_path / "aliased.yaml"
    aliased.write_text(yaml.safe_dump({"a": 1}) + "b: &x 1\nc: *x\n")
    with pytest.raises(MappingError, match=r"aliased\.yaml"):
        load_mapping(aliased, CLAIMS)


NEWER = """\
## 2.1.4

- Fixed `--max-budget-usd` not stopping the loop in print mode
- Improved startup time

""" + SMALL.replace("# Changelog\n", "").replace(
    "- Added `tools/list_changed` support for MCP servers\n  (the tool list is fetched again)",
    "- Added `tools/list_changed` support for MCP servers (the tools are fetched again)")


def test_an_update_keeps_every_review_and_adds_new_loop_entries_unreviewed() -> None:
    update = update_mapping(_reviewed(), parse_changelog(NEWER), client="claude-code",
                            source=SOURCE)
    entries = update.mapping["entries"]
    assert [(e["release"], e["text"][:20]) for e in entries] == [
        ("2.1.4", "Fixed `--max-budget-"), ("2.1.3", "Fixed `--max-turns` "),
        ("2.1.2", "Added `tools/list_ch"), ("2.0.43", "Added `tool_use_id` ")]
    # kept: the reviews of the entries still there, word for word
    assert entries[1]["claims"] == ["probe.max-turns-counts-model-turns"]
    assert entries[3]["claims"] == ["probe.result-pairing-by-id"]
    # new: the new release's loop entry and the edited one, unreviewed
    assert [e["text"][:20] for e in unmapped(update.mapping)] == ["Fixed `--max-budget-",
                                                                   "Added `tools/list_ch"]
    assert [e["text"][:20] for e in update.added] == ["Fixed `--max-budget-",
                                                      "Added `tools/list_ch"]
    # the edited entry's old review is offered beside it, and said to be gone
    [gone] = update.dropped
    assert gone["not_probed"].startswith("no probe's MCP server")
    assert update.was[("2.1.2", entries[2]["text"])] is gone
    assert update.mapping["source"]["newest"] == "2.1.4"
    assert update.mapping["source"]["loop_entries"] == 4
    assert update.mapping["source"]["sections"]["2.1.4"] == 2


# ---- the update command -----------------------------------------------------------------------

def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(["almanac", "changelog", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_the_update_command_flags_new_loop_entries_and_writes_only_when_asked(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mapping = _written(tmp_path, _reviewed())
    old, new = tmp_path / "old.md", tmp_path / "new.md"
    old.write_text(SMALL)
    new.write_text(NEWER)
    code, out, _ = _cli(capsys, "--changelog", str(old), "--mapping", str(mapping))
    assert code == 0 and "0 not reviewed yet" in out
    before = mapping.read_text()
    code, out, _ = _cli(capsys, "--changelog", str(new), "--mapping", str(mapping))
    assert code == 1
    assert ("not reviewed: 2.1.4 [turns and limits, stream-json, print mode and SDK] Fixed "
            "`--max-budget-usd` not stopping the loop in print mode") in out
    assert "was (text since edited): not probed: no probe's MCP server sends" in out
    assert "gone: 2.1.2 Added `tools/list_changed` support for MCP servers (the tool" in out
    assert mapping.read_text() == before  # not written without --write
    code, out, _ = _cli(capsys, "--changelog", str(new), "--mapping", str(mapping), "--write",
                        "--commit", "a" * 40)
    assert code == 1 and f"wrote {mapping}" in out
    written = load_mapping(mapping, CLAIMS)
    assert written["source"]["commit"] == "a" * 40
    assert [e.get("claims") for e in written["entries"]] == [
        None, ["probe.max-turns-counts-model-turns"], None, ["probe.result-pairing-by-id"]]
    # reviewed now: the command says so and exits 0
    text = mapping.read_text().replace(
        "  topics: [turns and limits, 'stream-json, print mode and SDK']\n",
        "  topics: [turns and limits, 'stream-json, print mode and SDK']\n"
        "  claims: [probe.max-turns-counts-model-turns]\n", 1).replace(
        "  topics: [MCP]\n", "  topics: [MCP]\n  not_probed: reviewed again\n", 1)
    mapping.write_text(text)
    code, out, _ = _cli(capsys, "--changelog", str(new), "--mapping", str(mapping))
    assert code == 0 and "4 reviewed, 0 new, 0 not reviewed yet" in out


@pytest.mark.parametrize(("setup", "said"), [
    ("malformed", "line 1: expected a release heading '## X.Y.Z', found '## next'"),
    ("missing", "expected a CHANGELOG.md, but there is no such file"),
    ("binary", "expected UTF-8 text"),
    ("no commit", "--write: expected --commit SHA"),
    ("bad commit", "--commit: expected a commit's 40 hex digits, found 'main'"),
    ("bad mapping", "expected a claim id of the catalog, found 'probe.nope'"),
])
def test_the_update_command_refuses_bad_input_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], setup: str, said: str) -> None:
    changelog = tmp_path / "CHANGELOG.md"
    changelog.write_text(SMALL)
    mapping = tmp_path / "m.yaml"
    args = ["--changelog", str(changelog), "--mapping", str(mapping)]
    if setup == "malformed":
        changelog.write_text("## next\n- x\n")
    elif setup == "missing":
        changelog.unlink()
    elif setup == "binary":
        changelog.write_bytes(b"## 2.1.0\n- \xff\xfe\n")
    elif setup == "no commit":
        args.append("--write")
    elif setup == "bad commit":
        args += ["--write", "--commit", "main"]
    elif setup == "bad mapping":
        broken = _reviewed()
        broken["entries"][0]["claims"] = ["probe.nope"]
        _written(tmp_path, broken).rename(mapping)
    code, out, err = _cli(capsys, *args)
    assert code == 2, out + err
    assert said in err and len(err.strip().splitlines()) == 1


# ---- the committed mapping --------------------------------------------------------------------

COMMITTED = ROOT / "reports" / "changelog" / "claude-code.yaml"
MIRROR = Path(os.environ.get("LOOPPROBE_CLAUDE_CODE_GIT",
                             "/work/.mirror/anthropics+claude-code/repo"))


def test_the_committed_mapping_reviews_every_loop_entry_it_lists() -> None:
    """Offline: the file holds every loop entry of its source (their count is recorded), each
    reviewed, its claims the catalog's, its topics the ones the parser finds now."""
    mapping = load_mapping(COMMITTED, claim_ids_of(REPORTS))
    entries = mapping["entries"]
    assert unmapped(mapping) == []
    assert mapping["source"]["loop_entries"] == len(entries) > 1500
    assert all(e["topics"] == list(topics_of(e["text"])) for e in entries), \
        "the loop topics changed: run loopprobe almanac changelog --write on the source"
    mapped = [e for e in entries if "claims" in e]
    assert len(mapped) + sum("not_probed" in e for e in entries) == len(entries)
    assert 40 <= len(mapped) <= 80
    assert sum(mapping["source"]["sections"].values()) > len(entries)


def test_the_committed_mapping_lists_exactly_the_loop_entries_of_its_source() -> None:
    """With the source at hand (the public repository's CHANGELOG.md at the recorded commit),
    the mapping's entries are its loop entries, no more, no fewer, and its sections match."""
    mapping = load_mapping(COMMITTED)
    source = mapping["source"]
    if not (MIRROR / "HEAD").is_file():
        pytest.skip(f"no clone of {source['repository']} at {MIRROR} "
                    "(set LOOPPROBE_CLAUDE_CODE_GIT to a git dir of it)")
    shown = subprocess.run(["git", "--git-dir", str(MIRROR), "show",
                            f"{source['commit']}:{source['path']}"],
                           capture_output=True, text=True, timeout=60)
    if shown.returncode != 0:
        pytest.skip(f"{MIRROR} does not hold {source['commit']}: {shown.stderr.strip()}")
    releases = parse_changelog(shown.stdout, source["path"])
    assert {r.version: len(r.entries) for r in releases} == source["sections"]
    assert releases[0].version == source["newest"]
    expected = [(e.release, e.text) for e in loop_entries(releases)]
    assert [entry_key(e) for e in mapping["entries"]] == expected
