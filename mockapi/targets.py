"""Request targets that cannot be read two ways.

``control_character`` finds what the mock does not answer as a path: a C0 control or DEL
in the decoded path (``%0d%0a`` arrives decoded); it is answered 400
``invalid_request_error`` and journaled.
"""

from __future__ import annotations

import re

__all__ = ["control_character"]

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def control_character(path: str) -> str | None:
    """Where ``path`` (decoded) holds a control character, e.g. ``U+000D at 4``; None if not."""
    found = _CONTROL.search(path)
    return None if found is None else f"U+{ord(found.group()):04X} at {found.start()}"
