"""Run the official Python SDK's tool runner (``client.beta.messages.tool_runner``) once.

Started by tests/test_threads.py with the python of an SDK line's venv; reads its
arguments as one JSON object and prints one JSON object: each message the runner
yielded (id, content, stop_reason) and each tool call it ran, in order.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import anthropic
from anthropic import beta_tool


def main() -> None:
    spec: dict[str, Any] = json.loads(sys.argv[1])
    calls: list[list[Any]] = []

    @beta_tool
    def add(a: int, b: int) -> str:
        """Add two integers."""
        calls.append(["add", a, b])
        time.sleep(spec.get("tool_seconds", 0))
        return str(a + b)

    @beta_tool
    def fail(reason: str) -> str:
        """A tool that always fails."""
        calls.append(["fail", reason])
        raise RuntimeError(reason)

    client = anthropic.Anthropic(base_url=spec["url"], api_key="sk-loopprobe",
                                 max_retries=spec.get("max_retries", 2), timeout=30)
    arguments: dict[str, Any] = {
        "model": "claude-sonnet-4-5", "max_tokens": 2048, "system": "You add numbers.",
        "tools": [add, fail], "messages": [{"role": "user", "content": spec["prompt"]}]}
    if spec.get("stream"):
        arguments["stream"] = True
    if "thread" in spec:
        arguments["thread"] = spec["thread"]
    if spec.get("thinking"):
        arguments["thinking"] = {"type": "enabled", "budget_tokens": 1024}
    if "max_iterations" in spec:
        arguments["max_iterations"] = spec["max_iterations"]
    messages = []
    for item in client.beta.messages.tool_runner(**arguments):
        message = item.get_final_message() if spec.get("stream") else item
        messages.append({"id": message.id, "stop_reason": message.stop_reason,
                         "content": [block.model_dump(mode="json", exclude_none=True)
                                     for block in message.content]})
    print(json.dumps({"messages": messages, "calls": calls}))


if __name__ == "__main__":
    main()
