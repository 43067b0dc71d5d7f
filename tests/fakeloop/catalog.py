"""Probes of the fake loop, for the fast harness tests (``loopprobe run --catalog`` reads REPORTS).

Their claims are about the fake loop (``tests/fakeloop/program.py``), never about a
real client; they exist so that the harness has something to run, check and report.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mockapi import Match, Rule, Scenario, text, tool_use
from probes.catalog.common import check_ended, last_user_locations, tool_pairs
from probes.core.checks import Checks
from probes.core.evidence import Evidence, block_text, blocks_of_type, messages
from probes.core.probe import Claim, Hooks, Invocation, Probe, ReportSpec
from probes.core.provenance import project_expectation

__all__ = ["DENY", "DENY_REASON", "READ", "REPORTS", "RESUME", "STOP", "STOP_REASON", "read_probe"]

SOURCE = project_expectation("the fake loop's own contract, written to test the harness",
                             "tests/fakeloop/program.py")
READ_CLAIM = "fake.read-loop"
STOP_CLAIM = "fake.stop-block"
DENY_CLAIM = "fake.pretooluse-deny"
RESUME_CLAIM = "fake.resume"
STOP_REASON = "STOP_HOOK_SAYS_GO_ON"
DENY_REASON = "NO_SHELL_FOR_THE_FAKE"


def _conversation(record: Mapping[str, Any]) -> list[list[str]]:
    """Each block of a request's messages as [role, text]."""
    pairs = []
    for message in messages(record):
        content = message.get("content")
        for block in content if isinstance(content, list) else [content]:
            pairs.append([str(message.get("role")), block_text(block)])
    return pairs


# ---- a Read tool loop ------------------------------------------------------------------

def _check_read(ev: Evidence, c: Checks) -> None:
    second = ev.request("read", 1)
    c.equal("requests", READ_CLAIM, "one request for the prompt, one with the tool result",
            expected=2, observed=len(ev.requests("read")), evidence="journal: main requests")
    pairs = tool_pairs(second)
    c.equal("paired", READ_CLAIM, "the tool_result answers the tool_use, right after it",
            expected={"tool_use_ids": ["toolu_read"], "tool_result_ids": ["toolu_read"],
                      "unpaired_uses": [], "orphan_results": []},
            observed=pairs, evidence="request 2: tool_use and tool_result ids")
    results = [b for _, b in blocks_of_type(second, "tool_result")]
    c.contains("file-content", READ_CLAIM, "the tool_result holds the file's text",
               needle="NOTE_CONTENT", haystack=block_text(results[0]) if results else None,
               evidence="request 2: tool_result content")
    run = ev.run("read")
    c.equal("transcript", READ_CLAIM, "the session transcript holds the four messages",
            expected=["user", "assistant", "user", "assistant"],
            observed=[e.get("type") for e in ev.transcript(run.session_id if run else None)],
            evidence="session file: message roles")
    check_ended(c, READ_CLAIM, ev, "read", final_text="NOTE_READ")


def read_probe(answer: str = "NOTE_READ") -> Probe:
    """The Read loop; another ``answer`` than NOTE_READ makes its final-text check fail."""
    return Probe(
        name="read-file", title="A Read tool loop",
        claims=(Claim(READ_CLAIM, "The fake loop runs Read and sends its result back, paired "
                                  "with the tool_use id.", source=SOURCE),),
        scenario=Scenario(name="read-file", rules=[
            Rule(id="read", match=Match(last_user_text_contains="READ_NOTE"),
                 reply=tool_use("Read", {"file_path": "{workspace}/note.txt"}, id="toolu_read")),
            Rule(id="answer", match=Match(tool_result_for="toolu_read"), reply=text(answer)),
        ]),
        fixtures={"note.txt": "NOTE_CONTENT\n"},
        invocations=(Invocation("read", "READ_NOTE", timeout=30),),
        check=_check_read,
    )


READ = read_probe()


# ---- a Stop hook that blocks once -----------------------------------------------------

def _check_stop(ev: Evidence, c: Checks) -> None:
    c.equal("requests", STOP_CLAIM, "the block sends the loop back to the model once",
            expected=2, observed=len(ev.requests("stop")), evidence="journal: main requests")
    c.equal("reason-sent", STOP_CLAIM, "the hook's reason is the last user message",
            expected=["messages[2].content[0] (user text)"],
            observed=last_user_locations(ev.request("stop", 1), STOP_REASON),
            evidence="request 2: where the reason is")
    c.equal("stop-hook-active", STOP_CLAIM, "Stop ran twice, the second time as a re-entry",
            expected=[False, True],
            observed=[h["input"].get("stop_hook_active") for h in ev.hooks("Stop")],
            evidence="hook calls: Stop payloads")
    check_ended(c, STOP_CLAIM, ev, "stop", final_text="SECOND_ANSWER")


