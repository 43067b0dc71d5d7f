"""The mock's journal is never written through a link (issue 44, item 7).

``serve --journal L`` (``loopprobe serve`` and ``python -m mockapi``) and the ``mock_api``
fixture, whose journal name is predictable, are given a journal name planted as a symbolic
link (to a file, or dangling), a hard link, a named pipe, a folder: each is refused in one
line naming the path and what it is, and the link's target is left as it was. Where the
old mock started anyway, a request is sent, so the test shows the target written through.
The files it writes beside the journal (``.pid``, ``.torn-at-N``) are not followed either;
the folders above the journal are the caller's path and are followed (mockapi.journal.file).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from mockapi import MockServer, Rule, Scenario, text
from mockapi.journal.read import read_journal
from mockapi.journal.write import Journal, JournalError
from tests.mock_process import read_line

PRECIOUS = b"someone else's file\n"
BODY = {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}
HEADERS = {"x-api-key": "k", "anthropic-version": "2023-06-01"}
SERVE = {
    "loopprobe serve": [sys.executable, "-m", "probes", "serve"],
    "python -m mockapi": [sys.executable, "-m", "mockapi"],
}


def _serve(argv: list[str], journal: Path) -> tuple[int, str]:
    """Start the mock on ``journal``; if it serves (the old mock did), send it a request and
    stop it. Its exit code and what it said on stderr."""
    process = subprocess.Popen([*argv, "--journal", str(journal), "--admin-open"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               start_new_session=True)
    try:
        try:
            url = read_line(process, 20).split()[3]
        except (RuntimeError, TimeoutError):
            pass  # refused (exited), or blocked opening the journal (the old mock on a FIFO)
        else:
            httpx.post(f"{url}/v1/messages", json=BODY, headers=HEADERS, timeout=10)
            process.send_signal(signal.SIGTERM)
        code = process.wait(10)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)
        code = -9
    assert process.stderr is not None
    return code, process.stderr.read().decode()


def _symlink_to_a_file(tmp_path: Path) -> tuple[Path, Path]:
    target = tmp_path / "elsewhere" / "precious.txt"
    target.parent.mkdir()
    target.write_bytes(PRECIOUS)
    link = tmp_path / "journal.jsonl"
    link.symlink_to(target)
    return link, target


def _dangling_symlink(tmp_path: Path) -> tuple[Path, Path]:
    target = tmp_path / "elsewhere" / "made-by-the-mock.txt"
    target.parent.mkdir()
    link = tmp_path / "journal.jsonl"
    link.symlink_to(target)
    return link, target


def _hard_link(tmp_path: Path) -> tuple[Path, Path]:
    target = tmp_path / "precious.txt"
    target.write_bytes(PRECIOUS)
    link = tmp_path / "journal.jsonl"
    os.link(target, link)
    return link, target


PLANTS: dict[str, tuple[Callable[[Path], tuple[Path, Path]], str]] = {
    "symlink": (_symlink_to_a_file, "a symbolic link"),
    "dangling-symlink": (_dangling_symlink, "a symbolic link"),
    "hard-link": (_hard_link, "a file with 2 names (hard links)"),
}


def _unchanged(target: Path, plant: str) -> None:
    if plant == "dangling-symlink":
        assert not target.exists(), "the mock created the link's target"
    else:
        assert target.read_bytes() == PRECIOUS, "the mock wrote through the link"


@pytest.mark.parametrize("entry", list(SERVE))
@pytest.mark.parametrize("plant", list(PLANTS))
def test_serve_refuses_a_journal_path_that_is_a_link(tmp_path: Path, entry: str,
                                                     plant: str) -> None:
    """Before: the mock appended every request to the link's target (or created it)."""
    make, said = PLANTS[plant]
    link, target = make(tmp_path)
    code, err = _serve(SERVE[entry], link)
    _unchanged(target, plant)
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and str(link) in lines[0] and said in lines[0], err
    assert "internal error" not in err


@pytest.mark.parametrize("entry", list(SERVE))
def test_serve_refuses_a_fifo_or_a_folder_at_the_journal_path_at_once(tmp_path: Path,
                                                                      entry: str) -> None:
    """Before: opening a FIFO to append blocked the mock forever, before it listened."""
    fifo = tmp_path / "journal.jsonl"
    os.mkfifo(fifo)
    code, err = _serve(SERVE[entry], fifo)
    assert code == 2 and "a named pipe (FIFO)" in err and str(fifo) in err, (code, err)
    folder = tmp_path / "folder.jsonl"
    folder.mkdir()
    code, err = _serve(SERVE[entry], folder)
    assert code == 2 and str(folder) in err and err.count("\n") == 1, (code, err)


