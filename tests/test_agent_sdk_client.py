"""The Claude Agent SDK as a second client: same probes, same checks, its own installs."""

from __future__ import annotations

from pathlib import Path

import pytest

from probes.catalog.tool_result_resume import PROBE
from probes.run.runner import run_probe
from tests.conftest import installed_client

pytestmark = pytest.mark.client

SDK_VERSION = "0.2.140"


@pytest.fixture(scope="module")
def sdk():  # type: ignore[no-untyped-def]
    return installed_client(f"claude-agent-sdk@{SDK_VERSION}")


def test_the_sdk_install_names_the_binary_it_bundles(sdk) -> None:  # type: ignore[no-untyped-def]
    client, binary = sdk
    assert binary.name == "claude-agent-sdk" and binary.version == SDK_VERSION
    assert binary.entry.name == "claude" and "_bundled" in str(binary.entry)
    assert len(binary.sha256) == 64
    # read from the bundled CLI's own --help
    assert {"run", "resume", "fork", "hooks"} <= client.capabilities(binary).supported
    assert [b.version for b in client.installed()].count(SDK_VERSION) == 1


def test_the_published_probe_runs_through_the_sdk(sdk, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    client, binary = sdk
    outcome = run_probe(PROBE, client, binary, tmp_path)
    assert outcome.error is None
    assert [(c.id, c.observed) for c in outcome.checks if not c.passed] == []
    evidence = outcome.evidence
    assert evidence is not None
    # the SDK's query() drove the bundled CLI: its requests say so
    agents = {r["headers"].get("user-agent") for r in evidence.requests()}
    assert all(agent and "claude-cli/" in agent for agent in agents)
