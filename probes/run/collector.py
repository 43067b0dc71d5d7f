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
  Only a process the run's own launch started may claim the stream (its PID, from the
  socket, descends from the PID the runner registered, ``launched``): a process elsewhere on
  the host (another run's uncontained client, say) is refused and recorded as an outsider,
  before it could claim a run and keep its client from starting. Killing the first process
  ends the run (its PID namespace dies with it);
- hook calls and MCP events are reported by processes the client itself starts, so a client
  could add records of its own: they are the client's account, as its transcripts are.

Every line is capped (``LINE_LIMIT``), every stream too (``STREAM_LIMIT``), and all of
them together (``TOTAL_LIMIT``: a client could open many MCP streams; beyond, lines are
counted and dropped), and at most ``CONNECTION_LIMIT`` connections are served at once; each
refusal is a ``fault``, listed in the evidence.
"""

from __future__ import annotations

import json
import re
import socket
import socketserver
import struct
import threading
import time
from collections.abc import Mapping
from io import BufferedIOBase
from pathlib import Path
from types import TracebackType
from typing import Any

from probes.core.evidence import OUTSIDER_FAULT, POSER_FAULT
from probes.run.hook_policy import decide

__all__ = ["CONNECTION_LIMIT", "LAUNCH_WAIT", "LINE_LIMIT", "STREAM_LIMIT", "TOTAL_LIMIT",
           "Collector", "descends_from"]

LINE_LIMIT = 1024 * 1024
STREAM_LIMIT = 32 * 1024 * 1024
TOTAL_LIMIT = 128 * 1024 * 1024
CONNECTION_LIMIT = 128
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
# how long a claim waits for the runner to say which process it started (the first process
# can connect before Popen has returned in the runner's thread)
LAUNCH_WAIT = 10.0
# how many parents are followed up from a reporter (bwrap, its init, the first process: 3)
_ANCESTRY_DEPTH = 32


def _peer_pid(sock: socket.socket) -> int | None:
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        return None
    pid: int = struct.unpack("3i", raw)[0]
    return pid


def _parent(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    # "pid (comm) state ppid ...": comm is the process's own choice, so read after its end
    fields = stat[stat.rfind(b")") + 1:].split()
    try:
        return int(fields[1])
    except (IndexError, ValueError):
        return None


def descends_from(pid: int | None, ancestors: set[int]) -> bool:
    """Whether process ``pid`` is one of ``ancestors`` or started by one (its parents read
    from /proc, as this process's PID namespace numbers them)."""
    for _ in range(_ANCESTRY_DEPTH):
        if pid is None or pid <= 1:
            return False
        if pid in ancestors:
            return True
        pid = _parent(pid)
    return False


def _unproven(pid: int | None) -> str:
    """Why a reporter could not be shown to be of the run's launch."""
    if pid is None:
        return "the socket did not say which process it is"
    if _parent(pid) is None:
        return "gone before its parents could be read"
    return "not started by the process the run launched"


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
        if not collector._slots.acquire(blocking=False):
            collector._fault("connection", f"more than {CONNECTION_LIMIT} reporters at once: "
                                           "refused")
            return
        try:
            self._serve(collector)
        except OSError:
            pass
        finally:
            collector._slots.release()

    def _serve(self, collector: Collector) -> None:
        header = collector._parse(self.rfile, "header")
        stream = header.get("stream") if header else None
        if stream == "hook":
            collector._hook_call(self.rfile, self.wfile, _peer_pid(self.request))
        elif stream == "mcp" and isinstance(header, dict) and _NAME.match(
                str(header.get("run", ""))):
            collector._mcp_events(str(header["run"]), self.rfile)
        elif stream == "hook_run":
            collector._hook_run(self.rfile, _peer_pid(self.request))
        elif stream == "egress":
            collector._egress_reports(self.rfile, self.wfile, _peer_pid(self.request))
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
        self.hook_calls: list[dict[str, Any]] = []
        # the user's own hook commands, as hook_wrapper.py ran them (probes.inside.hook_wrapper)
        self.hook_runs: list[dict[str, Any]] = []
        self.mcp: dict[str, list[dict[str, Any]]] = {}
        self.egress: list[dict[str, Any]] = []
        self.faults: list[dict[str, Any]] = []
        # per run: what the sandbox's first process said at the end (e.g. /tmp full)
        self.run_ends: dict[str, dict[str, Any]] = {}
        self._reporter_done: dict[str, threading.Event] = {}
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(CONNECTION_LIMIT)
        self._sizes: dict[str, int] = {}
        self._total = 0
        self._dropped: dict[str, int] = {}
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
        with self._lock:
            for stream, dropped in sorted(self._dropped.items()):
                self._fault_locked(stream, f"{dropped} lines beyond the stream's "
                                           f"{STREAM_LIMIT} bytes (or all streams' "
                                           f"{TOTAL_LIMIT}) were dropped")
            self._dropped.clear()

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

    # ---- records ---------------------------------------------------------------------

    def _keep(self, stream: str, file_name: str, record: dict[str, Any],
              into: list[dict[str, Any]]) -> None:
        with self._lock:
            self._keep_locked(stream, file_name, record, into)

    def _keep_locked(self, stream: str, file_name: str, record: dict[str, Any],
                     into: list[dict[str, Any]]) -> None:
        line = json.dumps(record, sort_keys=True, ensure_ascii=False) + "\n"
        size = self._sizes.get(stream, 0) + len(line)
        if size > STREAM_LIMIT or self._total + len(line) > TOTAL_LIMIT:
            self._dropped[stream] = self._dropped.get(stream, 0) + 1
            return
        self._sizes[stream] = size
        self._total += len(line)
        into.append(record)
        with open(self.evidence / file_name, "a", encoding="utf-8") as out:
            out.write(line)

    def _fault(self, stream: str, what: str, *, run: str | None = None,
               kind: str = "refused") -> None:
        with self._lock:
            self._fault_locked(stream, what, run=run, kind=kind)

    def _fault_locked(self, stream: str, what: str, *, run: str | None = None,
                      kind: str = "refused") -> None:
        fault = {"time": time.time(), "stream": stream, "run": run or self._run, "kind": kind,
                 "fault": what}
        self.faults.append(fault)
        with open(self.evidence / "collector-faults.jsonl", "a", encoding="utf-8") as out:
            out.write(json.dumps(fault, sort_keys=True) + "\n")

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
        self._keep("egress", "egress.jsonl", dict(attempt), self.egress)

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
            seen = sum(1 for c in self.hook_calls if c.get("event") == event and "input" in c)
            decision, sleep = decide(self.hook_policy, event, payload, seen)
            self._keep_locked("hook", "hooks.jsonl",
                              {"event": event, "started": started, "pid": pid, "index": seen,
                               "input": payload, "decision": decision}, self.hook_calls)
        if sleep:
            time.sleep(sleep)
        self._keep("hook", "hooks.jsonl", {"event": event, "finished": time.time(), "pid": pid,
                                           "index": seen,
                                           "tool_use_id": payload.get("tool_use_id")},
                   self.hook_calls)
        wfile.write((json.dumps({"output": decision}) + "\n").encode())
        wfile.flush()

    def _hook_run(self, rfile: BufferedIOBase, pid: int | None) -> None:
        record = self._parse(rfile, "hook_run")
        if not isinstance(record, dict) or not isinstance(record.get("exit_code"), int):
            self._fault("hook_run", f"expected a hook run's record, got {record!r:.300}")
            return
        with self._lock:
            self._keep_locked("hook_run", "hook-runs.jsonl",
                              {**record, "pid": pid, "run": self._run}, self.hook_runs)

    def _mcp_events(self, run: str, rfile: BufferedIOBase) -> None:
        with self._lock:
            events = self.mcp.setdefault(run, [])
        while (event := self._parse(rfile, f"mcp:{run}")) is not None:
            if isinstance(event, dict):
                self._keep(f"mcp:{run}", f"mcp-{run}.jsonl", event, events)
            else:
                self._fault(f"mcp:{run}", f"expected an object, got {event!r:.300}")

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
                                  f"{_unproven(pid)}) was refused", kind=OUTSIDER_FAULT)
            return
        if run is None or claimed:
            # the client's act, refused: the run's own stream stays the first one's (whose
            # end line the runner requires), so it costs no evidence
            self._fault("egress", "a second egress reporter (a process inside the sandbox "
                                  f"posing as its first process, pid {pid}) was refused"
                        if claimed else "an egress reporter outside a run was refused",
                        kind=POSER_FAULT)
            return
        ended = False
        while (attempt := self._parse(rfile, "egress")) is not None:
            if isinstance(attempt, dict) and "end" in attempt:
                ended = True
                with self._lock:
                    self.run_ends[run] = attempt
                break
            if isinstance(attempt, dict):
                self._keep("egress", "egress.jsonl", attempt, self.egress)
        with self._lock:
            done = self._reporter_done.get(run)
        if done is not None:
            done.set()
        if not ended:  # the harness's own kill at a timeout does this too (see runner)
            self._fault("egress", f"run {run}: the sandbox's egress reporter was cut off "
                                  "before the run ended (killed?)", run=run, kind="cut_off")
