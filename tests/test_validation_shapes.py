"""The refusals of a model's output limit, and of ``thinking``, ``tools``, image and
document shapes (mockapi.check.model_limits, mockapi.check.request_shapes): each refusal in the API's
wording, and a valid body of each documented shape accepted."""

from __future__ import annotations

import typing
from typing import Any

import pytest

from mockapi.check.model_limits import ModelLimit, output_limit
from mockapi.check.request_shapes import THINKING_TYPES, TOOL_NAME
from mockapi.check.validation import validate_request
from tests.refusals import COUNT, CREATE, HEADERS, refusal, refused_only_when_strict

INTERLEAVED = {**HEADERS, "anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14"}
OVER = "which is the maximum allowed number of output tokens for"
BUDGET_OVER = ("`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our "
               "documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
               "#max-tokens-and-context-window-size")
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="


def body(*content: Any, **fields: Any) -> dict[str, Any]:
    messages = [{"role": "user", "content": list(content) or "hi"}]
    return {"model": "claude-sonnet-4-5", "max_tokens": 1024, "messages": messages, **fields}


def tool(name: Any = "Read", **fields: Any) -> dict[str, Any]:
    return {"name": name, "description": "Read a file",
            "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}},
            **fields}


def image(source: Any) -> dict[str, Any]:
    return {"type": "image", "source": source}


def document(source: Any) -> dict[str, Any]:
    return {"type": "document", "source": source}


def in_tool_result(block: dict[str, Any]) -> dict[str, Any]:
    """``block`` inside a tool_result that answers the assistant's tool_use just before."""
    request = body()
    request["messages"] = [
        {"role": "user", "content": "look"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_a", "name": "Read",
                                           "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_a",
                                      "content": [block]}]}]
    return request




