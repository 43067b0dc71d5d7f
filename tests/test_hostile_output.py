"""The client is hostile input: what it prints, how much, and the names a catalog gives.

Small Python processes stand in for the client (no real client needed): one prints without
end, one never reads its stdin, one prints malformed control requests, one leaves a
grandchild behind. Each test fails on the harness before these bounds existed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from mockapi import Scenario
from probes.invocation import Invocation
from probes.mcp import McpReply, McpServer, McpTool
from probes.model import Claim, Probe

# ---- names a catalog gives ---------------------------------------------------------------

BAD_NAMES = ["/etc/passwd", "../x", "a/b", "", ".", ".hidden", "-flag", "a\x00b", "a" * 65]
TOOL = McpTool("t", (McpReply(text="x"),))


def _invocation(name: str) -> Any:
    return Invocation(name, "prompt")


def _server(name: str) -> Any:
    return McpServer((TOOL,), name=name)


def _probe(name: str) -> Any:
    return Probe(name=name, title="t", claims=(Claim("c", "s"),), scenario=Scenario(rules=[]),
                 invocations=(Invocation("run", "p"),), check=lambda ev, c: None)


MAKERS: list[tuple[str, Callable[[str], Any]]] = [
    ("invocation", _invocation), ("MCP server", _server), ("probe", _probe)]


@pytest.mark.parametrize("name", BAD_NAMES)
@pytest.mark.parametrize(("kind", "make"), MAKERS)
def test_a_name_that_is_not_simple_is_refused_saying_what_was_expected(
        kind: str, make: Callable[[str], Any], name: str) -> None:
    """Fails on the old code: the declarations took any name (a path made files there)."""
    longest = 128 if kind == "probe" else 64
    if kind == "probe" and name == "a" * 65:
        name = "a" * 129
    expected = (f"{kind} name {name!r}: expected a simple name (letters, digits, '.', '_', '-', "
                f"at most {longest}, not starting with '.' or '-')")
    with pytest.raises(ValueError) as raised:
        make(name)
    assert str(raised.value) == expected


@pytest.mark.parametrize("name", ["run", "Run_2", "a.b-c", "0", "a" * 64])
@pytest.mark.parametrize(("kind", "make"), MAKERS)
def test_a_simple_name_is_taken(kind: str, make: Callable[[str], Any], name: str) -> None:
    assert make(name).name == name
