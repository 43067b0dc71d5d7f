"""The caller decides permissions (can_use_tool): asked, denied, or allowed with changed input.
"""

from __future__ import annotations

from typing import Any

from mockapi import Match, Rule, Scenario, text, tool_use
from probes.catalog.common import check_ended
from probes.catalog.premises import STREAMED_INPUT
from probes.catalog.streamed_input.common import PERMISSION_DOCS, _control_requests, _tool_results_printed
from probes.catalog.variants import with_steps
from probes.core.checks import Checks
from probes.core.evidence import Evidence, blocks_of_type
from probes.core.premises import Premise
from probes.core.probe import Claim, Counterfactual, Invocation, Probe
from probes.core.provenance import project_expectation
from probes.core.streamed import PermissionAnswer, StreamedInput

__all__ = ["ALLOWED_TOOL", "ASKED_CLAIM", "ASKED_FILE", "BASH_DENIED_INPUT", "DENIED_FILE",
           "DENIED_TOOL", "DENY_CLAIM", "DENY_MESSAGE", "PERMISSIONS_PROBE", "PERMISSION_ANSWER",
           "PERMISSION_PROMPT", "READ_TOOL", "UPDATED_CLAIM", "UPDATED_CONTENT", "UPDATED_FILE",
           "WRITE_INPUT", "WRITE_UPDATED", "check_permissions", "tool_result_content"]


PERMISSION_PROMPT = "CAN_USE_TOOL_PROMPT"
DENIED_TOOL, ALLOWED_TOOL, READ_TOOL = ("toolu_permission_denied", "toolu_permission_allowed",
                                        "toolu_permission_read")
DENIED_FILE, ASKED_FILE, UPDATED_FILE = "denied.txt", "asked.txt", "updated.txt"
DENY_MESSAGE = "CALLER_DENIED_MARKER"
UPDATED_CONTENT = "UPDATED_BY_CALLER_MARKER"
PERMISSION_ANSWER = "CAN_USE_TOOL_ANSWER"
ASKED_CLAIM = "probe.can-use-tool-asked"
DENY_CLAIM = "probe.can-use-tool-deny"
UPDATED_CLAIM = "probe.can-use-tool-updated-input"
BASH_DENIED_INPUT = {"command": f"echo DENIED_COMMAND_RAN > {DENIED_FILE}",
                     "description": "write a file"}
WRITE_INPUT = {"file_path": f"{{workspace}}/{ASKED_FILE}", "content": "AS_THE_MODEL_ASKED\n"}
WRITE_UPDATED = {"file_path": f"{{workspace}}/{UPDATED_FILE}", "content": f"{UPDATED_CONTENT}\n"}


def _asked_for(tool_input: dict[str, Any]) -> str:
    """A call's command, or the name of the file it writes."""
    return str(tool_input.get("command") or tool_input.get("file_path", "")).rsplit("/", 1)[-1]


def check_permissions(ev: Evidence, c: Checks) -> None:
    asked = _control_requests(ev, "permissions", "can_use_tool")
    c.equal("asked-per-call", ASKED_CLAIM,
            "the client asked the caller once for each call that needs permission (Bash, "
            "Write) and not for the read-only Read",
            expected=[["Bash", BASH_DENIED_INPUT["command"]], ["Write", ASKED_FILE]],
            observed=[[a.get("tool_name"), _asked_for(a.get("input") or {})] for a in asked],
            evidence="run permissions: control_request events (can_use_tool)")
    results = {b.get("tool_use_id"): b for b in _tool_results_printed(ev, "permissions")}
    denied = results.get(DENIED_TOOL) or {}
    c.that("denied-error-result", DENY_CLAIM,
           "the denied call gets an error tool_result carrying the caller's message",
           passed=bool(denied.get("is_error")) and DENY_MESSAGE in str(denied.get("content")),
           expected=f"is_error true, content holding {DENY_MESSAGE}",
           observed={"is_error": denied.get("is_error"),
                     "content": str(denied.get("content"))[:160]} if denied else "no result",
           evidence="run permissions: stream-json user events")
    c.equal("denied-not-run", DENY_CLAIM, "the denied command did not run",
            expected=False, observed=DENIED_FILE in ev.workspace_files,
            evidence=f"workspace: {DENIED_FILE}")
    third = ev.request("permissions", 2)  # prompt -> Read; its result -> Bash; denial -> Write
    c.that("denial-sent-to-model", DENY_CLAIM,
           "the model's next request carries the denial as the call's result",
           passed=DENY_MESSAGE in str(tool_result_content(third, DENIED_TOOL)),
           expected=f"the tool_result for {DENIED_TOOL} holding {DENY_MESSAGE}",
           observed=tool_result_content(third, DENIED_TOOL),
           evidence=f"request #{third.get('seq')} messages")
    c.equal("updated-input-ran", UPDATED_CLAIM,
            "the allowed call ran with the caller's updated input: the updated file exists "
            "with the updated content, the asked-for file does not",
            expected={UPDATED_FILE: f"{UPDATED_CONTENT}\n", ASKED_FILE: None},
            observed={UPDATED_FILE: ev.workspace_files.get(UPDATED_FILE),
                      ASKED_FILE: ev.workspace_files.get(ASKED_FILE)},
            evidence="workspace files after the run")
    allowed = results.get(ALLOWED_TOOL) or {}
    c.equal("allowed-result-ok", UPDATED_CLAIM, "the allowed call's result is not an error",
            expected=False, observed=bool(allowed.get("is_error")) if allowed else "no result",
            evidence="run permissions: stream-json user events")
    check_ended(c, UPDATED_CLAIM, ev, "permissions", final_text=PERMISSION_ANSWER,
                prefix="result")


