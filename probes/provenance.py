"""The public face of ``probes.core.provenance``: what your own catalog imports.

Catalogs (``loopprobe run --catalog FILE``) import from ``probes.model``, ``probes.checks``,
``probes.evidence`` and ``probes.provenance``; these names stay here whatever moves inside
``probes/``. The harness itself imports ``probes.core``.
"""

from probes.core.provenance import (
    ANALYSIS_TITLE,
    ANALYSIS_VERSION,
    MAX_QUOTE,
    SOURCE_KINDS,
    Source,
    baseline,
    from_analysis,
    project_expectation,
    unstated,
)

__all__ = [
    "ANALYSIS_TITLE",
    "ANALYSIS_VERSION",
    "MAX_QUOTE",
    "SOURCE_KINDS",
    "Source",
    "baseline",
    "from_analysis",
    "project_expectation",
    "unstated",
]