REFUSED: list[Any] = [
    # max_tokens above the model's documented output limit, in the API's words
    pytest.param(body(max_tokens=200_000, model="claude-sonnet-4-5-20250929"), HEADERS,
                 f"max_tokens: 200000 > 64000, {OVER} claude-sonnet-4-5-20250929",
                 id="max-tokens-over-sonnet-4-5"),
    pytest.param(body(max_tokens=64_001), HEADERS,
                 f"max_tokens: 64001 > 64000, {OVER} claude-sonnet-4-5-20250929",
                 id="max-tokens-over-alias-names-the-dated-id"),
    pytest.param(body(max_tokens=10**12, model="claude-haiku-4-5"), HEADERS,
                 f"max_tokens: 1000000000000 > 64000, {OVER} claude-haiku-4-5-20251001",
                 id="max-tokens-a-trillion"),
    pytest.param(body(max_tokens=128_001, model="claude-opus-4-5-20251101"), HEADERS,
                 f"max_tokens: 128001 > 64000, {OVER} claude-opus-4-5-20251101",
                 id="max-tokens-over-opus-4-5"),
    pytest.param(body(max_tokens=9_999_999, model="claude-opus-4-8"), HEADERS,
                 f"max_tokens: 9999999 > 128000, {OVER} claude-opus-4-8", id="max-tokens-over-opus-4-8"),
    pytest.param(body(max_tokens=32_001, model="claude-opus-4-1"), HEADERS,
                 f"max_tokens: 32001 > 32000, {OVER} claude-opus-4-1-20250805",
                 id="max-tokens-over-opus-4-1"),
    pytest.param(body(max_tokens=4097, model="claude-3-haiku-20240307"), HEADERS,
                 f"max_tokens: 4097 > 4096, {OVER} claude-3-haiku-20240307", id="max-tokens-over-haiku-3"),
    pytest.param(body(max_tokens=64_001, model="claude-3-7-sonnet-20250219"), HEADERS,
                 f"max_tokens: 64001 > 64000, {OVER} claude-3-7-sonnet-20250219",
                 id="max-tokens-over-sonnet-3-7-without-the-beta"),
    pytest.param(body(max_tokens=128_001, model="claude-3-7-sonnet-latest"),
                 {**HEADERS, "anthropic-beta": "output-128k-2025-02-19"},
                 f"max_tokens: 128001 > 128000, {OVER} claude-3-7-sonnet-20250219",
                 id="max-tokens-over-sonnet-3-7-with-the-beta"),
    pytest.param(body(max_tokens=100_000, model="claude-sonnet-4-5"),
                 {**HEADERS, "anthropic-beta": "output-128k-2025-02-19"},
                 f"max_tokens: 100000 > 64000, {OVER} claude-sonnet-4-5-20250929",
                 id="the-128k-beta-raises-sonnet-3-7-only"),
    # thinking
    pytest.param(body(thinking={"type": "enabled", "budget_tokens": 512}), HEADERS,
                 "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024, "
                 "got 512", id="thinking-budget-below-1024"),
    pytest.param(body(thinking={"type": "enabled"}), HEADERS,
                 "thinking.enabled.budget_tokens: Field required", id="thinking-budget-missing"),
    pytest.param(body(thinking={"type": "enabled", "budget_tokens": "2048"}), HEADERS,
                 "thinking.enabled.budget_tokens: Input should be a valid integer, got string '2048'",
                 id="thinking-budget-string"),
    pytest.param(body(max_tokens=2048, thinking={"type": "enabled", "budget_tokens": 2048}), HEADERS,
                 f"{BUDGET_OVER} (got max_tokens 2048, thinking.budget_tokens 2048)",
                 id="thinking-budget-not-below-max-tokens"),
    pytest.param(body(thinking={"type": "on"}), HEADERS,
                 "thinking: Input tag 'on' found using 'type' does not match any of the expected "
                 "tags: 'adaptive', 'between_tools', 'disabled', 'enabled'", id="thinking-type-unknown"),
    pytest.param(body(thinking={"budget_tokens": 2048}), HEADERS,
                 "thinking: Unable to extract tag using discriminator 'type', got no `type`",
                 id="thinking-type-missing"),
    pytest.param(body(thinking=True), HEADERS,
                 "thinking: Input should be a valid dictionary, got boolean true", id="thinking-not-object"),
    # tools
    pytest.param(body(tools=[tool(), tool("Bash"), tool("Read")]), HEADERS,
                 "tools: Tool names must be unique. Got 'Read' at tools.0 and tools.2",
                 id="tool-names-duplicate"),
    pytest.param(body(tools=[{"type": "web_search_20250305", "name": "web_search"},
                             tool("web_search")]), HEADERS,
                 "tools: Tool names must be unique. Got 'web_search' at tools.0 and tools.1",
                 id="tool-name-taken-by-a-server-tool"),
    pytest.param(body(tools=[tool(), tool("service.doSomething")]), HEADERS,
                 "tools.1.custom.name: String should match pattern '^[a-zA-Z0-9_-]{1,128}$', got "
                 "'service.doSomething'", id="tool-name-with-a-dot"),
    pytest.param(body(tools=[tool("x" * 129)]), HEADERS,
                 "tools.0.custom.name: String should match pattern '^[a-zA-Z0-9_-]{1,128}$', got "
                 f"'{'x' * 76}...", id="tool-name-too-long"),
    pytest.param(body(tools=[tool("")]), HEADERS,
                 "tools.0.custom.name: String should match pattern '^[a-zA-Z0-9_-]{1,128}$', got ''",
                 id="tool-name-empty"),
    pytest.param(body(tools=[{"input_schema": {"type": "object"}}]), HEADERS,
                 "tools.0.custom.name: Field required", id="tool-name-missing"),
    pytest.param(body(tools=[tool(7)]), HEADERS,
                 "tools.0.custom.name: Input should be a valid string, got number 7", id="tool-name-number"),
    pytest.param(body(tools=[{"name": "Read"}]), HEADERS,
                 "tools.0.custom.input_schema: Field required", id="tool-schema-missing"),
    pytest.param(body(tools=[tool(input_schema={"type": "array"})]), HEADERS,
                 "tools.0.custom.input_schema.type: Input should be 'object', got 'array'",
                 id="tool-schema-not-object-type"),
    pytest.param(body(tools=[tool(input_schema={"properties": {}})]), HEADERS,
                 "tools.0.custom.input_schema.type: Field required", id="tool-schema-no-type"),
    pytest.param(body(tools=[tool(input_schema="{}")]), HEADERS,
                 "tools.0.custom.input_schema: Input should be a valid dictionary, got string '{}'",
                 id="tool-schema-string"),
    pytest.param(body(tools=[tool(type="custom", name="a b")]), HEADERS,
                 "tools.0.custom.name: String should match pattern '^[a-zA-Z0-9_-]{1,128}$', got 'a b'",
                 id="tool-typed-custom-checked-too"),
    pytest.param(body(tools={"Read": tool()}), HEADERS,
                 'tools: Input should be a valid list, got object {"Read":{"name":"Read",'
                 '"description":"Read a file","input_schema":{"type":"ob...', id="tools-not-a-list"),
    pytest.param(body(tools=["Read"]), HEADERS,
                 "tools.0: Input should be a valid dictionary, got string 'Read'", id="tool-not-object"),
    pytest.param(body(tools=[{"type": 20250305, "name": "web_search"}]), HEADERS,
                 "tools.0.type: Input should be a valid string, got number 20250305",
                 id="tool-type-not-string"),
    # images
    pytest.param(body(image({"type": "base64", "media_type": "image/bmp", "data": PNG})), HEADERS,
                 "messages.0.content.0.image.source.base64.media_type: Input should be 'image/jpeg', "
                 "'image/png', 'image/gif' or 'image/webp', got 'image/bmp'", id="image-media-type"),
    pytest.param(in_tool_result(image({"type": "base64", "media_type": "image/svg+xml", "data": "x"})),
                 HEADERS,
                 "messages.2.content.0.tool_result.content.0.image.source.base64.media_type: Input "
                 "should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp', got 'image/svg+xml'",
                 id="image-in-tool-result-media-type"),
    pytest.param(body(image({"type": "base64", "media_type": "image/png"})), HEADERS,
                 "messages.0.content.0.image.source.base64.data: Field required", id="image-data-missing"),
    pytest.param(body(image({"type": "base64", "data": PNG})), HEADERS,
                 "messages.0.content.0.image.source.base64.media_type: Field required",
                 id="image-media-type-missing"),
    pytest.param(body(image({"type": "base64", "media_type": "image/png", "data": [1, 2]})), HEADERS,
                 "messages.0.content.0.image.source.base64.data: Input should be a valid string, got "
                 "array [1,2]", id="image-data-array"),
    pytest.param(body(image({"type": "url"})), HEADERS,
                 "messages.0.content.0.image.source.url.url: Field required", id="image-url-missing"),
    pytest.param(body(image({"type": "file", "file_id": None})), HEADERS,
                 "messages.0.content.0.image.source.file.file_id: Input should be a valid string, got null",
                 id="image-file-id-null"),
    pytest.param(body(image({"type": "path", "path": "/tmp/a.png"})), HEADERS,
                 "messages.0.content.0.image.source: Input tag 'path' found using 'type' does not match "
                 "any of the expected tags: 'base64', 'file', 'url'", id="image-source-type-unknown"),
    pytest.param(body(image({"media_type": "image/png", "data": PNG})), HEADERS,
                 "messages.0.content.0.image.source: Unable to extract tag using discriminator 'type', "
                 "got no `type`", id="image-source-type-missing"),
    pytest.param(body({"type": "image"}), HEADERS,
                 "messages.0.content.0.image.source: Field required", id="image-source-missing"),
    pytest.param(body(image("data:image/png;base64," + PNG[:20])), HEADERS,
                 "messages.0.content.0.image.source: Input should be a valid dictionary, got string "
                 "'data:image/png;base64,iVBORw0KGgoAAAANSUhE'", id="image-source-data-url"),
    # documents
    pytest.param(body(document({"type": "base64", "media_type": "application/msword", "data": "x"})),
                 HEADERS, "messages.0.content.0.document.source.base64.media_type: Input should be "
                 "'application/pdf', got 'application/msword'", id="document-base64-not-pdf"),
    pytest.param(body(document({"type": "text", "media_type": "text/markdown", "data": "# hi"})),
                 HEADERS, "messages.0.content.0.document.source.text.media_type: Input should be "
                 "'text/plain', got 'text/markdown'", id="document-text-not-plain"),
    pytest.param(body(document({"type": "text", "media_type": "text/plain"})), HEADERS,
                 "messages.0.content.0.document.source.text.data: Field required",
                 id="document-text-no-data"),
    pytest.param(body(document({"type": "content", "content": 3})), HEADERS,
                 "messages.0.content.0.document.source.content.content: Input should be a valid string "
                 "or a valid list of content blocks, got number 3", id="document-content-number"),
    pytest.param(body(document({"type": "content"})), HEADERS,
                 "messages.0.content.0.document.source.content.content: Field required",
                 id="document-content-missing"),
    pytest.param(body(document({"type": "url", "url": 5})), HEADERS,
                 "messages.0.content.0.document.source.url.url: Input should be a valid string, got "
                 "number 5", id="document-url-number"),
    pytest.param(body(document({"type": "file"})), HEADERS,
                 "messages.0.content.0.document.source.file.file_id: Field required",
                 id="document-file-id-missing"),
    pytest.param(body(document({"type": "image", "data": "x"})), HEADERS,
                 "messages.0.content.0.document.source: Input tag 'image' found using 'type' does not "
                 "match any of the expected tags: 'base64', 'content', 'file', 'text', 'url'",
                 id="document-source-type-unknown"),
]


