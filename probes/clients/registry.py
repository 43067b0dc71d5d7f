"""The client kinds loopprobe can install and run: adding one is its module plus one line here."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping

from probes.clients.agent_sdk import ClaudeAgentSdk
from probes.clients.agent_sdk_ts import ClaudeAgentSdkTs
from probes.clients.base import Client, ClientBinary, ClientKey
from probes.clients.claude_code import ClaudeCode
from probes.clients.langgraph_agent import LangGraph
from probes.clients.npm import InstallError, cache_root
from probes.clients.opencode import OpenCode
from probes.clients.plugins import PLUGINS_ENV, load_plugins
from probes.clients.pydantic_agent import PydanticAi
from probes.clients.specs import expected_version
from probes.clients.tool_runner import AnthropicToolRunner
from probes.clients.ts_tool_runner import TsToolRunner
from probes.clients.vercel_ai import VercelAi

__all__ = [
    "CLIENT_KINDS",
    "DEFAULT_KIND",
    "LAST_USED",
    "PLUGINS_ENV",
    "SPEC_FORM",
    "all_clients",
    "client_for",
    "mark_used",
    "parse_client_spec",
    "prune_installs",
    "remove_install",
    "report_folder",
]

LAST_USED = "last-used"

CLIENT_KINDS: dict[str, Callable[[], Client]] = {
    "claude-code": ClaudeCode,
    "claude-agent-sdk": ClaudeAgentSdk,
    "anthropic-tool-runner": AnthropicToolRunner,
    "anthropic-ts-tool-runner": TsToolRunner,
    "vercel-ai": VercelAi,
    "pydantic-ai": PydanticAi,
    "langgraph": LangGraph,
    "claude-agent-sdk-ts": ClaudeAgentSdkTs,
    "opencode": OpenCode,
}
DEFAULT_KIND = "claude-code"
SPEC_FORM = "KIND@VERSION"


def _kinds() -> dict[str, Callable[[], Client]]:
    """The built-in kinds, then those ``$LOOPPROBE_CLIENTS`` adds (never in their place)."""
    return {**CLIENT_KINDS, **load_plugins(CLIENT_KINDS)}


def _known(kinds: Mapping[str, object]) -> str:
    return f"KIND one of {', '.join(kinds)}"


def client_for(kind: str) -> Client:
    kinds = _kinds()
    if kind not in kinds:
        raise InstallError(f"unknown client kind: expected one of {', '.join(kinds)}, found "
                           f"{kind!r}")
    return kinds[kind]()


def all_clients() -> list[Client]:
    return [make() for make in _kinds().values()]


def parse_client_spec(spec: str) -> tuple[Client, str]:
    """``claude-code@2.1.235``, ``2.1.235``, ``claude-agent-sdk@0.2.140`` -> (client, version),
    the version checked against its kind's grammar (``probes.clients.specs``)."""
    kind, sep, version = spec.rpartition("@")
    if not sep:
        kind, version = DEFAULT_KIND, spec
    kind = kind or DEFAULT_KIND
    kinds = _kinds()
    expected = f"expected {SPEC_FORM} with {_known(kinds)} (a bare VERSION is {DEFAULT_KIND})"
    if kind not in kinds:
        raise InstallError(f"unknown client {kind!r} in {spec!r}: {expected}")
    client = kinds[kind]()
    problem = expected_version(getattr(client, "registry", None), version)
    if problem is not None:
        raise InstallError(f"{spec!r}: {expected}; for {kind}, VERSION is {problem}, "
                           f"found {version!r}")
    return client, version


def report_folder(key: ClientKey) -> str:
    """The folder of a client version's reports: the version for the default kind, else
    ``<kind>-<version>``."""
    return key.version if key.kind == DEFAULT_KIND else f"{key.kind}-{key.version}"


def remove_install(client: Client, version: str) -> bool:
    """Delete a cached install (only ever one under the cache); True when one was removed."""
    for binary in client.installed():
        if binary.version == version and _cached(binary):
            shutil.rmtree(binary.root, ignore_errors=True)
            return True
    return False


def _cached(binary: ClientBinary) -> bool:
    cache = cache_root().resolve()
    root = binary.root.resolve()
    return root.is_relative_to(cache) and root != cache


def mark_used(binary: ClientBinary) -> None:
    """Note that a cached install was just used (what ``prune_installs`` keeps)."""
    if _cached(binary):
        (binary.root / LAST_USED).touch()


def _last_used(binary: ClientBinary) -> float:
    marker = binary.root / LAST_USED
    return marker.stat().st_mtime if marker.exists() else (binary.root / "install.json").stat().st_mtime


def prune_installs(keep: int, dry_run: bool = False) -> list[ClientBinary]:
    """Remove all but the ``keep`` most recently used installs of each client kind."""
    removed = []
    for client in all_clients():
        installs = sorted((b for b in client.installed() if _cached(b)), key=_last_used,
                          reverse=True)
        for binary in installs[keep:]:
            if not dry_run:
                shutil.rmtree(binary.root, ignore_errors=True)
            removed.append(binary)
    return removed
