"""The shared blob store: committed journals stored once across versions read back exactly,
and every reader (validate, diff, the journal's lines) sees what it saw before."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from probes.core.blob_store import store_blobs
from probes.core.safe_read import BLOB_SIDECAR_SUFFIX as SIDECAR_SUFFIX
from probes.core.safe_read import ReadRefused, read_journal
from probes.report.diff import diff_directories
from probes.report.format import read_journal_lines
from probes.report.schemas import validate_path

REPORTS = Path(__file__).resolve().parent.parent / "reports"
VERSIONS = ("2.1.306", "2.1.307")  # one plain, gzipped or not: whatever is committed


def _witnesses(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "almanac"
    for version in VERSIONS:
        shutil.copytree(REPORTS / version, root / "witnesses" / version / "a1-1")
    return root, root / "blobs"


def _journals(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.journal.jsonl*") if not p.name.endswith(
        SIDECAR_SUFFIX))


def test_stored_journals_read_back_as_the_originals(tmp_path: Path) -> None:
    root, store = _witnesses(tmp_path)
    originals = {p: read_journal(p) for p in _journals(root)}
    lines = {p: read_journal_lines(p) for p in originals}
    before = after = 0
    for journal in originals:
        was, now = store_blobs(journal, store)
        before, after = before + was, after + now
    assert after < before
    # stored once: a blob of several journals (several reports, both versions) is one file
    taken = [d for p in originals for d in json.loads(
        p.with_name(p.name + SIDECAR_SUFFIX).read_text())["blobs"]]
    assert len(list(store.rglob("*.json"))) == len(set(taken)) < len(taken)
    for journal, data in originals.items():
        assert read_journal(journal) == data
        assert read_journal_lines(journal) == lines[journal]
    checked, problems = validate_path(root / "witnesses")
    assert checked and not problems, problems[:3]
    a, b = (root / "witnesses" / v / "a1-1" for v in VERSIONS)
    assert _same_diff(a, b)


def _same_diff(a: Path, b: Path) -> bool:
    mine, theirs = diff_directories(a, b), diff_directories(REPORTS / VERSIONS[0],
                                                            REPORTS / VERSIONS[1])
    strip = {"a", "b", "dir_a", "dir_b"}
    return json.dumps({k: v for k, v in mine.items() if k not in strip}, sort_keys=True,
                      default=str).replace(str(a), "A").replace(str(b), "B") == json.dumps(
        {k: v for k, v in theirs.items() if k not in strip}, sort_keys=True,
        default=str).replace(str(REPORTS / VERSIONS[0]), "A").replace(
            str(REPORTS / VERSIONS[1]), "B")


@pytest.mark.parametrize("sidecar", [
    {"store": "/etc", "blobs": []},
    {"store": "../../elsewhere", "blobs": []},
    {"store": "../../../blobs", "blobs": ["../../etc/passwd"]},
    {"store": "../../../blobs", "blobs": ["0" * 64]},
    {"blobs": []},
])
def test_a_sidecar_that_leads_elsewhere_is_refused(tmp_path: Path,
                                                   sidecar: dict[str, object]) -> None:
    root, store = _witnesses(tmp_path)
    journal = _journals(root)[0]
    store_blobs(journal, store)
    journal.with_name(journal.name + SIDECAR_SUFFIX).write_text(json.dumps(sidecar))
    with pytest.raises(ReadRefused):
        read_journal(journal)
