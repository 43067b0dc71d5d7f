"""A bounded soak: 200 concurrent streaming clients, no failed or lost request, flat memory.

The mock runs as its own process (``python -m mockapi``) in its own session, so
its memory is measured alone (VmRSS from ``/proc/<pid>/status``, once a second)
and it is stopped by its process group, never by name. 200 asyncio clients share
one httpx connection pool with a connection each and send streaming requests
back to back until the soak time is up; each reads the whole SSE stream and
checks it runs from ``message_start`` to ``message_stop``. Every request carries a
unique marker, so the journal can be checked request by request afterwards.

The soak lasts ``LOOPPROBE_SOAK_SECONDS`` (default 20). Its length is the only
time in this file: nothing asserts how fast a request is answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from mockapi import read_journal
from mockapi.script.sse import decode_events
from tests.mock_process import read_line

SOAK_SECONDS = float(os.environ.get("LOOPPROBE_SOAK_SECONDS", "20"))
CLIENTS = 200
# The clients share 20 connection pools of 10 connections each. One pool of 200 is not used:
# httpcore scans every connection of a pool for every queued request, which made the client,
# not the mock, the bottleneck (~150 requests/s on 2 cores instead of 400-700).
POOLS = 20
# The mock closes a connection idle for its head timeout (30 s); a client that reuses one at
# that moment gets a reset for a request the server never read. The clients drop idle
# connections long before that, so a failure left is the mock's. (When the mock closed at
# uvicorn's 5 s, a pause of both processes, as a loaded CI machine makes, did exactly that:
# 7 resets in 7,305 requests on CI; 72 and 91 with both frozen 6 s mid-soak, none since.)
KEEPALIVE_EXPIRY = 1.0
SAMPLE_EVERY = 1.0  # seconds between two RSS samples
START_TIMEOUT = 15.0
STOP_TIMEOUT = 10.0
# Generous: no request is timed, but one that hangs this long is a failure, not a wait.
CLIENT_TIMEOUT = httpx.Timeout(60.0)
HEADERS = {"x-api-key": "sk-soak", "anthropic-version": "2023-06-01",
           "content-type": "application/json"}
MODEL = "claude-sonnet-4-5"
# Every request is the same conversation; only its marker differs (in metadata, which no rule
# looks at). The script keeps a little state per distinct `messages` value by design (it
# numbers turns: ~200 bytes each, measured), so with one conversation any growth per request
# is a leak.
MESSAGES = [{"role": "user", "content": "soak: say something long enough to stream"}]
ANSWER = "The quick brown fox jumps over the lazy dog. " * 6  # 270 characters
CHUNK = 24
SCENARIO: dict[str, Any] = {
    "name": "soak",
    "classifier": "plain",
    "rules": [{
        "id": "stream",
        "match": {"kind": "any"},
        "repeat": "always",
        "reply": {"content": [{"type": "text", "text": ANSWER, "chunk_size": CHUNK}]},
    }],
}
# message_start, ping, content_block_start, the deltas, content_block_stop, message_delta,
# message_stop
EVENTS_PER_STREAM = 3 + -(-len(ANSWER) // CHUNK) + 3

# ---- the memory bound ---------------------------------------------------------------------
# Sampling starts once every client has had a complete answer (so the growth from 0 to 200
# open connections is not counted), and the median RSS of the second half of the samples is
# compared with the median of the first half. About half of the sampled requests (n) lie
# between the two medians, so a leak of L bytes per request raises the second by ~L * n.
# A steady mock moved by less than 1 MiB in every 20-60 s soak tried (~55 MiB throughout);
# the bound, 8 MiB or 10% of the first half, whichever is larger, is 8 times that. At the
# 370-740 requests/s of a 2-core machine the default 20 s soak has n = 3,300-6,500, so a leak
# of ~1.3-2.5 KB per request fails it (a 4 KB one did, on purpose); LOOPPROBE_SOAK_SECONDS=60
# gets that under 1 KB. The test prints the smallest leak its run could have caught.
GROWTH_FLOOR = 8 * 1024 * 1024
GROWTH_RATIO = 0.10


@dataclass
class Soak:
    url: str
    pid: int
    deadline: float = 0.0
    sent: list[str] = field(default_factory=list)
    completed: int = 0
    failures: list[str] = field(default_factory=list)
    first_answers: set[int] = field(default_factory=set)
    warm: asyncio.Event = field(default_factory=asyncio.Event)
    samples: list[tuple[float, int, int]] = field(default_factory=list)  # (time, RSS, completed)

    def fail(self, marker: str, what: str) -> None:
        self.failures.append(f"{marker}: {what}")


def start_mock(workdir: Path) -> tuple[subprocess.Popen[bytes], str, Path, Path]:
    scenario, journal, log = (workdir / "scenario.json", workdir / "journal.jsonl",
                              workdir / "mock.log")
    scenario.write_bytes(orjson.dumps(SCENARIO))
    command = [sys.executable, "-m", "mockapi", "--port", "0", "--journal", str(journal),
               "--scenario", str(scenario)]
    with log.open("ab") as stderr:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr,
                                   cwd=workdir, start_new_session=True)
    try:
        line = read_line(process, START_TIMEOUT)
        prefix = "mockapi listening on "
        assert line.startswith(prefix), (line, log.read_text())
        return process, line[len(prefix):].split()[0], journal, log
    except BaseException:
        stop_group(process, signal.SIGKILL)
        raise


def stop_group(process: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    """Signal the mock's own process group (it was started in a new session); SIGKILL if stuck."""
    if process.poll() is None:
        os.killpg(process.pid, sig)
        try:
            process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(STOP_TIMEOUT)
    if process.stdout is not None:
        process.stdout.close()


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


