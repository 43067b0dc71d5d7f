"""Request targets that cannot be read two ways: what the recorder forwards, and the paths the
mock and the recorder refuse outright.

The recorder forwards the target as it came on the wire (``raw_path``), never the decoded
path: decoding first would turn ``%2F`` into a separator and ``%3F`` into a query, and
``/v1/../../admin`` joined to the upstream's base would leave it for another path of the
upstream's host, with the client's key. ``forwarded_url`` refuses (``UnsafeTarget``) any
target the upstream or a server in front of it could read as another path than the one
journaled: one not starting with ``/``, a dot segment (``.``, ``..``), an encoded ``.``,
``/`` or ``\\``, a backslash, a control character raw or encoded, a malformed percent
escape, or a byte RFC 3986 does not allow in a path (in the query: a byte outside
printable ASCII, or ``#``). What passes is appended to the upstream's base path
unchanged, and the URL built from it is checked once more to be on the upstream's
origin, under its base.

``check_upstream`` is the other end: the upstream's base URL, which every forwarded
target stays under. ``control_character`` finds what neither the mock nor the recorder
answers as a path: a C0 control or DEL in the decoded path (``%0d%0a`` arrives decoded);
both answer it 400 ``invalid_request_error`` and journal it.
"""

from __future__ import annotations

import re

import httpx

__all__ = ["UnsafeTarget", "UpstreamError", "check_upstream", "control_character",
           "forwarded_url"]

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# RFC 3986 pchar (unreserved, sub-delims, ":" and "@") and "/" for a path; a query cannot
# leave the path, so it may hold any printable ASCII byte but "#" (httpx escapes the rest)
_PATH_BYTES = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                        b"-._~!$&'()*+,;=:@/%")
_QUERY_BYTES = frozenset(range(0x21, 0x7F)) - frozenset(b"#")
_ESCAPE = re.compile(rb"%([0-9A-Fa-f]{2})")
_BAD_ESCAPE = re.compile(rb"%(?![0-9A-Fa-f]{2})")
_REFUSED_ESCAPES = {0x2E: "an encoded '.' (%2E)", 0x2F: "an encoded '/' (%2F)",
                    0x5C: "an encoded '\\' (%5C)"}


class UpstreamError(ValueError):
    """An --upstream that is not an http(s) URL."""


def check_upstream(url: str) -> str:
    """The upstream's base URL without a trailing slash; ``UpstreamError`` when it is not
    an http(s) URL with a host."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError) as error:
        raise UpstreamError(f"--upstream {url!r} is not a URL: {error}") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise UpstreamError(f"--upstream {url!r}: expected an http:// or https:// URL with a "
                            "host, e.g. https://api.anthropic.com")
    if parsed.query or parsed.fragment:
        raise UpstreamError(f"--upstream {url!r}: expected no query or fragment")
    if parsed.userinfo:  # the URL is written into the scenario: credentials go in headers
        raise UpstreamError("--upstream: expected no user or password in the URL (the "
                            "client's own x-api-key or authorization header is passed on)")
    return url.rstrip("/")


class UnsafeTarget(ValueError):
    """A request target the recorder does not forward; the message says why."""


def control_character(path: str) -> str | None:
    """Where ``path`` (decoded) holds a control character, e.g. ``U+000D at 4``; None if not."""
    found = _CONTROL.search(path)
    return None if found is None else f"U+{ord(found.group()):04X} at {found.start()}"


def _problem(raw: bytes, allowed: frozenset[int], what: str) -> str | None:
    for position, byte in enumerate(raw):
        if byte not in allowed:
            shown = repr(chr(byte)) if 0x20 < byte < 0x7F else f"byte 0x{byte:02X}"
            return f"{shown} at {position} of the {what}"
    if _BAD_ESCAPE.search(raw):
        return f"a malformed percent escape in the {what}"
    if what == "path":
        for escape in _ESCAPE.finditer(raw):
            value = int(escape.group(1), 16)
            if value in _REFUSED_ESCAPES:
                return _REFUSED_ESCAPES[value]
            if value < 0x20 or value == 0x7F:
                return f"an encoded control character (%{escape.group(1).decode()})"
    return None


def forwarded_url(upstream: str, raw_path: bytes, query: bytes) -> str:
    """The URL under ``upstream`` (a base URL without a trailing slash) that a request for
    ``raw_path`` and ``query`` (as they came on the wire) is forwarded to; ``UnsafeTarget``
    when the target could reach anything but that path under the base."""
    if not raw_path.startswith(b"/"):
        raise UnsafeTarget("the path does not start with '/'")
    problem = _problem(raw_path, _PATH_BYTES, "path") or _problem(query, _QUERY_BYTES, "query")
    if problem:
        raise UnsafeTarget(problem)
    if any(segment in (b".", b"..") for segment in raw_path.split(b"/")):
        raise UnsafeTarget("a '.' or '..' segment")
    url = upstream + raw_path.decode("ascii") + ("?" + query.decode("ascii") if query else "")
    base, built = httpx.URL(upstream), httpx.URL(url)
    base_path = base.raw_path.split(b"?")[0].rstrip(b"/")
    if (built.scheme, built.host, built.port) != (base.scheme, base.host, base.port) or \
            not built.raw_path.startswith(base_path + b"/"):
        raise UnsafeTarget(f"it would leave the upstream's base {upstream}")
    return url
