"""Run the mock on a real socket: uvicorn on 127.0.0.1, in a thread or as the main program."""

from __future__ import annotations

import contextlib
import ipaddress
import math
import os
import secrets
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

import httpx
import uvicorn

from mockapi.journal.read import JournalContents, read_journal
from mockapi.journal.records import RequestRecord
from mockapi.journal.write import Journal
from mockapi.script.scenario import Scenario
from mockapi.serve.admin import ADMIN_PREFIX, ADMIN_TOKEN_HEADER
from mockapi.serve.app import MockApp
from mockapi.serve.transport import ConnectionCap, Limits, Refused, bounded_protocol, connection_cap

__all__ = [
    "START_TIMEOUT",
    "STOP_TIMEOUT",
    "MockServer",
    "NonLoopbackRefused",
    "ServerThread",
    "bind_socket",
    "bind_unix_socket",
    "mock_server",
    "own_hosts",
    "uvicorn_config",
]

START_TIMEOUT = 10.0
STOP_TIMEOUT = 10.0


class NonLoopbackRefused(ValueError):
    pass


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bind_socket(host: str = "127.0.0.1", port: int = 0, *, allow_remote: bool = False) -> socket.socket:
    """Bind the listening socket ourselves, so port 0 gives a known free port at once."""
    if not _is_loopback(host) and not allow_remote:
        raise NonLoopbackRefused(
            f"refusing to bind {host!r}: the mock binds loopback only (127.0.0.1, ::1) unless "
            "explicitly allowed (--allow-remote / allow_remote=True)")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(1024)
    sock.set_inheritable(True)
    return sock


