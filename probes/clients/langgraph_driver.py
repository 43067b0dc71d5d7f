"""Run one invocation through a LangGraph ReAct agent on ChatAnthropic and print stream-json lines.

Executed with the install's own venv python (``python langgraph_driver.py SPEC_JSON``), so it
imports nothing of loopprobe. The agent is ``langgraph.prebuilt.create_react_agent`` with
``langchain_anthropic.ChatAnthropic`` (the invocation's base URL, retries, max_tokens and
thinking) and the loop drivers' three tools -- ``add``, ``fail`` (always raises) and
``read_file``. LangGraph's step limit is ``recursion_limit``, counted in graph super-steps
(one for the model, one for the tools): N model replies are ``2N - 1`` super-steps. Each AI
message is printed as an ``assistant`` event, then one ``result`` event.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from langchain_anthropic import ChatAnthropic
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.prebuilt import create_react_agent


def out(event: dict[str, Any]) -> None:
    print(json.dumps(event, default=str), flush=True)


@tool
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


@tool
def fail(reason: str) -> str:
    """A tool that always fails with the given reason."""
    raise RuntimeError(reason)


@tool
def read_file(path: str) -> str:
    """Read a text file of the workspace."""
    return (Path.cwd() / path).read_text()


def _text(message: AIMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content if isinstance(b, dict)
                   and b.get("type") == "text")


def main(argv: list[str]) -> int:
    spec: dict[str, Any] = json.loads(argv[1])
    options: dict[str, Any] = spec["options"]
    settings: dict[str, Any] = {"max_tokens": options.get("max_tokens", 1024)}
    if options.get("thinking"):
        settings["thinking"] = options["thinking"]
    model = ChatAnthropic(model=spec["model"], base_url=os.environ["ANTHROPIC_BASE_URL"],
                          api_key=os.environ["ANTHROPIC_API_KEY"],
                          max_retries=spec["max_retries"], timeout=60, **settings)
    agent = create_react_agent(model, [add, fail, read_file], prompt=spec["system"])
    config: dict[str, Any] = {}
    if spec["max_iterations"] is not None:
        config["recursion_limit"] = 2 * spec["max_iterations"] - 1
    try:
        state = agent.invoke({"messages": [("user", spec["prompt"])]}, config=config)
    except Exception as error:  # the loop's own failure, as it said it
        out({"type": "result", "subtype": "error", "is_error": True, "num_turns": None,
             "result": f"{type(error).__name__}: {error}"})
        return 1
    replies = [m for m in state["messages"] if isinstance(m, AIMessage)]
    for message in replies:
        out({"type": "assistant", "message": {
            "role": "assistant", "content": message.content,
            "stop_reason": message.response_metadata.get("stop_reason")}})
    out({"type": "result", "subtype": "success", "is_error": False, "num_turns": len(replies),
         "result": _text(replies[-1]) if replies else None})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
