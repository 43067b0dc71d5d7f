"""The single-tool pipeline: unknown tools, invalid input, denials, failures, rewritten input.

Every path must end in a tool_result with the call's own id (so the history
stays paired) and the loop must go on to the model's next answer.
"""

from __future__ import annotations

from typing import Any

from mockapi import Match, Message, Rule, Scenario, ToolUseBlock, text
from probes.catalog.common import check_ended
from probes.catalog.premises import hook_tool_ids
from probes.catalog.variants import answering, scripted_rule, with_rules, with_runs, without_hook_rules
from probes.core.checks import Checks
from probes.core.evidence import Evidence, blocks_of_type
from probes.core.premises import Premise
from probes.core.probe import Claim, Counterfactual, Hooks, Invocation, Probe
from probes.core.provenance import from_analysis

__all__ = ["DENIED", "FAILED", "IDS", "INVALID", "PROBE", "REWRITTEN", "UNKNOWN", "check"]

UNKNOWN = "probe.unknown-tool-error-result"
INVALID = "probe.input-validation-error"
DENIED = "probe.permission-denied-no-side-effect"
FAILED = "probe.failed-tool-no-rollback"
REWRITTEN = "probe.pretooluse-updated-input"

IDS = {"unknown": "toolu_pipeline_unknown", "invalid": "toolu_pipeline_invalid",
       "hook_denied": "toolu_pipeline_hook_denied", "rule_denied": "toolu_pipeline_rule_denied",
       "read_before_edit": "toolu_pipeline_read", "edit": "toolu_pipeline_edit",
       "failing": "toolu_pipeline_failing", "rewritten": "toolu_pipeline_rewritten"}


def _result(ev: Evidence, run: str, tool_id: str) -> dict[str, Any]:
    for record in ev.requests(run):
        for _, block in blocks_of_type(record, "tool_result"):
            if block.get("tool_use_id") == tool_id:
                return block
    return {}


