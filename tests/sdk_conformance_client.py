"""Call the mock with the official ``anthropic`` SDK and print what the SDK made of the reply.

    python sdk_conformance_client.py URL CASE MODE     # MODE: create | stream

Prints one JSON object: the assembled message (content blocks as dicts, stop_reason,
usage…) and, in stream mode, how many deltas of each type the SDK saw; or, when the SDK
raised one of its API errors, the exception's class name and status code. Uses only the
standard library and APIs that the 0.x and 2.x lines share; run it with the python of
the SDK line under test (see tests/sdk_lines.py).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anthropic

MODES = ("create", "stream")
MODEL = "claude-sonnet-4-5"
MAX_TOKENS = 4096
TIMEOUT = 30.0


def _message_dict(message: Any) -> dict[str, Any]:
    return {
        "id": message.id,
        "type": message.type,
        "role": message.role,
        "model": message.model,
        # exclude_none: fields the SDK models add but the wire did not carry (citations…)
        "content": [block.to_dict(mode="json", exclude_none=True) for block in message.content],
        "stop_reason": message.stop_reason,
        "stop_sequence": message.stop_sequence,
        "usage": message.usage.to_dict(mode="json", exclude_none=True),
    }


def _error_dict(error: anthropic.APIError) -> dict[str, Any]:
    return {
        "error": type(error).__name__,
        "status_code": getattr(error, "status_code", None),
        "body": error.body,
        "request_id": getattr(error, "request_id", None),
    }


def run(url: str, case: str, mode: str) -> dict[str, Any]:
    client = anthropic.Anthropic(base_url=url, api_key="loopprobe-test", max_retries=0,
                                 timeout=TIMEOUT)
    params: dict[str, Any] = {
        "model": MODEL,
        "max_tokens": MAX_TOKENS,
        "messages": [{"role": "user", "content": f"conformance case: {case}"}],
    }
    if "thinking" in case:
        params["thinking"] = {"type": "enabled", "budget_tokens": 1024}
    deltas: dict[str, int] = {}  # content_block_delta events seen, by delta type (stream only)
    try:
        if mode == "create":
            message = client.messages.create(**params)
        else:
            with client.messages.stream(**params) as stream:
                for event in stream:
                    if event.type == "content_block_delta":
                        kind = event.delta.type
                        deltas[kind] = deltas.get(kind, 0) + 1
                message = stream.get_final_message()
    except anthropic.APIError as error:
        return {"sdk": anthropic.__version__, **_error_dict(error)}
    finally:
        client.close()
    return {"sdk": anthropic.__version__, "message": _message_dict(message), "deltas": deltas}


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[2] not in MODES:
        print("usage: sdk_conformance_client.py URL CASE create|stream", file=sys.stderr)
        return 2
    print(json.dumps(run(*argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
