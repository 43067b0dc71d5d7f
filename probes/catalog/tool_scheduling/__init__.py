"""Tool scheduling: tools start while the message still streams, safe calls overlap, unsafe
calls are barriers, and results pair by id whatever the completion order.

Timing evidence comes from PreToolUse/PostToolUse hooks that log wall-clock
times per tool_use_id (a tool's window is [PreToolUse, PostToolUse]); the hooks
sleep to widen the windows, so overlaps and orderings are seconds apart, not
milliseconds. One module per concern (``streaming``, ``batch``: concurrency and
barriers, ``pairing``; the tool windows every check reads are in ``windows``), their names
here.
"""

from __future__ import annotations

from probes.catalog.tool_scheduling.batch import (
    BARRIER,
    BATCH_PROBE,
    BATCH_PROMPT,
    CONCURRENCY,
    HOOK_SLEEP,
    IDS,
    check_batch,
)
from probes.catalog.tool_scheduling.pairing import PAIR_PROMPT, PAIRING, PAIRING_PROBE, check_pairing
from probes.catalog.tool_scheduling.streaming import (
    HOLD_SECONDS,
    STREAM_PROMPT,
    STREAM_TOOL,
    STREAMING,
    STREAMING_PROBE,
    check_streaming,
)
from probes.catalog.tool_scheduling.windows import TIMELINE, tool_windows

__all__ = [
    "BARRIER",
    "BATCH_PROBE",
    "BATCH_PROMPT",
    "CONCURRENCY",
    "HOLD_SECONDS",
    "HOOK_SLEEP",
    "IDS",
    "PAIRING",
    "PAIRING_PROBE",
    "PAIR_PROMPT",
    "STREAMING",
    "STREAMING_PROBE",
    "STREAM_PROMPT",
    "STREAM_TOOL",
    "TIMELINE",
    "check_batch",
    "check_pairing",
    "check_streaming",
    "tool_windows",
]
