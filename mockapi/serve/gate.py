"""The gate in front of the routes: who may be answered at all, and the answer to a request
the journal could not take.

``Guard`` refuses, on every route, a request from a web page (``Origin``) or to a ``Host``
that is not the mock's own (DNS rebinding) with 403, and a path holding a control
character (``%0d%0a``) or not starting with ``/`` with 400, each journaled, and sends
the hot route straight to its endpoint; ``Unrecorded`` is raised when the journal
cannot take a request's line, and ``unrecorded`` answers it 500 with nothing of the
script used. The stream limit (``max_streams``) is ``MockApp``'s, which holds the count.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope
from starlette.types import Send as ASGISend

from mockapi.check.targets import control_character
from mockapi.script.events import error_body

__all__ = ["AnyMethod", "Guard", "Unrecorded", "json_response", "unrecorded"]


class Unrecorded(Exception):
    """The journal could not take this request's line: it is answered 500, unscripted."""

    def __init__(self, seq: int, why: str):
        super().__init__(why)
        self.seq, self.why = seq, why


async def unrecorded(request: Request, error: Exception) -> Response:
    if not isinstance(error, Unrecorded):
        raise error
    request_id = f"req_loopprobe_{error.seq:06d}"
    message = (f"loopprobe mock: this request could not be journaled, so it was not "
               f"answered from the script: {error.why}")
    return json_response(error_body("api_error", message, request_id), 500,
                         {"request-id": request_id, "x-should-retry": "false"})


class AnyMethod:
    """Serve ``endpoint`` for any HTTP method, so that every request is recorded."""

    def __init__(self, endpoint: Callable[[Request], Awaitable[Response]]):
        self.endpoint = endpoint

    async def __call__(self, scope: Scope, receive: Receive, send: ASGISend) -> None:
        response = await self.endpoint(Request(scope, receive))
        await response(scope, receive, send)


def json_response(body: bytes, status: int = 200,
                  headers: Mapping[str, str] | None = None) -> Response:
    return Response(body, status_code=status, headers=dict(headers or {}),
                    media_type="application/json")


class Guard:
    """Refuse, on every route, a request from a web page (it carries ``Origin``) or one whose
    ``Host`` is not the mock's own address (DNS rebinding); the mock's API refusals are
    journaled by ``refused`` (nothing is read of the body, no scripted reply is used)."""

    def __init__(self, app: Starlette, allowed_hosts: Collection[str] | None,
                 refused: Callable[[Request, str, int], Awaitable[Response]],
                 messages: Callable[[Request], Awaitable[Response]]):
        self.app = app
        self.messages = messages
        self.allowed = None if allowed_hosts is None else frozenset(
            h.lower().encode("latin-1") for h in allowed_hosts)
        self.refused = refused

    async def __call__(self, scope: Scope, receive: Receive, send: ASGISend) -> None:
        if scope["type"] == "http":
            host = b""
            for name, value in scope["headers"]:
                if name == b"origin":
                    why = (f"requests from web pages are refused: expected no Origin header, "
                           f"found Origin: {value.decode('latin-1')[:100]}")
                    break
                if name == b"host":
                    host = value.lower()
            else:
                why = "" if self.allowed is None or host in self.allowed else (
                    f"expected Host to be the mock's own address "
                    f"({', '.join(sorted(h.decode() for h in self.allowed))}), found "
                    f"{host.decode('latin-1')[:100] or 'none'}")
            status = 403
            if not why:  # Starlette's router would answer these 404 in plain text, unjournaled
                path = scope["path"]
                if control := control_character(path):
                    why, status = (f"the path holds a control character ({control}): "
                                   "expected printable characters only"), 400
                elif not path.startswith("/"):
                    why, status = f"expected a path starting with '/', got {path[:100]!r}", 400
            if why:
                response = await self.refused(Request(scope, receive), why, status)
                await response(scope, receive, send)
                return
            if scope["path"] == "/v1/messages" and scope["method"] == "POST":
                # the hot route, straight to its endpoint: the router and middleware of every
                # other route cost more than a request's own checks
                request = Request(scope, receive)
                try:
                    response = await self.messages(request)
                except Unrecorded as error:
                    response = await unrecorded(request, error)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
