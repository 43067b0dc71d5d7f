"""The egress guard: a local proxy that refuses every connection and records where it went.

Every client run gets ``HTTPS_PROXY``/``HTTP_PROXY`` pointing here and
``NO_PROXY`` for loopback, so the mock is reached directly and anything else
the client tries (api.anthropic.com, telemetry, update checks) lands here,
is answered 403 and is listed in the report as a failed check.
"""

from __future__ import annotations

import socketserver
import threading
import time
from dataclasses import dataclass, field
from types import TracebackType

__all__ = ["READ_TIMEOUT", "REFUSAL", "EgressAttempt", "EgressSink"]

READ_TIMEOUT = 5.0
REFUSAL = (b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n"
           b"X-Loopprobe: egress refused\r\n\r\n")


@dataclass(frozen=True)
class EgressAttempt:
    time: float
    method: str
    target: str  # host:port for CONNECT, the absolute URL otherwise

    @property
    def host(self) -> str:
        target = self.target.split("://", 1)[-1]
        return target.split("/", 1)[0]


@dataclass
class _Record:
    attempts: list[EgressAttempt] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        record: _Record = self.server.record  # type: ignore[attr-defined]
        self.request.settimeout(READ_TIMEOUT)
        line = b""
        try:
            while b"\n" not in line and len(line) < 8192:
                chunk = self.request.recv(1024)
                if not chunk:
                    break
                line += chunk
        except OSError:
            pass
        first = line.split(b"\r\n", 1)[0].split(b"\n", 1)[0].decode("latin-1", "replace")
        parts = first.split()
        method, target = (parts[0], parts[1]) if len(parts) >= 2 else ("?", first or "?")
        with record.lock:
            record.attempts.append(EgressAttempt(time.time(), method, target))
        try:
            self.request.sendall(REFUSAL)
        except OSError:
            pass


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


class EgressSink:
    """A refusing proxy on 127.0.0.1; ``attempts`` lists every connection it refused."""

    def __init__(self) -> None:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.record = _Record()  # type: ignore[attr-defined]
        self._thread: threading.Thread | None = None
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def attempts(self) -> list[EgressAttempt]:
        record: _Record = self._server.record  # type: ignore[attr-defined]
        with record.lock:
            return list(record.attempts)

    def environment(self) -> dict[str, str]:
        """Proxy variables for a client: everything but loopback goes to the sink."""
        no_proxy = "127.0.0.1,localhost,::1"
        return {"HTTPS_PROXY": self.url, "HTTP_PROXY": self.url, "https_proxy": self.url,
                "http_proxy": self.url, "NO_PROXY": no_proxy, "no_proxy": no_proxy}

    def start(self) -> EgressSink:
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.1}, daemon=True,
                                        name="egress-sink")
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(5)
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> EgressSink:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

