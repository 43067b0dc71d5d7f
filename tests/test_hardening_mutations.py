"""Each test of ``test_mock_hardening.py`` fails when the guarantee it tests is taken out.

For each guarantee, a copy of ``mockapi`` with that one fix reverted (the mutation
below) runs the test that guards it, which must fail: a test that passes on the
broken mock proves nothing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# (file in mockapi/, the fix, what reverts it, the test that must then fail)
MUTATIONS = [
    ("serve/app.py", "                self.script.undo(decision)\n", "                pass\n",
     "full_disk"),
    ("journal/write.py", "            try:  # never leave a partial line for the next one to be glued "
     "onto\n                os.ftruncate(self._fd, start)", "            try:\n                pass",
     "full_disk"),
    ("journal/write.py", "        problem = self.problem()\n", "        problem = None\n",
     "deleted_or_replaced"),
    ("journal/write.py", "                torn.append(TornLine(number, offset, len(line), last=False))\n",
     "                raise ValueError(line)\n", "unreadable_lines"),
    ("serve/app.py", "        if reason == END_CLIENT_DISCONNECTED and self.shutting_down:",
     "        if False:", "sigterm"),
    ("serve/app.py", "            if self.open_streams >= self.max_streams:", "            if False:",
     "max_streams"),
    ("serve/app.py", "            seq=seq, run=run, time=time.time(),",
     "            seq=seq, run=self.run, time=time.time(),", "after_a_reset"),
    ("serve/transport.py", "    if reset or queued > 0:\n", "    if False:\n", "abandons_unread"),
    ("script/events.py", "REPLY_REFERENCE_BYTES = ", "REPLY_REFERENCE_BYTES = 10**9 or ", "by_reference"),
    ("serve/transport.py", "        if len(self.headers) >= self.bounds.limits.max_headers:",
     "        if False:", "431"),
    ("serve/transport.py", "        if self._in_body and not self.transport.is_closing():\n",
     "        if False:\n", "stalled"),
    ("serve/transport.py", "        if limit is not None and (len(self.connections) >= limit",
     "        if False and (len(self.connections) >= limit", "beyond_the_limit"),
    ("serve/admin.py", "        if not (after_text.isascii() and after_text.isdigit()):",
     "        if not after_text.isdigit():", "after_a_seq"),
    ("serve/app.py", "            check(body, request.headers",
     "            0 and check(body, request.headers", "real_api_refuses"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "fix", "reverted", "test"), MUTATIONS,
                         ids=[f"{m[3]}:{m[0]}" for m in MUTATIONS])
def test_a_hardening_test_fails_without_its_fix(tmp_path: Path, name: str, fix: str,
                                                reverted: str, test: str) -> None:
    # a copy of the tree: pytest puts its root first on sys.path, so the copy's mockapi is
    # the one imported, in process and by the ``python -m mockapi`` the tests start
    tree = tmp_path / "tree"
    skip = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "mockapi", tree / "mockapi", ignore=skip)
    shutil.copytree(ROOT / "tests", tree / "tests", ignore=skip)
    shutil.copy(ROOT / "pyproject.toml", tree)
    source = (tree / "mockapi" / name).read_text()
    assert source.count(fix) == 1, f"the fix to revert is no longer in mockapi/{name}: {fix!r}"
    (tree / "mockapi" / name).write_text(source.replace(fix, reverted))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    imported = subprocess.run([sys.executable, "-c", "import mockapi; print(mockapi.__file__)"],
                              capture_output=True, text=True, timeout=60, env=env, cwd=tree)
    assert imported.stdout.strip() == str(tree / "mockapi" / "__init__.py"), imported
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "tests/test_mock_hardening.py", "-k", test],
        capture_output=True, text=True, timeout=300, env=env, cwd=tree)
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr
    assert done.returncode == 1 and "1 failed" in summary, (
        f"{test} did not fail with mockapi/{name} reverted: {summary}")
