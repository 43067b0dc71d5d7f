"""A pytest plugin (loaded automatically once loopprobe is installed): the mock as a fixture.

    def test_my_agent(mock_api):
        mock = mock_api(Scenario(classifier="plain", rules=[Rule(reply=text("hi"))]))
        client = anthropic.Anthropic(base_url=mock.url, api_key="test")
        ...
        assert mock.requests()[0]["body"]["messages"][0]["content"] == "hello"

Each call starts a server on 127.0.0.1 with its journal in the test's tmp_path
(``mockapi-journal-<n>.jsonl``: a name planted there as a link is refused, ``JournalRefused``);
all are stopped when the test ends. ``mock.assert_all_used()`` fails naming every scripted
reply that was never served; ``mock_api(scenario, require_all_used=True)`` checks that when
the test ends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mockapi.script.scenario import Scenario
from mockapi.serve.server import MockServer

__all__ = ["mock_api"]


@pytest.fixture
def mock_api(tmp_path: Path) -> Iterator[Callable[..., MockServer]]:
    """``mock_api(scenario=None, *, require_all_used=False, **MockServer options)`` -> a
    started MockServer; with ``require_all_used`` the test fails at its end unless every
    scripted reply was served (``MockServer.assert_all_used``)."""
    started: list[MockServer] = []
    checked: list[MockServer] = []

    def start(scenario: Scenario | None = None, *, require_all_used: bool = False,
              **options: Any) -> MockServer:
        journal = options.pop("journal_path", tmp_path / f"mockapi-journal-{len(started)}.jsonl")
        server = MockServer(scenario or Scenario(), journal, **options).start()
        started.append(server)
        if require_all_used:
            checked.append(server)
        return server

    yield start
    for server in started:
        server.stop()
    for server in checked:
        server.assert_all_used()
