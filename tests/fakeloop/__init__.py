"""A fake agent loop for testing the harness; it makes no claim about any real client."""

from __future__ import annotations

from tests.fakeloop.client import PROGRAM, FakeLoopClient

__all__ = ["PROGRAM", "FakeLoopClient"]