@pytest.mark.parametrize(("request_body", "headers", "expected"), REFUSED)
def test_refused_like_the_api(request_body: dict[str, Any], headers: dict[str, str],
                              expected: str) -> None:
    assert refusal(request_body, headers) == expected


@pytest.mark.parametrize(("request_body", "headers", "expected"), REFUSED)
def test_lenient_accepts_what_strict_refuses(request_body: dict[str, Any], headers: dict[str, str],
                                             expected: str) -> None:
    refused_only_when_strict(request_body, headers)


ACCEPTED: list[Any] = [
    # max_tokens
    pytest.param(body(max_tokens=0), HEADERS, id="max-tokens-0-prewarms-the-cache"),
    pytest.param(body(max_tokens=0, model="claude-opus-4-6"), HEADERS, id="max-tokens-0-known-model"),
    pytest.param(body(max_tokens=64_000), HEADERS, id="max-tokens-at-the-limit"),
    pytest.param(body(max_tokens=128_000, model="claude-opus-4-6"), HEADERS, id="opus-4-6-128k"),
    pytest.param(body(max_tokens=128_000, model="claude-sonnet-4-6"), HEADERS, id="sonnet-4-6-128k"),
    pytest.param(body(max_tokens=128_000, model="claude-3-7-sonnet-20250219"),
                 {**HEADERS, "anthropic-beta": "interleaved-thinking-2025-05-14, output-128k-2025-02-19"},
                 id="sonnet-3-7-with-the-128k-beta"),
    pytest.param(body(max_tokens=8192, model="claude-3-5-sonnet-20240620"),
                 {**HEADERS, "anthropic-beta": "max-tokens-3-5-sonnet-2024-07-15"},
                 id="sonnet-3-5-with-the-8k-beta"),
    pytest.param(body(max_tokens=10**12, model="claude-unknown-9"), HEADERS, id="unknown-model-no-limit"),
    pytest.param(body(max_tokens=10**12, model="anthropic.claude-sonnet-4-5-20250929-v1:0"), HEADERS,
                 id="a-bedrock-id-is-not-known"),
    # thinking: every shape the committed journals hold, and the documented ones
    pytest.param(body(max_tokens=32000, thinking={"type": "enabled", "budget_tokens": 31999}), HEADERS,
                 id="thinking-enabled"),
    pytest.param(body(max_tokens=32000, thinking={"type": "enabled", "budget_tokens": 31999,
                                                  "display": "updates"}), HEADERS,
                 id="thinking-display-updates-claude-code"),
    pytest.param(body(thinking={"type": "enabled", "budget_tokens": 1024, "display": "omitted"}),
                 INTERLEAVED, id="thinking-budget-1024-equal-to-max-interleaved"),
    pytest.param(body(max_tokens=16000, thinking={"type": "enabled", "budget_tokens": 100_000}),
                 INTERLEAVED, id="thinking-budget-over-max-interleaved"),
    pytest.param(body(thinking={"type": "disabled"}), HEADERS, id="thinking-disabled"),
    pytest.param(body(thinking={"type": "adaptive", "display": "summarized"}), HEADERS,
                 id="thinking-adaptive"),
    pytest.param(body(thinking={"type": "between_tools"}), HEADERS, id="thinking-between-tools"),
    pytest.param(body(thinking=None), HEADERS, id="thinking-null"),
    # tools
    pytest.param(body(tools=[]), HEADERS, id="tools-empty"),
    pytest.param(body(tools=[tool(), tool("mcp__github__create_issue", strict=True),
                             tool("x" * 128, type="custom", cache_control={"type": "ephemeral"})]),
                 HEADERS, id="custom-tools"),
    pytest.param(body(tools=[tool(input_schema={"type": "object", "$schema": "x", "anything": 1})]),
                 HEADERS, id="tool-schema-extra-keys"),
    pytest.param(body(tools=[
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 5},
        {"type": "bash_20250124", "name": "bash"},
        {"type": "text_editor_20250728", "name": "str_replace_based_edit_tool"},
        {"type": "computer_20250124", "name": "computer", "display_width_px": 1024,
         "display_height_px": 768},
        {"type": "code_execution_20250825", "name": "code_execution"},
        {"type": "mcp_toolset", "mcp_server_name": "github"},
        {"type": "mcp_toolset", "mcp_server_name": "linear"},
        tool()]), HEADERS, id="server-and-versioned-tools"),
    # images and documents, every documented source
    pytest.param(body(*(image({"type": "base64", "media_type": m, "data": PNG})
                        for m in ("image/jpeg", "image/png", "image/gif", "image/webp")),
                      image({"type": "url", "url": "https://example.com/a.png"}),
                      image({"type": "file", "file_id": "file_011"}),
                      {"type": "text", "text": "what is this?"}), HEADERS, id="image-sources"),
    pytest.param(body(document({"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="}),
                      document({"type": "text", "media_type": "text/plain", "data": "plain"}),
                      document({"type": "content", "content": [{"type": "text", "text": "a"}]}),
                      document({"type": "content", "content": "a string"}),
                      document({"type": "url", "url": "https://example.com/a.pdf"}),
                      {**document({"type": "file", "file_id": "file_011"}), "title": "t",
                       "citations": {"enabled": True}}), HEADERS, id="document-sources"),
    pytest.param(in_tool_result(image({"type": "base64", "media_type": "image/png", "data": PNG})),
                 HEADERS, id="image-in-tool-result"),
]


