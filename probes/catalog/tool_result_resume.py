"""One session walked through: a Read tool loop, resume, manual compaction, fork.

Reproduces the published probe of 2.1.235 (agent-loop-tool-result-resume.json):
the tool_use/tool_result pairing, the resumed view, the compact boundary, and
the forked session's identity and message view.
"""

from __future__ import annotations

from mockapi import Match, Rule, Scenario, text, tool_use
from probes.catalog.common import body_text, check_ended, last_user_locations, tool_pairs
from probes.catalog.variants import answering, with_rules, with_runs
from probes.core.checks import Checks
from probes.core.evidence import Evidence, blocks_of_type, locate
from probes.core.premises import Premise
from probes.core.probe import Claim, Counterfactual, Invocation, Probe
from probes.core.provenance import from_analysis

__all__ = ["CLAIMS", "COMPACTED", "FEEDBACK", "FILE_MARKER", "FINAL", "FIXTURE", "FORK", "FORKED",
           "FORK_OK", "INITIAL", "PROBE", "RESUME", "RESUMED", "RESUME_OK", "SCENARIO", "SUMMARY",
           "TOOL_ID", "check"]

INITIAL = "AGENT_LOOP_INITIAL_MARKER"
FILE_MARKER = "AGENT_LOOP_FILE_MARKER"
TOOL_ID = "toolu_agent_loop_probe"
FINAL = "TOOL_EXECUTION_OK"
RESUME = "AGENT_LOOP_RESUME_MARKER"
RESUME_OK = "RESUME_OK"
SUMMARY = "COMPACT_SUMMARY_MARKER"
FORK = "AGENT_LOOP_FORK_MARKER"
FORK_OK = "FORK_OK"
FIXTURE = "probe-fixture.txt"

FEEDBACK = "probe.agent-loop-tool-feedback"
RESUMED = "probe.session-resume"
COMPACTED = "probe.manual-compaction-boundary"
FORKED = "probe.session-fork-identity"

CLAIMS = (
    Claim(FEEDBACK, "A tool_use from the model is executed by the client, and its result "
                    "returns in the next request as a tool_result with the same id; the file "
                    "content reaches the model only through that tool_result; the run ends "
                    "with success and exit 0 after two model requests, which its result "
                    "counts as two turns (num_turns 2).",
          source=from_analysis(
              "模型结束任务:CLI 返回成功结果",
              "对 2.1.235 精确二进制验证了首个请求声明 Read 工具、第二个请求"
              "含同 ID 的调用与结果、结果包含文件 marker,并记录最终文本、"
              "success subtype 和退出状态", 61),
          beyond_source="The turn count is the analysis's turnCount (section "
                        "“先区分四个容易混淆的“轮次””, line 84: “第一次模型请求的 turnCount "
                        "是 1;如果模型调用工具,工具执行完后准备第二次模型请求时计数变为 2”); "
                        "that the result's num_turns reports it is expected, not stated."),
    Claim(RESUMED, "--resume of the session sends a request holding the first prompt, the "
                   "tool exchange, the first final text and the new prompt, in the same "
                   "session.",
          source=from_analysis(
              "精确版本正向探针:闭环不是纸面调用链",
              "随后脚本使用同一个 session ID 运行 --resume。第三次主请求同时"
              "包含首次 user marker、首次最终助手文本 TOOL_EXECUTION_OK 和当"
              "前 AGENT_LOOP_RESUME_MARKER", 454),
          beyond_source=('The analysis lists the first prompt, the first answer and the new prompt; that '
                        "the tool exchange is kept too is expected from 'restores history'.")),
    Claim(COMPACTED, "/compact on the resumed session emits a compact_boundary with trigger "
                     "'manual' and a pre-compaction token count, and records it in the "
                     "transcript.",
          source=from_analysis(
              "精确版本正向探针:闭环不是纸面调用链",
              "同一报告随后向真实 session 发送 /compact,观察到 "
              "system:compact_boundary、trigger=manual 和 preTokens=104", 461),
          beyond_source=('The analysis reports the compact_boundary, trigger manual and the pre-token '
                        'count, not where they are recorded; the transcript entry and the single summary '
                        "request are expected from the client's session format.")),
    Claim(FORKED, "--fork-session after compaction gets a new session identity; its request "
                  "keeps the summary and the current prompt and drops the pre-compaction "
                  "prompt, the old tool_use id and the old assistant result; the original "
                  "transcript is not modified.",
          source=from_analysis(
              "精确版本正向探针:闭环不是纸面调用链",
              "再用 --fork-session 创建新 session。fork 请求保留 compact "
              "summary 与当前 prompt,移除 compact 前 prompt、旧 tool-use ID "
              "和旧 assistant result。", 461),
          beyond_source=('That the original transcript is not modified (and the fork writes its own) is '
                        "expected from --fork-session's documented meaning (a new session), not stated by"
                        ' the analysis.')),
)

