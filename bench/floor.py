"""``python -m bench.floor``: the raw ASGI floor, the bench's third server.

What the same uvicorn costs with nothing of a mock on top, so that the bench can
say how much of the floor's speed our mock reaches:

- At start-up our mock's own application (``mockapi.serve.app.MockApp`` with the
  bench scenario, its journal in a temporary directory deleted at once) is
  called in-process through ASGI, once per mode, with the request the bench
  sends (``--body``: that body, ``stream`` set to true and to false, and the
  bench's headers). The ASGI messages it sends (``http.response.start``, then
  the ``http.response.body`` ones) are kept.
- Then, per request: read the body to its end (its chunks joined), pick the
  stream reply if it contains ``"stream":true`` (compact JSON, as the bench
  sends it: the only look at the body) and the JSON reply otherwise, and send
  the kept messages. No Starlette, no parsing, no journal, no routing (any
  method and path gets the reply).
- Served by uvicorn exactly as ``python -m mockapi`` serves our mock: the
  socket bound by ``mockapi.serve.server.bind_socket``, the configuration of
  ``mockapi.serve.server.uvicorn_config``, ``uvicorn.Server(...).run(sockets=[sock])``.

So its bytes on the wire (status line, headers, chunked SSE body or JSON body)
are our mock's for the same request, but for the ids our mock numbers per request
(``msg_loopprobe_000001``, ``req_loopprobe_000001``: the floor keeps the
numbers of its capture, which have the same length). Without ``--body`` the
capture uses a minimal ``claude-sonnet-4-5`` request.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from collections.abc import Awaitable, Callable, Mapping, MutableMapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from bench import SCENARIO
from bench.load import ANTHROPIC_VERSION, API_KEY

__all__ = ["CAPTURE_TIMEOUT", "DEFAULT_BODY", "STREAM_MARK", "FloorError", "capture_replies",
           "floor_app", "main"]

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[MutableMapping[str, Any], Receive, Send], Awaitable[None]]

STREAM_MARK = b'"stream":true'
CAPTURE_TIMEOUT = 10.0
DEFAULT_BODY: dict[str, Any] = {"model": "claude-sonnet-4-5", "max_tokens": 1024,
                                "messages": [{"role": "user", "content": "hello"}]}


class FloorError(RuntimeError):
    pass


async def _capture(app: App, body: bytes, port: int) -> list[Message]:
    """The ASGI messages ``app`` sends for one ``POST /v1/messages`` with ``body``."""
    sent: list[Message] = []
    complete = asyncio.Event()
    delivered = False

    async def receive() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await complete.wait()  # as uvicorn: nothing more until the reply is over
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            complete.set()

    scope: dict[str, Any] = {
        "type": "http", "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1", "method": "POST", "scheme": "http", "root_path": "",
        "path": "/v1/messages", "raw_path": b"/v1/messages", "query_string": b"",
        "server": ("127.0.0.1", port), "client": ("127.0.0.1", 1), "state": {},
        "headers": [(b"host", f"127.0.0.1:{port}".encode()), (b"x-api-key", API_KEY.encode()),
                    (b"anthropic-version", ANTHROPIC_VERSION.encode()),
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode())],
    }
    async with asyncio.timeout(CAPTURE_TIMEOUT):
        await app(scope, receive, send)
    if (not sent or sent[0]["type"] != "http.response.start" or sent[0]["status"] != 200
            or not complete.is_set() or sent[-1]["type"] != "http.response.body"):
        raise FloorError(f"our mock did not answer the capture request with one whole 200 "
                         f"reply: {[(m['type'], m.get('status')) for m in sent]}")
    return sent


def capture_replies(body: Mapping[str, Any], port: int = 0) -> dict[bool, list[Message]]:
    """Our mock's ASGI reply messages to ``body`` streamed (True) and not (False)."""
    from mockapi.journal.write import Journal
    from mockapi.script.scenario import parse_scenario
    from mockapi.serve.app import MockApp

    async def both(app: App) -> dict[bool, list[Message]]:
        return {stream: await _capture(app, orjson.dumps({**body, "stream": stream}), port)
                for stream in (True, False)}

    with tempfile.TemporaryDirectory(prefix="loopprobe-floor-") as tmp:
        journal = Journal(Path(tmp) / "capture.journal.jsonl")
        try:
            mock = MockApp(parse_scenario(SCENARIO, "bench.SCENARIO"), journal)
            return asyncio.run(both(mock.app))
        finally:
            journal.close()


def floor_app(replies: Mapping[bool, Sequence[Message]]) -> App:
    """The raw ASGI app: read the body, send the kept reply of its mode."""
    stream_reply, json_reply = tuple(replies[True]), tuple(replies[False])

    async def app(scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client left
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        for reply in stream_reply if STREAM_MARK in body else json_reply:
            await send(reply)

    return app


def _body_bytes(messages: Sequence[Message]) -> int:
    return sum(len(m.get("body", b"")) for m in messages if m["type"] == "http.response.body")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.floor", description="The bench's raw ASGI floor: our mock's "
        "reply bytes, captured once, from a bare ASGI app on our mock's uvicorn configuration.")
    parser.add_argument("--host", default="127.0.0.1", help="default: %(default)s")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port (default)")
    parser.add_argument("--body", type=Path, help="JSON request body to capture our mock's "
                        "replies to (its stream field is set per mode; default: a minimal "
                        "claude-sonnet-4-5 request)")
    args = parser.parse_args(argv)

    import uvicorn

    from mockapi.serve.server import NonLoopbackRefused, bind_socket, uvicorn_config

    try:
        sock = bind_socket(args.host, args.port)
    except NonLoopbackRefused:
        print(f"floor: refusing to bind {args.host!r}: the floor binds loopback only "
              "(127.0.0.1, ::1)", file=sys.stderr)
        return 2
    try:
        host, port = sock.getsockname()[:2]
        body = orjson.loads(args.body.read_bytes()) if args.body else DEFAULT_BODY
        if not isinstance(body, dict):
            raise FloorError(f"{args.body}: expected a JSON object")
        replies = capture_replies(body, port)
    except (OSError, ValueError, FloorError) as error:  # ValueError: non-loopback, bad JSON
        print(f"floor: {error}", file=sys.stderr)
        return 2
    shown = f"[{host}]" if ":" in host else host
    print(f"floor listening on http://{shown}:{port} (raw ASGI; our mock's replies captured "
          f"once: stream {_body_bytes(replies[True])} bytes, json "
          f"{_body_bytes(replies[False])} bytes)", flush=True)
    uvicorn.Server(uvicorn_config(floor_app(replies))).run(sockets=[sock])
    return 0


if __name__ == "__main__":
    sys.exit(main())
