"""The public face of ``probes.core.checks``: what your own catalog imports.

Catalogs (``loopprobe run --catalog FILE``) import from ``probes.model``, ``probes.checks``,
``probes.evidence`` and ``probes.provenance``; these names stay here whatever moves inside
``probes/``. The harness itself imports ``probes.core``.
"""

from probes.core.checks import (
    MISSING,
    CheckResult,
    Checks,
)

__all__ = [
    "MISSING",
    "CheckResult",
    "Checks",
]