def test_the_mock_api_fixture_refuses_a_journal_name_planted_as_a_link(
        mock_api: Callable[..., MockServer], tmp_path: Path) -> None:
    """The fixture's journal is tmp_path/mockapi-journal-<n>.jsonl: a name one can guess.
    Before: the server started, and its requests went to the link's target."""
    target = tmp_path / "elsewhere" / "precious.txt"
    target.parent.mkdir()
    target.write_bytes(PRECIOUS)
    (tmp_path / "mockapi-journal-0.jsonl").symlink_to(target)
    scenario = Scenario(classifier="plain", rules=[Rule(reply=text("hi"))])
    with pytest.raises(JournalError, match="is a symbolic link") as refused:
        mock = mock_api(scenario)
        httpx.post(f"{mock.url}/v1/messages", json=BODY, headers=HEADERS, timeout=10)
        mock.stop()
    assert str(tmp_path / "mockapi-journal-0.jsonl") in str(refused.value)
    assert target.read_bytes() == PRECIOUS
    # a journal path of the test's own is opened as before
    mock = mock_api(scenario, journal_path=tmp_path / "mine.jsonl")
    assert httpx.post(f"{mock.url}/v1/messages", json=BODY, headers=HEADERS,
                      timeout=10).status_code == 200


def test_the_pid_file_planted_as_a_link_is_replaced_not_written_through(tmp_path: Path) -> None:
    """Before: the pid was written over the link's target."""
    target = tmp_path / "precious.txt"
    target.write_bytes(PRECIOUS)
    (tmp_path / "journal.jsonl.pid").symlink_to(target)
    journal = Journal(tmp_path / "journal.jsonl")
    try:
        pid_file = tmp_path / "journal.jsonl.pid"
        assert not pid_file.is_symlink() and pid_file.read_text() == f"{os.getpid()}\n"
    finally:
        journal.close()
    assert target.read_bytes() == PRECIOUS


def test_a_torn_tail_is_set_aside_in_a_new_file_never_through_a_link(tmp_path: Path) -> None:
    """Before: the fragment was written over the target of a link planted at its side
    file's name (``<journal>.torn-at-<offset>``)."""
    path = tmp_path / "journal.jsonl"
    journal = Journal(path)
    journal.append({"type": "request", "seq": journal.next_seq()})
    journal.close()
    keep = path.stat().st_size
    with path.open("ab") as handle:
        handle.write(b'{"type":"request","seq":2,"bo')
    target = tmp_path / "precious.txt"
    target.write_bytes(PRECIOUS)
    (tmp_path / f"journal.jsonl.torn-at-{keep}").symlink_to(target)
    journal = Journal(path)  # resumed: the existing regular journal is appended to
    journal.append({"type": "request", "seq": journal.next_seq()})
    journal.close()
    assert target.read_bytes() == PRECIOUS
    side = tmp_path / f"journal.jsonl.torn-at-{keep}.1"
    assert side.read_bytes() == b'{"type":"request","seq":2,"bo'
    contents = read_journal(path)
    assert [r["seq"] for r in contents.requests()] == [1, 2]
    note = next(r for r in contents.records if r["type"] == "journal_note")
    assert note["moved_to"] == side.name


def test_a_journal_replaced_by_a_link_while_serving_is_not_written_through(
        tmp_path: Path) -> None:
    """The name is looked up once: reads and writes go through the journal's descriptor,
    and a swapped name makes the journal unavailable, never a write elsewhere."""
    path = tmp_path / "journal.jsonl"
    journal = Journal(path)
    journal.append({"type": "request", "seq": journal.next_seq()})
    target = tmp_path / "precious.txt"
    target.write_bytes(PRECIOUS)
    os.replace(path, tmp_path / "moved.jsonl")
    path.symlink_to(target)
    with pytest.raises(JournalError, match="replaced"):
        journal.append({"type": "request", "seq": journal.next_seq()})
    assert [r["seq"] for r in journal.read_after(0).requests()] == [1]  # its own file
    journal.close()
    assert target.read_bytes() == PRECIOUS


def test_a_journal_in_a_folder_reached_through_a_link_is_the_callers_choice(
        tmp_path: Path) -> None:
    """The folders above the journal are followed (``/tmp`` is a link on macOS): only the
    journal's own name, and the files beside it, are never followed."""
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "via").symlink_to(real)
    journal = Journal(tmp_path / "via" / "journal.jsonl")
    journal.append({"type": "request", "seq": journal.next_seq()})
    journal.close()
    assert [r["seq"] for r in read_journal(real / "journal.jsonl").requests()] == [1]
