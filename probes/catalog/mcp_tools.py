"""MCP tools and PostToolUse rewriting: the harness's own MCP server attached to the client.

Each run given a server (``Invocation(mcp=...)``) starts ``probes/inside/mcp_server.py`` over
stdio inside the sandbox; its log (every list, call, answer, crash and notification) is
evidence beside the journal. PostToolUse rewriting is probed on an MCP tool
(``updatedMCPToolOutput``) and on a built-in one (``updatedToolOutput``, valid and not); a
server that dies or hangs mid-call is ``probes.catalog.mcp_failures``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from mockapi import Match, Rule, Scenario, text, tool_use
from probes.catalog.common import check_ended, check_mentioned
from probes.catalog.premises import MCP_CONFIG, STREAMED_INPUT, hook_tool_ids
from probes.catalog.variants import recording_hooks, with_runs
from probes.core.checks import Checks
from probes.core.evidence import Evidence, blocks_of_type
from probes.core.mcp import McpReply, McpServer, McpTool
from probes.core.premises import Premise
from probes.core.probe import Claim, Counterfactual, Hooks, Invocation, Probe
from probes.core.provenance import from_analysis, project_expectation
from probes.core.streamed import Step, StreamedInput, user_message

__all__ = ["FRESH", "GOOD_REWRITE", "HOOKS_DOCS", "INVALID_CLAIM", "MCP_DOCS", "MCP_REWRITE",
           "MCP_REWRITE_CLAIM", "PROBES", "REFRESH_CLAIM", "REFRESH_PROBE", "REWRITE_PROBE",
           "SERVER", "TIMEOUT_MS", "UPDATED_CLAIM", "check_refresh", "check_rewrites",
           "server_calls", "tool_result_text", "with_server_reply"]

HOOKS_DOCS = "https://docs.claude.com/en/docs/claude-code/hooks (PostToolUse decision control)"
MCP_DOCS = "https://docs.claude.com/en/docs/claude-code/mcp"
TIMEOUT_MS = 3000

FRESH = McpTool("fresh", (McpReply(text="FRESH_TOOL_RESULT"),))
SERVER = McpServer(tools=(
    McpTool("lookup", (McpReply(text="MCP_LOOKUP_RESULT", then_tools=(
        McpTool("lookup", (McpReply(text="MCP_LOOKUP_AGAIN"),)), FRESH)),)),
    McpTool("rewritten", (McpReply(text="MCP_ORIGINAL_OUTPUT"),)),
    McpTool("crasher", (McpReply(crash=True),)),
    McpTool("hanger", (McpReply(hang=True),)),
))
MCP_REWRITE = "MCP_REWRITTEN_BY_HOOK"
GOOD_REWRITE = "BUILTIN_REWRITTEN_BY_HOOK"


def tool_result_text(record: Any, tool_use_id: str) -> str | None:
    """The text a request's tool_result for ``tool_use_id`` carries to the model."""
    for _, block in blocks_of_type(record, "tool_result") if record else []:
        if block.get("tool_use_id") == tool_use_id:
            content = block.get("content")
            if isinstance(content, list):
                return "".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
            return str(content)
    return None


def server_calls(ev: Evidence, run: str, event: str) -> list[dict[str, Any]]:
    return [e for e in ev.mcp_calls.get(run, []) if e.get("event") == event]


def _tools_offered(record: Any) -> list[str]:
    return sorted(str(t.get("name")) for t in (record.get("body") or {}).get("tools") or [])


# ---- PostToolUse rewriting ---------------------------------------------------------------

UPDATED_CLAIM = "probe.posttooluse-updated-output"
INVALID_CLAIM = "probe.posttooluse-invalid-output-kept"
MCP_REWRITE_CLAIM = "probe.posttooluse-mcp-output"