STOP = Probe(
    name="stop-block", title="A Stop hook blocks once",
    claims=(Claim(STOP_CLAIM, "A Stop hook's block appends its reason and re-enters the loop; "
                              "the next Stop payload has stop_hook_active.", source=SOURCE),),
    scenario=Scenario(name="stop-block", rules=[
        Rule(id="first", match=Match(last_user_text_contains="STOP_PROMPT"),
             reply=text("FIRST_ANSWER")),
        Rule(id="again", match=Match(last_user_text_contains=STOP_REASON),
             reply=text("SECOND_ANSWER")),
    ]),
    invocations=(Invocation("stop", "STOP_PROMPT", timeout=30),),
    hooks=Hooks({"Stop": {"action": "block", "reason": STOP_REASON, "times": 1}}),
    check=_check_stop,
)


# ---- a PreToolUse hook that denies ----------------------------------------------------

def _check_deny(ev: Evidence, c: Checks) -> None:
    results = [b for _, b in blocks_of_type(ev.request("deny", 1), "tool_result")]
    c.equal("denied-result", DENY_CLAIM, "the denied tool's result is an error with the reason",
            expected=[{"tool_use_id": "toolu_bash", "is_error": True, "content": DENY_REASON}],
            observed=[{k: b.get(k) for k in ("tool_use_id", "is_error", "content")}
                      for b in results],
            evidence="request 2: tool_result blocks")
    c.equal("not-run", DENY_CLAIM, "the denied command did not run",
            expected=False, observed="ran.txt" in ev.workspace_files,
            evidence="workspace: ran.txt exists")
    c.equal("hook-calls", DENY_CLAIM, "PreToolUse ran for Bash; PostToolUse never ran",
            expected={"PreToolUse": ["Bash"], "PostToolUse": []},
            observed={event: [h["input"].get("tool_name") for h in ev.hooks(event)]
                      for event in ("PreToolUse", "PostToolUse")},
            evidence="hook calls: tool names")
    check_ended(c, DENY_CLAIM, ev, "deny", final_text="DENIED_SEEN")


DENY = Probe(
    name="pretooluse-deny", title="A PreToolUse hook denies Bash",
    claims=(Claim(DENY_CLAIM, "A PreToolUse deny keeps the tool from running and answers the "
                              "tool_use with an error holding the reason.", source=SOURCE),),
    scenario=Scenario(name="pretooluse-deny", rules=[
        Rule(id="bash", match=Match(last_user_text_contains="DENY_PROMPT"),
             reply=tool_use("Bash", {"command": "touch {workspace}/ran.txt"}, id="toolu_bash")),
        Rule(id="after", match=Match(tool_result_for="toolu_bash"), reply=text("DENIED_SEEN")),
    ]),
    invocations=(Invocation("deny", "DENY_PROMPT", tools=("Bash",), timeout=30),),
    hooks=Hooks({"PreToolUse": {"action": "deny", "tools": ["Bash"], "reason": DENY_REASON}}),
    check=_check_deny,
)


# ---- resuming a session -----------------------------------------------------------------

def _check_resume(ev: Evidence, c: Checks) -> None:
    c.equal("history-sent", RESUME_CLAIM, "the resumed run sends the first exchange again",
            expected=[["user", "FIRST_PROMPT"], ["assistant", "FIRST_ANSWER"],
                      ["user", "SECOND_PROMPT"]],
            observed=_conversation(ev.request("second", 0)),
            evidence="run second, request 1: messages")
    first, second = ev.run("first"), ev.run("second")
    c.equal("same-session", RESUME_CLAIM, "both runs report one session id",
            expected=True, observed=bool(first and second and first.session_id
                                         and first.session_id == second.session_id),
            evidence="stream-json session_id of both runs")
    check_ended(c, RESUME_CLAIM, ev, "first", final_text="FIRST_ANSWER")
    check_ended(c, RESUME_CLAIM, ev, "second", final_text="SECOND_ANSWER")


RESUME = Probe(
    name="resume", title="A second run resumes the first session",
    claims=(Claim(RESUME_CLAIM, "A resumed session sends the stored messages before the new "
                                "prompt.", source=SOURCE),),
    scenario=Scenario(name="resume", rules=[
        Rule(id="first", match=Match(last_user_text_contains="FIRST_PROMPT"),
             reply=text("FIRST_ANSWER")),
        Rule(id="second", match=Match(last_user_text_contains="SECOND_PROMPT"),
             reply=text("SECOND_ANSWER")),
    ]),
    invocations=(Invocation("first", "FIRST_PROMPT", timeout=30),
                 Invocation("second", "SECOND_PROMPT", session="resume", resume_from="first",
                            timeout=30)),
    check=_check_resume,
)

REPORTS = (
    ReportSpec(name="fake-tools", title="Fake loop: tools", probes=(READ, DENY),
               summary="A test double's tool loop; no claim about a real client."),
    ReportSpec(name="fake-sessions", title="Fake loop: hooks and sessions", probes=(STOP, RESUME),
               summary="A test double's Stop hook and resume; no claim about a real client."),
)
