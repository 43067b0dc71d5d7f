"""Request validation (mockapi.check.validation, .messages): what the real API refuses is refused, with its
wording; what real clients send (every committed journal, the SDK lines) is accepted."""

from __future__ import annotations

import collections.abc
import copy
import itertools
import json
import re
import subprocess
import sys
import time
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mockapi import ScenarioError, parse_scenario
from mockapi.check.messages import BLOCK_TYPES, MESSAGE_ROLES, TOOL_RESULT_CONTENT_TYPES
from mockapi.check.requests import BadRequest
from mockapi.check.validation import MAX_MESSAGES, SAMPLING_REMOVED_IN, check, validate_request
from probes.report.format import read_journal_lines
from tests import sdk_lines
from tests.conftest import missing_install
from tests.refusals import COUNT, CREATE, HEADERS, refusal, refused_only_when_strict

ROOT = Path(__file__).resolve().parent.parent
NEW_HEADERS = {**HEADERS, "anthropic-version": SAMPLING_REMOVED_IN}


def body(*messages: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"model": "claude-sonnet-4-5", "max_tokens": 1024,
            "messages": list(messages) or [user("hi")], **fields}


def user(content: Any) -> dict[str, Any]:
    return {"role": "user", "content": content}


def assistant(content: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": content}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def use(tool_id: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": "Read", "input": {"file_path": "a.txt"}}


