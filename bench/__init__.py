"""The benchmark: our mock against the fastest peer mock (aimock), with real Claude Code bodies.

``scripts/bench`` (``python -m bench``) starts both servers, drives each in turn
with the same load generator and the same recorded request bodies, and reports
speed as ratios against the peer measured in the same run: never as absolute
thresholds, which would only measure the machine.
"""

from __future__ import annotations

__all__ = ["FIXED_TEXT"]

# The one reply both servers give to every request (two text deltas at 32 characters each).
FIXED_TEXT = "loopprobe bench: the same fixed reply to every request."
