"""Inside GitHub Actions, nothing loopprobe prints is a workflow command.

A line of a job's log that starts with ``::`` is a command to the runner: ``::error
file=...::`` draws an annotation on the pull request, ``::add-mask::`` hides text,
``::set-output`` sets a step output where the runner still takes it. What loopprobe prints
quotes what the client and a fork's case file said, so with ``GITHUB_ACTIONS=true`` it stops
the runner's commands for as long as it runs (``::stop-commands::TOKEN``, a random token)
and starts them again when it ends (``::TOKEN::``), whatever ends it. ``runner_commands``
reads a log as the runner does, to show which commands it would carry out.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from probes import cli
from probes.report.github_ci import workflow_commands_stopped

FORGED = ["::error file=src/app.py,line=1::forged by the client",
          "::set-output name=failed::false", "::add-mask::loopprobe", "::warning::forged"]
_STOP = re.compile(r"::stop-commands::(.+)")


def runner_commands(log: str) -> list[str]:
    """The workflow commands a runner would carry out reading ``log``, in order: a
    ``::stop-commands::TOKEN`` line stops them until a ``::TOKEN::`` line."""
    done, stopped_by = [], None
    for line in log.splitlines():
        if stopped_by is not None:
            if line == f"::{stopped_by}::":
                stopped_by = None
            continue
        if line.startswith("::"):
            done.append(line)
            stop = _STOP.fullmatch(line)
            if stop:
                stopped_by = stop.group(1)
    return done


def _case_printing_commands(tmp_path: Path) -> Path:
    """A case whose client prints workflow commands (its Bash) and says them (its reply),
    and whose title and expectation hold them too; its expectation fails, so the failure,
    with what was observed, is printed."""
    printed = "\\n".join(FORGED)
    path = tmp_path / "repo" / "cases.yaml"
    path.parent.mkdir()
    (path.parent / ".git").mkdir()
    path.write_text(yaml.safe_dump({
        "loopprobe": "cases/1", "name": "commands", "title": FORGED[0],
        "cases": [{"name": "one", "title": FORGED[3], "prompt": "\n".join(FORGED),
                   "model": [{"content": [{"type": "tool_use", "name": "Bash", "input": {
                       "command": f"printf '{printed}\\n'; printf '{printed}\\n' >&2"}}]},
                             {"text": "\n".join(FORGED)}],
                   "expect": [{"tool_result": {"name": "Bash", "contains": "\n".join(FORGED)
                                               + "\nnot printed"}}]}]}))
    return path


def test_in_actions_no_line_loopprobe_prints_is_a_command(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
        ) -> None:
    """The client's output, its reply and the case file's text reach the log as text: the
    runner carries out only the stop and its end. (Before, no stop: the runner read every
    line loopprobe printed as a possible command.)"""
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("LOOPPROBE_CLIENTS", "fake-loop=tests.fakeloop:FakeLoopClient")
    code = cli.main(["check", str(_case_printing_commands(tmp_path)), "--client", "fake-loop",
                     "--versions", "1", "--out", str(tmp_path / "out")])
    out, err = capsys.readouterr()
    assert code == 1, out + err
    lines = err.splitlines()
    stop = _STOP.fullmatch(lines[0])
    assert stop and re.fullmatch(r"loopprobe-[0-9a-f]{32}", stop.group(1)), lines[:3]
    assert lines[-1] == f"::{stop.group(1)}::"
    assert runner_commands(err) == [lines[0]]
    # stdout may be data a step parses: no marker there, and no line a runner would take
    assert runner_commands(out) == []
    assert (out + err).count(stop.group(1)) == 2  # nothing printed knows the token


def test_the_commands_start_again_however_loopprobe_ends(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
        ) -> None:
    """A refused case file (exit 2) and an exception in the block both end with the token."""
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    missing = tmp_path / "missing.yaml"
    assert cli.main(["check", str(missing), "--versions", "1",
                     "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert _STOP.fullmatch(err[0]) and err[-1] == f"::{_STOP.fullmatch(err[0]).group(1)}::"
    with pytest.raises(RuntimeError), workflow_commands_stopped({"GITHUB_ACTIONS": "true"}):
        raise RuntimeError("a bug")
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and runner_commands("\n".join(err)) == [err[0]]


def test_outside_actions_nothing_is_added(capsys: pytest.CaptureFixture[str]) -> None:
    with workflow_commands_stopped({}) as token:
        print("plain")
    assert token is None
    assert capsys.readouterr() == ("plain\n", "")


def test_the_runner_model_takes_commands_until_stopped() -> None:
    """``runner_commands`` is the instrument: it must see a command where one is carried
    out, or the tests above could not fail."""
    log = "\n".join([FORGED[0], "::stop-commands::t", FORGED[1], "::t::", FORGED[2]])
    assert runner_commands(log) == [FORGED[0], "::stop-commands::t", FORGED[2]]
