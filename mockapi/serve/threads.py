"""Message threads (beta ``message-threads-2026-08-12``): the conversation the API keeps for a
client that sends only each turn's new messages.

As the Messages API docs ("Message threads") describe it: a request with
``"thread": {"type": "create"}`` sends the whole conversation, ``system`` and ``tools``,
and the API keeps them with the reply under the reply's ``id``; a request with
``"thread": {"type": "continue", "previous_message_id": ID}`` sends only the messages
since that reply and leaves ``system`` and ``tools`` out; the API rebuilds the whole
conversation before the model sees it. A thread expires 5 minutes after its last
request (each stored reply restarts the 5 minutes); a continue that finds no thread is
answered 404 ``not_found_error`` with ``details.error_code: "thread_not_found"``, and
the client replays the whole conversation with a new ``create``. A reply can be
continued once (400 ``thread_already_continued``), and not while another continue from
it is being answered (400 ``thread_continue_in_flight``).

The mock does the same before any rule sees the request: it classifies, matches,
validates and counts turns on the rebuilt conversation, so a continue is the same turn
to a scenario as the whole conversation sent again. The journal keeps the body exactly
as sent and adds the rebuilt view (``thread``: what was sent, what the thread supplied,
and the seq that stored it).

Chosen where the docs are silent (the SDKs' error classes give the codes): the beta must
be named in ``anthropic-beta`` (else 400); ``system`` or ``tools`` in a continue is
refused with 400 ``invalid_request_error`` (the SDK helpers never send them); a reply is
kept only when it is a scripted message that plays whole (an error, a no-rule 400 or a
stream with a scripted fault keeps nothing, and the reply it continued from can be
continued again); ``model``, ``max_tokens`` and the other fields are not compared across
turns (no ``thread_fingerprint_mismatch``), and no request is refused as
``thread_unsupported_request``. A scenario sets ``thread_idle_seconds`` (default 300)
and a reply with ``expire_thread: true`` is not kept (its continue gets the 404). And,
so that one client cannot reach or crowd out another's threads:

- a thread belongs to the API key that created it (``x-api-key`` and ``authorization``
  together; the store keeps a hash, never the key): a continue with another key gets the
  very 404 ``thread_not_found`` of a thread that does not exist, so it learns nothing;
- reply ids are unguessable by default (``msg_loopprobe_<seq>_<24 random hex>``); a
  scenario's ``message_ids: sequential`` gives ``msg_loopprobe_<seq>`` (the harness sets
  it: its evidence must reproduce byte for byte, and a seed written beside a probe would be
  no secret either; what protects a thread is its key);
- a reply id names one stored reply per key: a scripted ``id`` that a live thread of the
  same key already holds is not stored for a second thread, and the id is held by neither
  from then on (a continue from it gets the 404 and the client replays; neither thread
  can be continued into the other's conversation); within one thread a newer reply takes
  the id over, as a scripted id repeated turn after turn needs;
- the store is bounded: at most ``max_threads`` live threads (1024) and ``max_bytes`` of
  stored conversation (64 MiB, counted as the request bodies and reply contents kept).
  Beyond either the least recently used threads are dropped (their continue gets the
  404, which the SDKs answer by replaying the conversation); a reply that alone exceeds
  ``max_bytes`` is not kept;
- expiry is swept on every request, oldest first: threads are kept in order of last use,
  so a sweep costs what it removes, and ``GET /_mock/state`` never walks expired threads.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn

import orjson

from mockapi.check.requests import BadRequest
from mockapi.journal.records import OUTCOME_INVALID_REQUEST, OUTCOME_THREAD_NOT_FOUND, Outcome

__all__ = ["CREATE_ONLY_FIELDS", "MAX_THREADS", "MAX_THREAD_BYTES", "THREADS_BETA",
           "THREAD_IDLE_SECONDS", "PendingTurn", "ThreadRefused", "Threads", "message_id"]

THREADS_BETA = "message-threads-2026-08-12"
THREAD_IDLE_SECONDS = 300.0
CREATE_ONLY_FIELDS = ("system", "tools")
MAX_THREADS = 1024
MAX_THREAD_BYTES = 64 * 1024 * 1024


def message_id(seq: int, message_ids: str) -> str:
    """The id of the mock's reply to request ``seq`` (a scenario's ``message_ids``)."""
    if message_ids == "sequential":
        return f"msg_loopprobe_{seq:06d}"
    return f"msg_loopprobe_{seq:06d}_{secrets.token_hex(12)}"


def _owner(headers: Mapping[str, str]) -> str:
    """Who a thread belongs to: a hash of the request's API key headers."""
    key = f"{headers.get('x-api-key', '')}\n{headers.get('authorization', '')}"
    return hashlib.blake2b(key.encode("utf-8", "surrogateescape"), digest_size=16).hexdigest()


