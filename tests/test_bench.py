"""scripts/bench: the raw ASGI floor sends our mock's bytes, and the whole bench in its smoke
mode (structure only, never speed)."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from bench.bodies import Bodies, load_bodies
from bench.floor import STREAM_MARK
from bench.peers import Server, start_floor, start_ours
from bench.verify import VerifyError, raw_reply, verify_same_bytes

ROOT = Path(__file__).resolve().parent.parent
SERVERS = {"ours", "aimock", "floor"}
# the ids our mock numbers per request; the floor keeps those of its one capture
PER_REQUEST_IDS = re.compile(rb"(msg|req)_loopprobe_[0-9]{6}")


@pytest.fixture(scope="module")
def bodies() -> Bodies:
    return load_bodies(ROOT / "reports" / "2.1.235", ROOT)


@pytest.fixture(scope="module")
def ours_and_floor(tmp_path_factory: pytest.TempPathFactory,
                   bodies: Bodies) -> Iterator[tuple[Server, Server]]:
    workdir = tmp_path_factory.mktemp("bench-floor")
    ours = start_ours(workdir, None)
    try:
        floor = start_floor(workdir, None, bodies.streaming[0])
        try:
            yield ours, floor
        finally:
            floor.stop()
    finally:
        ours.stop()


def _ids_masked(reply: bytes) -> bytes:
    return PER_REQUEST_IDS.sub(rb"\1_loopprobe_NNNNNN", reply)


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
def test_the_floor_sends_our_mocks_bytes_for_every_bench_body(
        ours_and_floor: tuple[Server, Server], bodies: Bodies, stream: bool) -> None:
    ours, floor = ours_and_floor
    model = orjson.loads(bodies.streaming[0])["model"]
    same_model = [b for b in bodies.variant(stream) if orjson.loads(b)["model"] == model]
    assert len(same_model) >= len(bodies.variant(stream)) - 5  # the floor's reply fits most
    framing = b"transfer-encoding: chunked\r\n" if stream else b"content-length: "
    for body in same_model:
        expected, got = raw_reply(ours.port, body), raw_reply(floor.port, body)
        assert got.startswith(b"HTTP/1.1 200 OK\r\n") and framing in got, got[:300]
        assert len(got) == len(expected)
        assert _ids_masked(got) == _ids_masked(expected), (got, expected)
        assert _ids_masked(got) != got  # the ids were there to mask
    # the bench's own check agrees
    assert verify_same_bytes(ours.port, floor.port, bodies.variant(stream)[0]) == len(got)


def test_the_bench_refuses_a_floor_whose_bytes_are_not_ours(
        tmp_path: Path, ours_and_floor: tuple[Server, Server], bodies: Bodies) -> None:
    ours, _ = ours_and_floor
    body = bodies.streaming[0]
    other_model = orjson.dumps({**orjson.loads(body), "model": "claude-opus-4-1"})
    wrong = start_floor(tmp_path, None, other_model)  # replies naming another model
    try:
        with pytest.raises(VerifyError, match="differs"):
            verify_same_bytes(ours.port, wrong.port, body)
    finally:
        wrong.stop()


def test_the_floor_picks_the_mode_from_the_body_as_the_bench_sends_it(bodies: Bodies) -> None:
    assert all(STREAM_MARK in b for b in bodies.streaming)
    assert not any(STREAM_MARK in b for b in bodies.non_streaming)


@pytest.mark.slow
def test_quick_bench_measures_all_three_servers_in_every_case(tmp_path: Path) -> None:
    out = tmp_path / "bench-results.json"
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--duration", "0.5", "--warmup", "0.1",
         "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results = json.loads(out.read_text())

    assert results["ok"] is True and results["errors"] == 0
    assert results["bodies"]["count"] > 0
    assert set(results["servers"]) == SERVERS
    for server in results["servers"].values():
        assert server["replies"]["stream"]["events"][-1] == "message_stop"
    floor, ours = results["servers"]["floor"], results["servers"]["ours"]
    for mode in ("stream", "json"):
        assert floor["replies"][mode]["same_bytes_as_ours"] > ours["replies"][mode]["bytes"]
        assert floor["replies"][mode]["bytes"] == ours["replies"][mode]["bytes"]
    cases = {(c["stream"], c["concurrency"]) for c in results["cases"]}
    assert cases == {(True, 1), (False, 1), (True, 16), (False, 16)}
    for case in results["cases"]:
        assert set(case["results"]) == SERVERS
        for name in SERVERS:
            measured = case["results"][name]
            assert measured["requests"] > 0 and measured["errors"] == 0, (case["name"], name)
            assert measured["p50_ms"] is not None and measured["p99_ms"] is not None
        for ratio in ("throughput_ours_over_aimock", "p50_aimock_over_ours",
                      "p99_aimock_over_ours", "throughput_ours_over_floor",
                      "p50_floor_over_ours", "p99_floor_over_ours"):
            value = case["ratios"][ratio]
            assert isinstance(value, float) and math.isfinite(value) and value > 0, (
                case["name"], ratio, value)
        for other in ("aimock", "floor"):
            assert len(case["ratios"][f"throughput_ours_over_{other}_by_round"]) == 1
    # the table: a row per server and a ratios row against each of the others, per case
    printed = done.stdout.splitlines()
    header = next(i for i, line in enumerate(printed) if line.split()[:2] == ["case", "server"])
    rows = [line.split() for line in printed[header + 1:]]
    for case in results["cases"]:
        kind, concurrency = case["name"].split()
        labels = [r[2:4] if r[2] == "vs" else r[2:3] for r in rows if r[:2] == [kind, concurrency]]
        assert labels == [["ours"], ["aimock"], ["floor"], ["vs", "aimock"], ["vs", "floor"]]
        floor_row = next(r for r in rows if r[:4] == [kind, concurrency, "vs", "floor"])
        assert float(floor_row[4]) == pytest.approx(case["ratios"]["throughput_ours_over_floor"])
