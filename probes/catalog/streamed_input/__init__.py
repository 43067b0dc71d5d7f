"""Streamed input: what a caller writes while the loop runs, as the Agent SDK does.

Every run here reads stream-json on stdin (``probes.core.streamed``): a user message written
while a tool runs, an ``interrupt`` while a tool runs or while the model streams, the
client's ``can_use_tool`` requests answered by the caller, ``set_model`` /
``set_permission_mode`` between turns, and a wake-up the session schedules for itself. One
module per concern (``queue``, ``interrupts``, ``permissions``, ``modes``, ``wakeup``; what
their runs show is read in ``common``), their names here.
"""

from __future__ import annotations

from probes.catalog.streamed_input.common import (
    ASSISTANT,
    PERMISSION_DOCS,
    RESULT,
    SDK_DOCS,
    check_cancelled,
    check_lifecycle_emitted,
)
from probes.catalog.streamed_input.interrupts import (
    BLOCK_CLAIM,
    CANCEL_DECLARATIONS,
    INTERRUPT_FINISHED,
    INTERRUPT_PROMPT,
    INTERRUPT_STARTED,
    INTERRUPT_STREAMING_PROBE,
    INTERRUPT_TOOL,
    INTERRUPT_TOOLS_PROBE,
    RESUME_ANSWER,
    RESUME_CLAIM,
    RESUME_PROMPT,
    STREAM_CLAIM,
    STREAM_PROMPT,
    TOOLS_CLAIM,
    check_interrupt_streaming,
    check_interrupt_tools,
)
from probes.catalog.streamed_input.modes import (
    MODE_CLAIM,
    MODE_FIRST_TOOL,
    MODE_PROMPT,
    MODE_SECOND,
    MODE_SECOND_TOOL,
    MODEL_CLAIM,
    MODEL_PROMPT,
    MODEL_SECOND,
    NEW_MODEL,
    SET_MODE_PROBE,
    SET_MODEL_PROBE,
    check_set_mode,
    check_set_model,
)
from probes.catalog.streamed_input.permissions import (
    ALLOWED_TOOL,
    ASKED_CLAIM,
    ASKED_FILE,
    BASH_DENIED_INPUT,
    DENIED_FILE,
    DENIED_TOOL,
    DENY_CLAIM,
    DENY_MESSAGE,
    PERMISSION_ANSWER,
    PERMISSION_PROMPT,
    PERMISSIONS_PROBE,
    READ_TOOL,
    UPDATED_CLAIM,
    UPDATED_CONTENT,
    UPDATED_FILE,
    WRITE_INPUT,
    WRITE_UPDATED,
    check_permissions,
    tool_result_content,
)
from probes.catalog.streamed_input.queue import (
    ABSORBED_CLAIM,
    CANCELLED_CLAIM,
    QUEUE_ANSWER,
    QUEUE_CLAIM,
    QUEUE_DONE,
    QUEUE_PROBE,
    QUEUE_PROMPT,
    QUEUE_STARTED,
    QUEUE_TOOL,
    QUEUED,
    check_queue,
)
from probes.catalog.streamed_input.wakeup import (
    LIFECYCLE_CLAIM,
    LOOP_DELAY,
    LOOP_DOCS,
    LOOP_HORIZON,
    LOOP_PROBE,
    LOOP_PROMPT,
    LOOP_TOOL,
    LOOP_WAITING,
    LOOP_WOKE,
    NOT_SCHEDULED,
    WAKEUP_CLAIM,
    check_loop,
    check_wakeup_reached,
)

__all__ = ["ABSORBED_CLAIM", "ALLOWED_TOOL", "ASKED_CLAIM", "ASKED_FILE", "ASSISTANT",
           "BASH_DENIED_INPUT", "BLOCK_CLAIM", "CANCELLED_CLAIM", "CANCEL_DECLARATIONS",
           "DENIED_FILE", "DENIED_TOOL", "DENY_CLAIM", "DENY_MESSAGE", "INTERRUPT_FINISHED",
           "INTERRUPT_PROMPT", "INTERRUPT_STARTED", "INTERRUPT_STREAMING_PROBE", "INTERRUPT_TOOL",
           "INTERRUPT_TOOLS_PROBE", "LIFECYCLE_CLAIM", "LOOP_DELAY", "LOOP_DOCS", "LOOP_HORIZON",
           "LOOP_PROBE", "LOOP_PROMPT", "LOOP_TOOL", "LOOP_WAITING", "LOOP_WOKE", "MODEL_CLAIM",
           "MODEL_PROMPT", "MODEL_SECOND", "MODE_CLAIM", "MODE_FIRST_TOOL", "MODE_PROMPT",
           "MODE_SECOND", "MODE_SECOND_TOOL", "NEW_MODEL", "NOT_SCHEDULED", "PERMISSIONS_PROBE",
           "PERMISSION_ANSWER", "PERMISSION_DOCS", "PERMISSION_PROMPT", "PROBES", "QUEUED",
           "QUEUE_ANSWER", "QUEUE_CLAIM", "QUEUE_DONE", "QUEUE_PROBE", "QUEUE_PROMPT",
           "QUEUE_STARTED", "QUEUE_TOOL", "READ_TOOL", "RESULT", "RESUME_ANSWER", "RESUME_CLAIM",
           "RESUME_PROMPT", "SDK_DOCS", "SET_MODEL_PROBE", "SET_MODE_PROBE", "STREAM_CLAIM",
           "STREAM_PROMPT", "TOOLS_CLAIM", "UPDATED_CLAIM", "UPDATED_CONTENT", "UPDATED_FILE",
           "WAKEUP_CLAIM", "WRITE_INPUT", "WRITE_UPDATED", "check_cancelled",
           "check_interrupt_streaming", "check_interrupt_tools", "check_lifecycle_emitted",
           "check_loop", "check_permissions", "check_queue", "check_set_mode", "check_set_model",
           "check_wakeup_reached", "tool_result_content"]

PROBES = (QUEUE_PROBE, INTERRUPT_TOOLS_PROBE, INTERRUPT_STREAMING_PROBE, PERMISSIONS_PROBE,
          SET_MODEL_PROBE, SET_MODE_PROBE, LOOP_PROBE)
