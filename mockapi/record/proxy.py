"""Record, then replay: a proxy in front of any Messages API endpoint that writes what passed.

Every request is forwarded to the upstream as it came (its ``x-api-key`` or
``authorization`` too: they go to the upstream and nowhere else), and the upstream's
answer is relayed as it arrives: a stream event by event, a JSON body, an error with its
status. What passed is written twice:

- the **journal**, in the mock's own format and by its own writer (``Journal``: secret
  headers and query parameters redacted, one line per request as soon as the upstream's status is known, a
  ``response_end`` line when a stream is over);
- a **scenario** the mock loads: one rule per ``POST /v1/messages`` exchange, matched on
  what the mock itself computes for the request (``kind``, ``turn``, ``attempt``, by the
  same ``Script`` and classifier), never on the request's text (dates, paths, session ids
  change run to run). The rule's reply is the upstream's: its text, tool_use, thinking
  and redacted_thinking blocks, ``stop_reason``, ``usage``, ``model`` and ``id``; an error
  status with its type and message; or, for anything a message reply cannot say (a stream
  that broke off or carried an error event, a block type the mock does not know), the
  upstream's bytes as a ``raw`` reply. Strings are escaped so that the scenario's
  ``{placeholders}`` leave them as they were. The scenario is ``validation: lenient``:
  the upstream already judged each request.

The scenario file is rewritten (atomically) after every exchange and once more when the
proxy stops, when exchanges still open are written as what arrived of them, cut off.
Message threads (``thread`` in the body) are relayed and journaled but get no rule.

Chosen where the docs are silent (a proxy's own choices):

- the path is forwarded as it came on the wire, under the upstream's base path, or not at
  all: a target that could leave the base or be read two ways (a ``.``/``..`` segment, an
  encoded ``.``, ``/`` or backslash, a raw backslash, a control character, a malformed escape)
  is answered 400 ``invalid_request_error``, journaled, and never forwarded
  (``mockapi.check.targets``); a head that is not HTTP gets the same 400 from the transport;
- secret-bearing query parameters (``api_key=``...) are forwarded, like the key headers,
  and journaled ``[redacted]``;
- the client gets every byte of the upstream's body; a rule keeps at most
  ``max_recorded_bytes`` of it (4 MiB) and replays cut off there, and the scenario's
  ``description`` says which rule kept how much of how many bytes;
- when the client leaves, the upstream's response is closed at once (its body is not
  read on for nobody): the rule is what arrived, cut off, and a client that leaves before
  the upstream answered is journaled ``client_disconnected``;
- rules are made and the scenario written on a worker thread, never on the event loop.

Here: the recorder on a socket (``RecordingProxy``) and ``loopprobe record``. The proxy
as an ASGI app is ``recorder``'s (``Recorder``), the reply written for an exchange
``upstream_reply``'s; ``mockapi.record`` gives their names.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import FrameType, TracebackType

import uvicorn

from mockapi.check.targets import UpstreamError
from mockapi.record.recorder import Recorder
from mockapi.serve.server import (
    NonLoopbackRefused,
    ServerThread,
    bind_socket,
    bind_unix_socket,
    own_hosts,
)
from mockapi.serve.server import uvicorn_config as _uvicorn_config

__all__ = ["RecordingProxy", "record"]


# ---- on a socket ------------------------------------------------------------------------


class _StopQuietly(uvicorn.Server):
    """Stops on SIGINT/SIGTERM without re-raising the signal afterwards (uvicorn's default):
    stopping is how a recording ends, and the scenario is written after it."""

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        self._captured_signals.clear()


class RecordingProxy:
    """The recorder on a loopback port (or a Unix socket, as ``MockServer``) in a thread;
    a context manager. ``.url``, ``.journal`` (the mock's journal writer), ``.recorder``.
    """

    def __init__(self, upstream: str, scenario_path: str | Path, journal_path: str | Path, *,
                 host: str = "127.0.0.1", port: int = 0, uds: Path | None = None,
                 public_url: str | None = None, classifier: str = "claude-code",
                 fsync: bool = False):
        self.uds = uds
        self._socket = bind_unix_socket(uds) if uds is not None else bind_socket(host, port)
        if uds is not None:
            if public_url is None:
                raise ValueError("a recorder on a Unix socket needs the public_url clients use")
            self.url = public_url.rstrip("/")
        else:
            address = self._socket.getsockname()
            shown = f"[{address[0]}]" if ":" in address[0] else address[0]
            self.url = public_url or f"http://{shown}:{address[1]}"
        self.recorder = Recorder(upstream, scenario_path, journal_path, classifier=classifier,
                                 fsync=fsync, allowed_hosts=own_hosts(self.url))
        self.journal = self.recorder.journal
        self._server = _StopQuietly(_uvicorn_config(
            self.recorder, on_refused=self.recorder.refused_by_transport))
        self._runner = ServerThread(self._server, self._socket, f"record:{self.url}",
                                    "the recorder")
        self._closed = False

    def serve_forever(self) -> None:
        """Serve in this thread until SIGINT or SIGTERM; then write the scenario."""
        try:
            self._server.run(sockets=[self._socket])
        finally:
            self._close()

    def start(self) -> RecordingProxy:
        self._runner.start()
        return self

    def stop(self) -> None:
        self._runner.stop()
        self._close()

    def _close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._socket.close()
        if self.uds is not None:
            self.uds.unlink(missing_ok=True)
        self.recorder.close()

    def __enter__(self) -> RecordingProxy:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def record(upstream: str, out: Path, *, host: str = "127.0.0.1", port: int = 0,
           classifier: str = "claude-code") -> int:
    """``loopprobe record``: serve until SIGINT/SIGTERM, then write the scenario; 2 when it
    cannot start (one line on stderr saying why)."""
    scenario_path, journal_path = out / "scenario.yaml", out / "journal.jsonl"
    if scenario_path.exists() or journal_path.exists():
        print(f"loopprobe record: {out} already holds a recording (scenario.yaml, "
              "journal.jsonl): choose another --out", file=sys.stderr)
        return 2
    try:
        proxy = RecordingProxy(upstream, scenario_path, journal_path, host=host, port=port,
                               classifier=classifier, fsync=True)
    except UpstreamError as error:
        print(f"loopprobe record: {error}", file=sys.stderr)
        return 2
    except NonLoopbackRefused:
        print(f"loopprobe record: refusing to bind {host!r}: the recorder listens on loopback "
              "only (127.0.0.1, ::1)", file=sys.stderr)
        return 2
    except (OSError, ValueError) as error:
        print(f"loopprobe record: cannot listen on {host}:{port}: {error}", file=sys.stderr)
        return 2
    print(f"loopprobe record: listening on {proxy.url}, forwarding to {proxy.recorder.upstream}"
          f"; writing {scenario_path} and {journal_path} (Ctrl-C to stop)", flush=True)
    proxy.serve_forever()
    rules = len(proxy.recorder.rules)
    print(f"loopprobe record: wrote {scenario_path} ({rules} rule(s)) and {journal_path}",
          flush=True)
    return 0
