"""The mock's HTTP transport: uvicorn's httptools protocol with bounds, and delivery checks.

uvicorn bounds neither the size nor the count of request headers (a 64 MB header
is parsed and handed on), nor the time a client may take to send them or a body
(a connection that sends half a request is held forever). ``bounded_protocol``
adds these bounds per connection, in the protocol, so a request that arrives whole
pays nothing for them. The head of a request pipelined behind one whose reply is still
being sent is bounded the same way, from its first byte: refused, it is answered once that
reply ends, and the connection reads nothing more meanwhile. Refusals of a head, and a head
that is not HTTP at all (a raw CR or a byte outside ASCII in the target; uvicorn answers
those in plain text), are answered in the API's error envelope, the connection closed, and
reported to ``on_refused`` (the app journals them). A body that stalls is answered 408 the
same way, and the application, already reading it, sees the client leave with
``BODY_TIMED_OUT`` in ``scope["extensions"]`` saying why. The extensions also carry the connection
(``TRANSPORT_EXTENSION``) so a reply can check its own delivery.

Connections are capped by ``Limits.max_connections`` and by the process's descriptors
(``connection_cap``): past the cap a request gets 503 ``overloaded_error`` once its head is in;
a connection accepted while ``OVER_CAP_ROOM`` others already wait over the cap is answered 503
at once, so the descriptors never run out (uvloop, out of them, accepts and drops connections
unanswered).

``delivery`` asks the kernel whether the bytes of a reply reached the client's
side: on TCP, the send queue holds every byte the peer has not acknowledged
(``SIOCOUTQ``); a Unix socket (the harness bridges one into its sandbox) says
nothing about what the forwarder behind it did, so it is not checked.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import resource
import socket
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar, NamedTuple

import httptools
import orjson
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

__all__ = ["BODY_TIMED_OUT", "DESCRIPTOR_RESERVE", "OVER_CAP_ROOM", "TRANSPORT_EXTENSION",
           "BoundedHttpToolsProtocol", "Bounds", "Connection", "ConnectionCap", "Limits", "Refused",
           "bounded_protocol", "connection_cap", "delivery"]

TRANSPORT_EXTENSION = "loopprobe.transport"
BODY_TIMED_OUT = "loopprobe.body_timed_out"
_SIOCOUTQ = 0x5411  # linux/sockios.h (TIOCOUTQ): bytes in the send queue not yet acknowledged
_TCP_CLOSE = 7  # tcp_info.tcpi_state after a reset
# Connections over the cap still take a descriptor until they are answered 503: this many may
# wait for their head; past them a connection is answered at once.
OVER_CAP_ROOM = 32
# Descriptors kept from connections, beyond those open when the server starts (stdio, the
# listening socket, the journal, the event loop's): the connections over the cap
# (OVER_CAP_ROOM), and as many again for files opened while serving (a scenario sent to
# /_mock/, a reply journaled by reference, the journal checking its own path).
DESCRIPTOR_RESERVE = 2 * OVER_CAP_ROOM


@dataclass(frozen=True)
class Limits:
    """What one connection may send before the application sees a request."""

    max_header_bytes: int = 32 * 1024  # request line and headers together
    max_headers: int = 100
    # from connect, from the end of the last reply (an idle keep-alive connection), or from
    # the head's first byte, to the head's end
    header_timeout: float = 30.0
    body_timeout: float = 30.0  # the longest pause between two parts of a body
    max_connections: int = 1000  # beyond it 503 overloaded_error


@dataclass(frozen=True)
class ConnectionCap:
    """How many connections a server serves at once, and why that many."""

    max: int
    configured: int
    why: str


def _open_descriptors() -> int:
    try:
        return len(os.listdir("/proc/self/fd")) - 1  # less the one listing it
    except OSError:
        return 3 + 8  # stdio and a guess at the rest, where /proc is not mounted


def connection_cap(configured: int) -> ConnectionCap:
    """``configured``, or fewer when the soft RLIMIT_NOFILE leaves no descriptors for that many:
    the soft limit less the descriptors open now and DESCRIPTOR_RESERVE."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft == resource.RLIM_INFINITY:
        return ConnectionCap(configured, configured, "the configured cap (no descriptor limit)")
    in_use = _open_descriptors()
    room = max(1, soft - in_use - DESCRIPTOR_RESERVE)
    if room >= configured:
        return ConnectionCap(configured, configured,
                             f"the configured cap (soft RLIMIT_NOFILE {soft} leaves room)")
    return ConnectionCap(room, configured,
                         f"soft RLIMIT_NOFILE {soft} less {in_use} descriptors open at start "
                         f"and {DESCRIPTOR_RESERVE} kept for refusals and files")


