"""The content-addressed journal (format 4): large repeated parts of request bodies written
once as blob records, and every reader seeing the bodies exactly as they arrived."""

from __future__ import annotations

import gzip
import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest

from mockapi.journal import blobs as blobs_module
from mockapi.journal.blobs import (
    BLOB_THRESHOLD,
    BlobError,
    BlobSplitter,
    blob_line,
    parse_blob_line,
    resolve_body,
)
from mockapi.journal.read import read_journal
from mockapi.journal.records import request_record
from mockapi.journal.write import Journal
from probes.core.safe_read import ReadRefused, json_lines
from probes.report.format import read_journal_lines
from probes.report.journal_blobs import compact_journal_file, compact_lines, expand_lines
from probes.report.schemas import validate_path

ROOT = Path(__file__).resolve().parent.parent
DIGESTS = ROOT / "tests" / "fixtures" / "report-journal-digests.json"
SYSTEM = [{"type": "text", "text": "You are a careful agent. " * 200}]
TOOLS = [{"name": f"tool_{i}", "description": "does things " * 40,
          "input_schema": {"type": "object", "properties": {}}} for i in range(8)]


def body(turn: int, *, extra: Any = None) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "hello"}]
    for i in range(turn):
        messages += [{"role": "assistant", "content": [
                          {"type": "tool_use", "id": f"t{i}", "name": "tool_0", "input": {}}]},
                     {"role": "user", "content": [
                          {"type": "tool_result", "tool_use_id": f"t{i}",
                           "content": f"result {i} " + "r" * 2000}]}]
    made = {"model": "claude-sonnet-4-5", "max_tokens": 64, "system": SYSTEM, "tools": TOOLS,
            "messages": messages, "stream": True}
    if extra is not None:
        made["metadata"] = extra
    return made


def record(seq: int, raw: bytes) -> dict[str, Any]:
    return dict(request_record(seq=seq, run=1, time=0.0, elapsed=0.0, method="POST",
                               path="/v1/messages", query="", headers={}, body_size=len(raw),
                               outcome="replied", status=200))


def write(journal: Journal, seq: int, sent: dict[str, Any], *, parsed: bool = True) -> bytes:
    raw = orjson.dumps(sent)
    journal.append_request(record(seq, raw), reply=b'{"text":"hi"}', body=raw,
                           body_is_json=True, parsed=orjson.loads(raw) if parsed else None)
    return raw


