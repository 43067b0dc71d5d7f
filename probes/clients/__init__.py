"""Agent-loop clients the harness can install and run."""

from __future__ import annotations

from pathlib import Path

from probes.clients.base import Client, ClientBinary, Command, Output
from probes.clients.npm import InstallError

__all__ = ["CLIENTS", "Client", "ClientBinary", "Command", "InstallError", "Output",
           "agent_sdk_driver_path", "all_clients", "parse_client_spec"]

DEFAULT_CLIENT = "claude-code"


def agent_sdk_driver_path() -> Path:
    return Path(__file__).with_name("agent_sdk_driver.py")


def all_clients() -> list[Client]:
    return [cls() for cls in _clients().values()]


def _clients() -> dict[str, type]:
    from probes.clients.agent_sdk import ClaudeAgentSdk
    from probes.clients.claude_code import ClaudeCode
    return {"claude-code": ClaudeCode, "claude-agent-sdk": ClaudeAgentSdk}


CLIENTS = ("claude-code", "claude-agent-sdk")


def parse_client_spec(spec: str) -> tuple[Client, str]:
    """``claude-code@2.1.235``, ``2.1.235``, ``claude-agent-sdk@0.2.140`` -> (client, version)."""
    name, sep, version = spec.rpartition("@")
    if not sep:
        name, version = DEFAULT_CLIENT, spec
    name = name or DEFAULT_CLIENT
    if name not in CLIENTS:
        raise InstallError(f"unknown client {name!r} in {spec!r}; known: {', '.join(CLIENTS)}")
    if not version:
        raise InstallError(f"no version in {spec!r}; expected e.g. {name}@2.1.235")
    client: Client = _clients()[name]()
    return client, version
