"""Everything one probe left behind, and lookups the checks use.

Checks read evidence only through this module, so a test can build an
``Evidence`` from saved artefacts, alter it, and watch a check fail.
Lookups never raise on missing data: they return None or empty values, and
the check that needed the data fails saying what it saw.

``Output`` is a client's printed events read as the common event protocol (Claude
Code's stream-json shapes: ``type``/``subtype``, ``message.content``, a final
``result``); every client kind prints or is translated to it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mockapi.journal.records import JournalRecord, RequestRecord
from probes.core.invocation import Invocation
from probes.core.safe_read import json_lines, nested_deeper_than
from probes.core.tally import NotKept

__all__ = ["CLIENT_FAULT", "FAULTS_NOT_KEPT", "LOST_FAULT", "MAX_EVENT_DEPTH", "OUTSIDER_FAULT",
           "POSER_FAULT", "PROTOCOL_FAULTS", "SANDBOX_REFUSALS", "Evidence", "Location",
           "Output", "RunRecord", "block_text", "blocks_of_type", "locate", "message_outline",
           "messages"]

# the kinds of a collector fault (Evidence.evidence_faults). The client's act, refused: a line
# of no known shape, a connection past the limit (its own reports are what it loses)
CLIENT_FAULT = "refused"
# a process posing as a reporter, refused: the client's act, costing no evidence
POSER_FAULT = "poser"
# a process outside the run (elsewhere on the host) reaching the run's collector, refused:
# not the client's act, and it cost no evidence
OUTSIDER_FAULT = "outsider"
# the harness's own: a record it could not write (any kind but these three is the harness's,
# as "cut_off": the sandbox's first process cut off before its run ended)
LOST_FAULT = "lost"
# what a cap on each kind of fault says it left out (probes.core.tally.NotKept.what)
FAULTS_NOT_KEPT = {CLIENT_FAULT: "client faults", POSER_FAULT: "poser faults",
                   OUTSIDER_FAULT: "outsider faults", LOST_FAULT: "harness faults"}
# what a streamed run's cap on its protocol faults says it left out (RunRecord.not_kept)
PROTOCOL_FAULTS = "protocol faults"
# what the cap on what the harness refused in a sandbox says it left out (Evidence.not_kept)
SANDBOX_REFUSALS = "sandbox refusals"
# a printed line nested deeper is kept unparsed: reports recurse into events, and a client's
# line must not exhaust that recursion (real events nest a few tens of levels at most)
MAX_EVENT_DEPTH = 128


@dataclass
class Output:
    """What a run printed, read as the common event protocol."""

    events: list[dict[str, Any]]
    unparsed: list[str]

    @property
    def result(self) -> dict[str, Any] | None:
        """The final result event; with several (background agents), the last one counts."""
        results = [e for e in self.events if e.get("type") == "result"]
        return results[-1] if results else None

    @property
    def session_id(self) -> str | None:
        """The session the client says it ran in: the result's, else the first event's."""
        found = (self.result or {}).get("session_id") or next(
            (e.get("session_id") for e in self.events if e.get("session_id")), None)
        return str(found) if found else None

    def tool_results(self) -> list[dict[str, Any]]:
        """The tool_result blocks the client printed (its own record of the tools it ran)."""
        return [b for e in self.of_type("user")
                for b in (e.get("message") or {}).get("content", []) or []
                if isinstance(b, dict) and b.get("type") == "tool_result"]

    def of_type(self, type_: str, subtype: str | None = None) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("type") == type_
                and (subtype is None or e.get("subtype") == subtype)]

    @classmethod
    def from_json_lines(cls, stdout: str) -> Output:
        events: list[dict[str, Any]] = []
        unparsed: list[str] = []
        for line in json_lines(stdout):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except (ValueError, RecursionError):
                unparsed.append(line)
                continue
            if isinstance(value, dict) and not nested_deeper_than(value, MAX_EVENT_DEPTH):
                events.append(value)
            else:
                unparsed.append(line)
        return cls(events, unparsed)


@dataclass
class RunRecord:
    name: str
    invocation: Invocation
    argv: list[str]
    env: dict[str, str]
    exit_code: int | None
    timed_out: bool
    duration: float
    stdout: str
    stderr: str
    output: Output
    session_id: str | None
    seqs: tuple[int, int]  # journal seq range (first, last] of requests made during the run
    pid: int = 0
    started: float = 0.0  # wall-clock time the client process was started (time.time())
    files_changed: dict[str, dict[str, str | None]] = field(default_factory=dict)
    # a streamed run: what the caller wrote to stdin (and why), and the steps never written
    stdin: list[dict[str, Any]] = field(default_factory=list)
    client: dict[str, Any] | None = None  # the binary, when not the probe's own version
    stdin_pending: list[dict[str, Any]] = field(default_factory=list)
    stdout_dropped: int = 0  # bytes printed beyond what was kept (probes.run.pipes.OUTPUT_CAP)
    stderr_dropped: int = 0
    stopped: str | None = None  # why the harness stopped the run before its end
    # the sandbox's bounds this run reached ({bound, limit, observed, how}: probes.run.bounds)
    bounds_hit: list[dict[str, Any]] = field(default_factory=list)
    # control requests of a shape the protocol does not have (probes.core.streamed): the client's
    protocol_faults: list[dict[str, Any]] = field(default_factory=list)
    # what the run's records left out past their caps (probes.core.tally.NotKept): protocol
    # faults, unscripted requests, the stdin transcript
    not_kept: list[NotKept] = field(default_factory=list)

    @property
    def result(self) -> dict[str, Any] | None:
        return self.output.result

    def last_events(self, count: int = 5) -> list[str]:
        return [f"{e.get('type')}/{e.get('subtype')}" if e.get("subtype") else str(e.get("type"))
                for e in self.output.events[-count:]]


@dataclass
class Evidence:
    probe: str
    client: dict[str, Any]
    runs: dict[str, RunRecord]
    journal: list[JournalRecord]
    hook_calls: list[dict[str, Any]] = field(default_factory=list)
    # the user's own hook commands as they ran (probes.inside.hook_wrapper): event, input,
    # exit code, stdout, stderr, duration
    hook_runs: list[dict[str, Any]] = field(default_factory=list)
    # what copying the user's setup in did (hooks wrapped, a hooks file left as it was)
    setup_notes: list[str] = field(default_factory=list)
    session_files: dict[str, str] = field(default_factory=dict)  # relative path -> text
    workspace_files: dict[str, str] = field(default_factory=dict)
    # workspace files too large to keep whole (path -> size): they exist, unread
    workspace_large_files: dict[str, int] = field(default_factory=dict)
    torn_journal: str | None = None
    # what the harness's MCP server served, per run given one (probes.inside.mcp_server's log)
    mcp_calls: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    placeholders: dict[str, str] = field(default_factory=dict)  # real path -> $NAME
    mock_url: str = ""
    egress: list[dict[str, Any]] = field(default_factory=list)  # connections the guard refused
    egress_guarded: bool = False
    containment: dict[str, Any] = field(default_factory=dict)  # how the runs were contained
    # "$WORKSPACE" -> the path the client saw (in a sandbox: /sandbox/workspace)
    client_paths: dict[str, str] = field(default_factory=dict)
    # what the harness would not read in the client's sandbox ({path, found}): a link, a FIFO,
    # a hard link, a file cut at its size limit -- the client's doing
    sandbox_refusals: list[dict[str, str]] = field(default_factory=list)
    # invocations never started, and why (a path their files go to made unusable by the
    # client in an earlier run)
    runs_not_started: dict[str, str] = field(default_factory=dict)
    # what the collector refused or cut, by kind: CLIENT_FAULT (the client's act: a line of no
    # known shape, a connection past the limit), POSER_FAULT (a process posing as a reporter,
    # the client's act, costing no evidence), OUTSIDER_FAULT (a process outside the run
    # reaching its collector, refused, costing none); any other, the harness's evidence lost
    # (a reporter cut off, a record not written); the first of each kind per run
    evidence_faults: list[dict[str, Any]] = field(default_factory=list)
    # what the collector's records and faults, and the sandbox's refusals, left out past their
    # caps, per kind and run (probes.core.tally.NotKept: "and 399,872 more, 54 MiB, not kept")
    not_kept: list[NotKept] = field(default_factory=list)
    # static evidence, for the strings the probe names (Probe.client_mentions): whether the
    # installed client's files mention each ({"binary_sha256", "files", "found": {s: bool}})
    client_mentions: dict[str, Any] = field(default_factory=dict)
    # journal seqs the checks looked up since the last take_reads(): which lines a check read
    _reads: set[int] = field(default_factory=set, repr=False, compare=False)

    def take_reads(self) -> list[int]:
        """The seqs of the requests looked up since the last call, and forget them."""
        reads, self._reads = sorted(self._reads), set()
        return reads

    def _seen(self, records: list[RequestRecord]) -> list[RequestRecord]:
        self._reads.update(r["seq"] for r in records)
        return records

    def mentions(self, needle: str) -> bool | None:
        """Whether the installed client's files mention ``needle`` (static evidence); None
        when it was not looked up."""
        found = (self.client_mentions.get("found") or {}).get(needle)
        return found if isinstance(found, bool) else None

    def path(self, placeholder: str) -> str:
        """The path behind a placeholder such as ``$WORKSPACE``, as the client saw it."""
        if placeholder in self.client_paths:
            return self.client_paths[placeholder]
        return next((real for real, name in self.placeholders.items() if name == placeholder),
                    placeholder)

    def all_requests(self) -> list[RequestRecord]:
        """Every recorded request, any path, in arrival order."""
        return self._seen(self._all_requests())

    def _all_requests(self) -> list[RequestRecord]:
        return [r for r in self.journal if r["type"] == "request"]

    def run_of(self, seq: int) -> str | None:
        """The run during which the request ``seq`` arrived."""
        return next((name for name, run in self.runs.items()
                     if run.seqs[0] < seq <= run.seqs[1]), None)

    def requests(self, run: str | None = None, kind: str | None = "main",
                 path: str = "/v1/messages") -> list[RequestRecord]:
        """Recorded requests, in arrival order, optionally only those made during ``run``."""
        if run is not None and run not in self.runs:
            return []  # a misspelt run name must not read the whole journal
        low, high = self.runs[run].seqs if run is not None else (0, 1 << 62)
        return self._seen([r for r in self._all_requests() if r.get("path") == path
                           and (kind is None or r.get("kind") == kind)
                           and low < r.get("seq", 0) <= high])

    def request(self, run: str | None, index: int,
                kind: str | None = "main") -> Mapping[str, Any]:
        """The ``index``-th request of a run (negative from the end), or {} if there is none."""
        found = self.requests(run, kind)
        return found[index] if -len(found) <= index < len(found) else {}

    def run(self, name: str) -> RunRecord | None:
        return self.runs.get(name)

    def transcript(self, session_id: str | None) -> list[dict[str, Any]]:
        if not session_id:
            return []
        for path, text in self.session_files.items():
            if path.endswith(f"{session_id}.jsonl") and "/subagents/" not in path:
                return _json_lines(text)
        return []

    def hooks(self, event: str) -> list[dict[str, Any]]:
        return [h for h in self.hook_calls if h.get("event") == event and "input" in h]


def _json_lines(text: str) -> list[dict[str, Any]]:
    entries = []
    for line in json_lines(text):
        try:
            value = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict):
            entries.append(value)
    return entries


def messages(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    body = record.get("body")
    found = body.get("messages") if isinstance(body, dict) else None
    return [m for m in found if isinstance(m, dict)] if isinstance(found, list) else []


def block_text(block: Any) -> str:
    """All text inside one content block (tool_result content included)."""
    if isinstance(block, str):
        return block
    if not isinstance(block, dict):
        return ""
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind == "tool_result":
        content = block.get("content")
        if isinstance(content, list):
            return "\n".join(block_text(b) for b in content)
        return str(content or "")
    if kind == "tool_use":
        return json.dumps(block.get("input"), sort_keys=True)
    if kind == "thinking":
        return str(block.get("thinking", ""))
    return ""


@dataclass(frozen=True)
class Location:
    message: int
    block: int
    role: str
    type: str

    def __str__(self) -> str:
        return f"messages[{self.message}].content[{self.block}] ({self.role} {self.type})"


def locate(record: Mapping[str, Any], needle: str) -> list[Location]:
    """Where ``needle`` occurs in a request's messages, block by block."""
    found = []
    for m_index, message in enumerate(messages(record)):
        content = message.get("content")
        blocks = [content] if isinstance(content, str) else content
        if not isinstance(blocks, list):
            continue
        for b_index, block in enumerate(blocks):
            if needle in block_text(block):
                kind = block.get("type", "?") if isinstance(block, dict) else "string"
                found.append(Location(m_index, b_index, str(message.get("role")), kind))
    return found


def blocks_of_type(record: Mapping[str, Any], kind: str) -> list[tuple[int, dict[str, Any]]]:
    found = []
    for m_index, message in enumerate(messages(record)):
        content = message.get("content")
        if isinstance(content, list):
            found += [(m_index, b) for b in content if isinstance(b, dict) and b.get("type") == kind]
    return found


def message_outline(record: Mapping[str, Any]) -> list[str]:
    """A one-line-per-message view of a request: role and block types with short text."""
    outline = []
    for message in messages(record):
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        parts = []
        for block in blocks if isinstance(blocks, list) else []:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "tool_use":
                parts.append(f"tool_use {block.get('name')} {block.get('id')}")
            elif kind == "tool_result":
                parts.append(f"tool_result {block.get('tool_use_id')}"
                             + (" is_error" if block.get("is_error") else ""))
            elif kind == "text" and block_text(block).lstrip().startswith("<system-reminder>"):
                parts.append("system-reminder")  # context the client injects, not the prompt
            else:
                text = block_text(block).strip().replace("\n", " ")
                parts.append(f"{kind} {text[:60]!r}")
        outline.append(f"{message.get('role')}: " + " | ".join(parts))
    return outline
