"""Sessions across versions: one version writes a session, another resumes and forks it.

For writer W and reader R, one probe in one sandbox: W runs a tool turn in a new session,
R resumes it, R forks it (each run's binary recorded). Every ordered pair of a list of
versions, the diagonal included as the baseline, gives the compatibility table
(``loopprobe sessions``): ``sessions.json`` (each pair's binaries, commands, exit codes and
every check with its expected and observed value, bounded), each pair's recorded requests as
a gzipped journal under ``journals/`` (the lines a report's journal has) and ``SESSIONS.md``.
Tables written before every check was kept list only the failed ones (``failed_checks``):
they still read.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

from mockapi import Match, Rule, Scenario, text, tool_use
from probes.catalog.common import body_text, check_ended, last_user_locations, tool_pairs
from probes.clients.base import Client, ClientBinary
from probes.core.checks import Checks
from probes.core.evidence import Evidence
from probes.core.files import write_bytes, write_json, write_lines
from probes.core.outcome import ProbeOutcome
from probes.core.probe import Claim, Counterfactual, Invocation, Probe
from probes.core.provenance import project_expectation
from probes.core.verdicts import decide_claim
from probes.report.journal_blobs import compact_lines
from probes.report.normalise import Normaliser, journal_line

__all__ = ["CLAIMS", "CLI_DOCS", "FILE_MARKER", "FORKED_ANSWER", "FORK_CLAIM", "FORK_PROMPT",
           "RESUMED_ANSWER", "RESUME_CLAIM", "RESUME_PROMPT", "SCENARIO", "TOOL_ID",
           "WRITER_ANSWER", "WRITE_PROMPT", "check", "compat_probe", "failed_checks",
           "pair_entry", "pair_journal", "render_table", "run_table"]

WRITE_PROMPT, WRITER_ANSWER = "SESSION_COMPAT_WRITE_MARKER", "SESSION_COMPAT_WRITER_ANSWER"
RESUME_PROMPT, RESUMED_ANSWER = "SESSION_COMPAT_RESUME_MARKER", "SESSION_COMPAT_RESUMED"
FORK_PROMPT, FORKED_ANSWER = "SESSION_COMPAT_FORK_MARKER", "SESSION_COMPAT_FORKED"
TOOL_ID = "toolu_session_compat_read"
FILE_MARKER = "SESSION_COMPAT_FILE_MARKER"
RESUME_CLAIM = "probe.session-cross-version-resume"
FORK_CLAIM = "probe.session-cross-version-fork"
CLI_DOCS = "https://docs.claude.com/en/docs/claude-code/cli-reference (--resume, --fork-session)"
_BOUND = 300  # an expected or observed value longer than this (as JSON) is kept cut, as text


def _history(c: Checks, claim: str, ev: Evidence, run: str) -> None:
    """The run's request carries the writer's turn: its prompt, its tool exchange, its answer."""
    request = ev.request(run, 0)
    seen = body_text(request) or ""
    pairs = tool_pairs(request) if request else {}
    c.that(f"{run}.writer-prompt", claim, "the request holds the writer's prompt",
           passed=WRITE_PROMPT in seen, expected=f"{WRITE_PROMPT} in the messages",
           observed=seen[-400:] or "no request", evidence=f"request #{request.get('seq')}")
    c.that(f"{run}.writer-tool-exchange", claim,
           "the writer's tool call is there with its result paired, holding the file",
           passed=TOOL_ID in pairs.get("tool_use_ids", []) and not pairs.get("unpaired_uses")
           and FILE_MARKER in seen,
           expected=f"{TOOL_ID} answered in the next message, {FILE_MARKER} in its result",
           observed=pairs or "no request", evidence=f"request #{request.get('seq')} messages")
    c.that(f"{run}.writer-answer", claim, "the writer's final answer is in the history",
           passed=WRITER_ANSWER in seen, expected=f"{WRITER_ANSWER} in the messages",
           observed=seen[-400:] or "no request", evidence=f"request #{request.get('seq')}")


def check(ev: Evidence, c: Checks) -> None:
    writer = ev.run("write")
    c.equal("write.ended", RESUME_CLAIM, "the writer's run ended with its answer",
            expected=WRITER_ANSWER, observed=(writer.result or {}).get("result")
            if writer else None, evidence="run write: result")
    _history(c, RESUME_CLAIM, ev, "resume")
    c.that("resume.prompt-last", RESUME_CLAIM, "the reader's prompt is the last user turn",
           passed=bool(last_user_locations(ev.request("resume", 0), RESUME_PROMPT)),
           expected=f"{RESUME_PROMPT} in the last user message",
           observed=last_user_locations(ev.request("resume", 0), RESUME_PROMPT) or "absent",
           evidence="run resume: its first request")
    check_ended(c, RESUME_CLAIM, ev, "resume", final_text=RESUMED_ANSWER, prefix="resume")
    _history(c, FORK_CLAIM, ev, "fork")
    written = writer.session_id if writer else None
    fork = ev.run("fork")
    forked = fork.session_id if fork else None
    c.that("fork.new-identity", FORK_CLAIM, "the fork runs under a new session id",
           passed=forked is not None and forked != written,
           expected=f"a session id other than the writer's {written}", observed=forked,
           evidence="run fork: session_id of its result")
    touched = sorted(p for p in (fork.files_changed if fork else {})
                     if written and p.endswith(f"{written}.jsonl"))
    c.equal("fork.writer-untouched", FORK_CLAIM, "the fork leaves the written transcript as is",
            expected=[], observed=touched, evidence="run fork: files changed")
    check_ended(c, FORK_CLAIM, ev, "fork", final_text=FORKED_ANSWER, prefix="fork")


SCENARIO = Scenario(name="session-compat", rules=[
    Rule(id="resumed", match=Match(last_user_text_contains=RESUME_PROMPT),
         reply=text(RESUMED_ANSWER)),
    Rule(id="forked", match=Match(last_user_text_contains=FORK_PROMPT), reply=text(FORKED_ANSWER)),
    Rule(id="answer", match=Match(tool_result_for=TOOL_ID), reply=text(WRITER_ANSWER)),
    Rule(id="read", match=Match(last_user_text_contains=WRITE_PROMPT),
         reply=tool_use("Read", {"file_path": "{workspace}/notes.txt"}, id=TOOL_ID)),
])

CLAIMS = (
    Claim(RESUME_CLAIM,
          "A session written by one version resumes in another: the reader's request "
          "carries the writer's prompt, its tool call with the paired result and its "
          "answer, then the new prompt, and the run ends with success.",
          source=project_expectation(
              "--resume restores a stored conversation; users resume sessions after "
              "updating the client, so a stored session is expected to load in the next "
              "version (and the one before, on a rollback)", CLI_DOCS)),
    Claim(FORK_CLAIM,
          "A session written by one version forks in another: a new session id, the "
          "writer's history carried, the written transcript left as it was.",
          source=project_expectation(
              "--fork-session with --resume starts a new session from the stored one",
              CLI_DOCS)),
)


def compat_probe(writer: str, reader: str) -> Probe:
    """The probe of one pair; run it with the writer's binary as the probe's client."""
    other = None if reader == writer else reader
    return Probe(
        name=f"session-compat-{writer}-to-{reader}",
        title=f"A session written by {writer}, resumed and forked by {reader}",
        claims=CLAIMS, scenario=SCENARIO, fixtures={"notes.txt": f"{FILE_MARKER}\n"},
        invocations=(
            Invocation("write", WRITE_PROMPT),
            Invocation("resume", RESUME_PROMPT, session="resume", resume_from="write",
                       client_version=other),
            Invocation("fork", FORK_PROMPT, session="resume", resume_from="write", fork=True,
                       client_version=other)),
        check=check,
        counterfactuals=(Counterfactual(
            "reader-starts-anew",
            "The reader's runs start new sessions instead of resuming the written one: "
            "nothing of the writer's turn can be in their requests.",
            (RESUME_CLAIM, FORK_CLAIM),
            lambda p: replace(p, invocations=tuple(
                replace(i, session="new", resume_from=None, fork=False)
                if i.name != "write" else i for i in p.invocations))),))


def _verdict(outcome: ProbeOutcome, claim: str) -> str:
    """The claim's verdict by the reports' rule (``decide_claim``), in the table's words."""
    if outcome.evidence is None and not (outcome.not_applicable or outcome.absent):
        return "error"
    checks = [c.to_json() for c in outcome.checks]
    status, _ = decide_claim([c for c in checks if c["claim"] == claim], checks,
                             not_applicable=outcome.not_applicable, error=outcome.error,
                             absent=outcome.absent)
    return {"confirmed": "ok", "not_observable": "ok", "contradicted": "fails",
            "differs_from_baseline": "fails", "not_applicable": "not applicable",
            "not_reached": "not reached"}.get(status, status)