SCENARIO = Scenario(
    name="agent-loop-tool-result-resume",
    description="Read tool loop, then resume, /compact and a fork of the same session.",
    rules=[
        Rule(id="final-after-tool-result", match=Match(tool_result_for=TOOL_ID),
             reply=text(FINAL)),
        Rule(id="initial-read", match=Match(last_user_text_contains=INITIAL),
             reply=tool_use("Read", {"file_path": "{workspace}/" + FIXTURE}, id=TOOL_ID)),
        Rule(id="resume-answer", match=Match(last_user_text_contains=RESUME),
             reply=text(RESUME_OK)),
        Rule(id="compact-summary", match=Match(kind="compaction"),
             reply=text(f"<summary>{SUMMARY}: the user asked for a file to be read and the "
                        "session was resumed once.</summary>")),
        Rule(id="fork-answer", match=Match(last_user_text_contains=FORK), reply=text(FORK_OK)),
    ],
)


def check(ev: Evidence, c: Checks) -> None:
    _check_feedback(ev, c)
    _check_resume(ev, c)
    _check_compact(ev, c)
    _check_fork(ev, c)


def _check_feedback(ev: Evidence, c: Checks) -> None:
    requests = ev.requests("initial")
    first, second = ev.request("initial", 0), ev.request("initial", 1)
    c.equal("initial.request-count", FEEDBACK, "the initial run made two model requests",
            expected=2, observed=len(requests), evidence="journal: main requests of run initial")
    tools = [t.get("name") for t in (first.get("body") or {}).get("tools", [])] if first else None
    c.that("request-1.declares-read", FEEDBACK, "the first request declares the Read tool",
           passed="Read" in (tools or []), expected="tools include Read",
           observed=tools, evidence=f"request #{first.get('seq')} body.tools")
    c.that("request-1.holds-prompt", FEEDBACK, "the first request's last user turn is the prompt",
           passed=bool(last_user_locations(first, INITIAL)),
           expected=f"{INITIAL} in the last user message",
           observed=last_user_locations(first, INITIAL) or body_text(first),
           evidence=f"request #{first.get('seq')} messages")
    c.absent("request-1.no-file-content", FEEDBACK,
             "the first request does not yet contain the file content",
             needle=FILE_MARKER, haystack=body_text(first),
             evidence=f"request #{first.get('seq')} messages")
    uses = [b for _, b in blocks_of_type(second, "tool_use")]
    c.equal("request-2.tool-use-id", FEEDBACK,
            "the second request repeats the model's tool_use with its id",
            expected=[TOOL_ID], observed=[b.get("id") for b in uses] if second else None,
            evidence=f"request #{second.get('seq')} assistant tool_use blocks")
    c.equal("request-2.tool-use-input", FEEDBACK, "the repeated tool_use keeps its input",
            expected={"file_path": f"{ev.path('$WORKSPACE')}/{FIXTURE}"},
            observed=uses[0].get("input") if uses else None,
            evidence=f"request #{second.get('seq')} tool_use.input")
    results = [b for _, b in blocks_of_type(second, "tool_result")]
    c.equal("request-2.tool-result-id", FEEDBACK,
            "the tool_result's tool_use_id equals the tool_use's id",
            expected=[TOOL_ID], observed=[b.get("tool_use_id") for b in results] if second else None,
            evidence=f"request #{second.get('seq')} user tool_result blocks")
    places = [str(loc) for loc in locate(second, FILE_MARKER)]
    c.that("request-2.file-marker-via-tool-result", FEEDBACK,
           "the file content reaches the second request, and only inside the tool_result",
           passed=bool(places) and all("tool_result" in p for p in places),
           expected="only in user tool_result blocks", observed=places or "nowhere",
           evidence=f"request #{second.get('seq')} messages")
    pairs = tool_pairs(second)
    c.that("request-2.pairing", FEEDBACK,
           "every tool_use has exactly one tool_result in the next message, no orphan results",
           passed=bool(pairs["tool_use_ids"]) and not pairs["unpaired_uses"]
           and not pairs["orphan_results"],
           expected="each tool_use answered once; no orphan tool_result", observed=pairs,
           evidence=f"request #{second.get('seq')} messages")
    run = ev.run("initial")
    tool_events = run.output.tool_results() if run else []
    c.that("initial.tool-ran", FEEDBACK,
           "the client ran Read and printed its result (the file marker) before the second request",
           passed=any(FILE_MARKER in str(b.get("content")) and b.get("tool_use_id") == TOOL_ID
                      for b in tool_events),
           expected=f"a stream-json tool_result for {TOOL_ID} holding {FILE_MARKER}",
           observed=[{"tool_use_id": b.get("tool_use_id"), "content": str(b.get("content"))[:80]}
                     for b in tool_events] or "no tool_result event",
           evidence="run initial: stream-json user events")
    check_ended(c, FEEDBACK, ev, "initial", final_text=FINAL)
    c.equal("initial.num-turns", FEEDBACK, "the result counts two model turns",
            expected=2, observed=(run.result or {}).get("num_turns") if run else None,
            evidence="run initial: result.num_turns")


