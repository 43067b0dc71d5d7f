"""Shared fixtures. Mock servers come from the mockapi pytest plugin (``mock_api``)."""

from __future__ import annotations

import pytest

DEFAULT_CLIENT_VERSION = "2.1.235"


@pytest.fixture(scope="session")
def claude_code_binary():  # type: ignore[no-untyped-def]
    """The real Claude Code client (installed from npm into the cache on first use)."""
    from probes.clients.claude_code import ClaudeCode
    return ClaudeCode().install(DEFAULT_CLIENT_VERSION)
