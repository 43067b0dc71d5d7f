"""An example probe of your own: does the client run two Reads from one response, and answer
each with its own tool_result? Run it with

    loopprobe run --client 2.1.235 --catalog examples/probes/read_twice.py --out /tmp/mine
"""

from __future__ import annotations

from mockapi import Match, Message, Rule, Scenario, ToolUseBlock, text
from probes.catalog.common import check_ended, tool_pairs
from probes.checks import Checks
from probes.evidence import Evidence
from probes.model import Claim, Invocation, Probe, ReportSpec
from probes.provenance import project_expectation

CLAIM = "example.two-reads-two-results"


def check(ev: Evidence, c: Checks) -> None:
    pairs = tool_pairs(ev.request("run", 1))
    c.equal("both-answered", CLAIM, "each Read got its own tool_result",
            expected=["toolu_first", "toolu_second"], observed=sorted(pairs["tool_result_ids"]),
            evidence="request 2: tool_result ids")
    check_ended(c, CLAIM, ev, "run", final_text="BOTH_READ")


PROBE = Probe(
    name="read-twice",
    title="Two Reads in one response",
    claims=(Claim(CLAIM, "Two tool_use blocks in one response each get a tool_result.",
                  source=project_expectation(
                      "each tool_use must be answered by a tool_result with its id",
                      "Anthropic Messages API docs, 'Tool use': tool_result blocks")),),
    scenario=Scenario(name="read-twice", rules=[
        Rule(id="answer", match=Match(tool_result_for="toolu_second"), reply=text("BOTH_READ")),
        Rule(id="two-reads", match=Match(last_user_text_contains="READ_TWICE"), reply=Message(
            content=[ToolUseBlock(name="Read", id="toolu_first",
                                  input={"file_path": "{workspace}/a.txt"}),
                     ToolUseBlock(name="Read", id="toolu_second",
                                  input={"file_path": "{workspace}/b.txt"})])),
    ]),
    fixtures={"a.txt": "A\n", "b.txt": "B\n"},
    invocations=(Invocation("run", "READ_TWICE"),),
    check=check,
)

REPORTS = (ReportSpec(name="read-twice", title="Example: two Reads", probes=(PROBE,)),)
