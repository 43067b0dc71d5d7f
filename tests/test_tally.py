"""The one bound on every record a client can cause (``probes.core.tally``): the first records
kept whole, the rest counted and said, whatever the kind; and the kinds outside the collector
that use it (the sandbox's refusals, the evidence's and the report's counts)."""

from __future__ import annotations

import os
from pathlib import Path

from probes.core.checks import Checks
from probes.core.evidence import SANDBOX_REFUSALS, Evidence
from probes.core.tally import UNCOUNTED, Cap, Tallies, Tally, size_text
from probes.core.verdicts import harness_checks
from probes.sandbox.client_files import REFUSALS_KEPT, ClientFiles
from probes.sandbox.folders import Sandbox


def test_the_first_records_that_fit_are_kept_and_none_after_the_first_that_does_not() -> None:
    tally = Tally(Cap(3, 100))
    assert [tally.admit(size) for size in (40, 40, 30, 10, 10)] == \
        [True, True, False, False, False], "what is kept is always the first N, whole"
    assert (tally.kept, tally.kept_bytes, tally.more, tally.more_bytes) == (2, 80, 3, 50)
    assert tally.not_kept("MCP events", "run1") == {
        "what": "MCP events", "run": "run1", "kept": 2, "kept_bytes": 80, "more": 3,
        "more_bytes": 50, "said": "2 kept (80 bytes); and 3 more, 50 bytes, not kept"}


def test_a_count_cap_and_a_byte_cap_each_stop_the_keeping() -> None:
    by_count, by_bytes = Tally(Cap(2, 10**9)), Tally(Cap(10**9, 25))
    assert [by_count.admit(1) for _ in range(4)] == [True, True, False, False]
    assert [by_bytes.admit(10) for _ in range(4)] == [True, True, False, False]
    assert Tally(Cap(5, 5)).not_kept("x") is None, "nothing left out, nothing said"


def test_a_stream_is_cut_anywhere_and_its_bytes_counted() -> None:
    tally = Tally(Cap(UNCOUNTED, 10))
    assert [tally.take(4), tally.take(4), tally.take(4), tally.take(4)] == [4, 4, 2, 0]
    tally.cut(7)  # bytes left out of a record kept shortened
    left_out = tally.not_kept("stdout")
    assert left_out is not None and left_out["more_bytes"] == 13
    assert left_out["said"] == "10 bytes kept; and 13 bytes more, not kept"


def test_sizes_are_said_as_a_reader_takes_them_in() -> None:
    assert [size_text(n) for n in (900, 832_000, 49_077_085, 3 << 30)] == \
        ["900 bytes", "812 KiB", "47 MiB", "3.0 GiB"]
    tally = Tally(Cap(128, 1 << 30))
    for _ in range(400_000):
        tally.admit(123)
    left_out = tally.not_kept("client faults (mcp)")
    assert left_out is not None
    assert left_out["said"] == "128 kept (15 KiB); and 399,872 more, 47 MiB, not kept"


def test_tallies_keep_each_kind_and_run_apart_under_its_kind_s_cap() -> None:
    tallies = Tallies({"faults": Cap(1, 100)})
    assert tallies.admit("faults (mcp)", "run1", 10, "faults")
    assert not tallies.admit("faults (mcp)", "run1", 10, "faults")
    assert tallies.admit("faults (header)", "run1", 10, "faults"), "another stream: its own"
    assert tallies.admit("faults (mcp)", "run2", 10, "faults"), "another run: its own"
    assert [(n["what"], n["run"], n["more"]) for n in tallies.not_kept()] == \
        [("faults (mcp)", "run1", 1)]


def test_the_sandbox_s_refusals_are_kept_to_their_cap_and_counted(tmp_path: Path) -> None:
    """Fails on the old code: a client leaving a FIFO at each of its 200,000 names had a
    refusal listed for each in the evidence and the report."""
    box = Sandbox.create(tmp_path, "p")
    for n in range(REFUSALS_KEPT.records + 500):
        os.mkfifo(box.workspace / f"fifo-{n}")
    files = ClientFiles(box)
    files.workspace()
    assert len(files.refused) == REFUSALS_KEPT.records
    (left_out,) = files.not_kept()
    assert (left_out["what"], left_out["more"]) == (SANDBOX_REFUSALS, 500)
    checks = Checks("p")
    harness_checks(Evidence(probe="p", client={}, runs={}, journal=[],
                            not_kept=files.not_kept()), checks)
    assert all(c.passed for c in checks.results), "the sandbox's: in the report, no check"
