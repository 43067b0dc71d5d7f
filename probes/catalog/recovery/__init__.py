"""Recovery paths: max_tokens continuation, malformed tool use, thinking-only answers,
prompt-too-long compaction, auto-compaction and the history it needs, API retries (also with
the non-streaming fallback switched off) and the fallback model: the probes of the recovery
report, one module per concern (``answers``, ``compaction``, ``retries``), their names here.
"""

from __future__ import annotations

from probes.catalog.recovery.answers import (
    MALFORMED,
    MALFORMED_PROBE,
    MALFORMED_TOOL_ID,
    MAX_TOKENS,
    MAX_TOKENS_PROBE,
    THINKING,
    THINKING_PROBE,
    check_malformed,
    check_max_tokens,
    check_thinking,
)
from probes.catalog.recovery.compaction import (
    AUTO_COMPACT,
    AUTO_COMPACT_PROBE,
    COMPACTION_GATE,
    FILLER_FILE,
    GATE_COMPACTS,
    GATE_PROBE,
    GATE_TURNS,
    GROUPS,
    PTL_FAIL_PROBE,
    PTL_FAIL_TURNS,
    PTL_PROBE,
    PTL_RECOVERED,
    PTL_SURFACED,
    PTL_TEXT,
    SUMMARY,
    check_auto_compact,
    check_compaction_gate,
    check_ptl_recovered,
    check_ptl_surfaced,
)
from probes.catalog.recovery.retries import (
    ABANDONED,
    BREAK_AFTER,
    FALLBACK,
    FALLBACK_PROBE,
    NO_STREAM_FALLBACK,
    NO_STREAM_FALLBACK_PROBE,
    RETRIES,
    RETRIES_PROBE,
    RETRY_AFTER,
    check_fallback,
    check_no_stream_fallback,
    check_retries,
)

__all__ = ["ABANDONED", "AUTO_COMPACT", "AUTO_COMPACT_PROBE", "BREAK_AFTER", "COMPACTION_GATE",
           "FALLBACK", "FALLBACK_PROBE", "FILLER_FILE", "GATE_COMPACTS", "GATE_PROBE",
           "GATE_TURNS", "GROUPS", "MALFORMED", "MALFORMED_PROBE", "MALFORMED_TOOL_ID",
           "MAX_TOKENS", "MAX_TOKENS_PROBE", "NO_STREAM_FALLBACK", "NO_STREAM_FALLBACK_PROBE",
           "PROBES", "PTL_FAIL_PROBE", "PTL_FAIL_TURNS", "PTL_PROBE", "PTL_RECOVERED",
           "PTL_SURFACED", "PTL_TEXT", "RETRIES", "RETRIES_PROBE", "RETRY_AFTER", "SUMMARY",
           "THINKING", "THINKING_PROBE", "check_auto_compact", "check_compaction_gate",
           "check_fallback", "check_malformed", "check_max_tokens", "check_no_stream_fallback",
           "check_ptl_recovered", "check_ptl_surfaced", "check_retries", "check_thinking"]

PROBES = (MAX_TOKENS_PROBE, MALFORMED_PROBE, THINKING_PROBE, PTL_PROBE, PTL_FAIL_PROBE,
          AUTO_COMPACT_PROBE, GATE_PROBE, RETRIES_PROBE, NO_STREAM_FALLBACK_PROBE, FALLBACK_PROBE)
