"""``probes.core.safe_read``: each hostile file refused in one line, before it is opened or
expanded; what loopprobe writes read as before."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

from probes.core.safe_read import (
    MAX_DEPTH,
    MAX_JSON_BYTES,
    ReadRefused,
    check_file,
    confined,
    loads,
    read_journal,
    read_json,
    read_yaml,
)


def _refused(call: object, match: str) -> str:
    with pytest.raises(ReadRefused, match=match) as raised:
        call()  # type: ignore[operator]
    assert "\n" not in str(raised.value)
    return str(raised.value)


def test_special_files_are_refused_without_opening_them(tmp_path: Path) -> None:
    fifo = tmp_path / "a.json"
    os.mkfifo(fifo)  # opening it for reading would wait for a writer for ever
    _refused(lambda: read_json(fifo), r"expected a regular file, found a named pipe")
    zero = tmp_path / "zero.json"
    zero.symlink_to("/dev/zero")
    _refused(lambda: read_json(zero), r"found a character device")
    _refused(lambda: read_json(tmp_path), r"found a folder")
    with pytest.raises(FileNotFoundError):
        read_json(tmp_path / "absent.json")


def test_symlinks_leaving_the_folder_are_refused_and_those_inside_followed(tmp_path: Path) -> None:
    folder, outside = tmp_path / "folder", tmp_path / "outside.json"
    folder.mkdir()
    outside.write_text('{"secret": 1}')
    (folder / "out.json").symlink_to(outside)
    (folder / "real.json").write_text("{}")
    (folder / "in.json").symlink_to("real.json")
    _refused(lambda: read_json(folder / "out.json", within=folder),
             r"a symlink to .*outside\.json, outside the folder")
    assert read_json(folder / "in.json", within=folder) == {}
    assert read_json(folder / "out.json") == {"secret": 1}  # a file named on purpose
    check_file(folder / "in.json", within=folder)


def test_an_oversize_file_is_refused_from_its_size_unread(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    with big.open("wb") as out:
        out.truncate(MAX_JSON_BYTES + 1)  # sparse: nothing is written, nothing read
    _refused(lambda: read_json(big), rf"expected at most {MAX_JSON_BYTES:,} bytes, found")


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 5_000, 100_000])
def test_deep_nesting_is_refused_never_a_recursion_error(depth: int) -> None:
    text = "[" * depth + "]" * depth
    _refused(lambda: loads(text, "x.json"), rf"x\.json: nested deeper than {MAX_DEPTH} levels")
    deep_object = '{"a":' * depth + "1" + "}" * depth
    _refused(lambda: loads(deep_object, "x.json"), "nested deeper")


def test_nesting_up_to_the_bound_is_read() -> None:
    assert loads("[" * MAX_DEPTH + "]" * MAX_DEPTH, "x.json") is not None
    assert loads('"a string"', "x.json") == "a string"
    with pytest.raises(ValueError):
        loads("not json", "x.json")


def test_a_gzip_bomb_is_refused_while_decompressing(tmp_path: Path) -> None:
    bomb = tmp_path / "r.journal.jsonl.gz"
    bomb.write_bytes(gzip.compress(b"\n" * (64 * 1024 * 1024), 9))  # ~64 KB -> 64 MB
    _refused(lambda: read_journal(bomb), r"expected gzip expanding to at most")
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(gzip.compress(b'{"type": "request"}\n' * 100)[:-12])
    _refused(lambda: read_journal(cut), r"cut short")
    junk = tmp_path / "junk.jsonl.gz"
    junk.write_bytes(b"not gzip at all")
    _refused(lambda: read_journal(junk), r"expected gzip, found data it cannot decompress")


def test_journals_read_as_written(tmp_path: Path) -> None:
    lines = b"".join(json.dumps({"type": "request", "seq": i}).encode() + b"\n"
                     for i in range(50))
    plain, packed = tmp_path / "a.journal.jsonl", tmp_path / "a.journal.jsonl.gz"
    plain.write_bytes(lines)
    packed.write_bytes(gzip.compress(lines[:100], 9, mtime=0) + gzip.compress(lines[100:]))
    assert read_journal(plain) == read_journal(packed) == lines
    empty = tmp_path / "e.journal.jsonl.gz"
    empty.write_bytes(gzip.compress(b"", 9, mtime=0))
    assert read_journal(empty) == b""


def test_a_yaml_alias_bomb_is_refused_as_the_mock_refuses_it(tmp_path: Path) -> None:
    laughs = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for index, name in enumerate("bcdefghij"):
        previous = "abcdefghij"[index]
        laughs.append(f"{name}: &{name} [" + ",".join([f"*{previous}"] * 9) + "]")
    bomb = tmp_path / "scenario.yaml"
    bomb.write_text("\n".join(laughs) + "\n")
    assert bomb.stat().st_size < 1024
    _refused(lambda: read_yaml(bomb), r"found the alias \*a: aliases are refused")
    deep = tmp_path / "deep.yaml"
    deep.write_text("[" * 10_000 + "]" * 10_000)
    _refused(lambda: read_yaml(deep), r"nested")
    plain = tmp_path / "plain.yaml"
    plain.write_text("rules: []\n")
    assert read_yaml(plain) == {"rules": []}


@pytest.mark.parametrize("name", ["../elsewhere/x.jsonl", "/etc/passwd", "", None, 3,
                                  "sub/../../x.jsonl"])
def test_a_name_read_from_a_file_stays_in_its_folder(tmp_path: Path, name: object) -> None:
    _refused(lambda: confined(tmp_path, name, tmp_path / "r.json", "journal"),
             r"r\.json: journal")


def test_a_name_inside_the_folder_is_taken(tmp_path: Path) -> None:
    assert confined(tmp_path, "r.journal.jsonl", tmp_path / "r.json", "journal") \
        == tmp_path / "r.journal.jsonl"