def _bounded(value: Any) -> Any:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True,
                                                           ensure_ascii=False)
    return value if len(text) <= _BOUND else text[:_BOUND] + f"… (+{len(text) - _BOUND} chars)"


def pair_entry(writer: ClientBinary, reader: ClientBinary, outcome: ProbeOutcome) -> dict[str, Any]:
    """A pair's compact, machine-independent evidence: every check (id, claim, status,
    expected, observed; long values cut), so a pair that is ok shows what was seen too."""
    ev = outcome.evidence
    norm = Normaliser(ev)
    return {
        "writer": {"version": writer.version, "binary_sha256": writer.sha256},
        "reader": {"version": reader.version, "binary_sha256": reader.sha256},
        "resume": _verdict(outcome, RESUME_CLAIM), "fork": _verdict(outcome, FORK_CLAIM),
        "not_applicable": outcome.not_applicable, "error": outcome.error,
        "runs": [{"name": r.name, "version": (r.client or {}).get("version", writer.version),
                  "argv": [norm(_placeholder(a, ev)) for a in r.argv], "exit_code": r.exit_code,
                  "result": (r.result or {}).get("result"),
                  "subtype": (r.result or {}).get("subtype")}
                 for r in (ev.runs.values() if ev else [])],
        "checks": [{"id": c.id, "claim": c.claim, "status": c.status,
                    "expected": _bounded(norm(c.expected)),
                    "observed": _bounded(norm(c.observed))} for c in outcome.checks],
    }


