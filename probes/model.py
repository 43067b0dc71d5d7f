"""The public face of ``probes.core.probe``: what your own catalog imports, with
the MCP-server and streamed-input declarations an ``Invocation`` takes, and ``CatalogError``:
what a declaration raises, when the catalog loads, for a mistake in it.

Catalogs (``loopprobe run --catalog FILE``) import from ``probes.model``, ``probes.checks``,
``probes.evidence`` and ``probes.provenance``; these names stay here whatever moves inside
``probes/``. The harness itself imports ``probes.core``.
"""

from probes.core.mcp import McpReply, McpServer, McpTool
from probes.core.names import CatalogError
from probes.core.probe import (
    HARNESS_CLASSIFIER,
    Claim,
    Counterfactual,
    Hooks,
    Invocation,
    Probe,
    ReportSpec,
    Source,
    served_scenario,
    shown_scenario,
)
from probes.core.streamed import PermissionAnswer, Step, StreamedInput, control_request, user_message

__all__ = [
    "HARNESS_CLASSIFIER",
    "CatalogError",
    "Claim",
    "Counterfactual",
    "Hooks",
    "Invocation",
    "McpReply",
    "McpServer",
    "McpTool",
    "PermissionAnswer",
    "Probe",
    "ReportSpec",
    "Source",
    "Step",
    "StreamedInput",
    "control_request",
    "served_scenario",
    "shown_scenario",
    "user_message",
]
