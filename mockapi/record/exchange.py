"""One exchange the recorder relays: what came back from the upstream, what of it the
recording keeps (at most ``max_recorded_bytes`` of the body; the client gets all of it), and
the scenario rule it becomes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx

from mockapi.journal.records import MAX_WRITE_OFFSETS, Routing
from mockapi.record.upstream_reply import reply_from_exchange

__all__ = ["Exchange", "rule_id"]


@dataclass
class Exchange:
    """One forwarded request: what came back, and what of it the recording keeps."""

    seq: int
    routing: Routing | None  # None: not a recorded route, nothing of the body is kept
    limit: int
    status: int = 0
    headers: httpx.Headers = field(default_factory=httpx.Headers)
    chunks: list[bytes] = field(default_factory=list)  # the first ``limit`` bytes
    kept: int = 0
    size: int = 0  # every byte relayed
    writes: int = 0
    offsets: list[float] = field(default_factory=list)  # at most MAX_WRITE_OFFSETS + 1
    response: httpx.Response | None = None
    unreachable: str | None = None  # the upstream could not be asked
    broken: str | None = None  # the upstream broke its body off
    complete: bool = False

    def take(self, chunk: bytes, offset: float) -> None:
        self.size += len(chunk)
        self.writes += 1
        if len(self.offsets) <= MAX_WRITE_OFFSETS:
            self.offsets.append(offset)
        if self.routing is not None and self.kept < self.limit:
            part = chunk[:self.limit - self.kept]
            self.chunks.append(part)
            self.kept += len(part)

    def cut(self, rule: str) -> str | None:
        """What the recording left out of this body (for the rule of id ``rule``), or None."""
        if self.size <= self.kept:
            return None
        return (f"{rule} keeps the first {self.kept} of the {self.size} bytes the upstream "
                f"sent (max_recorded_bytes) and replays cut off there")

    def rule(self, *, complete: bool) -> dict[str, Any]:
        """The scenario rule of a Messages API exchange (``routing`` set): matched on what
        the mock computes for the request, answering what the upstream sent; ``complete``:
        the upstream's body ended whole (a cut one is replayed as it came)."""
        routing = self.routing
        assert routing is not None
        return {"id": rule_id(routing),
                "match": {"kind": routing["kind"], "turn": routing["turn"],
                          "attempt": routing["attempt"]},
                "reply": reply_from_exchange(self.status, self.headers, self.chunks,
                                             complete and self.size == self.kept)}


def rule_id(routing: Routing) -> str:
    """A recorded rule's id: what the mock computed for its request."""
    return f"{routing['kind']}-turn{routing['turn']}-attempt{routing['attempt']}"