def pair_journal(outcome: ProbeOutcome) -> bytes:
    """The pair's recorded requests, each a line as in a report's journal, gzipped with no
    timestamp in the header (the same bytes for the same lines)."""
    ev = outcome.evidence
    norm = Normaliser(ev)
    lines = compact_lines([journal_line(outcome.probe.name, dict(r), norm)
                           for r in (ev.journal if ev else [])])
    return gzip.compress("".join(line + "\n" for line in lines).encode(), 9, mtime=0)


def failed_checks(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """The checks of a pair that did not pass: from every check kept, or from a table written
    before they were (``failed_checks``)."""
    if "checks" in entry:
        return [c for c in entry["checks"] if c.get("status") != "passed"]
    return list(entry.get("failed_checks") or [])


def _placeholder(text: str, ev: Evidence | None) -> str:
    for real, name in sorted((ev.placeholders if ev else {}).items(), key=lambda kv: -len(kv[0])):
        text = text.replace(real, name)
    return text


def render_table(entries: Sequence[dict[str, Any]]) -> list[str]:
    """SESSIONS.md: writer × reader, each cell resume / fork, then every failure's checks."""
    versions = sorted({e["writer"]["version"] for e in entries} |
                      {e["reader"]["version"] for e in entries}, key=_version_key)
    cells = {(e["writer"]["version"], e["reader"]["version"]): e for e in entries}
    mark = {"ok": "ok", "fails": "**fails**", "error": "error", "not applicable": "n/a"}
    out = ["# Sessions across versions", "",
           "A session written by the row's version (a Read tool turn), then resumed "
           "(`--resume`) and forked (`--resume --fork-session`) by the column's version, in "
           "one sandbox against the mock. Each cell: resume / fork. Claims "
           f"`{RESUME_CLAIM}` and `{FORK_CLAIM}`; the evidence of each pair (binaries, "
           "commands, exit codes, every check with what it expected and observed) is in "
           "`sessions.json`, its recorded requests in `journals/`; regenerate with "
           "`loopprobe sessions`.", "",
           "| writer ↓ reader → | " + " | ".join(versions) + " |",
           "|---|" + "---|" * len(versions)]
    for writer in versions:
        row = []
        for reader in versions:
            entry = cells.get((writer, reader))
            row.append(f"{mark[entry['resume']]} / {mark[entry['fork']]}" if entry else "—")
        out.append(f"| **{writer}** | " + " | ".join(row) + " |")
    failures = [e for e in entries if e["resume"] != "ok" or e["fork"] != "ok"]
    if failures:
        out += ["", "## What failed", ""]
        for e in sorted(failures, key=lambda e: (_version_key(e["writer"]["version"]),
                                                 _version_key(e["reader"]["version"]))):
            out.append(f"- **{e['writer']['version']} → {e['reader']['version']}** "
                       f"(resume {e['resume']}, fork {e['fork']}): "
                       + (e["not_applicable"] or e["error"] or "; ".join(
                           f"`{c['id']}` expected {c['expected']!r}, observed "
                           f"{c['observed']!r}" for c in failed_checks(e)[:3])))
    return out


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else 0 for p in version.split("."))


def run_table(client: Client, versions: Sequence[str], out: Path, *, jobs: int,
              run: Callable[[Probe, ClientBinary], ProbeOutcome],
              progress: Callable[[str], None] = lambda _: None) -> list[dict[str, Any]]:
    """Every ordered pair of ``versions`` (the diagonal too); writes the table to ``out``."""
    binaries = {v: client.install(v) for v in versions}
    pairs = [(w, r) for w in versions for r in versions]

    def one(pair: tuple[str, str]) -> dict[str, Any]:
        writer, reader = pair
        outcome = run(compat_probe(writer, reader), binaries[writer])
        entry = pair_entry(binaries[writer], binaries[reader], outcome)
        entry["journal"] = f"journals/{writer}-to-{reader}.journal.jsonl.gz"
        write_bytes(out / entry["journal"], pair_journal(outcome))
        progress(f"  {writer} -> {reader}: resume {entry['resume']}, fork {entry['fork']}")
        return entry

    with ThreadPoolExecutor(max(1, jobs)) as pool:
        entries = list(pool.map(one, pairs))
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "sessions.json", {"claims": [c.id for c in CLAIMS],
                                       "sources": {c.id: c.source.to_json() for c in CLAIMS},
                                       "pairs": entries})
    write_lines(out / "SESSIONS.md", render_table(entries))
    return entries

