"""Run one invocation through the Anthropic SDK's tool runner and print it as stream-json lines.

Executed with the SDK's own venv python (``python tool_runner_driver.py SPEC_JSON``), so it
imports nothing of loopprobe. The runner (``client.beta.messages.tool_runner``) is given
three tools of the driver's own — ``add``, ``fail`` (always raises) and ``read_file`` (a
file of the workspace) — and the invocation's prompt, model and iteration limit. Each
message it yields is printed as an ``assistant`` event, then one ``result`` event, in the
shapes of Claude Code's stream-json so the same evidence reader takes both.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anthropic
from anthropic import beta_tool


@beta_tool
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


@beta_tool
def fail(reason: str) -> str:
    """A tool that always fails with the given reason."""
    raise RuntimeError(reason)


@beta_tool
def read_file(path: str) -> str:
    """Read a text file of the workspace."""
    return (Path.cwd() / path).read_text()


def main(argv: list[str]) -> int:
    spec: dict[str, Any] = json.loads(argv[1])
    client = anthropic.Anthropic(base_url=os.environ["ANTHROPIC_BASE_URL"],
                                 api_key=os.environ["ANTHROPIC_API_KEY"],
                                 max_retries=spec["max_retries"], timeout=60)
    arguments: dict[str, Any] = {
        "model": spec["model"], "max_tokens": 1024, "system": spec["system"],
        "tools": [add, fail, read_file],
        "messages": [{"role": "user", "content": spec["prompt"]}]}
    if spec["max_iterations"] is not None:
        arguments["max_iterations"] = spec["max_iterations"]
    arguments.update(spec["options"])  # e.g. {"thread": false}
    turns, last = 0, None
    try:
        for message in client.beta.messages.tool_runner(**arguments):
            turns += 1
            last = message
            print(json.dumps({"type": "assistant", "message": message.model_dump(
                mode="json", exclude_none=True)}), flush=True)
    except anthropic.APIError as error:
        print(json.dumps({"type": "result", "subtype": "error", "is_error": True,
                          "num_turns": turns, "result": f"{type(error).__name__}: {error}"}))
        return 1
    text = "".join(b.text for b in last.content if b.type == "text") if last else None
    print(json.dumps({"type": "result", "subtype": "success", "is_error": False,
                      "num_turns": turns, "result": text,
                      "stop_reason": last.stop_reason if last else None}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
