"""Static evidence (``probes.clients.mentions``): whether the installed client's files
mention a string, and the reach check that reads it (``probes.catalog.common.check_mentioned``).

A fake client package stands in for an install, with and without the string; the fake loop
runs a probe that declares the strings it needs looked up, and its verdicts are decided from
the recorded answer. Nothing here is about a real client.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from mockapi import Match, Rule, Scenario, text
from probes.catalog.common import check_mentioned
from probes.clients import mentions as client_mentions
from probes.clients.base import ClientBinary
from probes.clients.mentions import look_up, searched_files
from probes.core.checks import Checks
from probes.core.evidence import Evidence
from probes.core.probe import CatalogError, Claim, Invocation, Probe, ReportSpec
from probes.core.provenance import project_expectation
from probes.core.verdicts import check_evidence
from probes.report.build import build_report
from probes.run.runner import run_probe
from tests.fakeloop import FakeLoopClient

PACKAGE = "@example/client"


def _install(root: Path, files: dict[str, bytes], entry: str = "cli.js") -> ClientBinary:
    """A client install under ``root``: ``files`` in its package folder, ``entry`` among them."""
    package = root / "node_modules" / PACKAGE
    for name, data in files.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_bytes(data)
    digest = hashlib.sha256(b"".join(files[n] for n in sorted(files))).hexdigest()
    return ClientBinary("example", "1", "linux-x86_64", PACKAGE, root, package / entry,
                        ("node", str(package / entry)), digest)


def test_a_string_in_the_package_files_is_found_and_one_nowhere_is_not(tmp_path: Path) -> None:
    binary = _install(tmp_path, {"cli.js": b"var a = {updatedToolOutput: 1};",
                                 "vendor/extra.cjs": b"process.env.SOME_CAP",
                                 "vendor/tool.bin": b"ONLY_IN_A_BINARY_ASIDE"})
    found = look_up(binary, ["updatedToolOutput", "SOME_CAP", "ONLY_IN_A_BINARY_ASIDE",
                             "neverMentioned"])
    assert found["found"] == {"ONLY_IN_A_BINARY_ASIDE": False, "SOME_CAP": True,
                              "neverMentioned": False, "updatedToolOutput": True}
    assert found["binary_sha256"] == binary.sha256
    assert found["files"] == [f"node_modules/{PACKAGE}/cli.js",
                              f"node_modules/{PACKAGE}/vendor/extra.cjs"]


def test_a_native_entry_is_searched_as_bytes_across_chunks(tmp_path: Path,
                                                            monkeypatch: Any) -> None:
    monkeypatch.setattr(client_mentions, "_CHUNK", 16)
    # the needle straddles the 16-byte chunks of a binary the JavaScript is embedded in
    data = b"\x00\x7fELF" + b"\x00" * 9 + b"CLAUDE_CODE_STOP_HOOK_BLOCK_CAP" + b"\xff" * 40
    binary = _install(tmp_path, {"bin/claude.exe": data}, entry="bin/claude.exe")
    assert look_up(binary, ["CLAUDE_CODE_STOP_HOOK_BLOCK_CAP"])["found"] == {
        "CLAUDE_CODE_STOP_HOOK_BLOCK_CAP": True}


def test_links_and_nested_dependencies_are_not_searched(tmp_path: Path) -> None:
    outside = tmp_path / "outside.js"
    outside.write_text("linkedString")
    binary = _install(tmp_path / "install", {"cli.js": b"x",
                                             "node_modules/dep/index.js": b"dependencyString"})
    (binary.entry.parent / "link.js").symlink_to(outside)
    assert [p.name for p in searched_files(binary)] == ["cli.js"]
    assert look_up(binary, ["linkedString", "dependencyString"])["found"] == {
        "dependencyString": False, "linkedString": False}


def test_the_answer_is_kept_per_binary(tmp_path: Path) -> None:
    binary = _install(tmp_path, {"cli.js": b"cachedString"})
    assert look_up(binary, ["cachedString"])["found"] == {"cachedString": True}
    binary.entry.write_bytes(b"gone")  # an install never changes under its sha256
    assert look_up(binary, ["cachedString"])["found"] == {"cachedString": True}


@pytest.mark.parametrize("needle", ["", "   ", "ünïcode", "x" * 101])
def test_a_probe_refuses_a_needle_it_cannot_look_up(needle: str) -> None:
    with pytest.raises(CatalogError, match="client_mentions"):
        _probe(needle, expected="DONE")


# ---- the reach check on a run --------------------------------------------------------------

CLAIM = "test.mentioned"
CLIENT = FakeLoopClient()
BINARY = CLIENT.install("1")


def _probe(needle: str, *, expected: str, declared: bool = True) -> Probe:
    def check(ev: Evidence, c: Checks) -> None:
        check_mentioned(c, CLAIM, ev, needle, "what the test looks up")
        record = ev.runs.get("run")
        c.equal("final-text", CLAIM, "the run ends with the model's text", expected=expected,
                observed=(record.result or {}).get("result") if record else None,
                evidence="run run: result.result")
    return Probe(name="mentions", title="mentions",
                 claims=(Claim(CLAIM, "a harness test", source=project_expectation(
                     "a harness test of static evidence", "tests/test_client_mentions.py")),),
                 scenario=Scenario(rules=[Rule(id="done", match=Match(), reply=text("DONE"))]),
                 invocations=(Invocation("run", "GO"),), check=check,
                 client_mentions=(needle,) if declared else ())


def _verdict(probe: Probe, tmp_path: Path) -> tuple[str, str, dict[str, Any]]:
    outcome = run_probe(probe, CLIENT, BINARY, tmp_path)
    report, _, _ = build_report(ReportSpec("mentions", "Mentions", (probe,)), [outcome], BINARY)
    (claim,) = report["claims"]
    return claim["status"], claim["reason"], dict(report)


def test_a_string_the_client_never_mentions_makes_the_claim_absent(tmp_path: Path) -> None:
    status, reason, report = _verdict(_probe("neverMentionedByTheFakeLoop", expected="OTHER"),
                                      tmp_path)
    assert status == "absent", reason
    assert f"(sha256 {BINARY.sha256[:12]}…) never mentions neverMentionedByTheFakeLoop" in reason
    (section,) = report["probes"]
    assert section["client_mentions"] == {"binary_sha256": BINARY.sha256,
                                          "files": ["program.py"],
                                          "found": {"neverMentionedByTheFakeLoop": False}}
    check = next(c for c in report["checks"] if "client-mentions" in c["id"])
    assert check["description"].startswith("static evidence: ")


def test_a_mentioned_string_leaves_the_behaviour_to_decide(tmp_path: Path) -> None:
    # program.py says stream-json: reach holds, so a behaviour change is still contradicted
    status, reason, _ = _verdict(_probe("stream-json", expected="OTHER"), tmp_path / "a")
    assert (status, reason) == ("contradicted", "mentions.final-text expected OTHER, "
                                                "observed DONE")
    status, reason, _ = _verdict(_probe("stream-json", expected="DONE"), tmp_path / "b")
    assert status == "confirmed", reason


def test_a_string_the_probe_did_not_declare_is_an_error(tmp_path: Path) -> None:
    probe = _probe("stream-json", expected="DONE", declared=False)
    outcome = run_probe(probe, CLIENT, BINARY, tmp_path)
    assert outcome.evidence is not None
    _, error = check_evidence(probe, outcome.evidence)
    assert error is not None and "not looked up" in error
    status, _, _ = _verdict(probe, tmp_path / "again")
    assert status == "error"
