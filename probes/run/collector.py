"""What processes inside a run report to the harness, received on a Unix socket and kept by
the harness where the client cannot reach: hook calls, the MCP server's log, egress attempts.

The client can write everything in its sandbox, so no evidence is kept there. Three reporters
run inside: the hook relay (``hook_recorder.py``, one connection per hook call: the call is
recorded here, answered by the probe's policy, ``probes.run.hook_policy``), the harness's MCP
server (``mcp_server.py``: one JSON line per event) and the sandbox's first process
(``sandbox_init.py``: one line per refused egress attempt). Each connection starts with one
line naming its stream: ``{"stream": "hook"}``, ``{"stream": "mcp", "run": NAME}`` or
``{"stream": "egress"}``.

What the reports can be trusted for, and what not:

- the records are appended on the host as they arrive: nothing inside can erase or rewrite
  one already received;
- egress: the sandbox's first process connects before the client starts, and one egress
  reporter is accepted per run; a later one is refused and recorded as a forging attempt.
  Only a process the run's own launch started may claim the stream (``probes.run.ancestry``:
  its PID, from the socket, descends from the PID the runner registered, ``launched``): a
  process elsewhere on the host (another run's uncontained client, say) is refused and
  recorded as an outsider, before it could claim a run and keep its client from starting.
  Killing the first process ends the run (its PID namespace dies with it);
- hook calls and MCP events are reported by processes the client itself starts, so a client
  could add records of its own: they are the client's account, as its transcripts are.

Every line is capped (``LINE_LIMIT``), every kind of record and fault per run
(``probes.run.collected``: the first kept, the rest counted), and at most
``CONNECTION_LIMIT`` connections are served at once, the next refused as the client's act;
one more slot is kept for the egress claim of a run not yet claimed, so connections still
held (a run's client's, not yet seen closed) never keep the next run's first process out.
"""

from __future__ import annotations

import json
import re
import socketserver
import threading
import time
from collections.abc import Mapping
from io import BufferedIOBase
from pathlib import Path
from types import TracebackType
from typing import Any

from probes.core.evidence import CLIENT_FAULT, OUTSIDER_FAULT, POSER_FAULT
from probes.core.tally import NotKept
from probes.run.ancestry import descends_from, peer_pid, unproven
from probes.run.collected import (
    EGRESS_ATTEMPTS,
    HOOK_CALLS,
    HOOK_RUNS,
    Collected,
)
from probes.run.hook_policy import decide

__all__ = ["CONNECTION_LIMIT", "LAUNCH_WAIT", "LINE_LIMIT", "Collector", "descends_from"]

LINE_LIMIT = 1024 * 1024
CONNECTION_LIMIT = 128
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
# how long a claim waits for the runner to say which process it started (the first process
# can connect before Popen has returned in the runner's thread)
LAUNCH_WAIT = 10.0
# hook event names counted apart (for a policy's ``times``); a client's made-up names past
# these share no count
_EVENT_NAMES = 64
_REFUSED = f"more than {CONNECTION_LIMIT} reporters at once: refused"


def _read_line(stream: BufferedIOBase) -> tuple[bytes, bool]:
    """One line of at most ``LINE_LIMIT`` bytes (the rest of a longer one is skipped), and
    whether it was cut."""
    line = stream.readline(LINE_LIMIT + 1)
    if len(line) <= LINE_LIMIT or line.endswith(b"\n"):
        return line, False
    while (more := stream.readline(LINE_LIMIT)) and not more.endswith(b"\n"):
        pass
    return line[:LINE_LIMIT], True


class _Handler(socketserver.StreamRequestHandler):
    server: _Server

    def handle(self) -> None:
        collector = self.server.collector
        reserved = collector._take_slot()
        if reserved is None:
            collector._fault("connection", _REFUSED)
            return
        try:
            self._serve(collector, reserved)
        except OSError:
            pass
        finally:
            collector._give_slot(reserved)

    def _serve(self, collector: Collector, reserved: bool) -> None:
        header = collector._parse(self.rfile, "header")
        stream = header.get("stream") if isinstance(header, dict) else None
        if reserved and stream != "egress":  # the reserved slot is for the run's claim only
            collector._fault("connection", _REFUSED)
        elif stream == "hook":
            collector._hook_call(self.rfile, self.wfile, peer_pid(self.request))
        elif stream == "mcp" and isinstance(header, dict) and _NAME.match(
                str(header.get("run", ""))):
            collector._mcp_events(str(header["run"]), self.rfile)
        elif stream == "hook_run":
            collector._hook_run(self.rfile, peer_pid(self.request))
        elif stream == "egress":
            collector._egress_reports(self.rfile, self.wfile, peer_pid(self.request))
        elif header is not None:
            collector._fault("header", "expected {\"stream\": \"hook\" | \"hook_run\" | \"mcp\" "
                                       f"(with a simple run name) | \"egress\"}}, got {header!r:.300}")


