"""Message threads under attack (issue 27): each test reproduces what broke the landed store.

Broken before: the store was unbounded (60 creates of 2 MB kept 130 MB) and freed an
expired thread only when it was looked up, each expiry walking every stored reply
(``GET /_mock/state`` after 16,000 expired threads took 3.9 s); reply ids were sequential
and any API key could continue another key's thread and read its system prompt; a
scripted reply id shared by two threads handed the first thread's continue to the second.
Memory is shown by measuring (tracemalloc, the store's own count), expiry by counting what
a sweep touches: no wall-clock assertion.
"""

from __future__ import annotations

import re
import tracemalloc
from pathlib import Path
from typing import Any

import httpx

from mockapi import MockServer, Rule, Scenario, text
from mockapi.serve.threads import MAX_THREAD_BYTES, MAX_THREADS, THREADS_BETA, Threads
from tests.test_threads import FIRST, HEADERS, TIMEOUT, USE_THEN_DONE, continue_from

MB = 1024 * 1024
KEY_A = {"x-api-key": "sk-ant-key-a"}
KEY_B = {"x-api-key": "sk-ant-key-b"}
BETA = {"anthropic-beta": THREADS_BETA}


def post(server: MockServer, body: dict[str, Any], **headers: str) -> httpx.Response:
    return httpx.post(f"{server.url}/v1/messages", headers={**HEADERS, **headers}, json=body,
                      timeout=TIMEOUT)


def create(threads: Threads, seq: int, content: str = "hi", *, key: str = "k",
           reply_id: str | None = None) -> str:
    """A thread create answered and kept, as the app does it; the reply's id."""
    body = {"model": "m", "max_tokens": 5, "system": "secret system prompt",
            "messages": [{"role": "user", "content": content}],
            "thread": {"type": "create"}}
    _, turn = threads.open(body, {"x-api-key": key, **BETA}, seq, len(content) + 100)
    reply_id = reply_id or f"msg_{seq}"
    turn.keep(reply_id, [{"type": "text", "text": "ok"}])
    return reply_id


# ---- bounds ----------------------------------------------------------------------------------


def test_sixty_creates_of_2_mb_keep_at_most_the_bound() -> None:
    threads = Threads(max_bytes=16 * MB)
    tracemalloc.start()
    try:
        for seq in range(1, 61):
            create(threads, seq, "x" * (2 * MB))
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # before: every create kept (130 MB held); now the least recently used go first
    assert threads.bytes <= 16 * MB
    assert held < 20 * MB, f"{held / MB:.1f} MB held"
    kept = threads.store_state()
    assert kept["threads"] == 7 and kept["evicted"] == 53
    assert [t["thread"] for t in threads.state()] == list(range(54, 61))


def test_the_bounds_default_to_1024_threads_and_64_mib() -> None:
    assert (MAX_THREADS, MAX_THREAD_BYTES) == (1024, 64 * MB)
    threads = Threads(max_threads=3)
    for seq in range(1, 6):
        create(threads, seq)
    assert [t["thread"] for t in threads.state()] == [3, 4, 5]
    # a reply that alone exceeds the bytes bound is not kept at all
    small = Threads(max_bytes=1000)
    create(small, 1, "x" * 2000)
    assert small.store_state()["threads"] == 0 and small.store_state()["not_kept"] == 1


def test_an_evicted_thread_is_not_found_in_the_apis_words(tmp_path: Path) -> None:
    scenario = Scenario(rules=[Rule(id="hi", repeat="always", reply=text("hi"))])
    with MockServer(scenario, tmp_path / "j.jsonl") as server:
        server.mock.threads = Threads(max_threads=2)
        ids = [post(server, FIRST).json()["id"] for _ in range(3)]
        evicted = post(server, continue_from(ids[0], [{"role": "user", "content": "more"}]))
        live = post(server, continue_from(ids[2], [{"role": "user", "content": "more"}]))
        store = server.admin("GET", "state").json()["thread_store"]
    assert evicted.status_code == 404
    assert evicted.json()["error"]["details"] == {"error_code": "thread_not_found"}
    assert live.status_code == 200
    assert (store["threads"], store["evicted"], store["max_threads"]) == (2, 1, 2)


# ---- expiry, swept in order of last use ------------------------------------------------------


class CountingDict(dict):  # type: ignore[type-arg]
    """A dict that counts the entries walked and deleted."""

    walked = deleted = 0

    def __iter__(self) -> Any:
        for key in super().__iter__():
            CountingDict.walked += 1
            yield key

    def items(self) -> Any:
        CountingDict.walked += len(self)
        return super().items()

    def values(self) -> Any:
        CountingDict.walked += len(self)
        return super().values()

    def keys(self) -> Any:
        CountingDict.walked += len(self)
        return super().keys()

    def __delitem__(self, key: Any) -> None:
        CountingDict.deleted += 1
        super().__delitem__(key)


