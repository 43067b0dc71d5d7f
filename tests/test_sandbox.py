"""The sandbox a probe runs in: fixtures written inside the workspace, with fixed mtimes."""

from __future__ import annotations

from pathlib import Path

import pytest

from probes.sandbox.folders import FIXTURE_MTIME, Sandbox


def test_fixtures_get_fixed_mtimes_in_the_order_given(tmp_path: Path) -> None:
    box = Sandbox.create(tmp_path, "probe")
    box.write_files({"b.txt": "B\n", "sub/a.txt": "A\n", "c.txt": "C\n"})
    stamps = {p: int((box.workspace / p).stat().st_mtime) for p in ("b.txt", "sub/a.txt", "c.txt")}
    assert stamps == {"b.txt": FIXTURE_MTIME, "sub/a.txt": FIXTURE_MTIME + 1,
                      "c.txt": FIXTURE_MTIME + 2}
    assert (box.workspace / "sub/a.txt").read_text() == "A\n"


def test_a_fixture_cannot_leave_the_workspace(tmp_path: Path) -> None:
    box = Sandbox.create(tmp_path, "probe")
    with pytest.raises(ValueError, match="expected a relative path inside the workspace"):
        box.write_files({"../escape.txt": "x"})
    assert not (box.root / "escape.txt").exists()