def result(tool_id: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": "contents of a.txt"}




# ---- each refusal: the field, what was expected, what arrived ---------------------------

TAGS = ", ".join(f"'{t}'" for t in sorted(BLOCK_TYPES))
RESULT_TAGS = ", ".join(f"'{t}'" for t in sorted(TOOL_RESULT_CONTENT_TYPES))
NON_EMPTY = "all messages must have non-empty content except for the optional final assistant message"

REFUSED: list[Any] = [
    pytest.param(body(max_tokens=-1), HEADERS,
                 "max_tokens: Input should be greater than or equal to 0, got -1", id="max-tokens-negative"),
    pytest.param({**body(), "messages": []}, HEADERS,
                 "messages: at least one message is required, got []", id="messages-empty"),
    pytest.param(body({"role": "wizard", "content": "hi"}), HEADERS,
                 "messages.0.role: Input should be 'user', 'assistant' or 'system', got 'wizard'",
                 id="role-unknown"),
    pytest.param(body(user("hi"), {"content": "x"}), HEADERS,
                 "messages.1.role: Field required", id="role-missing"),
    pytest.param(body(user("read it"), assistant([use("toolu_a")]),
                      user([result("toolu_a"), result("toolu_x")])), HEADERS,
                 "messages.2.content.1: unexpected `tool_use_id` found in `tool_result` blocks: "
                 "toolu_x. Each `tool_result` block must have a corresponding `tool_use` block in "
                 "the previous message.", id="tool-result-unknown-id"),
    pytest.param(body(user([result("toolu_x"), text("and"), result("toolu_y")])), HEADERS,
                 "messages.0.content.0: unexpected `tool_use_id` found in `tool_result` blocks: "
                 "toolu_x, toolu_y. Each `tool_result` block must have a corresponding `tool_use` "
                 "block in the previous message.", id="tool-result-without-previous-turn"),
    pytest.param(body(user("read"), assistant([text("ok"), use("toolu_a"), use("toolu_b")]),
                      user([result("toolu_b")])), HEADERS,
                 "messages.1: `tool_use` ids were found without `tool_result` blocks immediately "
                 "after: toolu_a. Each `tool_use` block must have a corresponding `tool_result` "
                 "block in the next message.", id="tool-use-unanswered"),
    pytest.param(body(user("read"), assistant([use("toolu_a")]), user("no result"),
                      assistant("ok"), user([result("toolu_a")])), HEADERS,
                 "messages.1: `tool_use` ids were found without `tool_result` blocks immediately "
                 "after: toolu_a. Each `tool_use` block must have a corresponding `tool_result` "
                 "block in the next message.", id="tool-result-a-turn-late"),
    pytest.param(body(user([text("look"), {"type": "image_url", "url": "x"}])), HEADERS,
                 f"messages.0.content.1: Input tag 'image_url' found using 'type' does not match "
                 f"any of the expected tags: {TAGS}", id="block-type-unknown"),
    pytest.param(body(user([{"text": "no type"}])), HEADERS,
                 "messages.0.content.0: Unable to extract tag using discriminator 'type', got no "
                 "`type`", id="block-type-missing"),
    pytest.param(body(user([{"type": "tool_result", "tool_use_id": "toolu_a",
                             "content": [{"type": "video"}]}])), HEADERS,
                 f"messages.0.content.0.tool_result.content.0: Input tag 'video' found using 'type' "
                 f"does not match any of the expected tags: {RESULT_TAGS}",
                 id="tool-result-content-type-unknown"),
    pytest.param(body(stream="true"), HEADERS,
                 "stream: Input should be a valid boolean, got string 'true'", id="stream-string"),
    pytest.param(body(temperature=1.5), HEADERS,
                 "temperature: Input should be less than or equal to 1, got 1.5", id="temperature-high"),
    pytest.param(body(temperature=-0.5), HEADERS,
                 "temperature: Input should be greater than or equal to 0, got -0.5",
                 id="temperature-negative"),
    pytest.param(body(temperature="0.5"), HEADERS,
                 "temperature: Input should be a valid number, got string '0.5'", id="temperature-string"),
    pytest.param(body(temperature=1.0), NEW_HEADERS,
                 f"temperature: Extra inputs are not permitted (API version {SAMPLING_REMOVED_IN}), "
                 f"got 1.0", id="temperature-removed-in-2026-10-21"),
    pytest.param(body(top_p=0.9), NEW_HEADERS,
                 f"top_p: Extra inputs are not permitted (API version {SAMPLING_REMOVED_IN}), got 0.9",
                 id="top-p-removed-in-2026-10-21"),
    pytest.param(body(user("")), HEADERS, f"messages.0: {NON_EMPTY}, got ''", id="content-empty-string"),
    pytest.param(body(user("hi"), assistant([]), user("again")), HEADERS,
                 f"messages.1: {NON_EMPTY}, got []", id="content-empty-list"),
    pytest.param(body(user("hi"), assistant("ok"), user([])), HEADERS,
                 f"messages.2: {NON_EMPTY}, got []", id="content-empty-final-user"),
    pytest.param(body(user([text("hi"), text("")])), HEADERS,
                 "messages: text content blocks must be non-empty, got an empty text at "
                 "messages.0.content.1", id="text-block-empty"),
    pytest.param(body(), {**HEADERS, "anthropic-version": "2023-6-1"},
                 'anthropic-version: "2023-6-1" is not a valid version, expected a date YYYY-MM-DD '
                 "such as 2023-06-01", id="version-not-a-date"),
    pytest.param(body(), {**HEADERS, "anthropic-version": "2023-06-01, 2023-06-01"},
                 'anthropic-version: "2023-06-01, 2023-06-01" is not a valid version, expected a '
                 "date YYYY-MM-DD such as 2023-06-01", id="version-twice"),
    pytest.param(body(), {**HEADERS, "anthropic-version": "2023-13-01"},
                 'anthropic-version: "2023-13-01" is not a valid version, expected a date '
                 "YYYY-MM-DD such as 2023-06-01", id="version-month-13"),
    pytest.param(body(user("hi"), "hello"), HEADERS,
                 "messages.1: Input should be a valid dictionary, got string 'hello'",
                 id="message-not-object"),
    pytest.param(body({"role": "user"}), HEADERS, "messages.0.content: Field required",
                 id="content-missing"),
    pytest.param(body(user(42)), HEADERS,
                 "messages.0.content: Input should be a valid string or a valid list of content "
                 "blocks, got number 42", id="content-number"),
    pytest.param(body(user(["hi"])), HEADERS,
                 "messages.0.content.0: Input should be a valid dictionary, got string 'hi'",
                 id="block-not-object"),
    pytest.param(body(user([{"type": "text", "text": None}])), HEADERS,
                 "messages.0.content.0.text.text: Input should be a valid string, got null",
                 id="text-not-string"),
    pytest.param(body(user("a"), assistant([{"type": "tool_use", "name": "Read", "input": {}}])),
                 HEADERS, "messages.1.content.0.tool_use.id: Field required", id="tool-use-no-id"),
    pytest.param(body(user("a"), assistant([{"type": "tool_use", "id": "t", "name": "R",
                                             "input": "{}"}])), HEADERS,
                 "messages.1.content.0.tool_use.input: Input should be a valid dictionary, got "
                 "string '{}'", id="tool-use-input-string"),
    pytest.param(body(user([{"type": "tool_result", "tool_use_id": 7}])), HEADERS,
                 "messages.0.content.0.tool_result.tool_use_id: Input should be a valid string, "
                 "got number 7", id="tool-result-id-number"),
    pytest.param({**body(), "messages": [user("hi")] * (MAX_MESSAGES + 1)}, HEADERS,
                 f"messages: a request may hold at most {MAX_MESSAGES} messages, "
                 f"got {MAX_MESSAGES + 1}", id="too-many-messages"),
]


@pytest.mark.parametrize(("request_body", "headers", "expected"), REFUSED)
def test_refused_like_the_api(request_body: dict[str, Any], headers: dict[str, str],
                              expected: str) -> None:
    assert refusal(request_body, headers) == expected


@pytest.mark.parametrize(("request_body", "headers", "expected"), REFUSED)
def test_lenient_accepts_what_strict_refuses(request_body: dict[str, Any], headers: dict[str, str],
                                             expected: str) -> None:
    refused_only_when_strict(request_body, headers)


def test_count_tokens_checks_the_messages_and_the_header_only() -> None:
    counted = {"model": "claude-sonnet-4-5", "messages": [user("hi")], "stream": "true",
               "max_tokens": -1, "temperature": 7}
    validate_request(counted, HEADERS, COUNT)  # not fields of count_tokens: not checked
    assert refusal({**counted, "messages": []}, HEADERS, COUNT) == (
        "messages: at least one message is required, got []")
    assert refusal(counted, {**HEADERS, "anthropic-version": "v1"}, COUNT).startswith(
        'anthropic-version: "v1" is not a valid version')
    assert refusal(counted, NEW_HEADERS, COUNT).startswith("temperature: Extra inputs")


def test_a_direct_call_without_messages_is_refused_too() -> None:
    assert refusal({"model": "m", "max_tokens": 1}) == "messages: Field required"
    assert refusal({"model": "m", "max_tokens": 1, "messages": "hi"}) == (
        "messages: Input should be a valid list, got string 'hi'")


def test_the_first_problem_in_message_order_is_the_one_reported() -> None:
    request = body(user("read"), assistant([use("toolu_a")]), user([text("")]), assistant([]),
                   user("x"))
    assert refusal(request).startswith("messages.1: `tool_use` ids were found without")


# ---- accepted: what the API documents as valid, and what we cannot know ------------------

ACCEPTED: list[Any] = [
    pytest.param(body(max_tokens=0), HEADERS, id="max-tokens-0-prewarms-the-cache"),
    pytest.param(body(user("hi"), assistant("")), HEADERS, id="final-assistant-prefill-empty-string"),
    pytest.param(body(user("hi"), assistant([])), HEADERS, id="final-assistant-prefill-empty-list"),
    pytest.param(body(user("hi"), assistant([text("")])), HEADERS, id="final-assistant-empty-text"),
    pytest.param(body(user("hi"), assistant("The answer is (")), HEADERS, id="prefill"),
    pytest.param(body(user("a"), user("b"), assistant("c"), assistant("d"), user("e")), HEADERS,
                 id="consecutive-same-role"),
    pytest.param(body(user("read"), assistant([use("toolu_a"), use("toolu_b")]),
                      user([result("toolu_a")]), user([result("toolu_b"), text("go on")])),
                 HEADERS, id="results-across-consecutive-user-messages"),
    pytest.param(body(user("read"), assistant([use("toolu_a")]),
                      {"role": "system", "content": "a note"}, user([result("toolu_a")])),
                 HEADERS, id="system-message-between-use-and-result"),
    pytest.param(body({"role": "system", "output_config": {}}, user("hi")), HEADERS,
                 id="system-message-without-content"),
    pytest.param(body(user("read"), assistant([text("reading"), use("toolu_a")])), HEADERS,
                 id="final-assistant-tool-use"),
    pytest.param(body(user("hi"), stream=True, temperature=0, top_p=0.5, top_k=5), HEADERS,
                 id="sampling-on-2023-06-01"),
    pytest.param(body(stream=False, temperature=1), HEADERS, id="temperature-1"),
    pytest.param(body(user("hi"), max_tokens=32000, future_field={"anything": [1, 2]},
                      thinking={"type": "enabled", "budget_tokens": 31999, "display": "updates"},
                      context_management={"edits": [{"type": "clear_thinking_20251015"}]}),
                 {**HEADERS, "anthropic-beta": "some-future-beta-2099-01-01"},
                 id="unknown-fields-and-betas"),
    pytest.param(body(user([{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"},
                             "future": True}])), HEADERS, id="unknown-block-fields"),
    pytest.param(body(user("hi"), model="not-a-real-model"), HEADERS, id="any-model-name"),
    pytest.param(body(user("  ")), HEADERS, id="whitespace-only-text"),
    pytest.param(body(), {**HEADERS, "anthropic-version": "2099-12-31"}, id="a-future-version"),
    pytest.param(body(), {"x-api-key": "k"}, id="no-version-header-parse-body-refuses-it"),
    pytest.param(body(user([{"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                         "data": "not base64"}}])),
                 HEADERS, id="image-data-unchecked"),
]


@pytest.mark.parametrize(("request_body", "headers"), ACCEPTED)
def test_accepted(request_body: dict[str, Any], headers: dict[str, str]) -> None:
    validate_request(request_body, headers, CREATE)


# ---- every body real clients sent: the committed journals --------------------------------

def _journal_requests() -> list[tuple[str, dict[str, Any], dict[str, str], str]]:
    found = []
    for path in sorted((ROOT / "reports").glob("**/*.journal.jsonl*")):
        if not path.name.endswith((".journal.jsonl", ".journal.jsonl.gz")):
            continue
        for line in read_journal_lines(path):  # large parts put back in their places
            record = orjson.loads(line)
            thread = record.get("body", {}).get("thread") if isinstance(
                record.get("body"), dict) else None
            if isinstance(thread, dict) and thread.get("type") == "continue":
                continue  # a fragment: the mock validated it whole (mockapi.serve.threads)
            if record.get("type") == "request" and record.get("path") in (CREATE, COUNT):
                found.append((str(path.relative_to(ROOT)), record["body"], record["headers"],
                              record["path"]))
    return found


def test_every_committed_journal_body_is_accepted() -> None:
    started = time.perf_counter()
    requests = _journal_requests()
    loaded = time.perf_counter()
    refused = []
    for source, request_body, headers, path in requests:
        try:
            validate_request(request_body, headers, path)
        except BadRequest as bad:
            refused.append(f"{source}: {bad.message}")
    done = time.perf_counter()
    folders = {Path(source).parent.name for source, *_ in requests}
    everywhere = {p.parent.name for p in (ROOT / "reports").glob("**/*.journal.jsonl*")}
    print(f"\n{len(requests)} committed request bodies from {len(folders)} client versions "
          f"validated in {done - loaded:.3f} s (loaded in {loaded - started:.2f} s)")
    assert refused == []
    assert len(requests) > 1000 and folders == everywhere


def _largest(requests: list[tuple[str, dict[str, Any], dict[str, str], str]],
             folder: str) -> tuple[dict[str, Any], dict[str, str]]:
    _, request_body, headers, _ = max(
        (r for r in requests if Path(r[0]).parent.name == folder),
        key=lambda r: len(orjson.dumps(r[1])))
    return request_body, headers


def _per_call(request_body: dict[str, Any], headers: dict[str, str], rounds: int = 300) -> float:
    validate_request(request_body, headers, CREATE)
    started = time.perf_counter()
    for _ in range(rounds):
        validate_request(request_body, headers, CREATE)
    return (time.perf_counter() - started) / rounds


def _grown(request_body: dict[str, Any], turns: int) -> dict[str, Any]:
    """``request_body`` with ``turns`` tool-using turns appended."""
    grown = copy.deepcopy(request_body)
    for n in range(turns):
        grown["messages"] += [
            assistant([text("Reading it."), use(f"toolu_grow_{n}")]),
            user([{**result(f"toolu_grow_{n}"), "content": "a line\n" * 40},
                  text("<system-reminder>keep going</system-reminder>")])]
    return grown


def _lines_run(request_body: dict[str, Any], headers: dict[str, str]) -> int:
    """How many lines of Python one validation runs: its work, counted, not timed (the
    same on every machine and under any load)."""
    count = 0

    def trace(frame: Any, event: str, arg: Any) -> Any:
        nonlocal count
        if event == "line":
            count += 1
        return trace

    sys.settrace(trace)
    try:
        validate_request(request_body, headers, CREATE)
    finally:
        sys.settrace(None)
    return count


def test_validation_grows_linearly_with_the_conversation() -> None:
    """Validation runs on every request, whose conversation grows by a turn each time: a
    check that looked back over earlier messages per message would make a long run's
    requests quadratic. Its work is counted in lines run: a body of 14 times the messages
    may take at most 16 times as many (linear: at most 14; a check over earlier messages
    per message: far more)."""
    requests = _journal_requests()
    largest, headers = _largest(requests, "2.1.235")
    short, long = _grown(largest, 10), _grown(largest, 160)
    short_n, long_n = _lines_run(short, headers), _lines_run(long, headers)
    print(f"\n{len(short['messages'])} messages: {short_n} lines; "
          f"{len(long['messages'])} messages: {long_n} lines per validation")
    assert long_n <= 16 * short_n, (short_n, long_n)


# ---- every body the official SDK lines send (tests/sdk_conformance_client.py) ------------

CAPTURE = r"""
import json, sys
import anthropic
try:
    import httpx2 as httpx  # the 2.x line's HTTP client
except ImportError:
    import httpx
sys.path.insert(0, sys.argv[1])
import sdk_conformance_client as client

MESSAGE = {"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
           "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
           "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}
EVENTS = [("message_start", {"type": "message_start", "message": {**MESSAGE, "content": [],
                                                                  "stop_reason": None}}),
          ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn",
                             "stop_sequence": None}, "usage": {"output_tokens": 1}}),
          ("message_stop", {"type": "message_stop"})]
SSE = "".join(f"event: {e}\ndata: {json.dumps(d)}\n\n" for e, d in EVENTS).encode()
seen = []

def answer(request):
    sent = json.loads(request.content)
    seen.append({"path": request.url.path, "headers": dict(request.headers), "body": sent})
    if sent.get("stream"):
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=SSE)
    return httpx.Response(200, json=MESSAGE)

class Captured(anthropic.Anthropic):
    def __init__(self, **options):
        transport = httpx.MockTransport(answer)
        super().__init__(http_client=httpx.Client(transport=transport), **options)

anthropic.Anthropic = Captured
for case in json.loads(sys.argv[2]):
    for mode in client.MODES:
        client.run("http://mock.invalid", case, mode)
print(json.dumps(seen))
"""


@pytest.mark.sdk
@pytest.mark.parametrize("line", list(sdk_lines.LINES))
def test_every_body_the_sdk_conformance_client_sends_is_accepted(line: str) -> None:
    from tests.test_sdk_conformance import CASES, ERROR_TYPES
    try:
        python = sdk_lines.python_for(line)
    except sdk_lines.SdkLineMissing:
        missing_install(f"anthropic=={sdk_lines.LINES[line]} (SDK line {line})",
                        sdk_lines.INSTALL_COMMAND)
        return
    cases = [*CASES, *(f"error-{status}" for status in ERROR_TYPES)]
    done = subprocess.run([str(python), "-c", CAPTURE, str(ROOT / "tests"), json.dumps(cases)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    sent = json.loads(done.stdout)
    assert len(sent) == len(cases) * 2
    assert any("thinking" in s["body"] for s in sent) and any(s["body"].get("stream") for s in sent)
    for request in sent:
        validate_request(request["body"], request["headers"], request["path"])


# ---- the SDK's definitions: our tables hold every tag the installed SDK declares ---------

def _unwrap(hint: Any) -> Any:
    while typing.get_origin(hint) in (typing.Annotated, typing.Required, typing.NotRequired):
        hint = typing.get_args(hint)[0]
    return hint


def _members(hint: Any) -> list[Any]:
    hint = _unwrap(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return [m for arg in typing.get_args(hint) for m in _members(arg)]
    return [hint]


def _fields(kind: Any) -> dict[str, Any]:
    if hasattr(kind, "model_fields"):  # the SDK's response blocks, which the API takes back
        return {name: f.annotation for name, f in kind.model_fields.items()}
    return typing.get_type_hints(kind, include_extras=True)


def _tags(union: Any, key: str) -> set[str]:
    return {tag for m in _members(union) if key in _fields(m)
            for tag in typing.get_args(_unwrap(_fields(m)[key]))}


def _list_item_tags(hint: Any) -> set[str]:
    """The ``type`` tags of the items of the list member(s) of ``str | Iterable[Block]``."""
    return {tag for alt in _members(hint)
            if typing.get_origin(alt) in (collections.abc.Iterable, list)
            for tag in _tags(typing.get_args(alt)[0], "type")}


def test_the_tables_hold_every_tag_the_sdk_declares() -> None:
    types_ = pytest.importorskip("anthropic.types")
    beta = pytest.importorskip("anthropic.types.beta")
    message_unions = (types_.MessageParam, beta.BetaMessageParam)
    roles = set().union(*(_tags(u, "role") for u in message_unions))
    blocks = set().union(*(_list_item_tags(_fields(m).get("content"))
                           for u in message_unions for m in _members(u)))
    results = set().union(*(_list_item_tags(_fields(kind)["content"])
                            for kind in (types_.ToolResultBlockParam, beta.BetaToolResultBlockParam)))
    assert {"user", "assistant", "text", "tool_use", "tool_result"} <= roles | blocks  # the walk works
    assert roles - MESSAGE_ROLES == set(), "update MESSAGE_ROLES in mockapi/check/messages.py"
    assert blocks - BLOCK_TYPES == set(), "update BLOCK_TYPES in mockapi/check/messages.py"
    assert results - TOOL_RESULT_CONTENT_TYPES == set(), \
        "update TOOL_RESULT_CONTENT_TYPES in mockapi/check/messages.py"


# ---- properties: valid shapes pass; one mutation from the refusal list is refused ---------

PROPERTY = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
WORDS = st.text(min_size=1, max_size=12)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6)
EXTRA_BLOCK_FIELDS = st.dictionaries(st.sampled_from(["cache_control", "future_x"]),
                                     st.just({"type": "ephemeral"}), max_size=1)


@st.composite
def conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Alternating turns from the user; every tool_use answered in the next user turn;
    sometimes consecutive user messages, system messages, and a final assistant prefill."""
    ids = (f"toolu_{n}" for n in itertools.count())
    messages: list[dict[str, Any]] = []
    pending: list[str] = []
    for turn in range(draw(st.integers(1, 7))):
        if turn % 2 == 0:
            results = [result(i) for i in draw(st.permutations(pending))]
            texts = [{**text(t), **draw(EXTRA_BLOCK_FIELDS)}
                     for t in draw(st.lists(WORDS, min_size=0 if results else 1, max_size=2))]
            blocks = results + texts
            if not results and len(texts) == 1 and draw(st.booleans()):
                messages.append(user(texts[0]["text"]))
            elif len(blocks) > 1 and draw(st.booleans()):  # one turn in two messages
                cut = draw(st.integers(1, len(blocks) - 1))
                messages += [user(blocks[:cut]), user(blocks[cut:])]
            else:
                messages.append(user(blocks))
            pending = []
        else:
            pending = [next(ids) for _ in range(draw(st.integers(0, 2)))]
            texts = [text(t) for t in draw(st.lists(WORDS, min_size=0 if pending else 1, max_size=2))]
            messages.append(assistant(texts + [use(i) for i in pending]))
        if draw(st.integers(0, 9)) == 0:
            messages.append({"role": "system", "content": draw(WORDS)})
    if messages[-1]["role"] == "user" and draw(st.booleans()):
        messages.append(assistant(draw(st.sampled_from(["", [], "The answer is", [text("So")]]))))
    return messages


@st.composite
def valid_requests(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, str]]:
    headers = {**HEADERS, "anthropic-version": draw(st.sampled_from(["2023-06-01", SAMPLING_REMOVED_IN]))}
    request = body(*draw(conversations()), max_tokens=draw(st.integers(0, 64_000)))
    if draw(st.booleans()):
        request["stream"] = draw(st.booleans())
    if headers["anthropic-version"] < SAMPLING_REMOVED_IN and draw(st.booleans()):
        request["temperature"] = draw(st.floats(0, 1) | st.integers(0, 1))
    if draw(st.booleans()):
        request["system"] = draw(st.sampled_from(["You are terse.", [text("You are terse.")]]))
    request.update(draw(st.dictionaries(st.sampled_from(["future_field", "x_beta", "zz_unknown"]),
                                        JSON_VALUES, max_size=2)))
    return request, headers


def _content_list(message: dict[str, Any]) -> list[Any]:
    if isinstance(message["content"], str):
        message["content"] = [text(message["content"])] if message["content"] else []
    content: list[Any] = message["content"]
    return content


def _not_a_tag(tags: frozenset[str]) -> st.SearchStrategy[str]:
    return st.text(min_size=1, max_size=15).filter(lambda t: t not in tags)


Mutation = Callable[[st.DrawFn, dict[str, Any], dict[str, str]], list[str]]


def _max_tokens(draw: st.DrawFn, request: dict[str, Any], headers: dict[str, str]) -> list[str]:
    request["max_tokens"] = draw(st.integers(-10**9, -1))
    return ["max_tokens: Input should be greater than or equal to 0"]


def _max_tokens_over_the_limit(draw: st.DrawFn, request: dict[str, Any],
                               headers: dict[str, str]) -> list[str]:
    request["max_tokens"] = draw(st.integers(64_001, 10**12))
    return [f"max_tokens: {request['max_tokens']} > 64000, which is the maximum allowed number of "
            f"output tokens for claude-sonnet-4-5-20250929"]


def _no_messages(draw: st.DrawFn, request: dict[str, Any], headers: dict[str, str]) -> list[str]:
    request["messages"] = []
    return ["messages: at least one message is required"]


def _role(draw: st.DrawFn, request: dict[str, Any], headers: dict[str, str]) -> list[str]:
    k = draw(st.integers(0, len(request["messages"]) - 1))
    request["messages"][k]["role"] = draw(_not_a_tag(MESSAGE_ROLES))
    return [f"messages.{k}.role: Input should be 'user', 'assistant' or 'system', got "]


def _orphan_result(draw: st.DrawFn, request: dict[str, Any], headers: dict[str, str]) -> list[str]:
    users = [k for k, m in enumerate(request["messages"]) if m["role"] == "user"]
    k = draw(st.sampled_from(users))
    content = _content_list(request["messages"][k])
    content.insert(draw(st.integers(0, len(content))), result("toolu_orphan"))
    return [f"messages.{k}.content.", "unexpected `tool_use_id` found in `tool_result` blocks: "
            "toolu_orphan"]


def _unanswered_use(draw: st.DrawFn, request: dict[str, Any], headers: dict[str, str]) -> list[str]:
    messages = request["messages"]
    answerable = [k for k, m in enumerate(messages) if m["role"] == "assistant"
                  and any(n["role"] == "user" for n in messages[k + 1:])]
    if answerable:
        k = draw(st.sampled_from(answerable))
    else:
        while messages[-1]["role"] != "user":  # a final prefill, a system message
            messages.pop()
        messages += [assistant("Let me look."), user("Go on.")]
        k = len(messages) - 2
    _content_list(messages[k]).append(use("toolu_unanswered"))
    return [f"messages.{k}: `tool_use` ids were found without `tool_result` blocks immediately "
            f"after: toolu_unanswered"]


def _unknown_block(draw: st.DrawFn, request: dict[str, Any], headers: dict[str, str]) -> list[str]:
    k = draw(st.integers(0, len(request["messages"]) - 1))
    content = _content_list(request["messages"][k])
    content.insert(draw(st.integers(0, len(content))), {"type": draw(_not_a_tag(BLOCK_TYPES))})
    return [f"messages.{k}.content.", "found using 'type' does not match any of the expected tags"]


def _stream(draw: st.DrawFn, request: dict[str, Any], headers: dict[str, str]) -> list[str]:
    request["stream"] = draw(st.sampled_from(["true", "false", "True", "1", [], {}]))
    return ["stream: Input should be a valid boolean"]


def _temperature(draw: st.DrawFn, request: dict[str, Any], headers: dict[str, str]) -> list[str]:
    request["temperature"] = draw(st.floats(1.0001, 1e6) | st.floats(-1e6, -1e-6))
    if headers["anthropic-version"] >= SAMPLING_REMOVED_IN:
        return ["temperature: Extra inputs are not permitted"]
    return ["temperature: Input should be"]


def _must_be_non_empty(messages: list[dict[str, Any]]) -> list[int]:
    """The messages whose content the API requires non-empty: all but system ones and a
    final assistant message (a prefill)."""
    last = len(messages) - 1
    return [k for k, m in enumerate(messages)
            if m["role"] != "system" and not (k == last and m["role"] == "assistant")]


def _empty_content(draw: st.DrawFn, request: dict[str, Any], headers: dict[str, str]) -> list[str]:
    messages = request["messages"]
    k = draw(st.sampled_from(_must_be_non_empty(messages)))
    messages[k]["content"] = draw(st.sampled_from(["", []]))
    # emptying a user turn's tool_results leaves the assistant's tool_uses before it unanswered
    return [f"messages.{k}: {NON_EMPTY}", "`tool_use` ids were found without `tool_result` blocks"]


def _empty_text(draw: st.DrawFn, request: dict[str, Any], headers: dict[str, str]) -> list[str]:
    messages = request["messages"]
    k = draw(st.sampled_from(_must_be_non_empty(messages)))
    content = _content_list(messages[k])
    content.insert(draw(st.integers(0, len(content))), text(""))
    return ["messages: text content blocks must be non-empty, got an empty text at "
            f"messages.{k}.content."]


def _version(draw: st.DrawFn, request: dict[str, Any], headers: dict[str, str]) -> list[str]:
    headers["anthropic-version"] = draw(st.text(max_size=20).filter(
        lambda v: not re.fullmatch(r"\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])", v)))
    return ["anthropic-version: ", " is not a valid version"]


MUTATIONS: dict[str, Mutation] = {
    "max_tokens": _max_tokens, "max_tokens_over_the_limit": _max_tokens_over_the_limit,
    "no_messages": _no_messages, "role": _role,
    "orphan_result": _orphan_result, "unanswered_use": _unanswered_use,
    "unknown_block": _unknown_block, "stream": _stream, "temperature": _temperature,
    "empty_content": _empty_content, "empty_text": _empty_text, "version": _version,
}


@pytest.fixture(scope="module")
def sdk_request_adapter() -> Callable[[dict[str, Any]], None]:
    """The SDK's beta request TypedDicts as a pydantic TypeAdapter, every list validated."""
    pydantic = pytest.importorskip("pydantic")
    params = pytest.importorskip("anthropic.types.beta.message_create_params")
    adapter = pydantic.TypeAdapter(params.MessageCreateParams)
    lazy = type(pydantic.TypeAdapter(collections.abc.Iterable[int]).validate_python([]))

    def consume(value: Any) -> None:  # Iterable[...] fields are validated as they are read
        if isinstance(value, lazy | list):
            for item in value:
                consume(item)
        elif isinstance(value, dict):
            for item in value.values():
                consume(item)

    return lambda request: consume(adapter.validate_python(request))


@PROPERTY
@given(valid_requests())
def test_valid_shapes_pass(sdk_request_adapter: Callable[[dict[str, Any]], None],
                           generated: tuple[dict[str, Any], dict[str, str]]) -> None:
    request, headers = generated
    validate_request(request, headers, CREATE)
    sdk_request_adapter(request)  # the generator's "valid" is the SDK's valid too


@PROPERTY
@given(valid_requests(), st.sampled_from(sorted(MUTATIONS)), st.data())
def test_one_mutation_from_the_refusal_list_is_refused(
        generated: tuple[dict[str, Any], dict[str, str]], mutation: str, data: st.DataObject) -> None:
    request, headers = copy.deepcopy(generated)
    expected = MUTATIONS[mutation](data.draw, request, headers)
    message = refusal(request, headers)
    if mutation == "empty_content":
        assert any(fragment in message for fragment in expected), message
    else:
        assert all(fragment in message for fragment in expected), message
    check(request, headers, CREATE, lenient=True)


# ---- the scenario's `validation` field -----------------------------------------------------

def test_scenario_validation_field() -> None:
    assert parse_scenario({}).validation == "strict"
    assert parse_scenario({"validation": "lenient"}).validation == "lenient"
    with pytest.raises(ScenarioError) as raised:
        parse_scenario({"validation": "loose"}, "s.yaml")
    assert raised.value.problems == [
        "validation: Input should be 'strict' or 'lenient' (found \"loose\")"]
