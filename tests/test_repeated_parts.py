"""Parsing a body with the large parts of earlier bodies reused (``mockapi.check.repeated_parts``)
gives exactly what ``orjson.loads`` gives: on every request body committed in reports/, and
on bodies written to mislead it."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mockapi.check.repeated_parts import RepeatedParts
from mockapi.journal.blobs import BlobSplitter
from mockapi.journal.read import read_journal
from mockapi.journal.records import request_record
from mockapi.journal.write import Journal
from probes.core.safe_read import json_lines
from probes.report.journal_blobs import expand_lines

ROOT = Path(__file__).resolve().parent.parent
BILLING = "x-anthropic-billing-header: cc_version=2.1.235.{}; cc_entrypoint=sdk-cli;"
LONG = "You are an interactive agent that helps users with software engineering tasks. " * 60
TOOLS = [{"name": f"tool_{i}", "description": "does things " * 40,
          "input_schema": {"type": "object", "properties": {}}} for i in range(6)]


def body(turn: int, **extra: Any) -> dict[str, Any]:
    """A Claude Code-shaped body: a billing block that changes on every request, then the
    long blocks that do not."""
    made = {"model": "claude-sonnet-4-5", "max_tokens": 64,
            "messages": [{"role": "user", "content": f"turn {turn}"}],
            "system": [{"type": "text", "text": BILLING.format(turn)},
                       {"type": "text", "text": LONG, "cache_control": {"type": "ephemeral"}},
                       {"type": "text", "text": LONG.upper()}],
            "tools": TOOLS, "stream": True}
    made.update(extra)
    return made


def loads_both(parts: RepeatedParts, raw: bytes) -> Any:
    """What ``parts.loads`` gives, checked against ``orjson.loads`` (same value, or the same
    error)."""
    try:
        expected = orjson.loads(raw)
    except orjson.JSONDecodeError:
        with pytest.raises(orjson.JSONDecodeError):
            parts.loads(raw)
        return None
    got = parts.loads(raw)
    assert got == expected
    return got


def primed() -> RepeatedParts:
    parts = RepeatedParts()
    for turn in range(2):
        loads_both(parts, orjson.dumps(body(turn)))
    assert parts.reused == 1, "the second body reuses the first one's parts"
    return parts


def committed_bodies() -> list[bytes]:
    found = []
    for path in sorted((ROOT / "reports").glob("*/*.journal.jsonl")):
        for line in expand_lines(json_lines(path.read_text())):
            record = orjson.loads(line)
            if record.get("type") == "request" and isinstance(record.get("body"), dict):
                found.append(orjson.dumps(record["body"]))
    return found


def test_every_committed_body_parses_as_orjson_parses_it():
    bodies = committed_bodies()
    assert len(bodies) > 500
    parts = RepeatedParts()
    for raw in bodies:
        loads_both(parts, raw)
    # the fast path is taken, not merely allowed: most bodies repeat their predecessor's
    assert parts.reused > len(bodies) // 2


def test_the_changing_first_block_does_not_stop_reuse():
    parts = primed()
    got = loads_both(parts, orjson.dumps(body(7)))
    assert parts.reused == 2
    known = parts.parts_of(got)
    assert set(known) == {("system", 1), ("system", 2), ("tools",)}
    assert got["system"][0]["text"] == BILLING.format(7)


@pytest.mark.parametrize("case", [
    # the key given twice: the last wins, as for the whole body
    lambda raw: raw[:-1] + b',"system":"another"}',
    lambda raw: raw[:-1] + b',"tools":[]}',
    lambda raw: b'{"system":"first",' + raw[1:],
    # the remembered text elsewhere: inside a string, inside a tool input, nested under a key
    lambda raw: raw.replace(b'"messages":[', b'"messages":[{"role":"user","content":'
                            + json.dumps(orjson.dumps(TOOLS).decode()).encode() + b'},', 1),
    lambda raw: raw.replace(b'"messages":[', b'"messages":[{"role":"user","content":[{"type":'
                            b'"tool_result","tool_use_id":"x","content":{"tools":'
                            + orjson.dumps(TOOLS) + b'}}]},', 1),
    lambda raw: raw.replace(b'"model":', b'"metadata":{"system":' + orjson.dumps(body(0)["system"])
                            + b',"tools":' + orjson.dumps(TOOLS) + b'},"model":', 1),
    # not as orjson writes it, or not JSON at all
    lambda raw: json.dumps(orjson.loads(raw)).encode(),
    lambda raw: json.dumps(orjson.loads(raw), indent=1).encode(),
    lambda raw: raw[:-2],
    lambda raw: raw + b"x",
    lambda raw: b"[" + raw + b"]",
    lambda raw: raw.replace(b'"system":[', b'"system":[1,', 1),
    lambda raw: raw.replace(b'"system":[', b'"system":{"a":[', 1).replace(b',"tools"', b'},"tools"', 1),
    # nested deeper than orjson writes (it reads 1024 levels, writes 254)
    lambda raw: raw.replace(b'"tools":', b'"tools":' + b"[" * 300 + b"]" * 300 + b',"x":', 1),
    lambda raw: raw.replace(b'"system":[', b'"system":[' + b"[" * 300 + b"]" * 300 + b",", 1),
    # a string that looks like a sentinel (the client cannot know the real one)
    lambda raw: raw.replace(b'"system":[', b'"system":["' + b"0" * 36 + b'",', 1),
])
def test_bodies_written_to_mislead_parse_as_orjson_parses_them(case):
    parts = primed()
    loads_both(parts, case(orjson.dumps(body(5))))
    # and whatever it was, the next ordinary body is parsed right
    loads_both(parts, orjson.dumps(body(6)))


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_any_edit_of_a_repeated_body_parses_as_orjson_parses_it(data):
    parts = primed()
    raw = bytearray(orjson.dumps(body(3)))
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(raw) - 1))
        edit = data.draw(st.sampled_from(["delete", "insert", "replace"]))
        byte = data.draw(st.sampled_from(b'{}[]",:\\ 0a'))
        if edit == "delete":
            del raw[at]
        elif edit == "insert":
            raw.insert(at, byte)
        else:
            raw[at] = byte
    loads_both(parts, bytes(raw))


def test_remembered_values_are_never_changed_by_the_mock(tmp_path):
    """Parts are shared between requests: a journal that changed one would change the next
    request's body too."""
    parts = RepeatedParts()
    journal = Journal(tmp_path / "j.jsonl")
    rng = random.Random(5)
    sent = []
    for seq in range(1, 30):
        made = body(rng.randrange(4))
        raw = orjson.dumps(made)
        parsed = parts.loads(raw)
        record = request_record(seq=seq, run=1, time=0.0, elapsed=0.0, method="POST",
                                path="/v1/messages", query="", headers={},
                                body_size=len(raw), outcome="replied", status=200)
        journal.append_request(record, reply=None, body=raw, body_is_json=True, parsed=parsed,
                               known=parts.parts_of(parsed))
        sent.append(made)
    for remembered in [*parts.blocks, *(p for ps in parts.whole.values() for p in ps)]:
        assert orjson.dumps(remembered.value) == remembered.encoded
    assert [r["body"] for r in read_journal(journal.path).requests()] == sent