class ThreadRefused(BadRequest):
    """A thread request the API refuses, with the ``error.details`` its SDKs read."""

    def __init__(self, status: int, error_type: str, message: str, error_code: str,
                 view: dict[str, Any]):
        outcome: Outcome = OUTCOME_THREAD_NOT_FOUND if status == 404 \
            else OUTCOME_INVALID_REQUEST
        super().__init__(status, error_type, message, outcome)
        self.details = {"error_code": error_code}
        self.view = view  # journaled: what the refused request asked for


@dataclass(eq=False)
class _Thread:
    number: int
    owner: str
    system: Any
    tools: Any
    has_system: bool
    has_tools: bool
    last_used: float
    turns: int = 0
    latest: str | None = None  # the id of its newest stored reply
    reply_ids: list[str] = field(default_factory=list)
    bytes: int = 0
    ended: bool = False


@dataclass(eq=False)
class _StoredReply:
    thread: _Thread
    messages: list[Any]  # the whole conversation up to and including this reply
    seq: int
    continued: bool = False
    in_flight: bool = False
    shared: bool = False  # its id was scripted for another thread too: held by neither


@dataclass
class PendingTurn:
    """A thread request being answered: ``keep`` stores its reply, ``drop`` keeps nothing."""

    threads: Threads
    thread: _Thread | None  # None: a create (the thread is made when the reply is kept)
    previous: _StoredReply | None
    messages: list[Any]
    fields: dict[str, Any]
    seq: int
    view: dict[str, Any] = field(default_factory=dict)
    done: bool = False
    owner: str = ""
    size: int = 0  # the request's body: what storing this turn adds, with the reply

    def keep(self, message_id: str, content: list[Any]) -> None:
        if self.done:
            return
        self.done = True
        self.threads.store(self, message_id, content)

    def drop(self) -> None:
        if self.done:
            return
        self.done = True
        if self.previous is not None:
            self.previous.in_flight = False

    def expire(self) -> None:
        """Keep nothing and end the thread (a scripted expiry)."""
        self.drop()
        if self.thread is not None:
            self.threads.expire(self.thread)