def bind_unix_socket(path: Path) -> socket.socket:
    """A listening Unix socket only this user can connect to."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    path.unlink(missing_ok=True)
    # not by umask: it is the process's, and probes running in threads would create their
    # folders with it (a sandbox the client cannot enter); nobody connects before listen()
    sock.bind(str(path))
    os.chmod(path, 0o600)
    sock.listen(1024)
    sock.set_inheritable(True)
    return sock


def own_hosts(url: str) -> set[str]:
    """The Host values a server at ``url`` answers: its address, and ``localhost`` for a
    loopback address (what clients send for http://localhost:PORT)."""
    authority = url.split("://", 1)[-1].split("/", 1)[0].lower()
    host, _, port = authority.rpartition(":")
    hosts = {authority}
    if host in ("127.0.0.1", "[::1]"):
        hosts.add(f"localhost:{port}")
    return hosts


def _unreported(method: str, path: str, status: int, why: str) -> None:
    pass


def uvicorn_config(app: Any, *, limits: Limits | None = None,
                   on_refused: Refused = _unreported,
                   cap: ConnectionCap | None = None) -> uvicorn.Config:
    """uvicorn as the mock runs it: quiet, and bounded by ``limits`` per connection; its
    connections capped by ``cap``, else as ``connection_cap`` finds this process's
    descriptors now."""
    limits = limits or Limits()
    cap = cap or connection_cap(limits.max_connections)
    return uvicorn.Config(
        app, log_level="warning", access_log=False, lifespan="off",
        timeout_graceful_shutdown=1, ws="none", server_header=False, date_header=False,
        http=bounded_protocol(limits, on_refused),
        limit_concurrency=cap.max,
        # An idle keep-alive connection is closed by the head timer (header_timeout, 30 s),
        # never by uvicorn's 5 s default. undici, under node's fetch, keeps an idle connection
        # 4 s by default: a client held up for a second reused a connection the mock was
        # closing, and got a reset for a request the mock never read.
        timeout_keep_alive=math.ceil(limits.header_timeout),  # uvicorn's is a whole number
    )


class _MockUvicorn(uvicorn.Server):
    """Tells the mock when it is stopping, so replies cut by the stop say so."""

    def __init__(self, config: uvicorn.Config, mock: MockApp):
        super().__init__(config)
        self.mock = mock

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        # sse-starlette ends its streams from this very signal, before shutdown() runs
        self.mock.shutting_down = True
        super().handle_exit(sig, frame)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.mock.shutting_down = True
        await super().shutdown(sockets)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        with super().capture_signals():
            yield
            # uvicorn raises SIGTERM or SIGINT again once it has stopped, ending the process
            # by the signal (-15, or a KeyboardInterrupt traceback); the mock stopped cleanly
            self._captured_signals.clear()


def mock_server(mock: MockApp, limits: Limits | None = None) -> uvicorn.Server:
    """A uvicorn server for ``mock``, journaling what its transport refuses; the mock shows
    its connection cap in ``/_mock/state``."""
    limits = limits or Limits()
    mock.connection_cap = connection_cap(limits.max_connections)
    return _MockUvicorn(uvicorn_config(mock.app, limits=limits, cap=mock.connection_cap,
                                       on_refused=mock.refused_by_transport), mock)


class ServerThread:
    """A uvicorn server on an already bound socket, served from a thread of this process."""

    def __init__(self, server: uvicorn.Server, sock: socket.socket, name: str, what: str):
        self._server, self._socket, self._name, self._what = server, sock, name, what
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None

    def start(self) -> None:
        def serve() -> None:
            try:
                self._server.run(sockets=[self._socket])
            except BaseException as error:  # surfaced by start()
                self._failure = error

        self._thread = threading.Thread(target=serve, name=self._name, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + START_TIMEOUT
        while not self._server.started:
            if self._failure or not self._thread.is_alive():
                raise RuntimeError(f"{self._what} failed to start: {self._failure!r}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self._what} did not start within {START_TIMEOUT}s")
            time.sleep(0.005)

    def stop(self) -> bool:
        """Stop serving (forcing it after STOP_TIMEOUT); False when it was not running."""
        if self._thread is None:
            return False
        self._server.should_exit = True
        self._thread.join(STOP_TIMEOUT)
        if self._thread.is_alive():
            self._server.force_exit = True
            self._thread.join(STOP_TIMEOUT)
        self._thread = None
        return True


class MockServer:
    """The mock on a loopback port in a background thread; use as a context manager.

    >>> with MockServer(scenario, journal_path) as mock:
    ...     client = anthropic.Anthropic(base_url=mock.url, api_key="x")
    """

    def __init__(self, scenario: Scenario, journal_path: str | Path, *,
                 context: Mapping[str, str] | None = None, host: str = "127.0.0.1",
                 port: int = 0, allow_remote: bool = False, fsync: bool = False,
                 admin_token: str | None = None, admin_open: bool = False,
                 uds: Path | None = None, public_url: str | None = None,
                 limits: Limits | None = None, **app_options: Any):
        """The admin routes need ``admin_token`` (a random one unless given) unless
        ``admin_open``. ``uds``: listen on this Unix socket instead of TCP (mode 0600);
        ``public_url`` is then the address clients are told (a forwarder connects it to the
        socket). Only requests whose Host is that address are served. ``limits``: what a
        connection may send before the app sees a request (``mockapi.serve.transport.Limits``)."""
        self.uds = uds
        self._socket = bind_unix_socket(uds) if uds is not None else bind_socket(
            host, port, allow_remote=allow_remote)
        if uds is not None:
            if public_url is None:
                raise ValueError("a mock on a Unix socket needs the public_url clients use")
            self.url, self.port = public_url.rstrip("/"), 0
        else:
            address = self._socket.getsockname()
            shown = f"[{address[0]}]" if ":" in address[0] else address[0]
            self.url = public_url or f"http://{shown}:{address[1]}"
            self.port = address[1]
        self.admin_token = None if admin_open else admin_token or secrets.token_urlsafe(24)
        self.journal = Journal(journal_path, fsync=fsync)
        self.mock = MockApp(scenario, self.journal, context=context,
                            admin_token=self.admin_token,
                            allowed_hosts=own_hosts(self.url), **app_options)
        self._server = mock_server(self.mock, limits)
        self._runner = ServerThread(self._server, self._socket, f"mockapi:{self.url}",
                                    "the mock server")

    def start(self) -> MockServer:
        self._runner.start()
        return self

    def stop(self) -> None:
        if not self._runner.stop():
            return
        self._socket.close()
        if self.uds is not None:
            self.uds.unlink(missing_ok=True)
        self.journal.close()

    def __enter__(self) -> MockServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # ---- conveniences over the admin surface (same data as /_mock/…) --------

    def read(self) -> JournalContents:
        return read_journal(self.journal.path)

    def requests(self, *, kind: str | None = None) -> list[RequestRecord]:
        """Recorded Messages API requests of the current run (optionally of one kind)."""
        return [r for r in self.read().requests()
                if r.get("run") == self.mock.run and (kind is None or r.get("kind") == kind)]

    def install(self, scenario: Scenario, context: Mapping[str, str] | None = None) -> None:
        self.mock.install(scenario, context)

    def reset(self) -> int:
        return self.mock.reset()

    def assert_all_used(self) -> None:
        """Fail (``AssertionError``) unless every scripted reply was served this run, naming
        each unused one (rule id, reply index) and how often each reply was used."""
        uses = self.mock.script.reply_uses()
        unused = [(rule, index) for rule, index, served in uses if not served]
        if not unused:
            return
        lines = [f"{len(unused)} of {len(uses)} scripted replies never used:"]
        lines += [f"  - rule {rule!r} reply {index}" for rule, index in unused]
        lines.append("used: " + ("; ".join(
            f"rule {rule!r} reply {index}: {served} time{'s' if served > 1 else ''}"
            for rule, index, served in uses if served) or "none"))
        raise AssertionError("\n".join(lines))

    def admin(self, method: str, name: str, **kwargs: Any) -> httpx.Response:
        headers = dict(kwargs.pop("headers", None) or {})
        if self.admin_token:
            headers[ADMIN_TOKEN_HEADER] = self.admin_token
        transport = httpx.HTTPTransport(uds=str(self.uds)) if self.uds is not None else None
        with httpx.Client(transport=transport, timeout=10) as client:
            return client.request(method, f"{self.url}{ADMIN_PREFIX}/{name}", headers=headers,
                                  **kwargs)