def check_rewrites(ev: Evidence, c: Checks) -> None:
    # a version that does not know updatedToolOutput ignores it silently: nothing in the run
    # tells that from one that knows it and keeps the original output
    for run, claim in (("good", UPDATED_CLAIM), ("bad", INVALID_CLAIM)):
        check_mentioned(c, claim, ev, "updatedToolOutput",
                        "the PostToolUse output field the hook answers", prefix=run)
    good = tool_result_text(ev.request("good", 1), "toolu_rewrite_good")
    c.that("good.rewritten", UPDATED_CLAIM,
           "the model receives the hook's output instead of the file's",
           passed=good is not None and GOOD_REWRITE in good and "GOOD_ORIGINAL" not in good,
           expected=f"{GOOD_REWRITE}, not GOOD_ORIGINAL, in the tool_result",
           observed=good, evidence="run good: request 2 tool_result")
    check_ended(c, UPDATED_CLAIM, ev, "good", final_text="AFTER_GOOD", prefix="good")
    bad = tool_result_text(ev.request("bad", 1), "toolu_rewrite_bad")
    c.that("bad.original-kept", INVALID_CLAIM,
           "an output that does not fit the tool's output schema is dropped: the model "
           "receives the file's own content",
           passed=bad is not None and "BAD_ORIGINAL" in bad and "NOT_A_READ_OUTPUT" not in bad,
           expected="BAD_ORIGINAL, not NOT_A_READ_OUTPUT, in the tool_result",
           observed=bad, evidence="run bad: request 2 tool_result")
    c.equal("bad.hook-ran", INVALID_CLAIM, "the PostToolUse hook ran for the call",
            expected=1, observed=len([h for h in ev.hooks("PostToolUse")
                                      if (h.get("input") or {}).get("tool_use_id")
                                      == "toolu_rewrite_bad"]),
            evidence="hook log: PostToolUse")
    check_ended(c, INVALID_CLAIM, ev, "bad", final_text="AFTER_BAD", prefix="bad")
    mcp = tool_result_text(ev.request("mcp", 1), "toolu_rewrite_mcp")
    c.that("mcp.rewritten", MCP_REWRITE_CLAIM,
           "the model receives the hook's output instead of the MCP server's",
           passed=mcp is not None and MCP_REWRITE in mcp and "MCP_ORIGINAL_OUTPUT" not in mcp,
           expected=f"{MCP_REWRITE}, not MCP_ORIGINAL_OUTPUT, in the tool_result",
           observed=mcp, evidence="run mcp: request 2 tool_result")
    c.equal("mcp.server-answered", MCP_REWRITE_CLAIM,
            "the server did answer the call (the rewrite replaced a real output)",
            expected=["rewritten"], observed=[e.get("tool") for e in server_calls(ev, "mcp", "answered")],
            evidence="MCP server log of run mcp")
    check_ended(c, MCP_REWRITE_CLAIM, ev, "mcp", final_text="AFTER_MCP", prefix="mcp")


def _read_output(content: str) -> dict[str, Any]:
    return {"type": "text", "file": {"filePath": "{workspace}/good.txt", "content": content,
                                     "numLines": 1, "startLine": 1, "totalLines": 1}}