def test_the_journal_writes_a_long_system_block_once_though_the_first_block_changes(tmp_path):
    journal = Journal(tmp_path / "j.jsonl")
    parts = RepeatedParts()
    for seq in range(1, 6):
        raw = orjson.dumps(body(seq))
        parsed = parts.loads(raw)
        record = request_record(seq=seq, run=1, time=0.0, elapsed=0.0, method="POST",
                                path="/v1/messages", query="", headers={},
                                body_size=len(raw), outcome="replied", status=200)
        journal.append_request(record, reply=None, body=raw, body_is_json=True, parsed=parsed,
                               known=parts.parts_of(parsed))
    lines = [orjson.loads(line) for line in journal.path.read_bytes().splitlines()]
    blobs = [line for line in lines if line["type"] == "blob"]
    assert len(blobs) == 3  # two long system blocks and the tool list, each once
    requests = [line for line in lines if line["type"] == "request"]
    assert requests[-1]["body_refs"] == [["system", 1], ["system", 2], ["tools"]]
    assert requests[-1]["body"]["system"][0]["text"] == BILLING.format(5)
    assert [r["body"] for r in read_journal(journal.path).requests()] \
        == [body(seq) for seq in range(1, 6)]


def test_a_splitter_without_known_parts_gives_the_same_lines():
    """Known parts only save work: the journal's lines are the same without them."""
    with_parts, without = BlobSplitter(), BlobSplitter()
    parts = RepeatedParts()
    for turn in range(6):
        raw = orjson.dumps(body(turn))
        parsed = parts.loads(raw)
        fast = with_parts.split(parsed, parts.parts_of(parsed))
        slow = without.split(orjson.loads(raw))
        assert (fast.body, fast.refs, fast.blobs) == (slow.body, slow.refs, slow.blobs)
