"""``python -m bench`` (``scripts/bench``): race our mock against aimock and a raw ASGI floor,
and report ratios.

Three servers (``bench.peers``) get the same load with the same real Claude Code
bodies, case by case, in rounds that rotate which goes first: our mock, aimock
(the fastest peer mock) and the floor (``bench.floor``: a bare ASGI app on our
mock's uvicorn configuration sending our mock's reply bytes). Per case the
ratios say how ours compares with aimock and what share of the floor it reaches.

Exit status: 0 when every case was measured on all three servers without an
error, 1 when a request failed, 2 when the benchmark could not run (install,
start, bodies, a reply that is not the expected one, a floor whose bytes are not
ours), 130 when interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from bench import FIXED_TEXT
from bench.bodies import Bodies, BodiesError, load_bodies
from bench.load import LoadResult, build_requests, response_ok, run_load
from bench.peers import (
    AIMOCK_VERSION,
    InstallError,
    Server,
    ServerError,
    start_aimock,
    start_floor,
    start_ours,
)
from bench.profile import ProfileError, print_profile, profile_ours
from bench.report import FLOOR, OURS, PEER, SERVERS, case_ratios, merge, summarize, table, write_json
from bench.verify import VerifyError, verify_reply, verify_same_bytes

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_BODIES = ROOT / "reports" / "2.1.235"
BUSY_LOAD = 0.5  # load average above which the machine is doing other work


@dataclass(frozen=True)
class Case:
    stream: bool
    concurrency: int

    @property
    def name(self) -> str:
        return f"{'stream' if self.stream else 'json'} c={self.concurrency}"


def _concurrency(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers like 1,16, got {text!r}") from None
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"expected positive numbers like 1,16, got {text!r}")
    return values


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="scripts/bench", description="Race our mock against aimock and a raw ASGI floor "
        "with real Claude Code request bodies; speed is reported as ratios against aimock and "
        "the floor measured in the same run.")
    parser.add_argument("--out", type=Path, default=Path("bench-results.json"),
                        help="JSON results file (default: %(default)s)")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: 1 s per case, short warm-up, one round (its ratios "
                        "are not meaningful: aimock's JIT is still warming up)")
    parser.add_argument("--duration", type=float, help="measured seconds per case, server "
                        "and round (default 3, --quick 1)")
    parser.add_argument("--warmup", type=float, help="seconds of load before each measurement "
                        "(default 0.5, --quick 0.25); before the first case each server also "
                        "gets 4x this per mode")
    parser.add_argument("--rounds", type=int, help="rounds per case, rotating which server "
                        "goes first: ours-aimock-floor, aimock-floor-ours, floor-ours-aimock, "
                        "... (default 4, --quick 1)")
    parser.add_argument("--concurrency", type=_concurrency, default=[1, 16],
                        help="connections per case, comma-separated (default: 1,16)")
    parser.add_argument("--bodies", type=Path, default=DEFAULT_BODIES,
                        help="directory of probe journals to take request bodies from "
                        "(default: reports/2.1.235; its committed version if it has none)")
    parser.add_argument("--aimock-version", default=AIMOCK_VERSION,
                        help="aimock version to install and run (default: %(default)s)")
    parser.add_argument("--no-pin", action="store_true",
                        help="do not pin the servers and the generator to separate CPUs")
    parser.add_argument("--profile", action="store_true",
                        help="also sample our mock with py-spy under load (streaming and not) "
                        "and summarise where its CPU goes; folded stacks go next to --out")
    parser.add_argument("--suite", action="store_true",
                        help="instead of the mock race: the probe suite on --client serially "
                        "and with -j N; prints both walls, the client time and the speedup")
    parser.add_argument("--client", default="2.1.235",
                        help="the client --suite runs (default: %(default)s)")
    parser.add_argument("-j", "--jobs", type=int, help="--suite: probes at once (default: the "
                        "machine's cores)")
    parser.add_argument("--profile-seconds", type=float, default=None,
                        help="seconds of sampling per mode (default 5, --quick 2)")
    args = parser.parse_args(argv)
    quick = args.quick
    args.duration = args.duration or (1.0 if quick else 3.0)
    args.warmup = args.warmup if args.warmup is not None else (0.25 if quick else 0.5)
    args.settle = 4 * args.warmup
    args.rounds = args.rounds or (1 if quick else 4)
    args.profile_seconds = args.profile_seconds or (2.0 if quick else 5.0)
    if args.duration <= 0 or args.warmup < 0 or args.rounds < 1:
        parser.error("--duration must be > 0, --warmup >= 0, --rounds >= 1")
    return args


def _pinning(enabled: bool) -> tuple[set[int] | None, set[int] | None]:
    """(server CPUs, generator CPUs): the last CPU for the servers, the first for the load."""
    if not enabled or not hasattr(os, "sched_getaffinity"):
        return None, None
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return None, None
    return {cpus[-1]}, {cpus[0]}


def _terminate(signum: int, frame: FrameType | None) -> None:
    print(f"bench: stopped by signal {signum}; stopping the servers", file=sys.stderr)
    raise SystemExit(128 + signum)


def _node_version() -> str | None:
    try:
        return subprocess.run(["node", "--version"], capture_output=True, text=True,
                              timeout=30).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def _order(number: int) -> tuple[str, ...]:
    """The servers in the order they run in round ``number`` (from 0): each round starts
    with the server after the previous round's first."""
    first = number % len(SERVERS)
    return SERVERS[first:] + SERVERS[:first]


