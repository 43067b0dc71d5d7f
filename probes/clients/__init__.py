"""Agent-loop clients the harness can install and run."""

from __future__ import annotations

from probes.clients.base import Client, ClientBinary, Command, Output
from probes.clients.claude_code import ClaudeCode
from probes.clients.npm import InstallError

__all__ = ["CLIENTS", "Client", "ClientBinary", "Command", "InstallError", "Output",
           "parse_client_spec"]

CLIENTS: dict[str, type[ClaudeCode]] = {"claude-code": ClaudeCode}
DEFAULT_CLIENT = "claude-code"


def parse_client_spec(spec: str) -> tuple[Client, str]:
    """``claude-code@2.1.235``, ``2.1.235`` or ``claude-code@latest`` -> (client, version)."""
    name, sep, version = spec.rpartition("@")
    if not sep:
        name, version = DEFAULT_CLIENT, spec
    name = name or DEFAULT_CLIENT
    if name not in CLIENTS:
        raise InstallError(f"unknown client {name!r} in {spec!r}; known: {', '.join(CLIENTS)}")
    if not version:
        raise InstallError(f"no version in {spec!r}; expected e.g. {name}@2.1.235")
    return CLIENTS[name](), version
