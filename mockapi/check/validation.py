"""Requests the real Messages API refuses with 400 ``invalid_request_error``, refused here too.

This docstring is the ledger of what is refused and accepted, where each rule and each
message's wording comes from, and what was measured, for the whole check: the top-level
fields and the header here, the messages and their blocks in ``mockapi.check.messages``
(whose docstring points here), the shapes of ``thinking``, ``tools`` and sources in
``mockapi.check.request_shapes``.

``mockapi.check.requests.parse_body`` has already checked the headers' presence, the JSON and
the required fields' types; ``validate_request`` then checks what the real API also
refuses, and ``check`` is what the app calls (a scenario's ``validation: lenient``, or
the CLI's ``--lenient``, skips it). Each refusal is ``BadRequest(400,
"invalid_request_error", message, OUTCOME_INVALID_REQUEST)``; the message names the
field (pydantic-style location: ``messages.1.content.0``), what was expected and what
arrived.

Refused (``/v1/messages``; the rules about ``messages`` and the header hold for
``/v1/messages/count_tokens`` too):

- ``anthropic-version`` not a date ``YYYY-MM-DD``;
- ``max_tokens`` below 0 (``0`` is valid: it pre-warms the prompt cache, see below), or
  above the output limit of a model ``mockapi.check.model_limits`` knows (ids and aliases, with
  the betas that raise a limit; an unknown model has no limit);
- ``thinking`` not an object, of a ``type`` other than ``enabled``, ``disabled``,
  ``adaptive`` or ``between_tools``, an ``enabled`` one without an integer ``budget_tokens``
  of at least 1,024, or with one not below ``max_tokens`` unless the
  ``interleaved-thinking-2025-05-14`` beta is on;
- ``tools`` not a list of objects; a custom tool (no ``type``, or ``custom``) whose ``name``
  does not match ``^[a-zA-Z0-9_-]{1,128}$`` or whose ``input_schema`` is not an object of
  ``type: "object"``; two tools of one name, server tools included (``web_search``...);
- an ``image`` or ``document`` block, in a message or a ``tool_result``, whose ``source`` is
  missing or not an object, of an unknown ``type``, or without what its type needs: image
  ``base64`` a ``media_type`` of ``image/jpeg``, ``image/png``, ``image/gif`` or
  ``image/webp`` and string ``data``, ``url`` a string ``url``, ``file`` a string
  ``file_id``; document ``base64`` ``application/pdf`` and ``data``, ``text``
  ``text/plain`` and ``data``, ``content`` a string or a list, ``url``, ``file`` likewise;
- ``stream`` not a boolean (``"true"`` included);
- ``temperature`` not a number or outside 0..1, and, from API version 2026-10-21 on,
  ``temperature``, ``top_p`` or ``top_k`` at all;
- ``messages`` empty, or longer than 100,000;
- a message that is not an object, a role not ``user``/``assistant``/``system``, a missing
  ``content``, ``content`` neither a string nor a list;
- a content block that is not an object, has no ``type`` or an unknown one (also inside a
  ``tool_result``'s ``content``); a ``text`` block without a string ``text``, a ``tool_use``
  without a string ``id``/``name`` or an object ``input``, a ``tool_result`` without a string
  ``tool_use_id``;
- empty content (``""`` or ``[]``), or an empty ``text`` block, in any message but a final
  ``assistant`` one (a prefill may be empty);
- a ``tool_result`` whose ``tool_use_id`` no ``tool_use`` of the assistant turn just before
  has, and an assistant ``tool_use`` that the user turn just after does not answer.

When a body has several problems, the header's and the top-level fields' come first, then
the one in the earliest message (the API's order is unknown to us).

Where the rules come from: ``max_tokens: 0`` being valid from the current API reference
(platform.claude.com/docs/en/api/typescript/messages, .../api/csharp/messages/create and
.../api/cli/messages/create: "Set to `0` to populate the prompt cache without generating
a response", "minimum: 0"; older copies, .../api/ruby/messages/create, still say "minimum
1" and lack that sentence: they predate it, and no ``anthropic-version`` makes a
difference), and from the SDK (below); the output limits from the sources listed in
``mockapi.check.model_limits``; ``thinking`` from the SDK's ``ThinkingConfigParam`` (its tags;
"Must be ≥1024 and less than `max_tokens`", ``anthropic`` 2.17.0) and the extended-thinking
docs (platform.claude.com/docs/en/build-with-claude/extended-thinking: with interleaved
thinking the budget may exceed ``max_tokens``, being the whole turn's); a custom tool's
``input_schema`` from the SDK's ``ToolParam`` (``type: Required[Literal["object"]]``); the
image and document sources from the SDK's ``ImageBlockParam`` and ``DocumentBlockParam``
(``Base64ImageSource``, ``URLImageSource``, ``FileImageSource``, ``Base64PDFSource``,
``PlainTextSource``, ``ContentBlockSource``, ``URLPDFSource``); the ``system`` role, the 0..1
range of ``temperature`` and the 100,000-message limit from the SDK's own definitions and
docstrings (``anthropic`` 2.16.0 and 0.125.0, ``types/message_create_params.py``: "Set to
`0` to populate the prompt cache without generating a response", ``SystemMessageParam``,
"Ranges from `0.0` to `1.0`"; anthropics/anthropic-sdk-python#893, where the maintainers
say a negative temperature is now refused); the removal of ``temperature``, ``top_p`` and
``top_k`` in API version 2026-10-21 from that version's migration notes as reported
(developersdigest.tech, codersera.com, dev.to/apidog articles on 2026-10-21) and from the
SDK 2.16.0 params, which no longer have them; the published versions from
platform.claude.com/docs/en/api/versioning; the rest from the API's error texts below.

Speed: one hand-written pass over the messages and their blocks (type checks, set
look-ups; the pairing pass only visits tool blocks), one over ``tools`` (a regular
expression per custom tool name), no model building. With the thinking, tool and source
checks added the times below, measured again on a noisier machine, stayed in the same
range (10 to 23 µs for the largest body before and after, about 200 µs for 100 KB). Measured here
(tests/test_validation.py prints it): 6 µs for the largest Claude Code 2.1.235 body (49 KB,
its size is the system prompt and tools), about 100 µs for a 100 KB conversation of 160
tool-using messages, 9 ms for all 1,694 committed bodies; parsing the 100 KB of JSON with
orjson takes about 300 µs. Validating with a pydantic ``TypeAdapter`` built from the SDK's
request TypedDicts (``anthropic.types.beta.MessageCreateParams``, every ``Iterable``
consumed, since pydantic checks those lazily) took 0.6 ms for the largest recorded body
and 0.175 ms on average, and the SDK's literals are stricter than what clients send: the
non-beta types refuse the ``thinking.display: "updates"`` that Claude Code 2.1.306 and
later send, and errors come back as unions of every alternative, not the API's single
line. The SDK is also only a test dependency of this package. So the SDK's definitions
are used where they are cheap and safe: the sets of roles and block ``type`` tags
(``mockapi.check.messages``) are the SDK's (``anthropic`` 2.16.0 and 0.125.0, beta and
non-beta message params), and tests/test_validation.py fails when the installed SDK
declares one they lack; its property test also checks that the bodies it generates as
valid pass the SDK's ``TypeAdapter``.

Where the wording comes from (third-party reports of real API replies, found with
public issue search; "ours" where none was found):

- ``messages.N.content.M: unexpected `tool_use_id` found in `tool_result` blocks: ID.
  Each `tool_result` block must have a corresponding `tool_use` block in the previous
  message.``: anthropics/claude-code#13460 and #18947, router-for-me/CLIProxyAPI#497,
  langchain-ai/langchain#31657. Which ids are listed when a message has several
  unexpected ones is ours (all of that message's, at the first one's block).
- ``messages.N: `tool_use` ids were found without `tool_result` blocks immediately
  after: ID1, ID2. Each `tool_use` block must have a corresponding `tool_result` block in
  the next message.``: anthropics/claude-code#5989, #1237, #5060, Kilo-Org/kilocode#5163
  (the API quotes both block names in backticks).
- ``messages: at least one message is required``: langchain-ai/langchain#31657.
- ``messages.N: all messages must have non-empty content except for the optional final
  assistant message``: anthropics/claude-code#4416, #6774, tidyverse/ellmer#709 (an
  empty list); that ``""`` draws the same reply is ours.
- ``messages: text content blocks must be non-empty``: anthropics/claude-code#59812,
  #53473 (the API names no index; ours adds where).
- ``messages.N.content.M: Input tag 'X' found using 'type' does not match any of the
  expected tags: ...``: AstrBotDevs/AstrBot#4444 (the tags listed are the SDK's).
- ``messages.N.content.M.text.text: Input should be a valid string``:
  simonw/llm-anthropic#23 (the location carries the block's tag).
- ``anthropic-version: "X" is not a valid version``: directus-labs/extensions#285,
  decolua/9router#1227 (the API also refuses well-formed dates it does not know).
- ``temperature: Extra inputs are not permitted`` (API version 2026-10-21):
  ttlequals0/MinusPod release 2.101.10 and the version's migration notes.
- ``stream: Input should be a valid boolean``: diegosouzapw/OmniRoute#677 (relayed by a
  proxy).
- ``max_tokens: 200000 > 64000, which is the maximum allowed number of output tokens for
  claude-sonnet-4-5-20250929``: BerriAI/litellm#15715, OpenHands/software-agent-sdk#596,
  anthropics/claude-code#24451 (claude-opus-4-5-20251101), Effect-TS/effect#7129
  (claude-opus-4-8, 128000).
- ``thinking.enabled.budget_tokens: Input should be greater than or equal to 1024``:
  themaximalist/llm.js#30.
- ```max_tokens` must be greater than `thinking.budget_tokens`. Please consult our
  documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#max-
  tokens-and-context-window-size``: router-for-me/CLIProxyAPI#413, vercel/ai#7927,
  liuw1535/antigravity2api-nodejs#149 (ours adds the two values).
- ``tools.N.custom.name: String should match pattern '^[a-zA-Z0-9_-]{1,128}$'``:
  CircleCI-Public/mcp-server-circleci#110, modelcontextprotocol/modelcontextprotocol#1345
  (from mid-2025; earlier replies, anthropics/claude-code#985 and apify/tester-mcp-client#11,
  show ``{1,64}``).
- ``tools: Tool names must be unique.``: anthropics/claude-code#10687, microsoft/vscode#276110,
  danny-avila/LibreChat#13162 (a custom ``web_search`` beside the server tool); ours adds
  the name and both places.
- ``messages.N.content.M.tool_result.content.K.image.source.base64.media_type: Input should
  be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'``: anthropics/claude-code#5955;
  the other source fields' refusals follow its location scheme (ours).
- Ours, in pydantic's wording: the ``thinking`` tag and type refusals, the custom tool's
  missing ``name`` or ``input_schema`` and its ``type``, ``messages.N.role: Input should
  be 'user', 'assistant' or 'system'`` (reports show ``'user' or 'assistant'``, from
  before ``system`` messages),
  ``max_tokens: Input should be greater than or equal to 0`` (reports show ``... to 1``,
  from before ``max_tokens: 0`` became valid), ``temperature: Input should be less than
  or equal to 1`` (anthropics/anthropic-sdk-python#893 shows an older ``temperature:
  range: -1 or 0..1``), ``Field required``, ``Input should be a valid dictionary``,
  ``Unable to extract tag using discriminator 'type'``, and the 100,000-message limit
  (the SDK documents the limit, not the reply).

Every message also says what arrived (``, got ...``), as ``mockapi.check.requests`` does.

Still accepted although the real API refuses it, or may:

- ``null`` for ``stream`` or ``temperature`` (taken as absent);
- unknown top-level fields, unknown fields inside messages, blocks, ``thinking`` and
  tools, and unknown ``anthropic-beta`` values (the API's rule for them is unknown to us;
  Claude Code sends unpublished ones); any ``thinking.display`` (the docs list
  ``summarized`` and ``omitted``; Claude Code 2.1.306 and later send ``"updates"``, which
  the SDK's beta types know);
- a well-formed ``anthropic-version`` the API does not know (only 2023-01-01, 2023-06-01
  and 2026-10-21 are published); version 2026-10-21's refusal of ``document`` blocks in
  ``assistant`` messages and of non-empty ``citations`` in ``user`` text blocks;
- a repeated ``anthropic-version`` header: the first value is checked (the API reads the
  joined ``"2023-06-01, 2023-06-01"`` and refuses it);
- ``model`` names: any string (the mock answers as the scenario says);
- ``max_tokens`` of a model not in ``mockapi.check.model_limits`` (any value), the Message
  Batches API's larger limits, and ``max_tokens: 0`` together with ``stream``, thinking or
  structured outputs (reported as refused);
- what depends on the model in ``thinking``: Claude Opus 4.7 and later refuse ``enabled``
  (the extended-thinking docs), some refuse ``disabled`` or ``adaptive``; the budget
  against ``max_tokens`` when the interleaved-thinking beta is on;
- ``tool_choice``, ``output_config``, ``metadata``, ``service_tier``, ``container``,
  ``mcp_servers``, ``context_management`` and the other optional top-level objects: their
  shapes and enums are not checked; ``top_p`` and ``top_k`` ranges;
- ``system``: its type and its blocks are not checked (empty text blocks included);
- ``tools``: a custom tool's ``input_schema`` beyond its ``type`` (a valid JSON Schema or
  not), its ``description``; a server tool's ``type`` (any string is taken for a version the
  API may know) and its fields; ``mcp_toolset`` names against ``mcp_servers``;
- token limits: the context window, ``prompt is too long`` (scripted as a reply when wanted);
- images and documents: whether base64 ``data`` decodes and matches its media type, URLs'
  form and reach, file ids, sizes and counts, a ``content`` source's blocks;
- blocks' fields beyond those listed above (``thinking`` signatures, ``cache_control``
  placement and the limit of 4 breakpoints, citations, ``tool_result.is_error``...);
- whitespace-only text blocks (reported as refused: ``text content blocks must contain
  non-whitespace text``), trailing whitespace in a final assistant message, empty text
  blocks in a final assistant message and inside ``tool_result`` content;
- duplicate ``tool_use`` ids; ``tool_use`` in user messages and ``tool_result`` in
  assistant ones; a final assistant message with ``tool_use`` blocks; pairing of server
  tools (``server_tool_use``, ``mcp_tool_use``, ``advisor_tool_result``...); a run of
  consecutive same-role messages counts as one turn, and ``system`` messages are skipped,
  when pairing ``tool_use`` with ``tool_result``;
- ``system`` messages: accepted under every API version (the 0.125.0 SDK has them in its
  beta types only); their content is not required and never counts as empty;
- order: consecutive messages of the same role are accepted (the API combines them), and
  a first message from the assistant is accepted;
- ``/v1/messages/count_tokens``: its own fields beyond ``messages`` are not checked
  (``thinking``, ``tools`` included; image and document sources inside messages are).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Final, Literal

from mockapi.check.messages import check_messages
from mockapi.check.model_limits import output_limit
from mockapi.check.request_shapes import check_thinking, check_tools
from mockapi.check.request_shapes import got as _got
from mockapi.check.request_shapes import refuse as _refuse
from mockapi.check.request_shapes import show as _show

__all__ = ["MAX_MESSAGES", "SAMPLING_REMOVED_IN", "ValidationMode", "check", "validate_request"]

ValidationMode = Literal["strict", "lenient"]  # a scenario's `validation`

MAX_MESSAGES: Final = 100_000  # "There is a limit of 100,000 messages in a single request"
# From this API version on, temperature, top_p and top_k are refused, even at their defaults.
SAMPLING_REMOVED_IN: Final = "2026-10-21"

_CREATE_PATH: Final = "/v1/messages"
_SAMPLING: Final = ("temperature", "top_p", "top_k")
_VERSION = re.compile(r"\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])")
_MISSING: Final = object()


def check(body: dict[str, Any], headers: Mapping[str, str], path: str, *, lenient: bool) -> None:
    """What the app calls after ``parse_body``: ``validate_request`` unless ``lenient``."""
    if not lenient:
        validate_request(body, headers, path)


def validate_request(body: dict[str, Any], headers: Mapping[str, str], path: str) -> None:
    """Raise ``BadRequest`` (400 invalid_request_error) for what the real API refuses.

    ``body`` is the parsed JSON object of a request to ``path`` (``/v1/messages`` or
    ``/v1/messages/count_tokens``); ``headers`` are its headers, lower-case names.
    """
    version = headers.get("anthropic-version")
    if version is not None and not _VERSION.fullmatch(version):
        _refuse(f"anthropic-version: {json.dumps(version)} is not a valid version, expected a "
                f"date YYYY-MM-DD such as 2023-06-01")
    if version is not None and version >= SAMPLING_REMOVED_IN:
        for name in _SAMPLING:
            if name in body:
                _refuse(f"{name}: Extra inputs are not permitted (API version {version}), "
                        f"got {_show(body[name])}")
    if path == _CREATE_PATH:
        _check_create_fields(body, headers.get("anthropic-beta"))
    messages = body.get("messages", _MISSING)
    if messages is _MISSING:
        _refuse("messages: Field required")
    if not isinstance(messages, list):
        _refuse(f"messages: Input should be a valid list, got {_got(messages)}")
    if not messages:
        _refuse("messages: at least one message is required, got []")
    if len(messages) > MAX_MESSAGES:
        _refuse(f"messages: a request may hold at most {MAX_MESSAGES} messages, "
                f"got {len(messages)}")
    check_messages(messages)


def _check_create_fields(body: dict[str, Any], betas: str | None) -> None:
    max_tokens = body.get("max_tokens")
    if type(max_tokens) is int:
        if max_tokens < 0:
            _refuse(f"max_tokens: Input should be greater than or equal to 0, got {max_tokens}")
        limit = output_limit(body.get("model"), betas)
        if limit is not None and max_tokens > limit.max_tokens:
            _refuse(f"max_tokens: {max_tokens} > {limit.max_tokens}, which is the maximum allowed "
                    f"number of output tokens for {limit.model_id}")
    stream = body.get("stream", False)
    if stream is not True and stream is not False and stream is not None:
        _refuse(f"stream: Input should be a valid boolean, got {_got(stream)}")
    temperature = body.get("temperature")
    if temperature is not None:
        if isinstance(temperature, bool) or not isinstance(temperature, int | float):
            _refuse(f"temperature: Input should be a valid number, "
                    f"got {_got(temperature)}")
        if temperature < 0:
            _refuse(f"temperature: Input should be greater than or equal to 0, got {temperature}")
        if temperature > 1:
            _refuse(f"temperature: Input should be less than or equal to 1, got {temperature}")
    check_thinking(body.get("thinking"), max_tokens, betas)
    check_tools(body.get("tools"))
