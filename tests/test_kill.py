"""SIGKILL the mock in the middle of a load: every request it answered is in the journal.

The mock runs as its own process (``python -m mockapi``) in its own session and
is killed by its process group, never by name. Each request carries a unique
marker; a request whose client received any response byte must have its
``request`` record in the journal, because the record is written before the
reply starts. A torn last line (a write cut by the kill) is allowed and must be
reported by the reader, not crash it.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from mockapi import read_journal
from tests.mock_process import read_line

ITERATIONS = 10
REQUESTS = 24  # per iteration
WORKERS = 12
SEED = 20240607
START_TIMEOUT = 15.0
EXIT_TIMEOUT = 10.0
LOAD_TIMEOUT = 30.0
CLIENT_TIMEOUT = httpx.Timeout(5.0)
HEADERS = {"x-api-key": "sk-test", "anthropic-version": "2023-06-01"}
MARKER_SIZE = len(f"kill-{0:02d}-{0:03d}-{uuid.uuid4().hex}")
# Request sizes: most small, some large enough that writing their journal line takes a while.
PADDINGS = (0, 0, 2_000, 200_000, 2_000_000)

SCENARIO: dict[str, Any] = {
    "name": "kill-under-load",
    "classifier": "plain",
    "rules": [
        {   # recorded, then silent for a while: the kill can land between record and reply
            "id": "slow-start",
            "match": {"kind": "any", "last_user_text_contains": "slow-start"},
            "repeat": "always",
            "reply": {"text": "late", "stall_before": 0.15},
        },
        {   # headers and a few events, a stall, then the rest
            "id": "streaming",
            "match": {"kind": "any"},
            "repeat": "always",
            "reply": {"content": [{"type": "text", "text": "x" * 400, "chunk_size": 16}],
                      "stall": {"after_events": 4, "seconds": 0.1}},
        },
    ],
}


@dataclass
class Outcome:
    marker: str
    got_response: bool = False  # status line and headers arrived
    body_bytes: int = 0
    error: str | None = None


class Progress:
    """How many requests have started receiving their response."""

    def __init__(self) -> None:
        self._count = 0
        self._changed = threading.Condition()

    def note(self) -> None:
        with self._changed:
            self._count += 1
            self._changed.notify_all()

    def wait_for(self, count: int, timeout: float) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: self._count >= count, timeout)


def start_mock(journal: Path, scenario: Path, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    command = [sys.executable, "-m", "mockapi", "--port", "0", "--journal", str(journal),
               "--scenario", str(scenario)]
    with log.open("ab") as stderr:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr,
                                   cwd=journal.parent, start_new_session=True)
    try:
        line = read_line(process, START_TIMEOUT)
        prefix = "mockapi listening on "
        assert line.startswith(prefix), (line, log.read_text())
        return process, line[len(prefix):].split()[0]
    except BaseException:
        kill_group(process)
        raise


def kill_group(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL the mock's own process group (it was started in a new session)."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(EXIT_TIMEOUT)
    if process.stdout is not None:
        process.stdout.close()


def send(client: httpx.Client, url: str, outcome: Outcome, padding: int,
         progress: Progress) -> None:
    content = outcome.marker + " " + "p" * padding
    body = {"model": "claude-sonnet-4-5", "max_tokens": 64, "stream": True,
            "messages": [{"role": "user", "content": content}]}
    try:
        with client.stream("POST", f"{url}/v1/messages", headers=HEADERS,
                           content=orjson.dumps(body)) as response:
            outcome.got_response = True
            progress.note()
            for chunk in response.iter_raw():
                outcome.body_bytes += len(chunk)
    except httpx.HTTPError as error:
        outcome.error = type(error).__name__


def content_of(record: dict[str, Any]) -> str:
    assert "body" in record, record  # every line that was written whole holds a JSON body
    content: str = record["body"]["messages"][0]["content"]
    return content


def restart_and_send(journal: Path, scenario: Path, log: Path) -> httpx.Response:
    """Start a new mock on the killed one's journal and send it one request."""
    process, url = start_mock(journal, scenario, log)
    try:
        body = {"model": "claude-sonnet-4-5", "max_tokens": 64,
                "messages": [{"role": "user", "content": "after the kill"}]}
        return httpx.post(f"{url}/v1/messages", headers=HEADERS, json=body,
                          timeout=CLIENT_TIMEOUT)
    finally:
        kill_group(process)