def check_stream(body: bytes) -> str | None:
    """Why ``body`` is not one whole message stream, or None if it is."""
    try:
        names = [name for name, _ in decode_events(body)]
    except UnicodeDecodeError as error:
        return f"undecodable stream: {error}"
    if names[:1] != ["message_start"] or names[-1:] != ["message_stop"]:
        return f"stream from {names[:1]} to {names[-1:]}, {len(body)} bytes"
    if len(names) != EVENTS_PER_STREAM:
        return f"{len(names)} events, expected {EVENTS_PER_STREAM}"
    return None


async def client_loop(soak: Soak, client: httpx.AsyncClient, number: int) -> None:
    sequence = 0
    while time.monotonic() < soak.deadline:
        sequence += 1
        marker = f"soak-{number:03d}-{sequence:06d}-{uuid.uuid4().hex[:12]}"
        body = orjson.dumps({"model": MODEL, "max_tokens": 256, "stream": True,
                             "metadata": {"user_id": marker}, "messages": MESSAGES})
        soak.sent.append(marker)
        try:
            async with client.stream("POST", f"{soak.url}/v1/messages", headers=HEADERS,
                                     content=body) as response:
                received = await response.aread()
        except httpx.HTTPError as error:
            soak.fail(marker, f"{type(error).__name__}: {error}")
            continue
        if response.status_code != 200:
            soak.fail(marker, f"status {response.status_code}: {received[:200]!r}")
            continue
        problem = check_stream(received)
        if problem is not None:
            soak.fail(marker, problem)
            continue
        soak.completed += 1
        if number not in soak.first_answers:
            soak.first_answers.add(number)
            if len(soak.first_answers) == CLIENTS:
                soak.warm.set()


async def sample_memory(soak: Soak) -> None:
    """VmRSS once a second from the moment every client has been answered once."""
    await soak.warm.wait()
    while time.monotonic() < soak.deadline:
        soak.samples.append((time.monotonic(), rss_bytes(soak.pid), soak.completed))
        await asyncio.sleep(SAMPLE_EVERY)


async def run_soak(soak: Soak) -> float:
    per_pool = CLIENTS // POOLS
    limits = httpx.Limits(max_connections=per_pool, max_keepalive_connections=per_pool,
                          keepalive_expiry=KEEPALIVE_EXPIRY)
    async with contextlib.AsyncExitStack() as stack:
        pools = [await stack.enter_async_context(
            httpx.AsyncClient(timeout=CLIENT_TIMEOUT, limits=limits)) for _ in range(POOLS)]
        started = time.monotonic()
        soak.deadline = started + SOAK_SECONDS
        sampler = asyncio.create_task(sample_memory(soak))
        await asyncio.gather(*(client_loop(soak, pools[n % POOLS], n) for n in range(CLIENTS)))
        elapsed = time.monotonic() - started
        soak.warm.set()  # if some client was never answered, the sampler must still end
        await sampler
    return elapsed


def mib(size: float) -> str:
    return f"{size / (1024 * 1024):.1f} MiB"


