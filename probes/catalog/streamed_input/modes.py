"""set_model and set_permission_mode written between turns: what the next request or call
uses.
"""

from __future__ import annotations

from mockapi import Match, Rule, Scenario, text, tool_use
from probes.catalog.common import check_ended
from probes.catalog.premises import STREAMED_INPUT
from probes.catalog.streamed_input.common import PERMISSION_DOCS, RESULT, _control_requests, _control_response
from probes.catalog.streamed_input.permissions import _asked_for
from probes.catalog.variants import with_steps
from probes.core.checks import Checks
from probes.core.evidence import Evidence
from probes.core.probe import Claim, Counterfactual, Invocation, Probe
from probes.core.provenance import project_expectation
from probes.core.streamed import PermissionAnswer, Step, StreamedInput, control_request, user_message

__all__ = ["MODEL_CLAIM", "MODEL_PROMPT", "MODEL_SECOND", "MODE_CLAIM", "MODE_FIRST_TOOL",
           "MODE_PROMPT", "MODE_SECOND", "MODE_SECOND_TOOL", "NEW_MODEL", "SET_MODEL_PROBE",
           "SET_MODE_PROBE", "check_set_mode", "check_set_model"]


MODEL_PROMPT, MODEL_SECOND = "SET_MODEL_PROMPT", "SET_MODEL_SECOND_TURN"
NEW_MODEL = "claude-haiku-4-5"
MODEL_CLAIM = "probe.set-model-next-request"
MODE_PROMPT, MODE_SECOND = "SET_MODE_PROMPT", "SET_MODE_SECOND_TURN"
MODE_FIRST_TOOL, MODE_SECOND_TOOL = "toolu_mode_first_write", "toolu_mode_second_write"
MODE_CLAIM = "probe.set-permission-mode-next-call"


def check_set_model(ev: Evidence, c: Checks) -> None:
    requests = ev.requests("model")
    c.equal("acknowledged", MODEL_CLAIM, "the client answered set_model with success",
            expected="success", observed=_control_response(ev, "model", "loopprobe-1"),
            evidence="run model: control_response events")
    c.equal("models", MODEL_CLAIM,
            "the first turn's request uses the starting model, the next turn's the new one",
            expected=["claude-sonnet-4-5", NEW_MODEL],
            observed=[(r.get("body") or {}).get("model") for r in requests],
            evidence="journal: main requests, body.model")
    check_ended(c, MODEL_CLAIM, ev, "model", final_text="SET_MODEL_SECOND_ANSWER",
                prefix="result")


SET_MODEL_PROBE = Probe(
    name="set-model-mid-session",
    premises=(STREAMED_INPUT,),
    revision=2,  # the final text where the result event's is empty
    title="set_model between turns: the next request uses the new model",
    claims=(Claim(
        MODEL_CLAIM,
        "A set_model control request between two turns of one streamed session is "
        "acknowledged, and the next turn's model request names the new model.",
        source=project_expectation(
            "setModel changes the model of a streaming-input session for what follows",
            "https://docs.claude.com/en/docs/agent-sdk/typescript (Query.setModel)")),),
    scenario=Scenario(name="set-model-mid-session", rules=[
        Rule(id="second", match=Match(last_user_text_contains=MODEL_SECOND),
             reply=text("SET_MODEL_SECOND_ANSWER")),
        Rule(id="first", match=Match(last_user_text_contains=MODEL_PROMPT),
             reply=text("SET_MODEL_FIRST_ANSWER")),
    ]),
    invocations=(Invocation(
        "model", MODEL_PROMPT, tools=("Read",),
        streamed=StreamedInput(steps=(
            Step(control_request("set_model", model=NEW_MODEL), after_event=RESULT),
            Step(user_message(MODEL_SECOND)),))),),
    check=check_set_model,
    fingerprinted=False,
    counterfactuals=(Counterfactual(
        "no-set-model",
        "The second turn follows without a set_model request, so nothing can change its model.",
        (MODEL_CLAIM,),
        lambda p: with_steps(p, "model", Step(user_message(MODEL_SECOND),
                                              after_event={"type": "result"}))),),
)


def check_set_mode(ev: Evidence, c: Checks) -> None:
    asked = _control_requests(ev, "mode", "can_use_tool")
    c.equal("acknowledged", MODE_CLAIM,
            "the client answered set_permission_mode with success",
            expected="success", observed=_control_response(ev, "mode", "loopprobe-1"),
            evidence="run mode: control_response events")
    c.equal("asked-before-only", MODE_CLAIM,
            "the Write of the first turn (mode default) is put to the caller; the Write of the "
            "turn after acceptEdits is not",
            expected=["first.txt"],
            observed=[_asked_for(a.get("input") or {}) for a in asked],
            evidence="run mode: control_request events (can_use_tool)")
    c.equal("both-written", MODE_CLAIM, "both writes ran",
            expected=["first.txt", "second.txt"],
            observed=sorted(n for n in ev.workspace_files if n in ("first.txt", "second.txt")),
            evidence="workspace files after the run")
    check_ended(c, MODE_CLAIM, ev, "mode", final_text="SET_MODE_SECOND_ANSWER", prefix="result")


SET_MODE_PROBE = Probe(
    name="set-permission-mode-mid-session",
    premises=(STREAMED_INPUT,),
    revision=2,  # the final text where the result event's is empty
    title="set_permission_mode between turns: acceptEdits stops the prompts for edits",
    claims=(Claim(
        MODE_CLAIM,
        "A set_permission_mode acceptEdits control request between two turns is "
        "acknowledged and governs the next tool call: a file Write that was put to the "
        "caller (can_use_tool) in default mode runs without asking afterwards.",
        source=project_expectation(
            "setPermissionMode changes the permission mode of a streaming-input session; "
            "acceptEdits auto-accepts file edits",
            f"https://docs.claude.com/en/docs/agent-sdk/typescript (Query.setPermissionMode) "
            f"and {PERMISSION_DOCS} (permission modes)")),),
    scenario=Scenario(name="set-permission-mode-mid-session", rules=[
        Rule(id="second-answer", match=Match(tool_result_for=MODE_SECOND_TOOL),
             reply=text("SET_MODE_SECOND_ANSWER")),
        Rule(id="second-write", match=Match(last_user_text_contains=MODE_SECOND),
             reply=tool_use("Write", {"file_path": "{workspace}/second.txt",
                                      "content": "SECOND\n"}, id=MODE_SECOND_TOOL)),
        Rule(id="first-answer", match=Match(tool_result_for=MODE_FIRST_TOOL),
             reply=text("SET_MODE_FIRST_ANSWER")),
        Rule(id="first-write", match=Match(last_user_text_contains=MODE_PROMPT),
             reply=tool_use("Write", {"file_path": "{workspace}/first.txt",
                                      "content": "FIRST\n"}, id=MODE_FIRST_TOOL)),
    ]),
    invocations=(Invocation(
        "mode", MODE_PROMPT, tools=("Write",),
        streamed=StreamedInput(
            steps=(Step(control_request("set_permission_mode", mode="acceptEdits"),
                        after_event=RESULT),
                   Step(user_message(MODE_SECOND)),),
            permissions=(PermissionAnswer("Write", "allow"),))),),
    check=check_set_mode,
    fingerprinted=False,
    counterfactuals=(Counterfactual(
        "no-set-permission-mode",
        "The second turn follows without a set_permission_mode request: the mode stays default, "
        "so its write must be asked for too.",
        (MODE_CLAIM,),
        lambda p: with_steps(p, "mode", Step(user_message(MODE_SECOND),
                                             after_event={"type": "result"}))),),
)
