"""``FakeToolLoopClient``: the ``Client`` protocol around ``toolloop.py``, a stdlib-only generic loop.

It exists to test the generic agent-loop catalog in seconds: it keeps every obligation, or
breaks the ones named in ``plant`` (``toolloop.PLANTS``). It never makes a claim about a
real client.
"""

from __future__ import annotations

import hashlib
import json
import platform
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from probes.clients.base import Capabilities, ClientBinary, Command, RunContext
from probes.core.evidence import Output
from probes.core.invocation import CAPABILITIES, Invocation
from probes.sandbox.folders import Sandbox, base_environment

__all__ = ["DUMMY_API_KEY", "TOOLLOOP", "FakeToolLoopClient"]

FOLDER = Path(__file__).resolve().parent
TOOLLOOP = FOLDER / "toolloop.py"
DUMMY_API_KEY = "sk-ant-fakeloop-dummy-key"
SUPPORTED = frozenset({"run", "max_turns", "loop_tools"})


class FakeToolLoopClient:
    name = "fake-tool-loop"
    package = "loopprobe-tests/fakeloop-toolloop"
    catalog = "probes.catalog.agent_loop"

    def __init__(self, plant: Iterable[str] = ()):
        self.plant = tuple(plant)

    def install(self, version: str) -> ClientBinary:
        sha256 = hashlib.sha256(TOOLLOOP.read_bytes()).hexdigest()
        return ClientBinary(self.name, version,
                            f"{platform.system().lower()}-{platform.machine()}", self.package,
                            FOLDER, TOOLLOOP, (sys.executable, "-I", str(TOOLLOOP)), sha256)

    def installed(self) -> list[ClientBinary]:
        return [self.install("1")]

    def published(self) -> list[str]:
        return ["1"]

    def capabilities(self, binary: ClientBinary) -> Capabilities:
        return Capabilities(SUPPORTED, {name: "not in the fake tool loop"
                                        for name in CAPABILITIES if name not in SUPPORTED})

    def prepare(self, box: Sandbox, seen: Callable[[Path], str] = str) -> dict[str, str]:
        return {}

    def command(self, binary: ClientBinary, invocation: Invocation,
                context: RunContext) -> Command:
        spec: dict[str, Any] = {
            "prompt": invocation.prompt, "model": invocation.model,
            "max_iterations": invocation.max_turns,
            "max_retries": int(invocation.env.get("ANTHROPIC_MAX_RETRIES") or 0),
            "options": invocation.settings or {}, "plant": list(self.plant)}
        env = {**base_environment(context.box), "ANTHROPIC_BASE_URL": context.base_url,
               "ANTHROPIC_API_KEY": DUMMY_API_KEY, **context.extra_env}
        return Command([*binary.launcher, json.dumps(spec, sort_keys=True)], env,
                       context.box.workspace)

    def read_output(self, stdout: str) -> Output:
        return Output.from_json_lines(stdout)

    def session_folder(self, box: Sandbox) -> Path | None:
        return None
