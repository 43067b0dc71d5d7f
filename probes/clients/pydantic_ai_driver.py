"""Run one invocation through a pydantic-ai agent on its Anthropic model and print stream-json lines.

Executed with the install's own venv python (``python pydantic_ai_driver.py SPEC_JSON``), so
it imports nothing of loopprobe. The agent gets the loop drivers' three tools -- ``add``,
``fail`` (always raises) and ``read_file`` -- through ``Agent.tool_plain``; its model is
``AnthropicModel`` on an ``AsyncAnthropic`` client with the invocation's retries; the step
limit is ``UsageLimits(request_limit=N)``. Each model response is printed as an
``assistant`` event, then one ``result`` event.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from anthropic import AsyncAnthropic
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.usage import UsageLimits


def out(event: dict[str, Any]) -> None:
    print(json.dumps(event, default=str), flush=True)


def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


def fail(reason: str) -> str:
    """A tool that always fails with the given reason."""
    raise RuntimeError(reason)


def read_file(path: str) -> str:
    """Read a text file of the workspace."""
    return (Path.cwd() / path).read_text()


def _responses(messages: list[Any]) -> list[dict[str, Any]]:
    shown = []
    for message in messages:
        if isinstance(message, ModelResponse):
            shown.append({"role": "assistant", "stop_reason": getattr(message, "finish_reason",
                                                                      None),
                          "content": [{"part_kind": p.part_kind, **{
                              k: v for k, v in vars(p).items() if isinstance(v, str | int | dict)}}
                              for p in message.parts]})
    return shown


def main(argv: list[str]) -> int:
    spec: dict[str, Any] = json.loads(argv[1])
    options: dict[str, Any] = spec["options"]
    client = AsyncAnthropic(base_url=os.environ["ANTHROPIC_BASE_URL"],
                            api_key=os.environ["ANTHROPIC_API_KEY"],
                            max_retries=spec["max_retries"], timeout=60)
    model = AnthropicModel(spec["model"], provider=AnthropicProvider(anthropic_client=client))
    agent = Agent(model, system_prompt=spec["system"], tools=[add, fail, read_file])
    settings: dict[str, Any] = {"max_tokens": options.get("max_tokens", 1024)}
    if options.get("thinking"):
        settings["anthropic_thinking"] = options["thinking"]
    limits = UsageLimits(request_limit=spec["max_iterations"]) \
        if spec["max_iterations"] is not None else None
    captured: list[Any] = []
    try:
        from pydantic_ai import capture_run_messages
        with capture_run_messages() as captured:
            result = agent.run_sync(spec["prompt"], model_settings=settings,  # type: ignore[arg-type]
                                    usage_limits=limits)
    except Exception as error:  # the loop's own failure: what it said, and what it had sent
        for message in _responses(captured):
            out({"type": "assistant", "message": message})
        out({"type": "result", "subtype": "error", "is_error": True,
             "num_turns": len(_responses(captured)),
             "result": f"{type(error).__name__}: {error}"})
        return 1
    responses = _responses(result.all_messages())
    for message in responses:
        out({"type": "assistant", "message": message})
    output = getattr(result, "output", None)
    out({"type": "result", "subtype": "success", "is_error": False, "num_turns": len(responses),
         "result": output if isinstance(output, str) else json.dumps(output, default=str)})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
