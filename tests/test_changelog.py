"""The public changelog as data: releases and entries parsed, loop entries found by topic, a
malformed changelog refused in one line; the reviewed mapping checked (schema, unknown claim
ids, counts) and updated from a newer changelog without losing a review."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from probes.scale.changelog import ChangelogError, parse_changelog, topics_of
from probes.scale.changelog_map import (
    MappingError,
    load_mapping,
    mapping_text,
    unmapped,
    update_mapping,
)

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