def _check_resume(ev: Evidence, c: Checks) -> None:
    initial, resumed = ev.run("initial"), ev.run("resume")
    request = ev.request("resume", 0)
    c.equal("resume.request-count", RESUMED, "the resumed run made one model request",
            expected=1, observed=len(ev.requests("resume")),
            evidence="journal: main requests of run resume")
    c.equal("resume.same-session", RESUMED, "the resumed run continues the same session id",
            expected=initial.session_id if initial else "<initial session>",
            observed=(resumed.result or {}).get("session_id") if resumed else None,
            evidence="run resume: result.session_id")
    text_seen = body_text(request)
    c.contains("resume.holds-first-prompt", RESUMED, "the resumed request holds the first prompt",
               needle=INITIAL, haystack=text_seen, evidence=f"request #{request.get('seq')}")
    c.contains("resume.holds-first-answer", RESUMED,
               "the resumed request holds the first run's final text",
               needle=FINAL, haystack=text_seen, evidence=f"request #{request.get('seq')}")
    pairs = tool_pairs(request)
    c.that("resume.holds-tool-exchange", RESUMED,
           "the resumed request holds the tool_use and its tool_result",
           passed=pairs["tool_use_ids"] == [TOOL_ID] and pairs["tool_result_ids"] == [TOOL_ID],
           expected={"tool_use_ids": [TOOL_ID], "tool_result_ids": [TOOL_ID]},
           observed={k: pairs[k] for k in ("tool_use_ids", "tool_result_ids")},
           evidence=f"request #{request.get('seq')}")
    c.that("resume.new-prompt-last", RESUMED, "the resume prompt is the last user turn",
           passed=bool(last_user_locations(request, RESUME)),
           expected=f"{RESUME} in the last user message",
           observed=last_user_locations(request, RESUME) or "not in the last user message",
           evidence=f"request #{request.get('seq')}")
    check_ended(c, RESUMED, ev, "resume", final_text=RESUME_OK)