REWRITE_PROBE = Probe(
    name="posttooluse-rewrite",
    premises=(
        hook_tool_ids("PostToolUse", MCP_REWRITE_CLAIM),
        Premise("hook_output", "updatedMCPToolOutput", "feature",
                "the PostToolUse hook's rewrite of an MCP tool's output",
                claims=(MCP_REWRITE_CLAIM,)),
    ),
    revision=3,  # premises: a version lacking one is absent or not observable, never contradicted
    title="PostToolUse replaces a tool's output: valid, invalid, and an MCP tool's",
    claims=(
        Claim(UPDATED_CLAIM,
              "A PostToolUse hook answering updatedToolOutput (shaped as the tool's output) "
              "replaces what the model receives as the tool's result.",
              source=from_analysis("工具成功与 PostToolUse",
                                   "PostToolUse 可以返回附件或 updatedToolOutput", 245)),
        Claim(INVALID_CLAIM,
              "An updatedToolOutput that does not fit the tool's output schema is not used: "
              "the model receives the tool's original output.",
              source=from_analysis("工具成功与 PostToolUse",
                                   "更新后的结果必须满足工具 output schema,复验失败时保留原始输出",
                                   245)),
        Claim(MCP_REWRITE_CLAIM,
              "For an MCP tool, a PostToolUse hook answering updatedMCPToolOutput replaces "
              "the server's output in what the model receives.",
              source=project_expectation(
                  "the hooks reference documents updatedMCPToolOutput as replacing an MCP "
                  "tool's output; the analysis lists the rewrite as step 12 of a call "
                  "(“PostToolUse hook,可尝试改写 output”)", HOOKS_DOCS)),
    ),
    scenario=Scenario(name="posttooluse-rewrite", rules=[
        Rule(id="after-good", match=Match(tool_result_for="toolu_rewrite_good"),
             reply=text("AFTER_GOOD")),
        Rule(id="good", match=Match(last_user_text_contains="REWRITE_GOOD_PROMPT"),
             reply=tool_use("Read", {"file_path": "{workspace}/good.txt"},
                            id="toolu_rewrite_good")),
        Rule(id="after-bad", match=Match(tool_result_for="toolu_rewrite_bad"),
             reply=text("AFTER_BAD")),
        Rule(id="bad", match=Match(last_user_text_contains="REWRITE_BAD_PROMPT"),
             reply=tool_use("Read", {"file_path": "{workspace}/bad.txt"},
                            id="toolu_rewrite_bad")),
        Rule(id="after-mcp", match=Match(tool_result_for="toolu_rewrite_mcp"),
             reply=text("AFTER_MCP")),
        Rule(id="mcp", match=Match(last_user_text_contains="REWRITE_MCP_PROMPT"),
             reply=tool_use(SERVER.tool_name("rewritten"), {"query": "x"},
                            id="toolu_rewrite_mcp")),
    ]),
    fixtures={"good.txt": "GOOD_ORIGINAL\n", "bad.txt": "BAD_ORIGINAL\n"},
    hooks=Hooks({"PostToolUse": [
        {"action": "output", "tools": [SERVER.tool_name("rewritten")], "output": {
            "hookSpecificOutput": {"hookEventName": "PostToolUse",
                                   "updatedMCPToolOutput": MCP_REWRITE}}},
        {"action": "output", "tools": ["Read"], "input_contains": "good.txt", "output": {
            "hookSpecificOutput": {"hookEventName": "PostToolUse",
                                   "updatedToolOutput": _read_output(f"{GOOD_REWRITE}\n")}}},
        {"action": "output", "tools": ["Read"], "input_contains": "bad.txt", "output": {
            "hookSpecificOutput": {"hookEventName": "PostToolUse",
                                   "updatedToolOutput": "NOT_A_READ_OUTPUT"}}},
    ]}),
    invocations=(Invocation("good", "REWRITE_GOOD_PROMPT"),
                 Invocation("bad", "REWRITE_BAD_PROMPT"),
                 Invocation("mcp", "REWRITE_MCP_PROMPT", mcp=SERVER)),
    check=check_rewrites,
    fingerprinted=False,
    client_mentions=("updatedToolOutput",),
    boundaries=("Read's output as the hook gives it is the shape Read itself reports "
                "(tool_use_result in stream-json); a string is not that shape.",
                "Whether the client adds a hook error attachment for the invalid output is "
                "not checked: nothing in the next request names one."),
    counterfactuals=(
        Counterfactual(
            "hooks-record-only",
            "The PostToolUse hook only records and answers nothing: no output can be replaced.",
            (UPDATED_CLAIM, MCP_REWRITE_CLAIM),
            recording_hooks),
        Counterfactual(
            "valid-output",
            "The hook's output for bad.txt is shaped as Read's output, so it fits the schema and "
            "the original cannot be kept.",
            (INVALID_CLAIM,),
            lambda p: replace(p, hooks=Hooks({"PostToolUse": [
                {"action": "output", "tools": ["Read"], "input_contains": "bad.txt", "output": {
                    "hookSpecificOutput": {"hookEventName": "PostToolUse", "updatedToolOutput": {
                        "type": "text", "file": {"filePath": "{workspace}/bad.txt",
                                                 "content": "NOT_A_READ_OUTPUT\n", "numLines": 1,
                                                 "startLine": 1, "totalLines": 1}}}}}]}))),
    ),
)


# ---- the server changes its tool list ----------------------------------------------------

REFRESH_CLAIM = "probe.mcp-tool-list-refresh"


