"""``matrix --shard i/n`` slices and ``loopprobe merge``: sharded + merged equals unsharded."""

from __future__ import annotations

from pathlib import Path

import pytest

from probes import cli
from probes.clients import registry
from probes.scale.shard import ShardError, merge_fingerprints, parse_shard, shard_of
from tests.fakeloop import FakeLoopClient
from tests.fakeloop.catalog import REPORTS

CLIENT = FakeLoopClient()
FOLDER = "fake-loop-1"


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())
            if p.is_file() and not p.name.endswith(".timing.json")}


def test_sharded_and_merged_equals_unsharded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(registry.CLIENT_KINDS, "fake-loop", FakeLoopClient)
    full = tmp_path / "full"
    assert cli.run_suite((CLIENT, "1"), full / FOLDER, catalog=REPORTS, jobs=2) == 0
    slices = []
    for index in (1, 2):
        out = tmp_path / f"slice{index}"
        assert cli.run_suite((CLIENT, "1"), out / FOLDER, catalog=REPORTS,
                             shard=(index, 2)) == 0
        slices.append(str(out))
    assert cli.main(["matrix", "--clients", "fake-loop@1", "--out", str(full),
                     "--skip-run"]) == 0
    merged = tmp_path / "merged"
    assert cli.main(["merge", *slices, "--out", str(merged)]) == 0
    whole, joined = _files(full / FOLDER), _files(merged / FOLDER)
    assert sorted(whole) == sorted(joined)
    assert [name for name in whole if whole[name] != joined[name]] == []
    assert (full / "MATRIX.md").read_bytes() == (merged / "MATRIX.md").read_bytes()
    assert (full / "matrix.json").read_bytes() == (merged / "matrix.json").read_bytes()
    # each slice ran only its own reports
    assert {p.name for p in (tmp_path / "slice1" / FOLDER).glob("*.json")
            if not p.name.endswith(".timing.json")} == {"fake-tools.json", "fingerprint.json"}


def test_shard_arguments_and_slices() -> None:
    assert parse_shard("2/3") == (2, 3)
    for bad in ("0/3", "4/3", "x", "1/0"):
        with pytest.raises(ShardError, match="expected I/N"):
            parse_shard(bad)
    assert shard_of(list("abcdefg"), 1, 3) == ["a", "d", "g"]
    assert shard_of(list("abcdefg"), 3, 3) == ["c", "f"]


def test_fingerprints_merge_as_sets_and_counts() -> None:
    def part(first: int, system: list[str], seen: dict[str, int], betas: list[str]) -> dict:  # type: ignore[type-arg]
        return {"kind": "fingerprint", "shard": {"first_report": first},
                "fingerprint": {"system_blocks": system, "requests_seen": seen,
                                "anthropic_beta": betas, "headers": {"a": betas}}}
    merged = merge_fingerprints([part(1, ["second"], {"main": 2}, ["y"]),
                                 part(0, ["first"], {"main": 1, "side": 1}, ["x"])])
    assert merged == {"kind": "fingerprint", "fingerprint": {
        "system_blocks": ["first"], "requests_seen": {"main": 3, "side": 1},
        "anthropic_beta": ["x", "y"], "headers": {"a": ["x", "y"]}}}


def test_merge_input_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["merge", str(tmp_path / "nope"), "--out", str(tmp_path / "m")]) == 2
    assert "expected a folder written by matrix --shard" in capsys.readouterr().err


def test_a_slice_given_twice_is_refused_not_counted_twice() -> None:
    from probes.scale.shard import SHARD_KEY
    part = {"schema_version": 1, "kind": "fingerprint", "fingerprint": {"requests": {"main": 3}},
            SHARD_KEY: {"index": 1, "count": 2, "first_report": 0}}
    other = {**part, SHARD_KEY: {"index": 2, "count": 2, "first_report": 1}}
    assert merge_fingerprints([part, other])["fingerprint"] == {"requests": {"main": 6}}
    with pytest.raises(ShardError, match="slice 1/2 given twice"):
        merge_fingerprints([part, dict(part)])