class Threads:
    """The live threads of one mock, by owner and the id of each reply they keep."""

    def __init__(self, idle_seconds: float = THREAD_IDLE_SECONDS,
                 clock: Callable[[], float] = time.monotonic, *,
                 max_threads: int = MAX_THREADS, max_bytes: int = MAX_THREAD_BYTES):
        self.clock = clock
        self.idle_seconds = idle_seconds
        self.max_threads, self.max_bytes = max_threads, max_bytes
        self._replies: dict[tuple[str, str], _StoredReply] = {}
        self._by_use: OrderedDict[int, _Thread] = OrderedDict()  # least recently used first
        self._made = 0
        self.bytes = 0  # stored, over the live threads
        self.evicted = self.expired = self.not_kept = 0

    def open(self, body: dict[str, Any], headers: Mapping[str, str], seq: int,
             size: int = 0) -> tuple[dict[str, Any], PendingTurn]:
        """The body with the whole conversation, and the turn to settle once answered
        (``size``: the request body's, counted against ``max_bytes`` if it is kept).

        Raises ``BadRequest`` (a malformed ``thread``, a missing beta) or ``ThreadRefused``."""
        self.sweep()
        thread = body["thread"]
        betas = {b.strip() for b in headers.get("anthropic-beta", "").split(",")}
        if THREADS_BETA not in betas:
            _refuse(f"thread: requires the beta header anthropic-beta: {THREADS_BETA}, got "
                    f"{headers.get('anthropic-beta', 'none')!r}")
        kind = thread.get("type") if isinstance(thread, dict) else None
        fields = {k: v for k, v in body.items() if k != "thread"}
        owner = _owner(headers)
        if kind == "create" and isinstance(thread, dict) and set(thread) == {"type"}:
            pending = PendingTurn(self, None, None, list(body["messages"]), {}, seq,
                                  {"type": "create"}, owner=owner, size=size)
            pending.fields = {f: body[f] for f in CREATE_ONLY_FIELDS if f in body}
            return fields, pending
        if kind != "continue" or not isinstance(thread.get("previous_message_id"), str) \
                or set(thread) != {"type", "previous_message_id"}:
            _refuse(f"thread: expected {{\"type\": \"create\"}} or {{\"type\": \"continue\", "
                    f"\"previous_message_id\": \"...\"}}, got {_short(thread)}")
        given = [f for f in CREATE_ONLY_FIELDS if f in body]
        if given:
            _refuse(f"{given[0]}: not allowed with thread continue: the thread keeps the value "
                    "of its create request; replay the whole conversation with "
                    "thread {\"type\": \"create\"} to change it")
        previous_id = thread["previous_message_id"]
        asked = {"type": "continue", "previous_message_id": previous_id,
                 "messages_sent": len(body["messages"])}
        previous = self._replies.get((owner, previous_id))
        if previous is None or previous.shared:  # another key's thread is not found either
            raise ThreadRefused(404, "not_found_error",
                                f"thread: no thread holds previous_message_id {previous_id!r} "
                                "(never created, expired, or deleted); replay the whole "
                                "conversation with thread {\"type\": \"create\"}",
                                "thread_not_found", asked)
        if previous.continued:
            raise ThreadRefused(400, "invalid_request_error",
                                f"thread: the response {previous_id!r} has already been "
                                f"continued; continue from the thread's most recent response "
                                f"id {previous.thread.latest!r}", "thread_already_continued",
                                asked)
        if previous.in_flight:
            raise ThreadRefused(400, "invalid_request_error",
                                f"thread: another request is still continuing from "
                                f"{previous_id!r}", "thread_continue_in_flight", asked)
        previous.in_flight = True
        stored = previous.thread
        self._touch(stored)
        messages = [*previous.messages, *body["messages"]]
        rebuilt = dict(fields, messages=messages)
        if stored.has_system:
            rebuilt["system"] = stored.system
        if stored.has_tools:
            rebuilt["tools"] = stored.tools
        view = {"type": "continue", "previous_message_id": previous_id,
                "thread": stored.number, "stored_by_seq": previous.seq,
                "messages_stored": len(previous.messages),
                "messages_sent": len(body["messages"]),
                "from_thread": [f for f in CREATE_ONLY_FIELDS
                                if getattr(stored, f"has_{f}")]}
        return rebuilt, PendingTurn(self, stored, previous, messages, {}, seq, view,
                                    owner=owner, size=size)

    def store(self, pending: PendingTurn, message_id: str, content: list[Any]) -> None:
        """Keep ``pending``'s reply under ``message_id``, or keep nothing (see the module
        docstring: an ended thread, a reply over ``max_bytes``, an id another thread holds)."""
        self.sweep()
        previous, thread = pending.previous, pending.thread
        if previous is not None:
            previous.in_flight = False
        key = (pending.owner, message_id)
        holder = self._replies.get(key)
        charge = pending.size + len(orjson.dumps(content))
        if (thread is not None and thread.ended) or charge > self.max_bytes or (
                holder is not None and holder.thread is not thread):
            if holder is not None and holder.thread is not thread:
                holder.shared = True
            self.not_kept += 1
            return
        if thread is None:
            self._made += 1
            thread = _Thread(self._made, pending.owner, pending.fields.get("system"),
                             pending.fields.get("tools"), "system" in pending.fields,
                             "tools" in pending.fields, self.clock())
        if previous is not None:
            previous.continued = True
            previous.messages = []  # never read again: the thread's newest reply has it all
        thread.turns += 1
        thread.latest = message_id
        if holder is None:
            thread.reply_ids.append(message_id)
        thread.bytes += charge
        self.bytes += charge
        self._replies[key] = _StoredReply(
            thread, [*pending.messages, {"role": "assistant", "content": content}], pending.seq)
        self._touch(thread)
        while len(self._by_use) > self.max_threads or self.bytes > self.max_bytes:
            self._end(next(iter(self._by_use.values())))  # the least recently used
            self.evicted += 1

    def sweep(self) -> None:
        """End every thread idle past ``idle_seconds``: the oldest first, stopping at the
        first live one (threads are kept in order of last use)."""
        now = self.clock()
        while self._by_use:
            oldest = next(iter(self._by_use.values()))
            if now - oldest.last_used <= self.idle_seconds:
                return
            self._end(oldest)
            self.expired += 1

    def expire(self, thread: _Thread) -> None:
        if not thread.ended:
            self._end(thread)

    def _touch(self, thread: _Thread) -> None:
        thread.last_used = self.clock()
        self._by_use[thread.number] = thread
        self._by_use.move_to_end(thread.number)

    def _end(self, thread: _Thread) -> None:
        thread.ended = True
        self._by_use.pop(thread.number, None)
        for reply_id in thread.reply_ids:
            stored = self._replies.get((thread.owner, reply_id))
            if stored is not None and stored.thread is thread:
                del self._replies[(thread.owner, reply_id)]
        self.bytes -= thread.bytes
        thread.reply_ids, thread.bytes = [], 0

    def state(self) -> list[dict[str, Any]]:
        """The live threads, oldest first (expired ones are swept first)."""
        self.sweep()
        now = self.clock()
        return [{"thread": t.number, "latest": t.latest, "turns": t.turns,
                 "messages": len(self._replies[(t.owner, t.latest)].messages)
                 if t.latest and (t.owner, t.latest) in self._replies else 0,
                 "expires_in": round(self.idle_seconds - (now - t.last_used), 3)}
                for _, t in sorted(self._by_use.items())]

    def store_state(self) -> dict[str, int]:
        """What the store holds and has let go, against its bounds."""
        return {"threads": len(self._by_use), "bytes": self.bytes,
                "max_threads": self.max_threads, "max_bytes": self.max_bytes,
                "expired": self.expired, "evicted": self.evicted, "not_kept": self.not_kept}


def _refuse(message: str) -> NoReturn:
    raise BadRequest(400, "invalid_request_error", message, OUTCOME_INVALID_REQUEST)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."
