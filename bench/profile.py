"""Sample our mock under load with py-spy and say where its CPU time goes, per request.

py-spy is installed with pip into ``<cache>/tools/py-spy-<version>`` on first use.
It records the server process (``--format raw``: folded stacks, idle time
excluded); the summary gives each function's self and inclusive share of the
samples and, with the server's CPU time per request measured in the same run,
the microseconds per request that share stands for.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from bench import FIXED_TEXT
from bench.bodies import Bodies
from bench.load import build_requests, response_ok, run_load
from bench.peers import Server
from bench.report import OURS
from probes.clients.npm import cache_root

__all__ = ["PY_SPY_VERSION", "ProfileError", "install_py_spy", "print_profile", "profile_ours",
           "start_recording", "summarize_folded"]

PY_SPY_VERSION = "0.4.3"
PIP_TIMEOUT = 300.0
RATE = 250  # samples per second
PROFILE_WAIT = 30.0
_LINE = re.compile(r" \(([^()]*?)(?::\d+)?\)$")


class ProfileError(RuntimeError):
    pass


def install_py_spy(version: str = PY_SPY_VERSION) -> Path:
    target = cache_root() / "tools" / f"py-spy-{version}"
    binary = target / "bin" / "py-spy"
    if binary.is_file():
        return binary
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
             "--target", str(staging), f"py-spy=={version}"],
            capture_output=True, text=True, timeout=PIP_TIMEOUT, stdin=subprocess.DEVNULL)
        if done.returncode != 0 or not (staging / "bin" / "py-spy").is_file():
            raise ProfileError(f"pip install py-spy=={version} failed: {done.stderr[-600:]}")
        if target.exists():
            shutil.rmtree(target)
        os.replace(staging, target)
    except subprocess.TimeoutExpired:
        raise ProfileError(f"pip install py-spy did not finish within {PIP_TIMEOUT}s") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return binary


def start_recording(binary: Path, pid: int, seconds: float, output: Path) -> subprocess.Popen[str]:
    """py-spy recording ``pid`` for ``seconds`` into ``output`` (folded stacks)."""
    return subprocess.Popen(
        [str(binary), "record", "--pid", str(pid), "--rate", str(RATE),
         "--duration", str(max(1, round(seconds))), "--format", "raw", "--output", str(output)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
        start_new_session=True)


def _frame(raw: str) -> str:
    """``Class.method (pkg/file.py:123)`` -> ``Class.method (pkg/file.py)``."""
    return _LINE.sub(lambda m: f" ({m.group(1)})", raw.strip())


# Where a sample's CPU goes: the first bucket (in this order) with a frame in its stack.
BUCKETS: tuple[tuple[str, str], ...] = (
    ("journal: Journal.append (orjson.dumps of the record + os.write)", "Journal.append ("),
    ("journal: building the record (_record/_record_end: headers, url, fields)",
     "MockApp._record"),
    ("request: body JSON parse and checks (parse_body)", "parse_body ("),
    ("request: reading the body (read_body)", "read_body ("),
    ("request: facts_from_body", "facts_from_body ("),
    ("script: Script.decide (fingerprint, turn state, matching)", "Script.decide ("),
    ("response: sse-starlette EventSourceResponse (task group, watchers, send)",
     "(sse_starlette/"),
    ("response: starlette Response.__call__ (JSON send)", "Response.__call__ (starlette/"),
    ("handler: rest of MockApp.messages (ids, headers, Response objects)",
     "MockApp.messages ("),
    ("starlette: routing, middleware, Request", "(starlette/"),
    ("uvicorn: httptools protocol, ASGI cycle, proxy-headers middleware",
     "(uvicorn/protocols/"),
    ("anyio", "(anyio/"),
)
OTHER = "event loop and other (uvloop/asyncio between callbacks, native)"


def _bucket(frames: list[str]) -> str:
    for name, needle in BUCKETS:
        if any(needle in frame for frame in frames):
            return name
    return OTHER


def summarize_folded(folded: Path, cpu_us_per_request: float | None,
                     top: int = 15) -> dict[str, Any]:
    """Bucketed and per-function (self) shares of the samples, with microseconds per request."""
    self_time: Counter[str] = Counter()
    buckets: Counter[str] = Counter()
    total = 0
    for line in folded.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [_frame(f) for f in stack.split(";") if f]
        if not frames:
            continue
        total += count
        self_time[frames[-1]] += count
        buckets[_bucket(frames)] += count

    def rows(counter: Counter[str], limit: int | None) -> list[dict[str, Any]]:
        return [{"frame": name, "share": round(count / total, 4),
                 "us_per_request": round(count / total * cpu_us_per_request, 1)
                 if cpu_us_per_request is not None else None}
                for name, count in counter.most_common(limit)]

    return {"samples": total, "cpu_us_per_request": cpu_us_per_request,
            "buckets": rows(buckets, None), "self": rows(self_time, top)}


def profile_ours(server: Server, bodies: Bodies, cases: list[dict[str, Any]],
                 concurrency: int, seconds: float, out: Path) -> dict[str, Any]:
    """Sample ``server`` under load in both modes; folded stacks go beside ``out``."""
    binary = install_py_spy()
    summary: dict[str, Any] = {"tool": f"py-spy {binary.parent.parent.name}",
                               "concurrency": concurrency, "modes": {}}
    for stream in (True, False):
        mode = "stream" if stream else "json"
        folded = out.with_name(f"{out.stem}.profile-{mode}.folded")
        recorder = start_recording(binary, server.process.pid, seconds, folded)
        try:
            result = run_load(server.port, build_requests(server.port, bodies.variant(stream)),
                              concurrency=concurrency, duration=seconds,
                              warmup=0.5, check=response_ok(stream, FIXED_TEXT),
                              server_cpu=server.cpu_seconds)
            output, _ = recorder.communicate(timeout=PROFILE_WAIT)
        finally:
            if recorder.poll() is None:
                os.killpg(recorder.pid, signal.SIGKILL)
                recorder.wait(PROFILE_WAIT)
        if recorder.returncode != 0 or not folded.is_file():
            raise ProfileError(f"py-spy failed ({recorder.returncode}): {output[-600:]}")
        # CPU per request from the unprofiled measurement of the same case (sampling slows it)
        same = [c for c in cases if c["stream"] == stream and c["concurrency"] == concurrency]
        cpu_ms = same[0]["results"][OURS]["server_cpu_ms_per_request"] if same else None
        if cpu_ms is None and result.requests and result.server_cpu is not None:
            cpu_ms = result.server_cpu * 1000 / result.requests
        summary["modes"][mode] = {
            "folded": str(folded), "requests_while_sampling": result.requests,
            **summarize_folded(folded, cpu_ms * 1000 if cpu_ms is not None else None)}
    return summary


def print_profile(profile: dict[str, Any]) -> None:
    for mode, data in profile["modes"].items():
        print(f"\nprofile of ours, {mode} c={profile['concurrency']}: {data['samples']} samples, "
              f"{data['cpu_us_per_request']} us CPU per request ({data['folded']})")
        for title, key, limit in (("where the CPU goes", "buckets", None),
                                  ("top functions (self time)", "self", 10)):
            print(f"  {title}:")
            for row in data[key][:limit]:
                cost = f"{row['us_per_request']:8.1f} us/req" if row["us_per_request"] else ""
                print(f"    {row['share'] * 100:5.1f}% {cost}  {row['frame']}")
