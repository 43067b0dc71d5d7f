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
and a reply with ``expire_thread: true`` is not kept (its continue gets the 404).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn

from mockapi.records import OUTCOME_INVALID_REQUEST, OUTCOME_THREAD_NOT_FOUND, Outcome
from mockapi.requests import BadRequest

__all__ = ["CREATE_ONLY_FIELDS", "THREADS_BETA", "THREAD_IDLE_SECONDS", "PendingTurn", "ThreadRefused",
           "Threads", "message_id"]

THREADS_BETA = "message-threads-2026-08-12"
THREAD_IDLE_SECONDS = 300.0
CREATE_ONLY_FIELDS = ("system", "tools")


def message_id(seq: int, message_ids: str) -> str:
    """The id of the mock's reply to request ``seq`` (a scenario's ``message_ids``): a
    thread is continued by it, so by default it cannot be guessed."""
    if message_ids == "sequential":
        return f"msg_loopprobe_{seq:06d}"
    return f"msg_loopprobe_{seq:06d}_{secrets.token_hex(12)}"


class ThreadRefused(BadRequest):
    """A thread request the API refuses, with the ``error.details`` its SDKs read."""

    def __init__(self, status: int, error_type: str, message: str, error_code: str,
                 view: dict[str, Any]):
        outcome: Outcome = OUTCOME_THREAD_NOT_FOUND if status == 404 \
            else OUTCOME_INVALID_REQUEST
        super().__init__(status, error_type, message, outcome)
        self.details = {"error_code": error_code}
        self.view = view  # journaled: what the refused request asked for


@dataclass
class _Thread:
    number: int
    system: Any
    tools: Any
    has_system: bool
    has_tools: bool
    last_used: float
    turns: int = 0
    latest: str | None = None  # the id of its newest stored reply


@dataclass
class _StoredReply:
    thread: _Thread
    messages: list[Any]  # the whole conversation up to and including this reply
    seq: int
    continued: bool = False
    in_flight: bool = False


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
    """The live threads of one mock, by the id of each reply they keep."""

    def __init__(self, idle_seconds: float = THREAD_IDLE_SECONDS,
                 clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.idle_seconds = idle_seconds
        self._replies: dict[str, _StoredReply] = {}
        self._made = 0

    def open(self, body: dict[str, Any], headers: Mapping[str, str],
             seq: int) -> tuple[dict[str, Any], PendingTurn]:
        """The body with the whole conversation, and the turn to settle once answered.

        Raises ``BadRequest`` (a malformed ``thread``, a missing beta) or ``ThreadRefused``."""
        thread = body["thread"]
        betas = {b.strip() for b in headers.get("anthropic-beta", "").split(",")}
        if THREADS_BETA not in betas:
            _refuse(f"thread: requires the beta header anthropic-beta: {THREADS_BETA}, got "
                    f"{headers.get('anthropic-beta', 'none')!r}")
        kind = thread.get("type") if isinstance(thread, dict) else None
        fields = {k: v for k, v in body.items() if k != "thread"}
        if kind == "create" and isinstance(thread, dict) and set(thread) == {"type"}:
            pending = PendingTurn(self, None, None, list(body["messages"]), {}, seq,
                                  {"type": "create"})
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
        previous = self._live(previous_id)
        if previous is None:
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
        stored.last_used = self.clock()
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
        return rebuilt, PendingTurn(self, stored, previous, messages, {}, seq, view)

    def store(self, pending: PendingTurn, message_id: str, content: list[Any]) -> None:
        thread = pending.thread
        if thread is None:
            self._made += 1
            thread = _Thread(self._made, pending.fields.get("system"), pending.fields.get("tools"),
                             "system" in pending.fields, "tools" in pending.fields, self.clock())
        if pending.previous is not None:
            pending.previous.in_flight = False
            pending.previous.continued = True
        thread.turns += 1
        thread.latest = message_id
        thread.last_used = self.clock()
        self._replies[message_id] = _StoredReply(
            thread, [*pending.messages, {"role": "assistant", "content": content}], pending.seq)

    def _live(self, message_id: str) -> _StoredReply | None:
        stored = self._replies.get(message_id)
        if stored is None:
            return None
        if self.clock() - stored.thread.last_used > self.idle_seconds:
            self.expire(stored.thread)
            return None
        return stored

    def expire(self, thread: _Thread) -> None:
        for key in [k for k, r in self._replies.items() if r.thread is thread]:
            del self._replies[key]

    def forget(self, message_id: str) -> None:
        """Drop the thread holding ``message_id`` (a scripted expiry)."""
        stored = self._replies.get(message_id)
        if stored is not None:
            self.expire(stored.thread)

    def state(self) -> list[dict[str, Any]]:
        """The live threads, oldest first (expired ones are dropped on the way)."""
        now = self.clock()
        threads: dict[int, _Thread] = {}
        for stored in list(self._replies.values()):
            if now - stored.thread.last_used > self.idle_seconds:
                self.expire(stored.thread)
            else:
                threads[stored.thread.number] = stored.thread
        return [{"thread": t.number, "latest": t.latest, "turns": t.turns,
                 "messages": len(self._replies[t.latest].messages) if t.latest else 0,
                 "expires_in": round(self.idle_seconds - (now - t.last_used), 3)}
                for _, t in sorted(threads.items())]


def _refuse(message: str) -> NoReturn:
    raise BadRequest(400, "invalid_request_error", message, OUTCOME_INVALID_REQUEST)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."
