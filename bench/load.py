"""The load generator: closed-loop HTTP/1.1 keep-alive connections on one asyncio (uvloop) loop.

Each request is a pre-built byte string (request line, the headers a client
sends, the body), built once per server up front, so the generator's per-request
work is a socket write, reading the response and a cheap validity check. The
same code drives both servers. Its own CPU use is measured, so a result where
the generator rather than the server was the limit can be told apart.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["LoadResult", "build_requests", "response_ok", "run_load"]

REQUEST_TIMEOUT = 10.0  # one request; a slower answer is an error, not a latency
DRAIN_TIMEOUT = REQUEST_TIMEOUT + 5.0
RECONNECT_PAUSE = 0.05
API_KEY = "loopprobe-bench"
ANTHROPIC_VERSION = "2023-06-01"


def build_requests(port: int, bodies: list[bytes], path: str = "/v1/messages") -> list[bytes]:
    head = (f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\nx-api-key: {API_KEY}\r\n"
            f"anthropic-version: {ANTHROPIC_VERSION}\r\ncontent-type: application/json\r\n")
    return [f"{head}content-length: {len(b)}\r\n\r\n".encode() + b for b in bodies]


def response_ok(stream: bool, text: str) -> Callable[[int, bytes], bool]:
    """A cheap per-response check: 200, and a complete stream or the reply text."""
    needle = b'"message_stop"' if stream else text.encode()

    def check(status: int, body: bytes) -> bool:
        return status == 200 and needle in body
    return check


@dataclass
class LoadResult:
    requests: int = 0
    errors: int = 0
    error_kinds: dict[str, int] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)  # seconds, measured requests only
    elapsed: float = 0.0
    generator_cpu: float = 0.0  # CPU seconds of the generator during the measured window
    server_cpu: float | None = None  # CPU seconds of the server during the measured window
    bytes_received: int = 0

    def error(self, kind: str) -> None:
        self.errors += 1
        self.error_kinds[kind] = self.error_kinds.get(kind, 0) + 1


class _Window:
    """Whether completions count: only between the end of warm-up and the stop."""

    def __init__(self) -> None:
        self.measuring = False
        self.stopped = False


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, bytes, bool]:
    """(status, body, connection closes) of one HTTP/1.1 response."""
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head[9:12])
    lower = head.lower()
    closes = b"\r\nconnection: close" in lower
    at = lower.find(b"\r\ncontent-length:")
    if at >= 0:
        end = lower.index(b"\r\n", at + 2)
        return status, await reader.readexactly(int(lower[at + 17:end])), closes
    if b"\r\ntransfer-encoding: chunked" in lower:
        parts: list[bytes] = []
        while True:
            line = await reader.readuntil(b"\r\n")
            size = int(line.split(b";", 1)[0], 16)
            if size == 0:
                while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers
                    pass
                return status, b"".join(parts), closes
            parts.append((await reader.readexactly(size + 2))[:-2])
    return status, await reader.read(), True


async def _connection(port: int, requests: list[bytes], first: int, window: _Window,
                      check: Callable[[int, bytes], bool], result: LoadResult) -> None:
    index = first
    writer: asyncio.StreamWriter | None = None
    reader: asyncio.StreamReader | None = None
    clock = time.perf_counter
    try:
        while not window.stopped:
            if writer is None:
                try:
                    async with asyncio.timeout(REQUEST_TIMEOUT):
                        reader, writer = await asyncio.open_connection("127.0.0.1", port)
                except (OSError, TimeoutError) as error:
                    if window.measuring:
                        result.error(f"connect: {type(error).__name__}")
                    await asyncio.sleep(RECONNECT_PAUSE)
                    continue
            assert reader is not None
            request = requests[index % len(requests)]
            index += 1
            started = clock()
            try:
                async with asyncio.timeout(REQUEST_TIMEOUT):
                    writer.write(request)
                    status, body, closes = await _read_response(reader)
            except (OSError, TimeoutError, asyncio.IncompleteReadError,
                    asyncio.LimitOverrunError, ValueError) as error:
                if window.measuring:
                    result.error(f"{type(error).__name__}")
                writer.close()
                writer = None
                await asyncio.sleep(RECONNECT_PAUSE)
                continue
            if window.measuring:
                if check(status, body):
                    result.requests += 1
                    result.latencies.append(clock() - started)
                    result.bytes_received += len(body)
                else:
                    result.error(f"bad response: status {status}, {body[:120]!r}")
            if closes:
                writer.close()
                writer = None
    finally:
        if writer is not None:
            writer.close()


async def _run(port: int, requests: list[bytes], concurrency: int, duration: float,
               warmup: float, check: Callable[[int, bytes], bool],
               server_cpu: Callable[[], float | None]) -> LoadResult:
    result = LoadResult()
    window = _Window()
    spread = max(1, len(requests) // concurrency)
    tasks = [asyncio.create_task(_connection(port, requests, n * spread, window, check, result))
             for n in range(concurrency)]
    try:
        await asyncio.sleep(warmup)
        cpu0, server0, start = time.process_time(), server_cpu(), time.perf_counter()
        window.measuring = True
        await asyncio.sleep(duration)
        window.measuring = False
        end, cpu1, server1 = time.perf_counter(), time.process_time(), server_cpu()
        window.stopped = True
        result.elapsed, result.generator_cpu = end - start, cpu1 - cpu0
        if server0 is not None and server1 is not None:
            result.server_cpu = server1 - server0
        done, pending = await asyncio.wait(tasks, timeout=DRAIN_TIMEOUT)
        for task in done:
            if task.exception() is not None:
                result.error(f"generator: {task.exception()!r}")
        for _ in pending:
            result.error(f"a request still open {DRAIN_TIMEOUT}s after the stop")
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return result


def run_load(port: int, requests: list[bytes], *, concurrency: int, duration: float,
             warmup: float, check: Callable[[int, bytes], bool],
             server_cpu: Callable[[], float | None] = lambda: None) -> LoadResult:
    """Warm up, then drive ``port`` for ``duration`` seconds; completed requests count."""
    factory: Callable[[], asyncio.AbstractEventLoop] = asyncio.new_event_loop
    try:
        import uvloop
        factory = uvloop.new_event_loop
    except ImportError:  # pragma: no cover - uvloop is a dependency off Windows
        pass
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(_run(port, requests, concurrency, duration, warmup, check,
                               server_cpu))
