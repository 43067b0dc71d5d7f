"""The public face of ``probes.core.evidence``: what your own catalog imports.

Catalogs (``loopprobe run --catalog FILE``) import from ``probes.model``, ``probes.checks``,
``probes.evidence`` and ``probes.provenance``; these names stay here whatever moves inside
``probes/``. The harness itself imports ``probes.core``.
"""

from probes.core.evidence import (
    MAX_EVENT_DEPTH,
    Evidence,
    Location,
    Output,
    RunRecord,
    block_text,
    blocks_of_type,
    locate,
    message_outline,
    messages,
)

__all__ = [
    "MAX_EVENT_DEPTH",
    "Evidence",
    "Location",
    "Output",
    "RunRecord",
    "block_text",
    "blocks_of_type",
    "locate",
    "message_outline",
    "messages",
]