def _check_compact(ev: Evidence, c: Checks) -> None:
    run = ev.run("compact")
    boundaries = run.output.of_type("system", "compact_boundary") if run else []
    meta = (boundaries[0].get("compact_metadata") or {}) if boundaries else {}
    c.equal("compact.boundary-event", COMPACTED, "/compact prints one compact_boundary event",
            expected=1, observed=len(boundaries), evidence="run compact: stream-json system events")
    c.equal("compact.trigger", COMPACTED, "the boundary's trigger is manual",
            expected="manual", observed=meta.get("trigger"),
            evidence="run compact: compact_boundary.compact_metadata.trigger")
    pre = meta.get("pre_tokens")
    c.that("compact.pre-tokens", COMPACTED, "the boundary records a pre-compaction token count",
           passed=isinstance(pre, int) and pre > 0, expected="a positive integer",
           observed=pre, evidence="run compact: compact_boundary.compact_metadata.pre_tokens")
    compactions = ev.requests("compact", kind="compaction")
    c.equal("compact.summary-request", COMPACTED,
            "the client asked the model for a summary once",
            expected=1, observed=len(compactions), evidence="journal: compaction requests")
    initial = ev.run("initial")
    entries = ev.transcript(initial.session_id if initial else None)
    marks = [e for e in entries if e.get("subtype") == "compact_boundary"]
    metadata = (marks[0].get("compactMetadata") or {}) if marks else {}
    recorded = {k: metadata[k] for k in ("trigger", "preTokens") if k in metadata}
    c.that("compact.transcript-boundary", COMPACTED,
           "the transcript records the boundary with trigger manual and preTokens",
           passed=recorded.get("trigger") == "manual" and isinstance(recorded.get("preTokens"), int),
           expected={"trigger": "manual", "preTokens": "an integer"},
           observed=recorded or "no compact_boundary entry",
           evidence="transcript of the initial session")
    check_ended(c, COMPACTED, ev, "compact", final_text=None)


def _check_fork(ev: Evidence, c: Checks) -> None:
    initial, fork = ev.run("initial"), ev.run("fork")
    fork_session = (fork.result or {}).get("session_id") if fork else None
    original = initial.session_id if initial else None
    c.that("fork.new-session", FORKED, "the fork runs under a new session id",
           passed=bool(fork_session) and fork_session != original,
           expected=f"a session id other than {original}", observed=fork_session,
           evidence="run fork: result.session_id")
    original_changed = [p for p in (fork.files_changed if fork else {})
                        if original and p.endswith(f"{original}.jsonl")]
    c.equal("fork.original-transcript-unchanged", FORKED,
            "the fork leaves the original transcript byte-identical",
            expected=[], observed=original_changed, evidence="sha256 of transcripts around run fork")
    new_files = [p for p, change in (fork.files_changed if fork else {}).items()
                 if change["before"] is None and fork_session and p.endswith(f"{fork_session}.jsonl")]
    c.that("fork.own-transcript", FORKED, "the fork writes its own transcript file",
           passed=len(new_files) == 1, expected="one new <fork session>.jsonl",
           observed=new_files or "none", evidence="files created during run fork")
    request = ev.request("fork", 0)
    seen = body_text(request)
    where = f"request #{request.get('seq')}"
    c.contains("fork.keeps-summary", FORKED, "the fork request holds the compaction summary",
               needle=SUMMARY, haystack=seen, evidence=where)
    c.that("fork.current-prompt-last", FORKED, "the fork prompt is the last user turn",
           passed=bool(last_user_locations(request, FORK)), expected=f"{FORK} in the last user message",
           observed=last_user_locations(request, FORK) or "not in the last user message",
           evidence=where)
    c.absent("fork.drops-initial-prompt", FORKED, "the pre-compaction prompt is gone",
             needle=INITIAL, haystack=seen, evidence=where)
    c.absent("fork.drops-tool-use-id", FORKED, "the old tool_use id is gone",
             needle=TOOL_ID, haystack=seen, evidence=where)
    c.absent("fork.drops-old-result", FORKED, "the old assistant result is gone",
             needle=FINAL, haystack=seen, evidence=where)
    check_ended(c, FORKED, ev, "fork", final_text=FORK_OK)


