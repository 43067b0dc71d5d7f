"""The secrets no journal line holds: the values of key headers and of credential query
parameters, each replaced with ``[redacted]``, every other byte left as it came.

Every writer of a journal line (the mock's app, the recorder) passes the request's headers
through ``redact_headers`` (``x-api-key``, ``authorization``...) and its query string through
``redact_query`` (``api_key=``, ``access_token=``...: ``is_secret_query_name``) before the
line is written.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import unquote_plus

__all__ = ["REDACTED", "SECRET_HEADERS", "is_secret_query_name", "redact_headers", "redact_query"]

REDACTED = "[redacted]"
SECRET_HEADERS = frozenset({"x-api-key", "authorization", "proxy-authorization", "cookie",
                            "x-loopprobe-admin-token"})
# query parameters whose value is a credential: these names, and any name ending in one of
# the suffixes (after lower-casing and reading "-" as "_": X-Api-Key is x_api_key)
_SECRET_QUERY_NAMES = frozenset({"key", "apikey", "token", "secret", "password", "passwd",
                                 "auth", "authorization", "sig", "signature", "credential",
                                 "credentials", "session", "cookie"})
_SECRET_QUERY_SUFFIXES = ("_key", "_token", "_secret", "_password", "_signature", "_auth")


def redact_headers(raw: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for name_b, value_b in raw:
        name = name_b.decode("latin-1").lower()
        value = REDACTED if name in SECRET_HEADERS else value_b.decode("latin-1")
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    return headers


def is_secret_query_name(name: str) -> bool:
    """Whether a query parameter of this (percent-decoded) name carries a credential."""
    folded = name.strip().lower().replace("-", "_")
    return folded in _SECRET_QUERY_NAMES or folded.endswith(_SECRET_QUERY_SUFFIXES)


def redact_query(query: str) -> str:
    """The query string with the value of each secret-bearing parameter (``api_key=``,
    ``access_token=``...; ``is_secret_query_name``) replaced by ``[redacted]``; every other
    byte as it came (``beta=true`` stays ``beta=true``)."""
    if not query:
        return query
    parts = query.split("&")
    for index, part in enumerate(parts):
        name, equals, _ = part.partition("=")
        if equals and is_secret_query_name(unquote_plus(name, errors="replace")):
            parts[index] = f"{name}={REDACTED}"
    return "&".join(parts)
