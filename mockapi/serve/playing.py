"""Playing a scripted reply: a body executed from its plan (``mockapi.script.plan``), its progress
noted, how it ended journaled once, and a ``max_streams`` slot held while it plays.

``MockApp`` (``mockapi.serve.app``) decides what to answer and records the request; what is here
sends the body and says how it ended: complete only once its bytes were acknowledged (on
TCP, ``mockapi.serve.transport.delivery``), cut by a scripted disconnect, or left by the client.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Protocol

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope
from starlette.types import Send as ASGISend

from mockapi.journal.records import END_CLIENT_DISCONNECTED, END_COMPLETE, MAX_WRITE_OFFSETS, EndReason
from mockapi.script.plan import Abort, Send, Sleep, Step
from mockapi.serve.transport import TRANSPORT_EXTENSION, Connection, delivery

__all__ = ["SSE_HEADERS", "WHOLE_WRITE_BYTES", "DeliberateDisconnect", "Host", "Played",
           "Playing", "WholeStream", "play", "stall", "transport_of"]


class Host(Protocol):
    """What a reply being played needs of its app (``MockApp``)."""

    open_streams: int
    delivery_timeout: float

    def cut_short(self, reason: EndReason) -> EndReason: ...

    def _record_end(self, seq: int, run: int, reason: EndReason, events: int, size: int,
                    offsets: list[float] | None = None,
                    delivered: tuple[str, int] | None = None) -> None: ...


class Playing:
    """A reply being played: its ``response_end`` is journaled exactly once, by whichever
    comes first (the reply's own end, or the end of its ASGI call when the client left
    before the body began), with the progress made so far; its ``max_streams`` slot, if
    it holds one, is given back then."""

    __slots__ = ("app", "ended", "offsets", "run", "sent", "seq", "size", "slot")

    def __init__(self, app: Host, seq: int, run: int, *, slot: bool):
        self.app, self.seq, self.run, self.slot = app, seq, run, slot
        self.sent = self.size = 0
        self.offsets: list[float] = []
        self.ended = False
        if slot:
            app.open_streams += 1

    def release(self) -> None:
        """Give back the slot without a ``response_end`` (no body was played)."""
        if self.slot:
            self.slot = False
            self.app.open_streams -= 1

    def end(self, reason: EndReason, delivered: tuple[str, int] | None = None) -> None:
        if self.ended:
            return
        self.ended = True
        self.release()
        self.app._record_end(self.seq, self.run, self.app.cut_short(reason), self.sent,
                             self.size, self.offsets, delivered)


class Played(Response):
    """``inner``, ending ``playing`` when its ASGI call ends if it did not end it itself."""

    def __init__(self, inner: Response, playing: Playing):
        super().__init__()
        self.inner, self.playing = inner, playing

    async def __call__(self, scope: Scope, receive: Receive, send: ASGISend) -> None:
        try:
            await self.inner(scope, receive, send)
        finally:
            self.playing.end(END_CLIENT_DISCONNECTED)


class DeliberateDisconnect(Exception):
    """Raised inside a response to drop the connection, as a scripted fault."""


class _QuietDeliberateDisconnects(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, BaseExceptionGroup):
            return not all(isinstance(e, DeliberateDisconnect) for e in exc.exceptions)
        if isinstance(exc, DeliberateDisconnect):
            return False
        # uvicorn's note for a deliberately unfinished response
        return "returned without completing response" not in record.getMessage()


logging.getLogger("uvicorn.error").addFilter(_QuietDeliberateDisconnects())


SSE_HEADERS = {"content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache",
               "connection": "keep-alive", "x-accel-buffering": "no"}


WHOLE_WRITE_BYTES = 64 * 1024  # a whole stream is handed to the server in pieces of this size


class WholeStream(Response):
    """A stream whose plan is one write: every event in one chunked body write.

    Same bytes and headers as the sse-starlette path used for other plans, without
    its per-response task group, which costs more than everything else of a request.
    The events are encoded as they go: past WHOLE_WRITE_BYTES the write is handed to
    the server piece by piece (waiting on the client as the server does), so a reply of
    millions of events is never held whole. The journal counts it as one write.
    """

    def __init__(self, start: bytes, tail: Iterable[bytes], headers: Mapping[str, str],
                 playing: Playing):
        super().__init__(status_code=200)
        self.start, self.tail = start, tail
        # no content-length: the body goes out chunked, as a stream does
        self.raw_headers = [(k.lower().encode("latin-1"), v.encode("latin-1"))
                            for k, v in headers.items()]
        self.playing = playing

    async def __call__(self, scope: Scope, receive: Receive, send: ASGISend) -> None:
        playing = self.playing
        reason: EndReason = END_CLIENT_DISCONNECTED
        delivered: tuple[str, int] | None = None
        try:
            await send({"type": "http.response.start", "status": 200,
                        "headers": self.raw_headers})
            playing.offsets.append(0.0)
            sends, size = 1, len(self.start)
            piece, piece_size = [self.start], len(self.start)
            for event in self.tail:
                if piece_size >= WHOLE_WRITE_BYTES:
                    await send({"type": "http.response.body", "body": b"".join(piece),
                                "more_body": True})
                    piece, piece_size = [], 0
                piece.append(event)
                piece_size += len(event)
                sends += 1
                size += len(event)
            await send({"type": "http.response.body", "body": b"".join(piece),
                        "more_body": False})
            delivered = await delivery(transport_of(scope), playing.app.delivery_timeout)
            if delivered is None or delivered[0] == "acknowledged":
                reason = END_COMPLETE
                playing.sent, playing.size = sends, size
        except OSError:
            pass
        finally:
            playing.end(reason, delivered)


def transport_of(scope: Scope) -> Connection | None:
    """The connection, where the transport is ours (not an in-process ASGI client)."""
    connection = scope.get("extensions", {}).get(TRANSPORT_EXTENSION)
    return connection if isinstance(connection, Connection) else None



async def play(plan: Iterable[Step], playing: Playing, transport: Connection | None,
           delivery_timeout: float) -> AsyncIterator[bytes]:
    """Execute ``plan`` as a response body, noting progress in ``playing``, and journal
    how it ended."""
    reason: EndReason = END_CLIENT_DISCONNECTED
    started = time.monotonic()
    delivered: tuple[str, int] | None = None
    try:
        for step in plan:
            if isinstance(step, Send):
                if len(playing.offsets) <= MAX_WRITE_OFFSETS:  # the journal keeps no more
                    playing.offsets.append(time.monotonic() - started)
                yield step.data
                playing.sent += 1
                playing.size += len(step.data)
            elif isinstance(step, Sleep):
                await asyncio.sleep(step.seconds)
            else:
                if isinstance(step, Abort):
                    reason = step.reason
                    raise DeliberateDisconnect(
                        f"scripted disconnect after {playing.sent} writes")
                # every write so far was handed to the transport: were they received?
                delivered = await delivery(transport, delivery_timeout)
                if delivered is None or delivered[0] == "acknowledged":
                    reason = step.reason
                return
    finally:
        playing.end(reason, delivered)


async def stall(request: Request, seconds: float) -> bool:
    """Wait ``seconds`` before answering; True if the client left meanwhile."""
    if seconds <= 0:
        return False
    try:
        async with asyncio.timeout(seconds):
            while True:
                message = await request.receive()
                if message["type"] == "http.disconnect":
                    return True
    except TimeoutError:
        return False