def _journaled(journal: Path, since: int) -> tuple[int, int]:
    """(bytes, request records) our mock's journal gained after offset ``since``."""
    try:
        with journal.open("rb") as handle:
            handle.seek(since)
            added = handle.read()
    except OSError:
        return 0, 0
    return len(added), added.count(b'{"type":"request",')


def _measure(servers: dict[str, Server], bodies: Bodies, cases: list[Case],
             args: argparse.Namespace, journal: Path) -> list[dict[str, Any]]:
    requests = {(name, stream): build_requests(server.port, bodies.variant(stream))
                for name, server in servers.items() for stream in (True, False)}
    # once per server and mode before any case: JIT, caches and pools settle
    for name, server in servers.items():
        for stream in (True, False):
            run_load(server.port, requests[(name, stream)], concurrency=max(args.concurrency),
                     duration=args.settle, warmup=0, check=response_ok(stream, FIXED_TEXT))
    measured = []
    for case in cases:
        rounds: dict[str, list[LoadResult]] = {name: [] for name in SERVERS}
        journal_bytes = journal_requests = 0
        for number in range(args.rounds):
            for name in _order(number):
                server = servers[name]
                journal_before = journal.stat().st_size if journal.is_file() else 0
                result = run_load(server.port, requests[(name, case.stream)],
                                  concurrency=case.concurrency, duration=args.duration,
                                  warmup=args.warmup, check=response_ok(case.stream, FIXED_TEXT),
                                  server_cpu=server.cpu_seconds)
                rounds[name].append(result)
                if name == OURS:
                    added, records = _journaled(journal, journal_before)
                    journal_bytes += added
                    journal_requests += records
                print(f"  {case.name:<10} {name:<7} round {number + 1}: "
                      f"{result.requests / result.elapsed:9.1f} req/s, {result.errors} errors",
                      flush=True)
        results = {name: summarize(merge(runs), runs) for name, runs in rounds.items()}
        # warm-up requests included: every request our mock answered in this case's rounds
        results[OURS]["journal_bytes_per_request"] = \
            round(journal_bytes / journal_requests) if journal_requests else None
        ratios: dict[str, Any] = {}
        for other in (PEER, FLOOR):
            ratios.update(case_ratios(results[OURS], results[other], other))
            ratios[f"throughput_ours_over_{other}_by_round"] = [
                round((o.requests / o.elapsed) / (p.requests / p.elapsed), 3)
                if o.elapsed and p.elapsed and p.requests else None
                for o, p in zip(rounds[OURS], rounds[other], strict=True)]
        measured.append({"name": case.name, "stream": case.stream,
                         "concurrency": case.concurrency, "results": results,
                         "ratios": ratios})
    return measured