@dataclass
class Memory:
    """The RSS samples split in halves: the growth between them and the bound it must stay in."""

    first: list[int]
    second: list[int]
    requests_between: float  # about how many requests lie between the two medians

    @classmethod
    def of(cls, samples: list[tuple[float, int, int]]) -> Memory:
        half = len(samples) // 2
        between = (samples[-1][2] - samples[0][2]) / 2 if samples else 0.0
        return cls([rss for _, rss, _ in samples[:half]], [rss for _, rss, _ in samples[half:]],
                   between)

    @property
    def growth(self) -> float:
        return statistics.median(self.second) - statistics.median(self.first)

    @property
    def bound(self) -> float:
        return max(GROWTH_FLOOR, GROWTH_RATIO * statistics.median(self.first))


@pytest.mark.slow
@pytest.mark.serial  # its bounds are the mock's growth under its own load alone (CONTRIBUTING)
def test_200_streaming_clients_soak(tmp_path: Path,
                                    record_property: Callable[[str, object], None]) -> None:
    process, url, journal, log = start_mock(tmp_path)
    soak = Soak(url, process.pid)
    try:
        elapsed = asyncio.run(run_soak(soak))
        assert process.poll() is None, f"the mock died during the soak: {log.read_text()}"
    finally:
        stop_group(process, signal.SIGTERM)  # uvicorn's graceful shutdown

    # ---- the numbers, printed (-s) and recorded as junit properties ----
    samples = soak.samples
    assert len(samples) >= 4, f"too few RSS samples to judge memory: {samples}"
    memory = Memory.of(samples)
    report: dict[str, object] = {
        "soak_seconds": round(elapsed, 1),
        "clients": CLIENTS,
        "requests_sent": len(soak.sent),
        "requests_failed": len(soak.failures),
        "requests_per_second": round(len(soak.sent) / elapsed, 1),
        "rss_samples": len(samples),
        "rss_min": mib(min(memory.first + memory.second)),
        "rss_max": mib(max(memory.first + memory.second)),
        "rss_first_half_median": mib(statistics.median(memory.first)),
        "rss_second_half_median": mib(statistics.median(memory.second)),
        "rss_growth": mib(memory.growth),
        "rss_growth_bound": mib(memory.bound),
        "smallest_leak_caught_bytes_per_request": round(
            memory.bound / max(memory.requests_between, 1)),
    }
    for name, value in report.items():
        record_property(name, value)
    print("\nsoak:", ", ".join(f"{k}={v}" for k, v in report.items()))
    print("soak RSS samples (MiB):", " ".join(f"{rss / 1048576:.1f}" for _, rss, _ in samples))

    # ---- no failed request ----
    assert not soak.failures, (f"{len(soak.failures)} of {len(soak.sent)} requests failed; "
                               f"the first ones: {soak.failures[:10]}")
    assert soak.completed == len(soak.sent) >= CLIENTS

    # ---- no lost request: each one recorded once, each stream recorded as complete ----
    contents = read_journal(journal)
    assert contents.torn_tail is None, contents.torn_tail
    requests = contents.requests()
    markers = Counter(r["body"]["metadata"]["user_id"] for r in requests)
    twice = [marker for marker, count in markers.items() if count > 1]
    assert not twice, f"{len(twice)} requests recorded more than once, e.g. {twice[:10]}"
    missing = set(soak.sent) - set(markers)
    assert not missing, f"{len(missing)} requests not in the journal, e.g. {sorted(missing)[:10]}"
    assert len(requests) == len(soak.sent), "the journal holds requests nobody sent"
    wrong = [r["seq"] for r in requests if (r["outcome"], r["status"]) != ("replied", 200)]
    assert not wrong, f"requests recorded as not replied: {wrong[:10]}"
    ends = [r for r in contents.records if r.get("type") == "response_end"]
    reasons = {r["seq"]: r["reason"] for r in ends}
    assert len(ends) == len(reasons) == len(requests), "not one response_end per request"
    incomplete = [(r["seq"], reasons.get(r["seq"])) for r in requests
                  if reasons.get(r["seq"]) != "complete"]
    assert not incomplete, f"{len(incomplete)} streams not complete: {incomplete[:10]}"

    # ---- flat memory ----
    assert memory.growth < memory.bound, (
        f"the mock's RSS grew by {mib(memory.growth)} between the halves of the soak (bound "
        f"{mib(memory.bound)}), over ~{memory.requests_between:.0f} requests: about "
        f"{memory.growth / max(memory.requests_between, 1):.0f} bytes per request")
