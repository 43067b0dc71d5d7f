"""Tool scheduling: tools start while the message still streams, safe calls overlap, unsafe
calls are barriers, and results pair by id whatever the completion order.

Timing evidence comes from PreToolUse/PostToolUse hooks that log wall-clock
times per tool_use_id (a tool's window is [PreToolUse, PostToolUse]); the hooks
sleep to widen the windows, so overlaps and orderings are seconds apart, not
milliseconds.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from mockapi import Match, Message, Rule, Scenario, ToolUseBlock, text
from mockapi.replies import StreamStall
from probes.catalog.common import check_ended, tool_pairs
from probes.catalog.variants import answering, scripted_rule, with_rules
from probes.core.checks import Checks
from probes.core.evidence import Evidence, blocks_of_type
from probes.core.probe import Claim, Counterfactual, Hooks, Invocation, Probe
from probes.core.provenance import from_analysis

__all__ = [
    "BARRIER",
    "BATCH_PROBE",
    "BATCH_PROMPT",
    "CONCURRENCY",
    "HOLD_SECONDS",
    "HOOK_SLEEP",
    "IDS",
    "PAIRING",
    "PAIRING_PROBE",
    "PAIR_PROMPT",
    "STREAMING",
    "STREAMING_PROBE",
    "STREAM_PROMPT",
    "STREAM_TOOL",
    "TIMELINE",
    "check_batch",
    "check_pairing",
    "check_streaming",
    "tool_windows",
]

STREAMING = "probe.streaming-tool-start"
CONCURRENCY = "probe.concurrency-safe-overlap"
BARRIER = "probe.unsafe-tool-barrier"
PAIRING = "probe.result-pairing-by-id"

HOLD_SECONDS = 3.0
HOOK_SLEEP = 0.8


# where a reader finds the times these checks compare (hook calls and response ends of each
# run, in ms from the run's start)
TIMELINE = "timeline in <report>.timing.json"


def tool_windows(ev: Evidence) -> dict[str, dict[str, Any]]:
    """tool_use_id -> {name, start (PreToolUse called), end (PostToolUse called)}."""
    windows: dict[str, dict[str, Any]] = {}
    for call in ev.hook_calls:
        payload = call.get("input") or {}
        tool_id = payload.get("tool_use_id")
        if not tool_id or "started" not in call:
            continue
        window = windows.setdefault(tool_id, {"name": payload.get("tool_name")})
        key = {"PreToolUse": "start", "PostToolUse": "end"}.get(str(call.get("event")))
        if key:
            window[key] = call["started"]
    return windows


def _response_end(ev: Evidence, seq: int | None) -> float | None:
    return next((r["time"] for r in ev.journal
                 if r["type"] == "response_end" and r["seq"] == seq), None)


# ---- streaming tool start ------------------------------------------------------

STREAM_PROMPT = "STREAMING_TOOL_START_PROMPT"
STREAM_TOOL = "toolu_streaming_start"


def check_streaming(ev: Evidence, c: Checks) -> None:
    first = ev.request("stream", 0)
    windows = tool_windows(ev)
    window = windows.get(STREAM_TOOL, {})
    released = _response_end(ev, first.get("seq"))
    c.that("tool-finished-before-message-end", STREAMING,
           f"the tool ran and finished while the mock held back message_delta/message_stop "
           f"for {HOLD_SECONDS}s after the tool_use block closed",
           passed=bool(window.get("end")) and released is not None
           and window["end"] < released,
           expected="PostToolUse before the message's end was sent",
           observed=("no PostToolUse for the tool" if not window.get("end") else
                     "the message end was never sent" if released is None else
                     "PostToolUse before the message end" if window["end"] < released else
                     "PostToolUse after the message end"),
           evidence=f"{TIMELINE}: hook_start of PostToolUse for {STREAM_TOOL} vs the "
                    "response_end of the run's first request")
    pairs = tool_pairs(ev.request("stream", 1))
    c.equal("result-in-next-request", STREAMING, "the early result is fed back once",
            expected=[STREAM_TOOL], observed=pairs["tool_result_ids"],
            evidence="request 2 tool_result ids")
    check_ended(c, STREAMING, ev, "stream", final_text="STREAMING_DONE", prefix="result")


def _block_held_open(p: Probe) -> Probe:
    held = Message(content=[ToolUseBlock(name="Read", id=STREAM_TOOL,
                                         input={"file_path": "{workspace}/early.txt"})],
                   stall=StreamStall(before_event="content_block_stop",
                                     seconds=HOLD_SECONDS))
    return with_rules(p, [answering(p, "held-tool-use", held)])


STREAMING_PROBE = Probe(
    name="streaming-tool-start",
    revision=2,  # the final text where the result event's is empty
    title="A tool_use block is executed as soon as it is complete, before the message ends",
    claims=(Claim(STREAMING, "The client starts executing a tool_use block at its "
                             "content_block_stop, while the rest of the message is still "
                             "streaming (before message_delta/message_stop).",
                  source=from_analysis(
                      "最关键的细节:模型仍在流式输出时,工具已经可以开始执行",
                      "这发生在整个 message_stop 到达之前。Waf 会同时等待“下一个模型"
                      "流事件”和“工具执行器有新结果可排出”。如果工具先产生 progress "
                      "或 result,它返回 tool_drain_tick,主循环立即把工具事件向 "
                      "UI/SDK 输出,然后继续消费模型流。", 185)),),
    scenario=Scenario(name="streaming-tool-start", rules=[
        Rule(id="final", match=Match(tool_result_for=STREAM_TOOL), reply=text("STREAMING_DONE")),
        Rule(id="held-tool-use", match=Match(last_user_text_contains=STREAM_PROMPT),
             reply=Message(content=[ToolUseBlock(name="Read", id=STREAM_TOOL,
                                                 input={"file_path": "{workspace}/early.txt"})],
                           stall=StreamStall(before_event="message_delta",
                                             seconds=HOLD_SECONDS))),
    ]),
    fixtures={"early.txt": "EARLY\n"},
    hooks=Hooks(),
    invocations=(Invocation("stream", STREAM_PROMPT),),
    check=check_streaming,
    boundaries=("One Read; tools whose permission needs a prompt are not covered.",),
    counterfactuals=(
        Counterfactual(
            "block-held-open",
            f"The mock holds the tool_use block itself open for {HOLD_SECONDS}s (before its "
            "content_block_stop) and then ends the message at once, so the block is complete only "
            "when the message ends: the tool cannot run while the message still streams.",
            (STREAMING,),
            _block_held_open),
    ),
)

# ---- concurrency and barriers -------------------------------------------------------

BATCH_PROMPT = "TOOL_BATCH_PROMPT"
IDS = {"read_a": "toolu_batch_read_a", "grep": "toolu_batch_grep", "read_b": "toolu_batch_read_b",
       "edit": "toolu_batch_edit", "read_c": "toolu_batch_read_c", "bash": "toolu_batch_bash"}


def _overlap(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return bool(a.get("start") and a.get("end") and b.get("start") and b.get("end")
                and a["start"] < b["end"] and b["start"] < a["end"])


def _after(later: dict[str, Any], earlier: dict[str, Any]) -> bool | None:
    if not (later.get("start") and earlier.get("end")):
        return None
    return bool(later["start"] >= earlier["end"])


def check_batch(ev: Evidence, c: Checks) -> None:
    w = tool_windows(ev)
    ra, gr, rb = w.get(IDS["read_a"], {}), w.get(IDS["grep"], {}), w.get(IDS["read_b"], {})
    ed, rc, ba = w.get(IDS["edit"], {}), w.get(IDS["read_c"], {}), w.get(IDS["bash"], {})
    c.that("safe-calls-overlap", CONCURRENCY,
           "Read, Grep and Read issued together (all concurrency-safe) run at the same time",
           passed=_overlap(ra, gr) and _overlap(gr, rb) and _overlap(ra, rb),
           expected="the three windows overlap pairwise",
           observed={"read_a/grep": _overlap(ra, gr), "grep/read_b": _overlap(gr, rb),
                     "read_a/read_b": _overlap(ra, rb)},
           evidence=f"{TIMELINE}: windows [hook_start PreToolUse, hook_start PostToolUse] "
                    "of toolu_batch_read_a, toolu_batch_grep, toolu_batch_read_b")
    c.that("edit-waits-for-safe-calls", BARRIER,
           "Edit (not concurrency-safe) starts only after the safe calls before it ended",
           passed=all(_after(ed, x) for x in (ra, gr, rb)),
           expected="Edit starts after read_a, grep and read_b end",
           observed={n: _after(ed, x) for n, x in (("read_a", ra), ("grep", gr), ("read_b", rb))},
           evidence=f"{TIMELINE}: hook_start PreToolUse of toolu_batch_edit vs hook_start "
                    "PostToolUse of the three safe calls")
    c.that("later-calls-wait-for-edit", BARRIER,
           "calls after the Edit do not start before it ends",
           passed=bool(_after(rc, ed)) and bool(_after(ba, ed)),
           expected="read_c and bash start after the Edit ends",
           observed={"read_c": _after(rc, ed), "bash": _after(ba, ed)},
           evidence=f"{TIMELINE}: hook_start PreToolUse of toolu_batch_read_c and "
                    "toolu_batch_bash vs hook_start PostToolUse of toolu_batch_edit")
    second = ev.request("batch", 1)
    bash_result = next((b for _, b in blocks_of_type(second, "tool_result")
                        if b.get("tool_use_id") == IDS["bash"]), {})
    c.that("bash-sees-the-edit", BARRIER, "a Bash after an Edit sees the edited file",
           passed="EDITED_CONTENT" in str(bash_result.get("content")),
           expected="EDITED_CONTENT in the Bash output",
           observed=str(bash_result.get("content")).strip().splitlines()[0][:120]
           if bash_result else None,
           evidence="request 2 tool_result of the Bash call")
    c.equal("file-edited", BARRIER, "the edit is on disk", expected="EDITED_CONTENT\n",
            observed=ev.workspace_files.get("b.txt"), evidence="workspace b.txt after the run")
    pairs = tool_pairs(second)
    c.that("every-call-answered", BARRIER, "all six calls got exactly one tool_result",
           passed=sorted(pairs["tool_result_ids"]) == sorted(IDS.values())
           and not pairs["unpaired_uses"],
           expected=sorted(IDS.values()),
           # sorted: concurrent calls finish, and are answered, in any order
           observed={k: sorted(v) for k, v in pairs.items()}, evidence="request 2 messages")
    check_ended(c, BARRIER, ev, "batch", final_text="BATCH_DONE", prefix="result")


def _use(key: str, name: str, **tool_input: Any) -> ToolUseBlock:
    return ToolUseBlock(name=name, id=IDS[key], input=tool_input)


_BATCH_ORDER = ("read_a", "grep", "read_b", "edit", "read_c", "bash")


def _no_barrier(p: Probe) -> Probe:
    batch = scripted_rule(p, "batch").reply
    assert isinstance(batch, Message)
    safe = ToolUseBlock(name="Read", id=IDS["edit"], input={"file_path": "{workspace}/b.txt"})
    content = [safe if isinstance(b, ToolUseBlock) and b.id == IDS["edit"] else b
               for b in batch.content]
    return with_rules(p, [answering(p, "batch", Message(content=content))])


def _one_call_per_response(p: Probe) -> Probe:
    batch = scripted_rule(p, "batch").reply
    assert isinstance(batch, Message)
    blocks = {b.id: b for b in batch.content if isinstance(b, ToolUseBlock)}
    calls = [blocks[IDS[key]] for key in _BATCH_ORDER]
    chain = [Rule(id=f"after-{key}", match=Match(tool_result_for=IDS[key]),
                  reply=Message(content=[call]))
             for key, call in zip(_BATCH_ORDER, calls[1:], strict=False)]
    return with_rules(p, [answering(p, "batch", Message(content=[calls[0]]))], added=chain)


BATCH_PROBE = Probe(
    name="tool-batch-scheduling",
    revision=2,  # the final text where the result event's is empty
    title="Concurrency-safe calls overlap; an unsafe call is a barrier",
    claims=(
        Claim(CONCURRENCY, "Several concurrency-safe calls (Read, Grep) in one response run "
                           "concurrently.",
              source=from_analysis(
                  "工具并发不是“全部 Promise.all”",
                  "这意味着多个只读、无共享状态的工具可以重叠;写文件、修改上下文"
                  "或其他被判定不安全的工具会按响应顺序串行化。", 210),
              beyond_source=('The analysis speaks of read-only tools without shared state and names Read '
                            'only conditionally; that Read and Grep are concurrency-safe is our '
                            'expectation of read-only tools.')),
        Claim(BARRIER, "A call that is not concurrency-safe (Edit) is a barrier: it starts "
                       "after the calls before it end, the calls after it (a Read, a Bash) "
                       "start after it ends, and a Bash after an Edit sees the edit.",
              source=from_analysis(
                  "一个具体执行例子",
                  "Edit 被判定非并发安全;如果 Read 仍在执行,Edit 等待,并形成屏障", 473),
              beyond_source=(
                  'Bash is not stated to be a barrier itself: the analysis decides concurrency '
                  'safety by the tool and its input ("安全性由“工具类型 + 本次 input”共同决定", '
                  'section “工具并发不是“全部 Promise.all””, line 210), and this Bash is a '
                  'read-only cat, so nothing is expected of it against the Read beside it. That '
                  'it waits for the Edit and sees the edit is the next line of the same example '
                  '(line 474: "Bash 位于 Edit 之后,不能越过 Edit 提前运行").')),
    ),
    scenario=Scenario(name="tool-batch-scheduling", rules=[
        Rule(id="final", match=Match(tool_result_for=IDS["bash"]), reply=text("BATCH_DONE")),
        Rule(id="batch", match=Match(last_user_text_contains=BATCH_PROMPT), reply=Message(content=[
            _use("read_a", "Read", file_path="{workspace}/a.txt"),
            _use("grep", "Grep", pattern="ORIGINAL", path="{workspace}"),
            _use("read_b", "Read", file_path="{workspace}/b.txt"),
            _use("edit", "Edit", file_path="{workspace}/b.txt", old_string="ORIGINAL_CONTENT",
                 new_string="EDITED_CONTENT"),
            _use("read_c", "Read", file_path="{workspace}/c.txt"),
            _use("bash", "Bash", command="cat {workspace}/b.txt", description="show b.txt"),
        ])),
    ]),
    fixtures={"a.txt": "A_CONTENT\n", "b.txt": "ORIGINAL_CONTENT\n", "c.txt": "C_CONTENT\n"},
    # staggered sleeps: the safe calls still overlap, and finish (so are answered) in one order
    hooks=Hooks({"PreToolUse": [
        {"action": "record", "tools": ["Read"], "input_contains": "a.txt", "sleep": HOOK_SLEEP},
        {"action": "record", "tools": ["Grep"], "sleep": HOOK_SLEEP + 0.3},
        {"action": "record", "tools": ["Read"], "input_contains": "b.txt", "sleep": HOOK_SLEEP + 0.6},
        # the Bash may run beside read_c (a read-only command can be concurrency-safe): it
        # sleeps longer, so the two finish in one order whether they overlap or not
        {"action": "record", "tools": ["Bash"], "sleep": HOOK_SLEEP + 0.4},
        {"action": "record", "sleep": HOOK_SLEEP}]}),
    invocations=(Invocation("batch", BATCH_PROMPT, tools=("Read", "Grep", "Edit", "Bash")),),
    check=check_batch,
    boundaries=(
        "Windows are measured by hooks (PreToolUse to PostToolUse), which run inside each "
        "tool's pipeline; a PreToolUse hook sleeps to widen every window (longer for each "
        "safe call in turn, and longer for the Bash than the Read beside it, so calls that "
        "may overlap finish in a fixed order and the evidence is the same on every run).",
        "Edit is preceded by a Read of the same file in the same batch, as Edit requires.",
        "Whether the read-only Bash (cat) runs beside the Read after the Edit is not "
        "checked: the analysis decides Bash's concurrency safety by its input and does not "
        "say which commands are safe (2.0.77 runs it after the Read, 2.1.117 and 2.1.235 "
        "beside it; the timing file shows which).",
    ),
    counterfactuals=(
        Counterfactual(
            "one-call-per-response",
            "The six calls come one per response, each after the previous result, so no two of "
            "them can run at the same time.",
            (CONCURRENCY,),
            _one_call_per_response),
        Counterfactual(
            "read-instead-of-edit",
            "The Edit is replaced by a Read of the same file (same id): every call before the Bash "
            "is concurrency-safe, so nothing makes the calls around it wait, and nothing edits "
            "the file the Bash shows.",
            (BARRIER,),
            _no_barrier),
    ),
)

# ---- pairing out of order -------------------------------------------------------------

PAIR_PROMPT = "PAIRING_PROMPT"
SLOW, FAST = "toolu_pair_slow", "toolu_pair_fast"


def check_pairing(ev: Evidence, c: Checks) -> None:
    w = tool_windows(ev)
    slow, fast = w.get(SLOW, {}), w.get(FAST, {})
    c.that("completed-out-of-order", PAIRING,
           "the second call finished before the first (the setup the claim needs)",
           passed=bool(slow.get("end") and fast.get("end") and fast["end"] < slow["end"]),
           expected="the fast call's PostToolUse before the slow call's",
           observed={"slow_end_after_fast_end": (slow["end"] > fast["end"])
                     if slow.get("end") and fast.get("end") else None},
           evidence=f"{TIMELINE}: hook_start PostToolUse of {FAST} vs {SLOW}")
    second = ev.request("pair", 1)
    results = {b.get("tool_use_id"): str(b.get("content"))
               for _, b in blocks_of_type(second, "tool_result")}
    c.that("paired-by-id", PAIRING, "each result is attached to its own call's id",
           passed="SLOW_FILE" in results.get(SLOW, "") and "FAST_FILE" in results.get(FAST, ""),
           expected={SLOW: "holds SLOW_FILE", FAST: "holds FAST_FILE"},
           observed={k: [m for m in ("SLOW_FILE", "FAST_FILE") if m in v] for k, v in results.items()},
           evidence="request 2 tool_results (which file's content each holds)")
    pairs = tool_pairs(second)
    c.that("exactly-one-each", PAIRING, "every tool_use has exactly one tool_result",
           passed=sorted(pairs["tool_result_ids"]) == sorted([SLOW, FAST])
           and not pairs["unpaired_uses"] and not pairs["orphan_results"],
           expected=sorted([SLOW, FAST]), observed=pairs, evidence="request 2 messages")
    check_ended(c, PAIRING, ev, "pair", final_text="PAIR_DONE", prefix="result")


def _same_id(p: Probe) -> Probe:
    both = Message(content=[
        ToolUseBlock(name="Read", id=SLOW, input={"file_path": "{workspace}/slow.txt"}),
        ToolUseBlock(name="Read", id=SLOW, input={"file_path": "{workspace}/fast.txt"})])
    return with_rules(p, [answering(p, "two-reads", both)])


PAIRING_PROBE = Probe(
    name="result-pairing",
    revision=2,  # the final text where the result event's is empty
    title="Results pair by tool_use_id whatever the completion order",
    claims=(Claim(PAIRING, "Tool results are paired with their calls by tool_use_id, not by "
                           "completion order; every tool_use gets exactly one tool_result.",
                  source=from_analysis(
                      "工具并发不是“全部 Promise.all”",
                      "工具结果用 tool_use_id 配对,不依赖完成顺序。", 211)),),
    scenario=Scenario(name="result-pairing", rules=[
        Rule(id="final", match=Match(tool_result_for=SLOW), reply=text("PAIR_DONE")),
        Rule(id="two-reads", match=Match(last_user_text_contains=PAIR_PROMPT), reply=Message(content=[
            ToolUseBlock(name="Read", id=SLOW, input={"file_path": "{workspace}/slow.txt"}),
            ToolUseBlock(name="Read", id=FAST, input={"file_path": "{workspace}/fast.txt"}),
        ])),
    ]),
    fixtures={"slow.txt": "SLOW_FILE\n", "fast.txt": "FAST_FILE\n"},
    hooks=Hooks({"PreToolUse": [{"action": "record", "input_contains": "slow.txt", "sleep": 2.0},
                          {"action": "record", "input_contains": "fast.txt", "sleep": 0.1}]}),
    invocations=(Invocation("pair", PAIR_PROMPT),),
    check=check_pairing,
    boundaries=("The completion order is forced by a PreToolUse hook that delays the first call.",),
    counterfactuals=(
        Counterfactual(
            "same-id-twice",
            "Both Read calls carry the same tool_use id, so their results cannot be told apart by "
            "id: no call has the fast call's id, and one id cannot carry both files' results.",
            (PAIRING,),
            _same_id),
        Counterfactual(
            "calls-finish-in-order",
            "The hook delays the second call instead of the first, so the calls finish in the "
            "order they were issued: pairing by id cannot be told from pairing by completion "
            "order, and the setup the claim needs is missing.",
            (PAIRING,),
            lambda p: replace(p, hooks=Hooks({"PreToolUse": [
                {"action": "record", "input_contains": "slow.txt", "sleep": 0.1},
                {"action": "record", "input_contains": "fast.txt", "sleep": 2.0}]}))),
    ),
)