def tool_result_content(record: Any, tool_use_id: str) -> Any:
    for _, block in blocks_of_type(record, "tool_result") if record else []:
        if block.get("tool_use_id") == tool_use_id:
            return block.get("content")
    return None


PERMISSIONS_PROBE = Probe(
    name="can-use-tool",
    premises=(
        STREAMED_INPUT,
        Premise("flag", "--permission-prompt-tool", "feature",
                "puts each permission question to the caller (stdio)"),
    ),
    revision=2,  # the final text where the result event's is empty
    title="The caller decides permissions: asked per call, deny, allow with updated input",
    claims=(
        Claim(ASKED_CLAIM,
              "With --permission-prompt-tool stdio and the default permission mode, the "
              "client sends a can_use_tool control request for each tool call that needs "
              "permission (a Bash command, a file Write) with the call's input, and none for "
              "a read-only Read in the workspace.",
              source=project_expectation(
                  "the SDK's canUseTool callback is invoked for each tool call the "
                  "permission rules do not decide; read-only tools need no approval",
                  f"{PERMISSION_DOCS} and https://docs.claude.com/en/docs/claude-code/iam "
                  "(tiered permission system)")),
        Claim(DENY_CLAIM,
              "A can_use_tool answer 'deny' with a message stops the call: the command does "
              "not run, and the model receives an error tool_result carrying the message.",
              source=project_expectation(
                  "a denial returns the caller's message to the model as the tool's result",
                  f"{PERMISSION_DOCS} (PermissionResultDeny message)")),
        Claim(UPDATED_CLAIM,
              "A can_use_tool answer 'allow' with updatedInput runs the tool with the updated "
              "input, not the model's.",
              source=project_expectation(
                  "allow with updated input lets the caller modify the tool input before "
                  "execution", f"{PERMISSION_DOCS} (PermissionResultAllow updatedInput)")),
    ),
    scenario=Scenario(name="can-use-tool", rules=[
        Rule(id="answer", match=Match(tool_result_for=ALLOWED_TOOL),
             reply=text(PERMISSION_ANSWER)),
        Rule(id="write", match=Match(tool_result_for=DENIED_TOOL),
             reply=tool_use("Write", WRITE_INPUT, id=ALLOWED_TOOL)),
        Rule(id="bash", match=Match(tool_result_for=READ_TOOL),
             reply=tool_use("Bash", BASH_DENIED_INPUT, id=DENIED_TOOL)),
        Rule(id="read", match=Match(last_user_text_contains=PERMISSION_PROMPT),
             reply=tool_use("Read", {"file_path": "{workspace}/notes.txt"}, id=READ_TOOL)),
    ]),
    fixtures={"notes.txt": "NOTES\n"},
    invocations=(Invocation(
        "permissions", PERMISSION_PROMPT, tools=("Read", "Bash", "Write"),
        streamed=StreamedInput(permissions=(
            PermissionAnswer("Bash", "deny", DENY_MESSAGE),
            PermissionAnswer("Write", "allow", updated_input=WRITE_UPDATED)))),),
    check=check_permissions,
    fingerprinted=False,
    boundaries=("Permission mode default with no allow or deny rules configured: every "
                "decision that reaches the caller is the client's own classification.",),
    counterfactuals=(Counterfactual(
        "permissions-bypassed",
        "The run bypasses permissions (no --permission-prompt-tool): the caller is never asked, "
        "so it cannot deny the command or change the write.",
        (ASKED_CLAIM, DENY_CLAIM, UPDATED_CLAIM),
        lambda p: with_steps(p, "permissions", permissions=None)),),
)