PROBE = Probe(
    name="tool-result-resume",
    premises=(
        Premise("flag", "--resume", "feature", "resumes the stored session",
                claims=(RESUMED, COMPACTED, FORKED)),
        Premise("command", "compact", "feature", "compacts the resumed session",
                claims=(COMPACTED, FORKED)),
        Premise("flag", "--fork-session", "feature", "forks the compacted session",
                claims=(FORKED,)),
    ),
    revision=2,  # the final text where the result event's is empty
    title="Tool feedback, resume, manual compaction and fork in one session",
    claims=CLAIMS,
    scenario=SCENARIO,
    fixtures={FIXTURE: f"{FILE_MARKER}\n"},
    invocations=(
        Invocation("initial", INITIAL, session="new", tools=("Read",)),
        Invocation("resume", RESUME, session="resume", resume_from="initial"),
        Invocation("compact", "/compact", session="resume", resume_from="initial"),
        Invocation("fork", FORK, session="resume", resume_from="initial", fork=True),
    ),
    check=check,
        boundaries=(
        "Uses only the Read tool against a local mock; says nothing about Bash, sandboxing, "
        "network tools, MCP or remote model quality.",
        "The token count of the boundary depends on the scripted usage; its presence is "
        "checked, not its value.",
        "The fork request also carries the fixture's content re-attached as a "
        "<system-reminder> text; the checks only require the old tool_use id and result to "
        "be gone, not every trace of the file.",
    ),
    counterfactuals=(
        Counterfactual(
            "text-only-answer",
            "The model answers the first prompt with text only (no tool_use), so no tool runs, no "
            "tool_result returns and the loop makes a single request.",
            (FEEDBACK,),
            lambda p: with_runs(with_rules(p, [answering(p, "initial-read", text(FINAL))]),
                                keep=("initial",))),
        Counterfactual(
            "fresh-session",
            "The resume run starts a new session instead of resuming the first, so its request "
            "cannot hold the first prompt, the tool exchange or the first answer.",
            (RESUMED,),
            lambda p: with_runs(p, keep=("initial", "resume"),
                                changes={"resume": {"session": "new", "resume_from": None}})),
        Counterfactual(
            "ordinary-prompt-instead-of-compact",
            "The compact run sends an ordinary prompt instead of /compact, so nothing asks for "
            "a summary and no compact boundary can be emitted or recorded.",
            (COMPACTED,),
            lambda p: with_runs(
                with_rules(p, added=[Rule(id="no-compact-answer",
                                          match=Match(last_user_text_contains="AGENT_LOOP_NO_COMPACT"),
                                          reply=text("NOT_COMPACTED"))]),
                keep=("initial", "compact"),
                changes={"compact": {"prompt": "AGENT_LOOP_NO_COMPACT_MARKER"}})),
        Counterfactual(
            "resume-without-fork",
            "The last run resumes the compacted session without --fork-session, so it keeps the "
            "original session id and appends to the original transcript.",
            (FORKED,),
            lambda p: with_runs(p, changes={"fork": {"fork": False}})),
        Counterfactual(
            "fork-before-compaction",
            "The session is forked without the /compact run before it, so there is no summary to "
            "keep and the fork's request still holds the first prompt, the tool exchange and the "
            "first answer.",
            (FORKED,),
            lambda p: with_runs(p, keep=("initial", "resume", "fork"))),
    ),
)