class _Server(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True
    request_queue_size = CONNECTION_LIMIT  # concurrent hook calls (parallel tools) queue
    collector: Collector


class Collector:
    """Listens on ``socket_path``; appends what arrives to files in ``evidence`` (a folder
    the client cannot reach) and keeps it for the run's evidence."""

    def __init__(self, socket_path: Path, evidence: Path,
                 hook_policy: Mapping[str, Any] | None = None):
        self.socket_path = socket_path
        self.evidence = evidence
        self.hook_policy = dict(hook_policy or {})
        self._kept = Collected(evidence)
        self._lock = self._kept.lock
        self.hook_calls = self._kept.hook_calls
        self.hook_runs = self._kept.hook_runs
        self.mcp = self._kept.mcp
        self.egress = self._kept.egress
        self.faults = self._kept.faults
        # per run: what the sandbox's first process said at the end (e.g. /tmp full)
        self.run_ends: dict[str, dict[str, Any]] = {}
        self._reporter_done: dict[str, threading.Event] = {}
        self._serving = 0  # connections served in the shared slots
        self._reserved = False  # the slot kept for an unclaimed run's egress claim is taken
        self._hook_seen: dict[str, int] = {}  # hook calls per event name, kept or not
        self._run: str | None = None
        self._claimed_runs: set[str] = set()  # runs whose egress stream is claimed
        self._launchers: dict[str, int] = {}  # run -> the PID its runner started
        self._launched = threading.Condition(self._lock)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # ---- life ------------------------------------------------------------------------

    def start(self) -> Collector:
        self._server = _Server(str(self.socket_path), _Handler)
        self._server.collector = self
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.1}, daemon=True,
                                        name="collector")
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None
        self._kept.write_not_kept()

    def __enter__(self) -> Collector:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def begin_run(self, name: str) -> None:
        """A run starts: its sandbox's first process may claim the egress stream, once."""
        with self._lock:
            self._run = name
            self._reporter_done[name] = threading.Event()

    def launched(self, name: str, pid: int) -> None:
        """The runner started run ``name`` as process ``pid``: its egress reporter must be that
        process or one it started."""
        with self._launched:
            self._launchers[name] = pid
            self._launched.notify_all()

    def run_end(self, name: str, timeout: float = 3.0) -> dict[str, Any]:
        """What the run's egress reporter said last (its ``end`` line), once its stream is
        read to the end (``{}``: none came within ``timeout``, or the run had none)."""
        with self._lock:
            done = self._reporter_done.get(name) if name in self._claimed_runs else None
        if done is not None:
            done.wait(timeout)
        with self._lock:
            return dict(self.run_ends.get(name, {}))

    def claimed(self, name: str) -> bool:
        """Whether the run's egress stream was claimed (its first process started the client)."""
        with self._lock:
            return name in self._claimed_runs

    def end_run(self) -> None:
        with self._lock:
            self._run = None

    def not_kept(self) -> list[NotKept]:
        """What the records and faults left out past their caps, per kind and run."""
        return self._kept.not_kept()

    def serving(self) -> int:
        """How many connections are being served now."""
        with self._lock:
            return self._serving + self._reserved

    # ---- connections -----------------------------------------------------------------

    def _take_slot(self) -> bool | None:
        """A slot to serve a connection in: a shared one (False), the one kept for the egress
        claim of a run under way and not yet claimed (True), or none."""
        with self._lock:
            if self._serving < CONNECTION_LIMIT:
                self._serving += 1
                return False
            if not self._reserved and self._run is not None \
                    and self._run not in self._claimed_runs:
                self._reserved = True
                return True
            return None

    def _give_slot(self, reserved: bool) -> None:
        with self._lock:
            if reserved:
                self._reserved = False
            else:
                self._serving -= 1

    # ---- records ---------------------------------------------------------------------

    def _fault(self, stream: str, what: str, *, run: str | None = None,
               kind: str = CLIENT_FAULT) -> None:
        with self._lock:
            self._kept.fault(stream, what, run or self._run, kind)

    def _parse(self, stream: BufferedIOBase, what: str) -> Any:
        line, cut = _read_line(stream)
        if not line:
            return None
        if cut:
            self._fault(what, f"a line over {LINE_LIMIT} bytes was cut and not read")
            return None
        try:
            return json.loads(line)
        except ValueError:
            self._fault(what, f"not JSON: {line[:300]!r}")
            return None

    def record_egress(self, attempt: Mapping[str, Any]) -> None:
        """An attempt seen on the host (an uncontained run's proxy)."""
        with self._lock:
            self._kept.keep(EGRESS_ATTEMPTS, self._run, "egress.jsonl", dict(attempt),
                            self.egress)

    # ---- streams ---------------------------------------------------------------------

    def _hook_call(self, rfile: BufferedIOBase, wfile: BufferedIOBase, pid: int | None) -> None:
        message = self._parse(rfile, "hook")
        if not isinstance(message, dict) or not isinstance(message.get("stdin"), str):
            self._fault("hook", f"expected {{\"stdin\": TEXT}}, got {message!r:.300}")
            return
        started = time.time()
        try:
            payload = json.loads(message["stdin"])
        except ValueError:
            payload = None
        if not isinstance(payload, dict):
            payload = {"unparsed_stdin": message["stdin"][:LINE_LIMIT]}
        event = str(payload.get("hook_event_name", "unknown"))
        with self._lock:  # counted and kept at once: concurrent calls get distinct indexes
            seen = self._hook_seen.get(event, 0)
            if event in self._hook_seen or len(self._hook_seen) < _EVENT_NAMES:
                self._hook_seen[event] = seen + 1
            decision, sleep = decide(self.hook_policy, event, payload, seen)
            run = self._run
            self._kept.keep(HOOK_CALLS, run, "hooks.jsonl",
                            {"event": event, "started": started, "pid": pid, "index": seen,
                             "input": payload, "decision": decision}, self.hook_calls)
        if sleep:
            time.sleep(sleep)
        with self._lock:
            self._kept.keep(HOOK_CALLS, run, "hooks.jsonl",
                            {"event": event, "finished": time.time(), "pid": pid,
                             "index": seen, "tool_use_id": payload.get("tool_use_id")},
                            self.hook_calls)
        wfile.write((json.dumps({"output": decision}) + "\n").encode())
        wfile.flush()

    def _hook_run(self, rfile: BufferedIOBase, pid: int | None) -> None:
        record = self._parse(rfile, "hook_run")
        if not isinstance(record, dict) or not isinstance(record.get("exit_code"), int):
            self._fault("hook_run", f"expected a hook run's record, got {record!r:.300}")
            return
        with self._lock:
            self._kept.keep(HOOK_RUNS, self._run, "hook-runs.jsonl",
                            {**record, "pid": pid, "run": self._run}, self.hook_runs)

    def _mcp_events(self, name: str, rfile: BufferedIOBase) -> None:
        while (event := self._parse(rfile, f"mcp:{name}")) is not None:
            if isinstance(event, dict):
                with self._lock:  # every stream of the run under way shares its cap
                    self._kept.keep_mcp(name, self._run, event)
            else:
                self._fault(f"mcp:{name}", f"expected an object, got {event!r:.300}")

    def _egress_reports(self, rfile: BufferedIOBase, wfile: BufferedIOBase,
                        pid: int | None) -> None:
        with self._launched:
            run = self._run
            if run is not None:
                self._launched.wait_for(lambda: run in self._launchers, LAUNCH_WAIT)
            if run is None:  # between runs: any run's launch may still be reporting
                launchers = set(self._launchers.values())
            elif run in self._launchers:
                launchers = {self._launchers[run]}
            else:  # the run's launch was never named: nothing descends from it
                launchers = set()
        outsider = not descends_from(pid, launchers)
        with self._lock:
            claimed = run in self._claimed_runs
            if run is not None and not outsider:
                self._claimed_runs.add(run)
        # the answer the reporter waits for before it starts the client: the stream is
        # claimed for this run while the run is under way, however late this thread is
        # scheduled (a machine under load), never for the run after it
        try:
            wfile.write((json.dumps({"claimed": None if claimed or outsider else run})
                         + "\n").encode())
            wfile.flush()
        except OSError:
            pass
        if outsider:
            # not of this run's launch: nothing the client did, and refused before it could
            # claim the run (which would keep the run's own first process from starting it)
            self._fault("egress", f"an egress reporter from outside the run (pid {pid}: "
                                  f"{unproven(pid)}) was refused", run=run, kind=OUTSIDER_FAULT)
            return
        if run is None or claimed:
            # the client's act, refused: the run's own stream stays the first one's (whose
            # end line the runner requires), so it costs no evidence
            self._fault("egress", "a second egress reporter (a process inside the sandbox "
                                  f"posing as its first process, pid {pid}) was refused"
                        if claimed else "an egress reporter outside a run was refused",
                        run=run, kind=POSER_FAULT)
            return
        self._egress_stream(run, rfile)

    def _egress_stream(self, run: str, rfile: BufferedIOBase) -> None:
        """The claimed stream of ``run``, read to its end line (or until it is cut off)."""
        ended = False
        while (attempt := self._parse(rfile, "egress")) is not None:
            if isinstance(attempt, dict) and "end" in attempt:
                ended = True
                with self._lock:
                    self.run_ends[run] = attempt
                break
            if isinstance(attempt, dict):
                with self._lock:
                    self._kept.keep(EGRESS_ATTEMPTS, run, "egress.jsonl", attempt, self.egress)
        with self._lock:
            done = self._reporter_done.get(run)
        if done is not None:
            done.set()
        if not ended:  # the harness's own kill at a timeout does this too (see runner)
            self._fault("egress", f"run {run}: the sandbox's egress reporter was cut off "
                                  "before the run ended (killed?)", run=run, kind="cut_off")