def _content(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return str(content or "")


def _first_line(block: dict[str, Any]) -> str | None:
    return _content(block).strip().splitlines()[0][:160] if block else None


def _error_result(c: Checks, claim: str, ev: Evidence, run: str, key: str, what: str) -> None:
    block = _result(ev, run, IDS[key])
    c.that(f"{key}.error-result", claim,
           f"{what} gives an error tool_result carrying the call's own id",
           passed=bool(block) and block.get("is_error") is True,
           expected={"tool_use_id": IDS[key], "is_error": True},
           observed={"tool_use_id": block.get("tool_use_id"), "is_error": block.get("is_error"),
                     "content": _first_line(block)} if block else "no tool_result with that id",
           evidence=f"run {run}: tool_result blocks of the next request")


def _not_run(c: Checks, claim: str, ev: Evidence, key: str, what: str) -> None:
    calls = [h for h in ev.hooks("PreToolUse") + ev.hooks("PostToolUse")
             if (h.get("input") or {}).get("tool_use_id") == IDS[key]]
    c.equal(f"{key}.not-run", claim, what, expected=[],
            observed=[h.get("event") for h in calls], evidence="hook log for the call")


def check(ev: Evidence, c: Checks) -> None:
    # unknown tool
    _error_result(c, UNKNOWN, ev, "unknown", "unknown", "a call to a tool that does not exist")
    c.contains("unknown.names-the-tool", UNKNOWN, "the error names the unknown tool",
               needle="NoSuchTool", haystack=_content(_result(ev, "unknown", IDS["unknown"]))
               if _result(ev, "unknown", IDS["unknown"]) else None,
               evidence="run unknown: the tool_result content")
    check_ended(c, UNKNOWN, ev, "unknown", final_text="UNKNOWN_DONE", prefix="unknown.result")
    # invalid input
    _error_result(c, INVALID, ev, "invalid", "invalid", "a Read whose input breaks its schema")
    c.contains("invalid.validation-error", INVALID, "the error is an InputValidationError",
               needle="InputValidationError",
               haystack=_content(_result(ev, "invalid", IDS["invalid"]))
               if _result(ev, "invalid", IDS["invalid"]) else None,
               evidence="run invalid: the tool_result content")
    _not_run(c, INVALID, ev, "invalid", "the invalid call never reaches the hooks or the tool")
    check_ended(c, INVALID, ev, "invalid", final_text="INVALID_DONE", prefix="invalid.result")
    # denials
    _error_result(c, DENIED, ev, "denied", "hook_denied", "a Write denied by a PreToolUse hook")
    _error_result(c, DENIED, ev, "denied", "rule_denied", "a Bash denied by a settings deny rule")
    c.equal("denied.no-side-effect", DENIED, "neither denied call changed the workspace",
            expected=[], observed=sorted(p for p in ev.workspace_files if "denied" in p),
            evidence="workspace files after the run")
    check_ended(c, DENIED, ev, "denied", final_text="DENIED_DONE", prefix="denied.result")
    # a failing tool after an edit
    _error_result(c, FAILED, ev, "failing", "failing", "a Bash command that exits 3")
    c.equal("failing.edit-kept", FAILED, "the earlier Edit stays on disk",
            expected="EDITED_BEFORE_FAILURE\n", observed=ev.workspace_files.get("kept.txt"),
            evidence="workspace kept.txt after the run")
    edit = _result(ev, "failing", IDS["edit"])
    c.equal("failing.edit-succeeded", FAILED, "the Edit itself succeeded",
            expected=False, observed=edit.get("is_error", False) if edit else None,
            evidence="run failing: the Edit's tool_result")
    check_ended(c, FAILED, ev, "failing", final_text="FAILING_DONE", prefix="failing.result")
    # updatedInput
    block = _result(ev, "rewritten", IDS["rewritten"])
    c.that("rewritten.tool-used-new-input", REWRITTEN,
           "the Read returns the file the hook substituted, not the one the model asked for",
           passed="REPLACEMENT_FILE" in _content(block)
           and "ORIGINAL_FILE" not in _content(block),
           expected="REPLACEMENT_FILE and not ORIGINAL_FILE",
           observed=[m for m in ("REPLACEMENT_FILE", "ORIGINAL_FILE") if m in _content(block)]
           if block else "no tool_result", evidence="run rewritten: the tool_result content")
    check_ended(c, REWRITTEN, ev, "rewritten", final_text="REWRITTEN_DONE",
                prefix="rewritten.result")


def _call(key: str, name: str, tool_input: dict[str, Any]) -> ToolUseBlock:
    return ToolUseBlock(name=name, id=IDS[key], input=tool_input)


def _final(key: str, answer: str) -> Rule:
    return Rule(id=f"{key}-final", match=Match(tool_result_for=IDS[key]), reply=text(answer))


def _first(prompt: str, *calls: ToolUseBlock) -> Rule:
    return Rule(id=f"{prompt.lower()}-calls", match=Match(last_user_text_contains=prompt),
                reply=Message(content=list(calls)))


def _with_calls(p: Probe, rule_id: str, **changed: ToolUseBlock) -> Rule:
    """The rule's single message with the calls of the given IDS keys replaced."""
    old = scripted_rule(p, rule_id).reply
    assert isinstance(old, Message)
    blocks = {IDS[key]: block for key, block in changed.items()}
    return answering(p, rule_id, Message(content=[
        blocks.get(b.id or "", b) if isinstance(b, ToolUseBlock) else b for b in old.content]))


PROBE = Probe(
    name="tool-pipeline",
    premises=(
        hook_tool_ids("PreToolUse", INVALID, DENIED, REWRITTEN),
        Premise("hook_output", "updatedInput", "feature",
                "the PreToolUse hook's rewrite of the call's input", claims=(REWRITTEN,)),
    ),
    revision=3,  # premises: a version lacking one is absent or not observable, never contradicted
    title="Every tool path ends in a paired tool_result and the loop continues",
    claims=(
        Claim(UNKNOWN, "A call to an unknown tool name becomes an error tool_result with the "
                       "same id; the loop continues and the next request carries it.",
              source=from_analysis(
                  "找不到工具",
                  "它生成带相同 tool_use_id 的 error tool_result,把“工具不存在”和"
                  "相似工具提示反馈给模型。模型下一轮可以修正工具名。", 237)),
        Claim(INVALID, "Input that breaks the tool's schema becomes an InputValidationError "
                       "tool_result; the tool (and its hooks) do not run.",
              source=from_analysis(
                  "输入 JSON 或 schema 错误",
                  "无法解析的 JSON、类型错误、缺失必填字段会变成 "
                  "InputValidationError tool result。", 239)),
        Claim(DENIED, "A denied call (PreToolUse hook deny, settings deny rule) becomes an "
                      "error tool_result and leaves no side effect.",
              source=from_analysis(
                  "权限决策",
                  "hook 结果、permission mode、规则、managed policy、sandbox、安"
                  "全分类器、用户对话框和 canUseTool 会汇合成 allow、deny 或未解"
                  "决的 ask。拒绝不会调用工具,而是生成 error tool_result。", 243)),
        Claim(FAILED, "A failing tool (Bash exiting non-zero) gives an is_error tool_result; "
                      "earlier side effects (an Edit) are kept, not rolled back.",
              source=from_analysis(
                  "亲手改变一次 Agent Loop",
                  "把测试结果切到“失败”,文件修改仍然保留,失败输出会作为 is_error "
                  "工具结果回灌;Agent Loop 本身不会替你撤销已经发生的文件修改。", 66)),
        Claim(REWRITTEN, "A PreToolUse hook's updatedInput is what the tool runs with.",
              source=from_analysis(
                  "单个工具调用的执行管线",
                  "hook/permission 返回 updatedInput 时再次 schema 校验,并基于新"
                  "值继续 permission 裁决", 228)),
    ),
    scenario=Scenario(name="tool-pipeline", rules=[
        _final("unknown", "UNKNOWN_DONE"),
        _final("invalid", "INVALID_DONE"),
        _final("rule_denied", "DENIED_DONE"),
        _final("failing", "FAILING_DONE"),
        _final("rewritten", "REWRITTEN_DONE"),
        _first("UNKNOWN_TOOL_PROMPT", _call("unknown", "NoSuchTool", {"x": 1})),
        _first("INVALID_INPUT_PROMPT", _call("invalid", "Read", {"file_path": 42})),
        _first("DENIED_PROMPT",
               _call("hook_denied", "Write", {"file_path": "{workspace}/hook-denied.txt",
                                              "content": "SHOULD_NOT_EXIST"}),
               _call("rule_denied", "Bash", {"command": "touch {workspace}/rule-denied.txt",
                                             "description": "create a file"})),
        _first("FAILING_TOOL_PROMPT",
               _call("read_before_edit", "Read", {"file_path": "{workspace}/kept.txt"}),
               _call("edit", "Edit", {"file_path": "{workspace}/kept.txt",
                                      "old_string": "BEFORE", "new_string": "EDITED_BEFORE_FAILURE"}),
               _call("failing", "Bash", {"command": "echo failing; exit 3",
                                         "description": "fail on purpose"})),
        _first("REWRITTEN_INPUT_PROMPT",
               _call("rewritten", "Read", {"file_path": "{workspace}/original.txt"})),
    ]),
    fixtures={"kept.txt": "BEFORE\n", "original.txt": "ORIGINAL_FILE\n",
              "replacement.txt": "REPLACEMENT_FILE\n"},
    hooks=Hooks({"PreToolUse": [
        {"action": "deny", "tools": ["Write"], "input_contains": "hook-denied.txt",
         "reason": "loopprobe denies this write"},
        {"action": "update_input", "tools": ["Read"], "input_contains": "original.txt",
         "input": {"file_path": "{workspace}/replacement.txt"}},
    ]}),
    invocations=(
        Invocation("unknown", "UNKNOWN_TOOL_PROMPT"),
        Invocation("invalid", "INVALID_INPUT_PROMPT"),
        Invocation("denied", "DENIED_PROMPT", tools=("Read", "Write", "Bash"),
                   settings={"permissions": {"deny": ["Bash(touch:*)"]}}),
        Invocation("failing", "FAILING_TOOL_PROMPT", tools=("Read", "Edit", "Bash")),
        Invocation("rewritten", "REWRITTEN_INPUT_PROMPT"),
    ),
    check=check,
    boundaries=(
        "Permission prompts (ask) cannot be answered in print mode; denials come from a hook "
        "and a settings rule, with bypassPermissions mode otherwise.",
        "PostToolUse output rewriting applies to MCP tools only (updatedMCPToolOutput); no MCP "
        "server is configured, so it is not exercised.",
        "Unparsable (not only schema-breaking) tool input is not sent here: invalid JSON inside "
        "a stream makes the client fall back to a non-streaming request instead.",
    ),
    counterfactuals=(
        Counterfactual(
            "known-tool",
            "The call names Read, a tool that exists, with valid input, so there is no unknown "
            "tool to report: it runs and succeeds.",
            (UNKNOWN,),
            lambda p: with_runs(with_rules(p, [_with_calls(
                p, "unknown_tool_prompt-calls", unknown=ToolUseBlock(
                    name="Read", id=IDS["unknown"],
                    input={"file_path": "{workspace}/kept.txt"}))]),
                                keep=("unknown",))),
        Counterfactual(
            "valid-input",
            "The Read's file_path is a string naming a fixture, so the input fits the schema: no "
            "validation error, and the call passes through the hooks to the tool.",
            (INVALID,),
            lambda p: with_runs(with_rules(p, [_with_calls(
                p, "invalid_input_prompt-calls", invalid=ToolUseBlock(
                    name="Read", id=IDS["invalid"],
                    input={"file_path": "{workspace}/kept.txt"}))]),
                                keep=("invalid",))),
        Counterfactual(
            "nothing-denies",
            "No PreToolUse hook denies the Write and no settings rule denies the Bash, so both run: "
            "no error results, and both files are created.",
            (DENIED,),
            lambda p: with_runs(without_hook_rules(p, "PreToolUse", "deny"), keep=("denied",),
                                changes={"denied": {"settings": None}})),
        Counterfactual(
            "bash-succeeds",
            "The Bash after the Edit exits 0, so no tool fails and no error result is given.",
            (FAILED,),
            lambda p: with_runs(with_rules(p, [_with_calls(
                p, "failing_tool_prompt-calls", failing=ToolUseBlock(
                    name="Bash", id=IDS["failing"],
                    input={"command": "echo failing; exit 0", "description": "succeed"}))]),
                                keep=("failing",))),
        Counterfactual(
            "edit-does-not-apply",
            "The Edit's old_string is not in the file, so the Edit itself fails: there is no "
            "earlier side effect for the failing Bash to leave in place.",
            (FAILED,),
            lambda p: with_runs(with_rules(p, [_with_calls(
                p, "failing_tool_prompt-calls", edit=ToolUseBlock(
                    name="Edit", id=IDS["edit"],
                input={"file_path": "{workspace}/kept.txt", "old_string": "NOT_IN_THE_FILE",
                       "new_string": "EDITED_BEFORE_FAILURE"}))]),
                                keep=("failing",))),
        Counterfactual(
            "no-input-rewrite",
            "No PreToolUse hook rewrites the Read's input, so the tool reads the file the model "
            "asked for.",
            (REWRITTEN,),
            lambda p: with_runs(without_hook_rules(p, "PreToolUse", "update_input"),
                                keep=("rewritten",))),
    ),
)