@pytest.mark.parametrize(("request_body", "headers"), ACCEPTED)
def test_accepted(request_body: dict[str, Any], headers: dict[str, str]) -> None:
    validate_request(request_body, headers, CREATE)


def test_count_tokens_checks_images_and_not_the_create_fields() -> None:
    counted = body(max_tokens=10**12, thinking={"type": "enabled", "budget_tokens": 1},
                   tools=[tool(), tool()])
    validate_request(counted, HEADERS, COUNT)  # not fields of count_tokens: not checked
    bad_image = body(image({"type": "base64", "media_type": "image/bmp", "data": PNG}))
    assert refusal(bad_image, HEADERS, COUNT).startswith(
        "messages.0.content.0.image.source.base64.media_type: Input should be")


def test_the_limit_table() -> None:
    assert output_limit("claude-sonnet-4-5") == ModelLimit("claude-sonnet-4-5-20250929", 64_000)
    assert output_limit("claude-sonnet-4-5-20250929") == output_limit("claude-sonnet-4-5")
    assert output_limit("claude-3-7-sonnet-20250219", "output-128k-2025-02-19") == ModelLimit(
        "claude-3-7-sonnet-20250219", 128_000)
    assert output_limit("claude-opus-4-6", "output-128k-2025-02-19") == ModelLimit(
        "claude-opus-4-6", 128_000)
    assert output_limit("claude-sonnet-4-5[1m]") is None
    assert output_limit(None) is None and output_limit(["claude-sonnet-4-5"]) is None


def test_the_tool_name_pattern_takes_no_trailing_newline() -> None:
    assert TOOL_NAME.fullmatch("Read") and not TOOL_NAME.fullmatch("Read\n")
    assert refusal(body(tools=[tool("Read\n")])).startswith("tools.0.custom.name: String should")


def test_the_thinking_tags_are_every_one_the_sdk_declares() -> None:
    types_ = pytest.importorskip("anthropic.types")
    beta = pytest.importorskip("anthropic.types.beta")
    declared = {tag for union in (types_.ThinkingConfigParam, beta.BetaThinkingConfigParam)
                for member in typing.get_args(union)
                for tag in typing.get_args(typing.get_type_hints(member)["type"])}
    assert "enabled" in declared
    assert declared == THINKING_TYPES, "update THINKING_TYPES in mockapi/check/request_shapes.py"
