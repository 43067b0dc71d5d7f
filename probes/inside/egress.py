"""The egress guard: a local proxy that refuses every connection and records where it went,
and a DNS sink that refuses every lookup and records the name.

Every client run gets ``HTTPS_PROXY``/``HTTP_PROXY`` pointing at the proxy and
``NO_PROXY`` for loopback, so the mock is reached directly and anything else
the client tries (api.anthropic.com, telemetry, update checks) lands here,
is answered 403 and is listed in the report as a failed check. In a contained
run both sinks live inside the run's network namespace (``sandbox_init.py``), where
nothing else is reachable; uncontained, only the proxy exists, on the host.

Standard library only: ``sandbox_init.py`` imports this file inside the sandbox.
"""

from __future__ import annotations

import socketserver
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from types import TracebackType
from typing import Any

__all__ = ["NO_PROXY", "READ_TIMEOUT", "REFUSAL", "DnsSink", "EgressAttempt", "EgressSink",
           "dns_question", "proxy_environment"]

NO_PROXY = "127.0.0.1,localhost,::1"


def proxy_environment(url: str) -> dict[str, str]:
    """Proxy variables for a client: everything but loopback goes to the proxy at ``url``."""
    return {"HTTPS_PROXY": url, "HTTP_PROXY": url, "https_proxy": url, "http_proxy": url,
            "NO_PROXY": NO_PROXY, "no_proxy": NO_PROXY}

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

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "host": self.host}


@dataclass
class _Record:
    attempts: list[EgressAttempt] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    on_attempt: Callable[[EgressAttempt], None] | None = None

    def add(self, attempt: EgressAttempt) -> None:
        with self.lock:
            self.attempts.append(attempt)
            if self.on_attempt is not None:
                self.on_attempt(attempt)


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
        record.add(EgressAttempt(time.time(), method, target))
        try:
            self.request.sendall(REFUSAL)
        except OSError:
            pass


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


class EgressSink:
    """A refusing proxy on 127.0.0.1; ``attempts`` lists every connection it refused."""

    def __init__(self, port: int = 0,
                 on_attempt: Callable[[EgressAttempt], None] | None = None) -> None:
        self._server = _Server(("127.0.0.1", port), _Handler)
        self._server.record = _Record(on_attempt=on_attempt)  # type: ignore[attr-defined]
        self._thread: threading.Thread | None = None
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def attempts(self) -> list[EgressAttempt]:
        record: _Record = self._server.record  # type: ignore[attr-defined]
        with record.lock:
            return list(record.attempts)

    def environment(self) -> dict[str, str]:
        return proxy_environment(self.url)

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



def dns_question(packet: bytes) -> tuple[int, str, bytes] | None:
    """A DNS query's id, name and question section (``None`` when it is not one)."""
    if len(packet) < 12:
        return None
    ident, _flags, questions = struct.unpack("!HHH", packet[:6])
    if questions < 1:
        return None
    labels, at = [], 12
    while at < len(packet) and packet[at] != 0:
        length = packet[at]
        if length > 63 or at + 1 + length > len(packet):
            return None
        labels.append(packet[at + 1:at + 1 + length].decode("latin-1"))
        at += 1 + length
    end = at + 5  # the root label, QTYPE, QCLASS
    if end > len(packet):
        return None
    return ident, ".".join(labels), packet[12:end]


class _DnsHandler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        packet, sock = self.request
        question = dns_question(packet)
        record: _Record = self.server.record  # type: ignore[attr-defined]
        name = question[1] if question else "?"
        record.add(EgressAttempt(time.time(), "DNS", f"dns://{name}"))
        if question is not None:
            ident, _, section = question
            # a response (QR), recursion available, RCODE 5: refused
            header = struct.pack("!HHHHHH", ident, 0x8185, 1, 0, 0, 0)
            sock.sendto(header + section, self.client_address)


class _UdpServer(socketserver.ThreadingUDPServer):
    daemon_threads = True
    allow_reuse_address = True


class DnsSink:
    """A resolver on 127.0.0.1:``port`` that refuses every query and records its name."""

    def __init__(self, port: int = 53,
                 on_attempt: Callable[[EgressAttempt], None] | None = None) -> None:
        self._server = _UdpServer(("127.0.0.1", port), _DnsHandler)
        self._server.record = _Record(on_attempt=on_attempt)  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.1}, daemon=True,
                                        name="dns-sink")

    def start(self) -> DnsSink:
        self._thread.start()
        return self
