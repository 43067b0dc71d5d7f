"""A Messages API request read and checked before any rule sees it: size, headers, JSON, fields.

Refusals carry the status, error type and wording the real API uses, saying
what was expected and what arrived.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from starlette.requests import Request

from mockapi.check.repeated_parts import RepeatedParts
from mockapi.journal.records import OUTCOME_INVALID_REQUEST, OUTCOME_TOO_LARGE, Outcome

__all__ = ["MAX_BODY_BYTES", "REQUIRED_FIELDS", "BadRequest", "is_json", "parse_body",
           "read_body"]

MAX_BODY_BYTES = 32 * 1024 * 1024  # the real API's request size limit
REQUIRED_FIELDS = {
    "/v1/messages": (("model", str), ("max_tokens", int), ("messages", list)),
    "/v1/messages/count_tokens": (("model", str), ("messages", list)),
}

_TYPE_NAMES = {str: "string", int: "integer", list: "list"}  # pydantic's wording, as the API


class BadRequest(Exception):
    """A refused request: the reply's status and error type, and the journal's outcome."""

    def __init__(self, status: int, error_type: str, message: str, outcome: Outcome):
        super().__init__(message)
        self.status, self.error_type, self.message, self.outcome = (
            status, error_type, message, outcome)


async def read_body(request: Request, limit: int) -> bytes:
    """The whole body; ``BadRequest`` (413) past ``limit`` bytes, declared or received.
    (A body that stalls is the transport's to bound: ``mockapi.serve.transport``.)"""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BadRequest(413, "request_too_large",
                         f"Request exceeds the maximum allowed number of bytes "
                         f"({limit}); content-length was {declared}", OUTCOME_TOO_LARGE)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BadRequest(413, "request_too_large",
                             f"Request exceeds the maximum allowed number of bytes ({limit})",
                             OUTCOME_TOO_LARGE)
        chunks.append(chunk)
    return b"".join(chunks)


def is_json(raw: bytes | None) -> bool:
    if not raw:
        return False
    try:
        orjson.loads(raw)
    except orjson.JSONDecodeError:
        return False
    return True


def parse_body(raw: bytes, headers: Mapping[str, str], path: str,
               parts: RepeatedParts | None = None) -> dict[str, Any]:
    """The body of a request to ``path`` (a key of REQUIRED_FIELDS), checked as the API does;
    ``parts``: the large parts of recent bodies, reused where this one repeats them."""
    if "x-api-key" not in headers and "authorization" not in headers:
        raise BadRequest(401, "authentication_error", "x-api-key header is required",
                         OUTCOME_INVALID_REQUEST)
    if "anthropic-version" not in headers:
        raise BadRequest(400, "invalid_request_error", "anthropic-version: header is required",
                         OUTCOME_INVALID_REQUEST)
    try:
        body = orjson.loads(raw) if parts is None else parts.loads(raw)
    except orjson.JSONDecodeError as error:
        raise BadRequest(400, "invalid_request_error",
                         f"The request body is not valid JSON: {error}",
                         OUTCOME_INVALID_REQUEST) from None
    if not isinstance(body, dict):
        raise BadRequest(400, "invalid_request_error",
                         f"The request body must be a JSON object, got {type(body).__name__}",
                         OUTCOME_INVALID_REQUEST)
    for name, expected in REQUIRED_FIELDS[path]:
        if name not in body:
            raise BadRequest(400, "invalid_request_error", f"{name}: Field required",
                             OUTCOME_INVALID_REQUEST)
        value = body[name]
        if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
            raise BadRequest(400, "invalid_request_error",
                             f"{name}: Input should be a valid {_TYPE_NAMES[expected]}, "
                             f"got {type(value).__name__}", OUTCOME_INVALID_REQUEST)
    return body