def load_and_kill(workdir: Path, iteration: int, rng: random.Random) -> list[Outcome]:
    workdir.mkdir()
    scenario, journal, log = (workdir / "scenario.json", workdir / "journal.jsonl",
                              workdir / "mock.log")
    scenario.write_bytes(orjson.dumps(SCENARIO))
    outcomes = [Outcome(f"kill-{iteration:02d}-{i:03d}-{uuid.uuid4().hex}")
                for i in range(REQUESTS)]
    for outcome in outcomes[::5]:
        outcome.marker = outcome.marker[:-10] + "slow-start"
    kill_after = rng.randrange(0, REQUESTS // 2 + 1)  # responses started before the kill
    jitter = rng.choice((0.0, 0.0, 0.005, 0.02))
    where = f"iteration {iteration}: kill after {kill_after} responses (+{jitter}s)"

    process, url = start_mock(journal, scenario, log)
    progress = Progress()
    limits = httpx.Limits(max_connections=REQUESTS)
    try:
        with httpx.Client(timeout=CLIENT_TIMEOUT, limits=limits) as client, \
                ThreadPoolExecutor(max_workers=WORKERS) as pool:
            futures = [pool.submit(send, client, url, outcome, rng.choice(PADDINGS), progress)
                       for outcome in outcomes]
            progress.wait_for(kill_after, LOAD_TIMEOUT)
            if jitter:
                time.sleep(jitter)
            kill_group(process)
            _, pending = wait(futures, LOAD_TIMEOUT)
            assert not pending, f"{where}: clients still waiting after the kill"
            for future in futures:
                future.result()
    finally:
        kill_group(process)

    assert process.returncode == -signal.SIGKILL, where
    contents = read_journal(journal)  # must not raise, whatever the kill cut
    markers = [content_of(r)[:MARKER_SIZE] for r in contents.requests()]
    sent = {o.marker for o in outcomes}
    assert len(markers) == len(set(markers)), f"{where}: a request recorded twice"
    assert set(markers) <= sent, f"{where}: records of requests nobody sent"
    lost = [o for o in outcomes if o.got_response and o.marker not in markers]
    assert not lost, f"{where}: answered but not in the journal: {lost} " \
                     f"(torn tail: {contents.torn_tail})"
    return outcomes


@pytest.mark.slow
def test_sigkill_under_load_loses_no_answered_request(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    everything: list[Outcome] = []
    for iteration in range(ITERATIONS):
        everything += load_and_kill(tmp_path / f"iteration-{iteration:02d}", iteration, rng)

    # The kills did land mid-load: some requests were answered and some were cut off.
    assert any(o.got_response for o in everything)
    assert any(o.error is not None for o in everything)


# ---- a kill that cuts a journal write, then a restart on that journal -------------------

HUGE = 30 * 1024 * 1024  # under the mock's 32 MiB body limit; its journal line takes a while
TEAR_ATTEMPTS = 5


def kill_during_journal_write(workdir: Path) -> tuple[Path, Path, Path, int]:
    """Send one huge request and SIGKILL the mock as soon as its journal starts growing.

    Returns the paths and the number of attempts it took to get a torn last line.
    """
    for attempt in range(1, TEAR_ATTEMPTS + 1):
        attempt_dir = workdir / f"attempt-{attempt}"
        attempt_dir.mkdir(parents=True)
        scenario, journal, log = (attempt_dir / "scenario.json", attempt_dir / "journal.jsonl",
                                  attempt_dir / "mock.log")
        scenario.write_bytes(orjson.dumps(SCENARIO))
        process, url = start_mock(journal, scenario, log)
        body = orjson.dumps({"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": [
            {"role": "user", "content": "huge " + "h" * HUGE}]})
        outcome = Outcome("huge")
        progress = Progress()
        client = httpx.Client(timeout=CLIENT_TIMEOUT)
        sender = threading.Thread(target=send_raw, args=(client, url, body, outcome, progress))
        try:
            sender.start()
            deadline = time.monotonic() + LOAD_TIMEOUT
            while journal.stat().st_size == 0:  # busy-wait: the write lasts milliseconds
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the mock wrote nothing within {LOAD_TIMEOUT}s")
            kill_group(process)
        finally:
            kill_group(process)
            sender.join(LOAD_TIMEOUT)
            client.close()
        assert not sender.is_alive()
        if read_journal(journal).torn_tail is not None:  # else the write won the race: retry
            return scenario, journal, log, attempt
    pytest.fail(f"no kill out of {TEAR_ATTEMPTS} cut the journal write short")


def send_raw(client: httpx.Client, url: str, body: bytes, outcome: Outcome,
             progress: Progress) -> None:
    try:
        response = client.post(f"{url}/v1/messages", headers=HEADERS, content=body)
        outcome.got_response = True
        progress.note()
        outcome.body_bytes = len(response.content)
    except httpx.HTTPError as error:
        outcome.error = type(error).__name__


@pytest.mark.slow
def test_restart_after_a_kill_mid_journal_write(tmp_path: Path) -> None:
    scenario, journal, log, _ = kill_during_journal_write(tmp_path)
    torn = read_journal(journal)  # the reader reports the cut line instead of failing
    assert torn.torn_tail is not None and torn.records == []

    response = restart_and_send(journal, scenario, log)
    assert response.status_code == 200, response.text
    after = read_journal(journal)  # the restarted mock must not have corrupted the journal
    [new] = after.requests()
    assert content_of(new) == "after the kill"
    assert response.headers["request-id"] == f"req_loopprobe_{new['seq']:06d}"