def test_each_large_part_is_written_once_and_read_back_whole(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j.jsonl")
    sent = [write(journal, seq, body(seq - 1)) for seq in range(1, 5)]
    journal.close()
    data = (tmp_path / "j.jsonl").read_bytes()
    lines = data.split(b"\n")[:-1]
    blobs = [line for line in lines if line.startswith(b'{"type":"blob"')]
    # the system prompt, the tool list, and each tool_result's large block: once each
    assert len(blobs) == 2 + 3
    assert data.count(b"You are a careful agent.") == 200
    # a blob is on disk before the first line that references it
    first_use = {parse_blob_line(b)[0]: None for b in blobs}
    for number, line in enumerate(lines):
        for digest in first_use:
            if digest in line.decode() and not line.startswith(b'{"type":"blob"'):
                first_use[digest] = first_use[digest] or number
    for digest in first_use:
        blob_at = next(i for i, line in enumerate(lines)
                       if line.startswith(b'{"type":"blob","sha256":"' + digest.encode()))
        assert blob_at < first_use[digest]  # type: ignore[operator]
    contents = read_journal(tmp_path / "j.jsonl")
    assert contents.torn == []
    assert [r["body"] for r in contents.requests()] == [orjson.loads(raw) for raw in sent]
    assert all("body_refs" not in r for r in contents.records)
    assert validate_path(tmp_path / "j.jsonl")[1] == []


def test_a_body_without_large_parts_is_spliced_as_it_came(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j.jsonl")
    raw = b'{"model":"m", "max_tokens":5,"messages":[{"role":"user","content":"hi"}]}'
    journal.append_request(record(1, raw), reply=None, body=raw, body_is_json=True)
    journal.close()
    assert b'"body":' + raw in (tmp_path / "j.jsonl").read_bytes()


def test_reading_after_a_seq_resolves_blobs_written_before_it(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j.jsonl")
    sent = [write(journal, seq, body(1)) for seq in range(1, 4)]
    contents = journal.read_after(2)
    assert [r["seq"] for r in contents.requests()] == [3]
    assert contents.requests()[0]["body"] == orjson.loads(sent[2])
    journal.close()


def test_the_blob_index_is_bounded_and_a_forgotten_blob_is_still_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Memory does not grow with the run: past the index's bound the oldest blobs are
    forgotten, written again when referenced again, and found in the file when read."""
    monkeypatch.setattr("mockapi.journal.blobs._BLOB_INDEX", 3)
    journal = Journal(tmp_path / "j.jsonl")
    sent = [write(journal, seq, body(0, extra={"n": seq, "text": f"{seq} " * 600}))
            for seq in range(1, 3)]
    # every request brings a new large block: the first ones fall out of the index
    sent += [write(journal, seq, {**body(0), "messages": [
        {"role": "user", "content": f"block {seq} " + "b" * 2000}]}) for seq in range(3, 9)]
    assert len(journal._blob_places._spans) <= 3 and len(journal._blobs.written) <= 3
    sent.append(write(journal, 9, body(0)))  # the system prompt again, its blob forgotten
    scans = []
    find_blob = blobs_module._find_blob
    monkeypatch.setattr(blobs_module, "_find_blob", lambda fd, digest: scans.append(digest) or
                        find_blob(fd, digest))
    for after in range(len(sent)):
        assert [r["body"] for r in journal.read_after(after).requests()] == \
            [orjson.loads(raw) for raw in sent[after:]]
    assert scans, "some window referenced a blob the index had forgotten"
    journal.close()
    contents = read_journal(tmp_path / "j.jsonl")
    assert contents.torn == []
    assert [r["body"] for r in contents.requests()] == [orjson.loads(raw) for raw in sent]


def test_a_reopened_journal_writes_no_blob_twice(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    journal = Journal(path)
    write(journal, 1, body(0))
    journal.close()
    size = path.stat().st_size
    journal = Journal(path)
    write(journal, 2, body(0))
    journal.close()
    added = path.read_bytes()[size:]
    assert b'"type":"blob"' not in added
    assert len(read_journal(path).requests()) == 2


def test_a_body_parsed_again_by_the_journal_is_the_same(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j.jsonl")
    raw = write(journal, 1, body(2), parsed=False)
    journal.close()
    [got] = read_journal(tmp_path / "j.jsonl").requests()
    assert got["body"] == orjson.loads(raw)


def test_a_missing_or_altered_blob_is_listed_never_taken_for_the_body(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    journal = Journal(path)
    write(journal, 1, body(0))
    write(journal, 2, body(0))
    journal.close()
    lines = path.read_bytes().split(b"\n")[:-1]
    altered = [line.replace(b"careful", b"carefree", 1) if line.startswith(b'{"type":"blob"')
               else line for line in lines]
    path.write_bytes(b"\n".join(altered) + b"\n")
    contents = read_journal(path)
    assert contents.requests() == []
    assert any("hashes to" in t.why for t in contents.torn)
    assert any("does not hold" in t.why for t in contents.torn)
    assert "does not hold" in (contents.torn_tail or "")
    problems = validate_path(path)[1]
    assert any("hashes to" in p.message for p in problems)


def test_a_string_that_looks_like_a_reference_stays_a_string(tmp_path: Path) -> None:
    lookalike = "sha256:" + "0" * 64
    journal = Journal(tmp_path / "j.jsonl")
    raw = write(journal, 1, body(0, extra={"user_id": lookalike}))
    journal.close()
    [got] = read_journal(tmp_path / "j.jsonl").requests()
    assert got["body"] == orjson.loads(raw)
    assert got["body"]["metadata"]["user_id"] == lookalike


@pytest.mark.parametrize("refs", [["system"], [["nowhere"]], [["metadata", "user_id"]], "x"])
def test_a_reference_that_is_not_one_is_refused(refs: Any) -> None:
    with pytest.raises(BlobError):
        resolve_body({"system": "s", "metadata": {"user_id": "u"}}, refs, lambda d: None)


def test_the_hash_of_a_value_seen_before_is_reused() -> None:
    splitter = BlobSplitter()
    first = splitter.split(body(0))
    second = splitter.split(body(0))
    assert first.refs == second.refs == [["system", 0], ["tools"]]  # a system list: block by block
    assert first.blobs and set(second.blobs) == set(first.blobs)  # not yet marked written
    splitter.written.update(first.blobs)
    assert splitter.split(body(0)).blobs == {}
    for digest, value in first.blobs.items():
        assert hashlib.sha256(value).hexdigest() == digest
        assert parse_blob_line(blob_line(digest, value)) == (digest, value)


def test_a_value_just_under_the_threshold_stays_inline() -> None:
    small = "x" * (BLOB_THRESHOLD - 10)
    assert BlobSplitter().split({"system": small, "messages": []}).refs == []


# ---- report journals -------------------------------------------------------------------

def _report_lines() -> list[str]:
    return [json.dumps({"probe": "p", "seq": n, "type": "request", "body": body(n % 3)},
                       sort_keys=True, ensure_ascii=False) for n in range(1, 7)] + [
        json.dumps({"probe": "p", "seq": 6, "type": "response_end", "reason": "complete"},
                   sort_keys=True)]


def test_a_report_journal_keeps_its_record_lines_in_place() -> None:
    lines = _report_lines()
    compact = compact_lines(lines)
    assert len("".join(compact)) < len("".join(lines)) / 3
    assert compact[:len(lines)] != lines
    assert all('"type": "blob"' in line for line in compact[len(lines):])
    assert expand_lines(compact)[:len(lines)] == lines
    assert compact_lines(compact) == compact  # compacting twice changes nothing


def test_a_report_journal_with_an_altered_blob_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "r.journal.jsonl"
    compact = compact_lines(_report_lines())
    compact = [line.replace("careful", "carefree") if line.startswith('{"sha256": ') else line
               for line in compact]
    path.write_text("\n".join(compact) + "\n")
    with pytest.raises(ReadRefused, match="hashes to"):
        read_journal_lines(path)


def test_every_committed_journal_reads_back_as_it_was_before_it_was_compacted() -> None:
    """Lossless: each committed report journal, its references resolved, is byte for byte
    the file it was before compaction (its SHA-256 recorded then, in the fixture)."""
    digests = json.loads(DIGESTS.read_text())
    tracked = subprocess.run(["git", "ls-files", "reports"], capture_output=True, text=True,
                             cwd=ROOT, check=True).stdout.split()
    journals = [f for f in tracked if ".journal.jsonl" in f]
    assert journals and set(journals) <= set(digests) | set(_added_since(digests, journals))
    for name in journals:
        if name not in digests:
            continue
        lines = read_journal_lines(ROOT / name)
        whole = "".join(line + "\n" for line in lines if not line.startswith('{"sha256": '))
        assert hashlib.sha256(whole.encode()).hexdigest() == digests[name], name


def _added_since(digests: dict[str, str], journals: list[str]) -> list[str]:
    # journals written after the conversion are compact from the start: nothing to compare
    return [j for j in journals if j not in digests]


def test_compacting_a_file_is_lossless(tmp_path: Path) -> None:
    lines = _report_lines()
    for name in ("r.journal.jsonl", "r.journal.jsonl.gz"):
        path = tmp_path / name
        text = "".join(line + "\n" for line in lines).encode()
        path.write_bytes(gzip.compress(text, 9, mtime=0) if name.endswith(".gz") else text)
        before, after = compact_journal_file(path)
        if not name.endswith(".gz"):  # (gzip finds repeats this close together itself)
            assert after < before
        assert read_journal_lines(path)[:len(lines)] == lines
        assert json_lines(text.decode()) == lines


def test_real_bodies_served_by_the_mock_read_back_as_sent(mock_api: Any) -> None:
    """Every committed Claude Code 2.1.235 body (sent unsorted, as a client would, and as
    the bench sends it), through a real mock: each reader sees the body exactly as sent,
    ``/_mock/requests`` too, and the journal smaller than the bodies."""
    from mockapi.script.replies import text
    from mockapi.script.scenario import Rule, Scenario

    mock = mock_api(Scenario(classifier="plain", validation="lenient",
                             rules=[Rule(reply=text("hi"), repeat="always")]))
    sent = []
    for name in ("goal", "tool-pipeline"):
        for line in read_journal_lines(ROOT / "reports" / "2.1.235" / f"{name}.journal.jsonl"):
            record = json.loads(line)
            if record.get("type") == "request" and record.get("path") == "/v1/messages" \
                    and isinstance(record.get("body"), dict):
                sent.append(orjson.dumps({**record["body"], "stream": False}))
    import httpx
    with httpx.Client(timeout=30) as client:
        for raw in sent:
            response = client.post(f"{mock.url}/v1/messages", content=raw, headers={
                "x-api-key": "k", "anthropic-version": "2023-06-01",
                "content-type": "application/json"})
            assert response.status_code == 200, response.text
    read = read_journal(mock.journal.path)
    assert read.torn == []
    assert [r["body"] for r in read.requests()] == [orjson.loads(raw) for raw in sent]
    admin = {"x-loopprobe-admin-token": mock.admin_token or ""}
    served = httpx.get(f"{mock.url}/_mock/requests", headers=admin, timeout=30).json()
    assert [r["body"] for r in served["records"] if r["type"] == "request"] == \
        [orjson.loads(raw) for raw in sent]
    # read after a seq: blobs written before it are found in the file
    later = httpx.get(f"{mock.url}/_mock/requests?after={len(sent) - 1}", headers=admin,
                      timeout=30).json()
    assert [r["body"] for r in later["records"] if r["type"] == "request"] == \
        [orjson.loads(sent[-1])]
    assert mock.journal.path.stat().st_size < sum(map(len, sent)) / 1.5  # few per prompt


def test_what_the_splitter_remembers_is_bounded() -> None:
    """Large blocks at ever new places (a hostile client) do not grow what is kept per
    place; the cache of recent values keeps its bound."""
    splitter = BlobSplitter()
    for n in range(300):
        blocks = [{"type": "text", "text": f"{n}-{j}-" + "z" * 2000} for j in range(20)]
        splitter.split({"messages": [{"role": "user", "content": blocks}] * 3})
    assert len(splitter._last) == 0  # only system and tools are kept per place
    assert sum(len(c) for c in splitter._recent.values()) <= 4096


@pytest.mark.parametrize("hostile", [
    '{"body": {"a": 1}, "body_refs": [[' + "[" * 5000 + "]" * 5000 + ']], "type": "request"}',
    '{"body": {"a": "sha256:' + "0" * 64 + '"}, "body_refs": [["a"]], "type": "request"}',
    '{"body": ["x"], "body_refs": [[1.5]], "type": "request"}',
    '{"body": {"a": 1}, "body_refs": "a", "type": "request"}',
])
def test_a_hostile_reference_is_refused_in_one_line(tmp_path: Path, hostile: str) -> None:
    path = tmp_path / "r.journal.jsonl"
    path.write_text(hostile + "\n")
    with pytest.raises(ReadRefused):
        read_journal_lines(path)


def test_a_blob_nested_too_deep_is_refused(tmp_path: Path) -> None:
    value = "[" * 3000 + "]" * 3000
    digest = hashlib.sha256(value.encode()).hexdigest()
    path = tmp_path / "r.journal.jsonl"
    path.write_text('{"body": {"a": "sha256:' + digest + '"}, "body_refs": [["a"]], '
                    '"type": "request"}\n'
                    f'{{"sha256": "{digest}", "type": "blob", "value": {value}}}\n')
    with pytest.raises(ReadRefused):
        read_journal_lines(path)
