"""What the validation tests share: the endpoints, the usual headers, and how a refusal is
read (the API's 400 ``invalid_request_error``, its message) or told from a lenient pass."""

from __future__ import annotations

from typing import Any

import pytest

from mockapi.check.requests import BadRequest
from mockapi.check.validation import check, validate_request
from mockapi.journal.records import OUTCOME_INVALID_REQUEST

CREATE = "/v1/messages"
COUNT = "/v1/messages/count_tokens"
HEADERS = {"x-api-key": "k", "anthropic-version": "2023-06-01", "content-type": "application/json"}


def refusal(request: dict[str, Any], headers: dict[str, str] = HEADERS, path: str = CREATE) -> str:
    """The message of the 400 ``invalid_request_error`` that strict validation gives."""
    with pytest.raises(BadRequest) as raised:
        validate_request(request, headers, path)
    bad = raised.value
    assert (bad.status, bad.error_type, bad.outcome) == (
        400, "invalid_request_error", OUTCOME_INVALID_REQUEST)
    return bad.message


def refused_only_when_strict(request: dict[str, Any], headers: dict[str, str]) -> None:
    """``validation: lenient`` answers what strict validation refuses."""
    check(request, headers, CREATE, lenient=True)
    with pytest.raises(BadRequest):
        check(request, headers, CREATE, lenient=False)
