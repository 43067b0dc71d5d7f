"""Agent-loop clients the harness can install and run, and what their installed files
mention (``mentions``: static evidence, for what no run can show).

May import: ``probes.core``, ``probes.sandbox``.
"""

from __future__ import annotations

from probes.clients.base import (
    Capabilities,
    Client,
    ClientBinary,
    ClientKey,
    Command,
    HookCommand,
    RunContext,
)
from probes.clients.npm import InstallError
from probes.clients.registry import (
    CLIENT_KINDS,
    DEFAULT_KIND,
    all_clients,
    client_for,
    parse_client_spec,
    report_folder,
)

__all__ = ["CLIENT_KINDS", "DEFAULT_KIND", "Capabilities", "Client", "ClientBinary", "ClientKey",
           "Command", "HookCommand", "InstallError", "RunContext", "all_clients", "client_for",
           "parse_client_spec", "report_folder"]
