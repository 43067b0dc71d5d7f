"""Concurrency and barriers: concurrency-safe calls of one reply overlap, and a call that is
not safe waits for the calls before it and holds back the calls after it."""

from __future__ import annotations

from typing import Any

from mockapi import Match, Message, Rule, Scenario, ToolUseBlock, text
from probes.catalog.common import check_ended, tool_pairs
from probes.catalog.premises import HOOK_TOOL_IDS, hook_tool_ids
from probes.catalog.tool_scheduling.windows import TIMELINE, tool_windows, unpaired
from probes.catalog.variants import answering, scripted_rule, with_rules
from probes.core.checks import Checks
from probes.core.evidence import Evidence, blocks_of_type
from probes.core.probe import Claim, Counterfactual, Hooks, Invocation, Probe
from probes.core.provenance import from_analysis

__all__ = ["BARRIER", "BATCH_PROBE", "BATCH_PROMPT", "CONCURRENCY", "HOOK_SLEEP", "IDS",
           "check_batch"]

CONCURRENCY = "probe.concurrency-safe-overlap"
BARRIER = "probe.unsafe-tool-barrier"
HOOK_SLEEP = 0.8

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
    w, blind = tool_windows(ev), unpaired(ev)
    ra, gr, rb = w.get(IDS["read_a"], {}), w.get(IDS["grep"], {}), w.get(IDS["read_b"], {})
    ed, rc, ba = w.get(IDS["edit"], {}), w.get(IDS["read_c"], {}), w.get(IDS["bash"], {})
    c.that("safe-calls-overlap", CONCURRENCY,
           "Read, Grep and Read issued together (all concurrency-safe) run at the same time",
           passed=_overlap(ra, gr) and _overlap(gr, rb) and _overlap(ra, rb),
           expected="the three windows overlap pairwise",
           observed=blind or {"read_a/grep": _overlap(ra, gr), "grep/read_b": _overlap(gr, rb),
                              "read_a/read_b": _overlap(ra, rb)},
           evidence=f"{TIMELINE}: windows [hook_start PreToolUse, hook_start PostToolUse] "
                    "of toolu_batch_read_a, toolu_batch_grep, toolu_batch_read_b")
    c.that("edit-waits-for-safe-calls", BARRIER,
           "Edit (not concurrency-safe) starts only after the safe calls before it ended",
           passed=all(_after(ed, x) for x in (ra, gr, rb)),
           expected="Edit starts after read_a, grep and read_b end",
           observed=blind or {n: _after(ed, x)
                              for n, x in (("read_a", ra), ("grep", gr), ("read_b", rb))},
           evidence=f"{TIMELINE}: hook_start PreToolUse of toolu_batch_edit vs hook_start "
                    "PostToolUse of the three safe calls")
    c.that("later-calls-wait-for-edit", BARRIER,
           "calls after the Edit do not start before it ends",
           passed=bool(_after(rc, ed)) and bool(_after(ba, ed)),
           expected="read_c and bash start after the Edit ends",
           observed=blind or {"read_c": _after(rc, ed), "bash": _after(ba, ed)},
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
    premises=(HOOK_TOOL_IDS, hook_tool_ids("PostToolUse")),
    revision=3,  # premises: a version lacking one is absent or not observable, never contradicted
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
