"""First part of the mock's hardening: a scenario is data (no YAML aliases), a journal has one
writer (an exclusive lock naming the holder) and only its owner can read it (mode 0600), and a
journal that cannot be written is named as such."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from mockapi import Scenario
from mockapi.journal import Journal, JournalInUse
from mockapi.scenario import ScenarioError, decode_scenario_text
from mockapi.server import MockServer

BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
    f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
    f"*{chr(97 + i)}]\n" for i in range(9))


def test_yaml_aliases_are_refused_before_they_expand() -> None:
    # refused at the first alias, while composing: nothing is expanded (9**10 items)
    with pytest.raises(ScenarioError, match=r"alias \*a: aliases are refused"):
        decode_scenario_text(BOMB, "bomb.yaml")
    # anchors without aliases, and ordinary data, still load
    assert decode_scenario_text("rules: &r []\n", "ok.yaml") == {"rules": []}


def test_a_second_server_on_one_journal_is_refused_naming_the_holder(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    with MockServer(Scenario(), path):
        with pytest.raises(JournalInUse, match=rf"pid {os.getpid()}"):
            Journal(path)
    Journal(path).close()  # released when the first server stopped


def test_the_journal_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j.jsonl")
    journal.close()
    assert stat.S_IMODE((tmp_path / "j.jsonl").stat().st_mode) == 0o600


def test_serve_names_a_journal_it_cannot_write_or_share(tmp_path: Path) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    done = subprocess.run([sys.executable, "-m", "mockapi", "--journal",
                           str(blocked / "j.jsonl")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "cannot write the journal" in done.stderr
    assert "listen" not in done.stderr
    held = Journal(tmp_path / "held.jsonl")
    try:
        done = subprocess.run([sys.executable, "-m", "mockapi", "--journal",
                               str(tmp_path / "held.jsonl")], capture_output=True, text=True,
                              timeout=60)
    finally:
        held.close()
    assert done.returncode == 2 and "being written by another mock" in done.stderr
