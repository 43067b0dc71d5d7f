"""The benchmark: our mock against the fastest peer mock (aimock) and a raw ASGI floor, with
real Claude Code bodies.

``scripts/bench`` (``python -m bench``) starts the three servers, drives each in
turn with the same load generator and the same recorded request bodies, and
reports speed as ratios against the others measured in the same run: never as
absolute thresholds, which would only measure the machine.
"""

from __future__ import annotations

from typing import Any

__all__ = ["FIXED_TEXT", "SCENARIO"]

# The one reply every server gives to every request (two text deltas at 32 characters each).
FIXED_TEXT = "loopprobe bench: the same fixed reply to every request."

# Our mock's scenario: one ``repeat: always`` rule answering every request with FIXED_TEXT
# (no ``ping``, so the stream has the seven events aimock sends). The floor replays the bytes
# our mock gives with it; sequential message ids keep their length from request to request.
SCENARIO: dict[str, Any] = {
    "name": "bench", "classifier": "plain", "message_ids": "sequential",
    "rules": [{"id": "fixed", "repeat": "always",
               "reply": {"text": FIXED_TEXT, "ping": False}}],
}