def test_16000_expired_threads_are_swept_in_one_call_without_touching_live_ones(
        tmp_path: Path) -> None:
    clock = [0.0]
    threads = Threads(idle_seconds=300, clock=lambda: clock[0], max_threads=20_000)
    threads._replies = CountingDict()
    for seq in range(1, 16_001):
        create(threads, seq)
    clock[0] = 200.0
    live = create(threads, 16_001, key="live")
    clock[0] = 301.0
    CountingDict.walked = CountingDict.deleted = 0
    state = threads.state()  # what GET /_mock/state shows: one sweep, then the live ones
    # before: each expiry walked every stored reply (16,000 x 16,000 entries)
    assert (CountingDict.walked, CountingDict.deleted) == (0, 16_000)
    assert [(t["thread"], t["latest"]) for t in state] == [(16_001, live)]
    assert threads.store_state()["expired"] == 16_000
    # a second look finds nothing more to do
    CountingDict.deleted = 0
    threads.state()
    assert CountingDict.deleted == 0
    # and the state route answers over them (16,000 expired threads put into a real mock)
    with MockServer(Scenario(), tmp_path / "j.jsonl") as server:
        server.mock.threads = Threads(idle_seconds=300, clock=lambda: clock[0],
                                      max_threads=20_000)
        clock[0] = 0.0
        for seq in range(1, 16_001):
            create(server.mock.threads, seq)
        clock[0] = 301.0
        assert server.admin("GET", "state").json()["threads"] == []
        assert server.mock.threads.store_state()["expired"] == 16_000


# ---- ids and ownership -----------------------------------------------------------------------


def test_reply_ids_are_unguessable_unless_a_scenario_pins_them(tmp_path: Path) -> None:
    pattern = re.compile(r"msg_loopprobe_\d{6}_[0-9a-f]{24}")
    with MockServer(USE_THEN_DONE, tmp_path / "a.jsonl") as server:
        first, second = post(server, FIRST).json()["id"], post(server, FIRST).json()["id"]
    assert pattern.fullmatch(first) and pattern.fullmatch(second)
    assert first[:20] == "msg_loopprobe_000001" and first[21:] != second[21:]
    pinned = USE_THEN_DONE.model_copy(update={"message_ids": "sequential"})
    with MockServer(pinned, tmp_path / "b.jsonl") as server:
        assert post(server, FIRST).json()["id"] == "msg_loopprobe_000001"


def test_another_key_cannot_continue_a_thread_nor_learn_it_exists(tmp_path: Path) -> None:
    with MockServer(USE_THEN_DONE, tmp_path / "j.jsonl") as server:
        first = post(server, FIRST, **KEY_A).json()["id"]
        stolen = post(server, continue_from(first), **KEY_B)
        also_bearer = post(server, continue_from(first), **{"x-api-key": "", "authorization":
                                                              "Bearer sk-ant-key-a"})
        owned = post(server, continue_from(first), **KEY_A)
        records = server.requests()
    with MockServer(USE_THEN_DONE, tmp_path / "k.jsonl") as fresh:
        missing = post(fresh, continue_from(first), **KEY_B)
    # the same 404 as for a reply no thread holds, word for word
    assert stolen.status_code == missing.status_code == 404
    assert stolen.json()["error"] == missing.json()["error"]
    assert stolen.json()["error"]["details"] == {"error_code": "thread_not_found"}
    assert also_bearer.status_code == 404  # the key is the pair of headers as sent
    # nothing of the thread reached the other key's request: no system prompt, no history
    assert records[1]["thread"] == {"type": "continue", "previous_message_id": first,
                                    "messages_sent": 1}
    # and the owner's thread is untouched by the attempts
    assert owned.status_code == 200 and owned.json()["content"] == [
        {"type": "text", "text": "5"}]
    assert records[3]["thread"]["stored_by_seq"] == 1


def test_a_scripted_id_shared_by_two_threads_takes_neither_over(tmp_path: Path) -> None:
    fixed = Scenario(rules=[Rule(id="hi", repeat="always", reply=text("hi", id="msg_fixed"))])
    more = [{"role": "user", "content": "more"}]
    with MockServer(fixed, tmp_path / "j.jsonl") as server:
        # two keys: each has its own msg_fixed, each continues into its own conversation
        assert post(server, FIRST, **KEY_A).json()["id"] == "msg_fixed"
        other = {**FIRST, "system": "B's system prompt"}
        assert post(server, other, **KEY_B).json()["id"] == "msg_fixed"
        a = post(server, continue_from("msg_fixed", more), **KEY_A)
        b = post(server, continue_from("msg_fixed", more), **KEY_B)
        # within one thread a repeated id moves on with it: continued again and again
        again = post(server, continue_from("msg_fixed", more), **KEY_A)
        # one key, a second thread on the same id: neither thread is reached through it
        post(server, FIRST, **KEY_A)
        after = post(server, continue_from("msg_fixed", more), **KEY_A)
        records = server.requests()
    assert (a.status_code, b.status_code, again.status_code) == (200, 200, 200)
    assert [(r["thread"]["thread"], r["thread"]["stored_by_seq"]) for r in records[2:4]] == [
        (1, 1), (2, 2)]
    assert records[4]["thread"]["stored_by_seq"] == 3
    assert after.status_code == 404
    assert after.json()["error"]["details"] == {"error_code": "thread_not_found"}
    assert server.mock.threads.store_state()["not_kept"] == 1
