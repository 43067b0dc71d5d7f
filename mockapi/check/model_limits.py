"""The most output tokens (``max_tokens``) each known Claude model takes, and where each
number comes from.

The real API refuses a larger ``max_tokens`` with 400 ``invalid_request_error``: ``max_tokens:
200000 > 64000, which is the maximum allowed number of output tokens for
claude-sonnet-4-5-20250929`` (BerriAI/litellm#15715, OpenHands/software-agent-sdk#596;
anthropics/claude-code#24451 for claude-opus-4-5-20251101, Effect-TS/effect#7129 for
claude-opus-4-8). ``mockapi.check.validation`` refuses it likewise, naming the model's dated id
where it has one (the replies reported name dated ids; that an alias is named by its dated
id is ours).

A model not in the table, or named some other way (a Bedrock or Vertex id, a ``[1m]``
suffix), has no limit here: the mock answers any model as its scenario says, and refusing a
model it does not know would refuse the newest ones.

Sources, where "overview" is the Models overview (platform.claude.com/docs/en/about-claude/
models/overview, its latest-models and legacy-models tables) and "page" the model's own page
(platform.claude.com/docs/en/models/<name>/overview):

- 128,000: Claude Opus 4.6 (its page: "Max output: 128K tokens"), Sonnet 4.6 (its page, as
  cited by withceleste/celeste-python#387 and the overview as cited by Effect-TS/effect#7129;
  one third-party note says 64K, the higher is kept: a mock stricter than the API is the
  worse error), Opus 4.7 and 4.8 (the overview, Effect-TS/effect#7129, which quotes the
  API's reply for claude-opus-4-8), Opus 5 and Sonnet 5 (their pages);
- 64,000: Sonnet 4.5, Opus 4.5 (the API's replies above), Haiku 4.5 (the overview's latest
  models table), Sonnet 4 and Sonnet 3.7 (the overview's legacy table);
- 32,000: Opus 4 and Opus 4.1 (the legacy table);
- 8,192: Claude Haiku 3.5 and Sonnet 3.5 (October 2024); 4,096: Opus 3, Sonnet 3, Haiku 3
  and Sonnet 3.5 (June 2024) (the legacy table).

Betas that raise a limit: ``output-128k-2025-02-19`` takes Claude Sonnet 3.7 to 128,000
("only available in Claude Sonnet 3.7", the extended-thinking docs and the legacy table's
footnote), ``max-tokens-3-5-sonnet-2024-07-15`` takes Sonnet 3.5 (June 2024) to 8,192 (the
July 2024 developer newsletter, platform.claude.com/docs/en/developer-newsletter/july2024).
The Message Batches API's larger limits (``output-300k-2026-03-24``) do not apply: the mock
serves the synchronous Messages API only.
"""

from __future__ import annotations

from typing import Final, NamedTuple

__all__ = ["ModelLimit", "output_limit"]


class ModelLimit(NamedTuple):
    """A model's output limit: the id the API names in its refusal, and the limit."""

    model_id: str
    max_tokens: int


# (dated id or, from Claude 4.6 on, the dateless id; aliases; limit)
_MODELS: Final[tuple[tuple[str, tuple[str, ...], int], ...]] = (
    ("claude-opus-5", (), 128_000),
    ("claude-sonnet-5", (), 128_000),
    ("claude-opus-4-8", (), 128_000),
    ("claude-opus-4-7", (), 128_000),
    ("claude-opus-4-6", (), 128_000),
    ("claude-sonnet-4-6", (), 128_000),
    ("claude-opus-4-5-20251101", ("claude-opus-4-5",), 64_000),
    ("claude-sonnet-4-5-20250929", ("claude-sonnet-4-5",), 64_000),
    ("claude-haiku-4-5-20251001", ("claude-haiku-4-5",), 64_000),
    ("claude-opus-4-1-20250805", ("claude-opus-4-1",), 32_000),
    ("claude-opus-4-20250514", ("claude-opus-4-0",), 32_000),
    ("claude-sonnet-4-20250514", ("claude-sonnet-4-0",), 64_000),
    ("claude-3-7-sonnet-20250219", ("claude-3-7-sonnet-latest",), 64_000),
    ("claude-3-5-sonnet-20241022", ("claude-3-5-sonnet-latest",), 8_192),
    ("claude-3-5-haiku-20241022", ("claude-3-5-haiku-latest",), 8_192),
    ("claude-3-5-sonnet-20240620", (), 4_096),
    ("claude-3-opus-20240229", ("claude-3-opus-latest",), 4_096),
    ("claude-3-sonnet-20240229", (), 4_096),
    ("claude-3-haiku-20240307", (), 4_096),
)
_LIMITS: Final[dict[str, ModelLimit]] = {
    name: ModelLimit(model_id, limit)
    for model_id, aliases, limit in _MODELS for name in (model_id, *aliases)}
# beta -> (the model it raises, its limit with the beta)
_BETAS: Final[dict[str, tuple[str, int]]] = {
    "output-128k-2025-02-19": ("claude-3-7-sonnet-20250219", 128_000),
    "max-tokens-3-5-sonnet-2024-07-15": ("claude-3-5-sonnet-20240620", 8_192),
}


def output_limit(model: object, betas: str | None = None) -> ModelLimit | None:
    """The output limit of ``model`` given the ``anthropic-beta`` header, or ``None`` when
    the model is not in the table (no limit)."""
    if type(model) is not str:
        return None
    limit = _LIMITS.get(model)
    if limit is None or not betas:
        return limit
    for beta in betas.split(","):
        raised = _BETAS.get(beta.strip())
        if raised is not None and raised[0] == limit.model_id:
            return ModelLimit(limit.model_id, raised[1])
    return limit