@dataclass
class Connection:
    """What a reply needs of its connection to check its delivery."""

    transport: asyncio.Transport
    sock: socket.socket | None  # None when it is not TCP
    # (unacknowledged bytes, reset) as the connection was lost, read while its socket was
    # still open: a client that reads a reply whole and closes at once leaves no socket to ask
    lost_with: tuple[int, bool] | None = None


Refused = Callable[[str, str, int, str], None]  # method, path, status, why


def _error_response(status: int, reason: str, error_type: str, message: str) -> bytes:
    body = orjson.dumps({"type": "error", "error": {"type": error_type, "message": message}})
    return (f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n").encode() + body


class _Refusal(Exception):
    def __init__(self, status: int, reason: str, error_type: str, message: str):
        super().__init__(message)
        self.status, self.reason, self.error_type, self.message = (
            status, reason, error_type, message)


class Bounds(NamedTuple):
    """What a ``BoundedHttpToolsProtocol`` enforces, and whom it tells of each refusal."""

    limits: Limits
    on_refused: Refused


def bounded_protocol(limits: Limits, on_refused: Refused) -> type[HttpToolsProtocol]:
    """An httptools protocol class enforcing ``limits`` and reporting refusals."""

    class Bounded(BoundedHttpToolsProtocol):
        bounds = Bounds(limits, on_refused)

    return Bounded


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with ``bounds`` (a subclass's, from ``bounded_protocol``):
    each connection's head and body timed and sized, its refusals answered in the API's
    envelope and reported."""

    bounds: ClassVar[Bounds]
    _head_timer: asyncio.TimerHandle | None = None
    _body_timer: asyncio.TimerHandle | None = None
    _head_bytes = 0
    _body_bytes = 0
    _in_head = True
    _head_begun = False  # a byte of the head parsed
    _in_body = False
    _pending: _Refusal | None = None  # answered once the reply being sent ends
    _connection: Connection

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        sock = transport.get_extra_info("socket")
        tcp = sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6)
        self._connection = Connection(transport, sock if tcp else None)
        self._await_head()
        limit = self.limit_concurrency
        if limit is not None and len(self.connections) > limit + OVER_CAP_ROOM:
            self._refuse(_overloaded(limit))  # a descriptor must stay for the next one

    def connection_lost(self, exc: Exception | None) -> None:
        # the event loop closes the socket after this returns
        connection = self._connection
        if connection.sock is not None and connection.lost_with is None:
            connection.lost_with = _unacknowledged(connection, connection.sock)
        self._stop_head_timer()
        self._stop_body_timer()
        super().connection_lost(exc)

    def _await_head(self) -> None:
        self._in_head, self._head_bytes = True, 0
        self._stop_head_timer()
        self._start_head_timer()

    def _start_head_timer(self) -> None:
        self._head_timer = self.loop.call_later(self.bounds.limits.header_timeout,
                                                self._head_timed_out)

    def _stop_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _stop_body_timer(self) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    def _body_timed_out(self) -> None:
        self._body_timer = None
        cycle = self.cycle
        if not self._in_body or self.transport.is_closing() or cycle is None:
            return
        self._in_body = False
        if cycle.response_started:  # answered without waiting for the rest
            self.transport.close()
            return
        message = (f"loopprobe mock: the request body paused for more than "
                   f"{self.bounds.limits.body_timeout:g} s after {self._body_bytes} bytes")
        cycle.scope["extensions"][BODY_TIMED_OUT] = message  # type: ignore[assignment]
        self.transport.write(_error_response(408, "Request Timeout", "timeout_error",
                                             message))
        cycle.disconnected = True  # the application reading the body sees the client go
        cycle.message_event.set()
        self.transport.close()

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self._in_head and not self.transport.is_closing() and not self._head_begun \
                and self._head_bytes == 0:
            self.transport.close()  # a connection that never sent a byte: nothing to answer
        elif self._in_head and not self.transport.is_closing():
            self._refuse(_Refusal(
                408, "Request Timeout", "timeout_error",
                f"loopprobe mock: the request's headers did not arrive within "
                f"{self.bounds.limits.header_timeout:g} s"))

    def data_received(self, data: bytes) -> None:
        if self._pending is not None:  # refused: answered once the reply being sent ends
            self.transport.pause_reading()  # again: the reply's receive() resumes reading
            return
        self._unset_keepalive_if_required()
        if self._in_head:
            self._head_bytes += len(data)
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserCallbackError as error:
            if isinstance(error.__context__, _Refusal):
                self._refuse(error.__context__)
            else:  # uvicorn's own callbacks: a target that is not ASCII
                self._refuse(_not_http(f"{type(error.__context__).__name__}: "
                                       f"{error.__context__}"))
            return
        except httptools.HttpParserError as error:
            # uvicorn would answer in plain text, unjournaled
            self._refuse(_not_http(f"{type(error).__name__}: {error}"))
            return
        except httptools.HttpParserUpgrade:
            self._unsupported_upgrade_warning()
        if self._in_body and not self.transport.is_closing():
            # a body that did not arrive whole: each part restarts the clock
            self._stop_body_timer()
            self._body_timer = self.loop.call_later(self.bounds.limits.body_timeout,
                                                    self._body_timed_out)
        if self._in_head and self._head_bytes > self.bounds.limits.max_header_bytes \
                and not self.transport.is_closing():
            self._refuse(_too_large(f"the request line and headers exceed "
                                    f"{self.bounds.limits.max_header_bytes} bytes"))

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._head_begun = True
        if self._head_timer is None:  # pipelined: from the head's first byte
            self._start_head_timer()

    def on_header(self, name: bytes, value: bytes) -> None:
        if len(self.headers) >= self.bounds.limits.max_headers:
            raise _Refusal(*_too_large_args(
                f"more than {self.bounds.limits.max_headers} request headers"))
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._stop_head_timer()
        limit = self.limit_concurrency
        if limit is not None and (len(self.connections) >= limit or len(self.tasks) >= limit):
            # uvicorn's own refusal is plain text and reaches no journal
            raise _overloaded(limit)
        self.scope["extensions"] = {TRANSPORT_EXTENSION: self._connection}  # type: ignore[dict-item]
        super().on_headers_complete()
        self._in_body, self._body_bytes = True, 0

    def on_body(self, body: bytes) -> None:
        self._body_bytes += len(body)
        super().on_body(body)

    def on_message_complete(self) -> None:
        self._in_body = False
        self._stop_body_timer()
        super().on_message_complete()
        # what follows is the next request's head, bounded like the first one even
        # while this request's reply is still being sent (HTTP/1.1 pipelining)
        self._in_head, self._head_begun, self._head_bytes = True, False, 0

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.transport.is_closing():
            return
        if self._pending is not None:
            self._answer(self._pending)
        elif not self._head_begun:
            self._await_head()  # keep-alive: the next head is timed from now

    def _refuse(self, refusal: _Refusal) -> None:
        self._stop_head_timer()
        self._in_head = False
        method = path = ""
        try:  # the request line may not have arrived whole, or not begun
            if self._head_begun:
                method = self.parser.get_method().decode("latin-1")
        except httptools.HttpParserError:
            pass
        if getattr(self, "url", b""):
            path = self.url.split(b"?", 1)[0][:200].decode("latin-1")
        self.bounds.on_refused(method, path, refusal.status, refusal.message)
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete:
            # a reply is still being sent: the refusal follows it; read nothing more
            self._pending = refusal
            self.transport.pause_reading()
            return
        self._answer(refusal)

    def _answer(self, refusal: _Refusal) -> None:
        self.transport.write(_error_response(refusal.status, refusal.reason,
                                             refusal.error_type, refusal.message))
        self.transport.close()


def _too_large_args(message: str) -> tuple[int, str, str, str]:
    return (431, "Request Header Fields Too Large", "request_too_large",
            f"loopprobe mock: {message}")


def _not_http(why: str) -> _Refusal:
    return _Refusal(400, "Bad Request", "invalid_request_error",
                    f"loopprobe mock: the request is not valid HTTP/1.1 ({why[:200]})")


def _overloaded(limit: int) -> _Refusal:
    return _Refusal(503, "Service Unavailable", "overloaded_error",
                    f"loopprobe mock: {limit} connections are open, the most this mock "
                    "serves at once")


def _too_large(message: str) -> _Refusal:
    return _Refusal(*_too_large_args(message))


def _unacknowledged(connection: Connection, sock: socket.socket) -> tuple[int, bool]:
    """Bytes of this connection the client has not acknowledged, and whether it was reset."""
    if connection.lost_with is not None:
        return connection.lost_with
    try:
        queued = struct.unpack("i", fcntl.ioctl(sock.fileno(), _SIOCOUTQ, b"\0\0\0\0"))[0]
        state = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0]
    except (OSError, ValueError):  # ValueError: closed (its descriptor is -1)
        return 0, True
    return queued + connection.transport.get_write_buffer_size(), state == _TCP_CLOSE


async def delivery(connection: Connection | None, timeout: float) -> tuple[str, int] | None:
    """After a reply's last write: ("acknowledged", 0) once the client's side acknowledged
    every byte, ("unacknowledged", n) when the connection was reset first or ``timeout``
    passed; None when this connection cannot tell (not TCP, or served in-process)."""
    if connection is None or connection.sock is None:
        return None
    sock = connection.sock
    queued, reset = _unacknowledged(connection, sock)
    wait, waited = 0.001, 0.0
    while not reset and queued > 0 and waited < timeout:
        await asyncio.sleep(wait)
        waited += wait
        wait = min(wait * 2, 0.05)
        queued, reset = _unacknowledged(connection, sock)
    if reset or queued > 0:
        return "unacknowledged", queued
    return "acknowledged", 0