def run(args: argparse.Namespace) -> int:
    cases = [Case(stream, c) for c in args.concurrency for stream in (True, False)]
    server_cpus, generator_cpus = _pinning(not args.no_pin)
    load_before = os.getloadavg()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    started = time.time()
    try:
        bodies = load_bodies(args.bodies, ROOT)
    except BodiesError as error:
        print(f"bench: {error}", file=sys.stderr)
        return 2
    print(f"bodies: {len(bodies.streaming)} distinct Claude Code request bodies from "
          f"{bodies.source}", flush=True)
    if load_before[0] > BUSY_LOAD:
        print(f"bench: note: load average {load_before[0]:.2f}: the machine is doing other work; "
              "the ratios are same-run but noisier", file=sys.stderr)
    document: dict[str, Any] = {"schema": "loopprobe-bench/1"}
    with tempfile.TemporaryDirectory(prefix="loopprobe-bench-") as tmp, \
            contextlib.ExitStack() as stack:
        try:
            servers, replies = _start_servers(Path(tmp), stack, server_cpus, args.aimock_version,
                                              bodies)
        except (InstallError, ServerError, VerifyError, OSError) as error:
            print(f"bench: {error}", file=sys.stderr)
            return 2
        if generator_cpus:
            os.sched_setaffinity(0, generator_cpus)
        print(f"measuring {len(cases)} cases x {len(servers)} servers x {args.rounds} round(s), "
              f"{args.warmup:g} s warm-up + {args.duration:g} s each", flush=True)
        measured = _measure(servers, bodies, cases, args, Path(tmp) / "ours.journal.jsonl")
        profile = _profile(args, servers[OURS], bodies, measured)
        journal = Path(tmp) / "ours.journal.jsonl"
        if journal.is_file():
            servers[OURS].config["journal_bytes_written"] = journal.stat().st_size
        errors = sum(c["results"][n]["errors"] for c in measured for n in SERVERS)
        document.update({
            "ok": errors == 0,
            "errors": errors,
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
            "seconds": round(time.time() - started, 1),
            "settings": _settings(args, server_cpus, generator_cpus),
            "machine": _machine(load_before),
            "bodies": bodies.describe(),
            "servers": {name: {**server.describe(), "replies": replies[name]}
                        for name, server in servers.items()},
            "cases": measured,
        })
        if profile is not None:
            document["profile"] = profile
    write_json(args.out, document)
    print()
    print(table(measured))
    if profile is not None:
        print_profile(profile)
    print(f"\nwrote {args.out}")
    if errors:
        print(f"bench: {errors} request(s) failed; see error_kinds in {args.out}", file=sys.stderr)
        return 1
    return 0


def _start_servers(tmp: Path, stack: contextlib.ExitStack, server_cpus: set[int] | None,
                   aimock_version: str,
                   bodies: Bodies) -> tuple[dict[str, Server], dict[str, dict[str, Any]]]:
    """Our mock, aimock and the floor started (each stopped when ``stack`` closes), and the
    reply each gives in both modes checked, the floor's byte for byte against ours."""
    servers: dict[str, Server] = {}
    print(f"starting our mock, aimock {aimock_version} (npm install into the "
          "cache on first use) and the floor", flush=True)
    servers[OURS] = start_ours(tmp, server_cpus)
    stack.callback(servers[OURS].stop)
    servers[PEER] = start_aimock(tmp, server_cpus, aimock_version)
    stack.callback(servers[PEER].stop)
    servers[FLOOR] = start_floor(tmp, server_cpus, bodies.streaming[0])
    stack.callback(servers[FLOOR].stop)
    replies = {name: {mode: verify_reply(server.url, bodies.variant(stream)[0], stream)
                      for mode, stream in (("stream", True), ("json", False))}
               for name, server in servers.items()}
    for mode, stream in (("stream", True), ("json", False)):
        size = verify_same_bytes(servers[OURS].port, servers[FLOOR].port,
                                 bodies.variant(stream)[0])
        replies[FLOOR][mode]["same_bytes_as_ours"] = size
    return servers, replies


def _profile(args: argparse.Namespace, ours: Server, bodies: Bodies,
             measured: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Our mock profiled under the heaviest load (``--profile``); None when not asked for or
    when profiling failed (said, the measurements stand)."""
    if not args.profile:
        return None
    try:
        return profile_ours(ours, bodies, measured, max(args.concurrency),
                            args.profile_seconds, args.out)
    except (ProfileError, OSError, subprocess.SubprocessError) as error:
        print(f"bench: profiling failed: {error}", file=sys.stderr)
        return None


def _settings(args: argparse.Namespace, server_cpus: set[int] | None,
              generator_cpus: set[int] | None) -> dict[str, Any]:
    return {"quick": args.quick, "duration_s": args.duration, "warmup_s": args.warmup,
            "settle_s": args.settle, "rounds": args.rounds,
            "order_by_round": [list(_order(n)) for n in range(args.rounds)],
            "concurrency": args.concurrency,
            "server_cpus": sorted(server_cpus) if server_cpus else None,
            "generator_cpus": sorted(generator_cpus) if generator_cpus else None,
            "headers": ["host", "x-api-key", "anthropic-version", "content-type",
                        "content-length"]}


def _machine(load_before: tuple[float, float, float]) -> dict[str, Any]:
    return {"cpus": os.cpu_count(), "platform": platform.platform(),
            "python": platform.python_version(), "node": _node_version(),
            "load_average_before": [round(v, 2) for v in load_before],
            "load_average_after": [round(v, 2) for v in os.getloadavg()]}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _terminate)
    try:
        if args.suite:
            from bench.suite import bench_suite, render_suite
            result = bench_suite(args.client, args.jobs)
            print(render_suite(result))
            args.out.write_text(json.dumps({"suite": result}, indent=2) + "\n")
            return 0
        return run(args)
    except KeyboardInterrupt:
        print("bench: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