def check_refresh(ev: Evidence, c: Checks) -> None:
    requests = ev.requests("refresh")
    c.equal("notified", REFRESH_CLAIM,
            "the server announced its changed tool list (tools/list_changed) after the call",
            expected=1, observed=len(server_calls(ev, "refresh", "notifications/tools/list_changed")),
            evidence="MCP server log of run refresh")
    c.equal("listed-again", REFRESH_CLAIM,
            "the client asked for the tool list again after the notification",
            expected=2, observed=len(server_calls(ev, "refresh", "tools/list")),
            evidence="MCP server log of run refresh: tools/list requests")
    before = [SERVER.tool_name(t.name) for t in SERVER.tools]
    after = [SERVER.tool_name("fresh"), SERVER.tool_name("lookup")]
    third: Any = requests[2] if len(requests) > 2 else {}
    c.equal("next-turn-offers-new-list", REFRESH_CLAIM,
            "the next turn's model request offers the changed list: the new tool, and not "
            "the ones the server dropped",
            expected=sorted(["Read", *after]),
            observed=_tools_offered(third) if third else "no third request",
            evidence=f"request #{third.get('seq')} body.tools")
    first: Any = requests[0] if requests else {}
    c.equal("first-offers-old-list", REFRESH_CLAIM,
            "the first request offered the server's first list",
            expected=sorted(["Read", *before]),
            observed=_tools_offered(first) if first else "no request",
            evidence=f"request #{first.get('seq')} body.tools")
    check_ended(c, REFRESH_CLAIM, ev, "refresh", final_text="REFRESH_SECOND_ANSWER",
                prefix="result")


def with_server_reply(probe: Probe, tool: str, *replies: McpReply) -> Probe:
    """``probe`` whose MCP server answers ``tool`` with ``replies`` instead."""
    server = SERVER
    if tool not in [t.name for t in server.tools]:
        raise KeyError(f"the MCP server has no tool {tool!r}")
    changed = McpServer(tuple(replace(t, replies=replies) if t.name == tool else t
                              for t in server.tools), server.name)
    return with_runs(probe, changes={i.name: {"mcp": changed} for i in probe.invocations
                                     if i.mcp is not None})


REFRESH_PROBE = Probe(
    name="mcp-tool-list-refresh",
    premises=(STREAMED_INPUT, MCP_CONFIG),
    revision=2,  # the final text where the result event's is empty
    title="An MCP server changes its tool list: the next turn offers the new one",
    claims=(Claim(
        REFRESH_CLAIM,
        "When an MCP server notifies tools/list_changed, the client lists the server's tools "
        "again and the next turn's model request offers the changed list.",
        source=from_analysis(
            "循环拥有的状态",
            "工具、权限、session、MCP、队列、abort controller、Agent 身份等运行上下文 | "
            "工具产生 context layer、MCP/tool refresh 或 query tracking 更新后 |", 115),
        beyond_source="The analysis lists MCP/tool refresh among what updates the loop's "
                      "context; the MCP specification says a client receiving "
                      "list_changed should list the tools again. When within the turn the new "
                      "list is used is not claimed: the next turn is."),),
    scenario=Scenario(name="mcp-tool-list-refresh", rules=[
        Rule(id="second-turn", match=Match(last_user_text_contains="REFRESH_SECOND_TURN"),
             reply=text("REFRESH_SECOND_ANSWER")),
        Rule(id="after-lookup", match=Match(tool_result_for="toolu_refresh_lookup"),
             reply=text("REFRESH_FIRST_ANSWER")),
        Rule(id="lookup", match=Match(last_user_text_contains="REFRESH_PROMPT"),
             reply=tool_use(SERVER.tool_name("lookup"), {"query": "x"},
                            id="toolu_refresh_lookup")),
    ]),
    invocations=(Invocation(
        "refresh", "REFRESH_PROMPT", mcp=SERVER,
        streamed=StreamedInput(steps=(Step(user_message("REFRESH_SECOND_TURN"),
                                           after_event={"type": "result"}),))),),
    check=check_refresh,
    fingerprinted=False,
    boundaries=("Two turns of one streamed session; the server changes its list while "
                "answering the first turn's call.",
                "The server notifies list_changed before it answers the call and waits (at "
                "most 5 s) for the client to list its tools again: the client holds the new "
                "list before it reads the result. Answering first let the request right after "
                "the call (within the turn, not claimed) race the client's re-listing: 2.1.235 "
                "offered the old list there on one run and the new one on another.",),
    counterfactuals=(Counterfactual(
        "list-unchanged",
        "The server answers the call without changing its tool list: there is nothing to refresh.",
        (REFRESH_CLAIM,),
        lambda p: with_server_reply(p, "lookup", McpReply(text="MCP_LOOKUP_RESULT"))),),
)


PROBES = (REWRITE_PROBE, REFRESH_PROBE)
