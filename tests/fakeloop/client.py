"""``FakeLoopClient``: the ``Client`` protocol around ``program.py``, a stdlib-only fake loop.

It exists to test the harness (runner -> evidence -> checks -> report -> guide -> diff)
in seconds without a real client binary. It never makes a claim about a real client:
what the fake loop does is what these tests scripted it to do.

An invocation's ``extra_args`` carry the fake's test switches: ``("--egress", "host:port")``
(a CONNECT through the egress proxy), ``("--hang",)`` (never finish) and
``("--hook-input-without", FIELD)`` (its hook inputs lack FIELD, as a release before the
field existed).
"""

from __future__ import annotations

import hashlib
import json
import platform
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from probes.clients.base import Capabilities, ClientBinary, Command, RunContext
from probes.core.evidence import Output
from probes.core.invocation import CAPABILITIES, Invocation
from probes.sandbox.folders import Sandbox, base_environment

__all__ = ["DROPS_HOOKS_FROM", "DUMMY_API_KEY", "PROGRAM", "PUBLISHED", "FakeLoopClient"]

FOLDER = Path(__file__).resolve().parent
PROGRAM = FOLDER / "program.py"
DUMMY_API_KEY = "sk-ant-fakeloop-dummy-key"
VERSION = "1"
# "versions" of the fake: from DROPS_HOOKS_FROM on it runs no hooks, a regression planted
# for the bisect tests
PUBLISHED = tuple(str(n) for n in range(1, 10))
DROPS_HOOKS_FROM = 6
SUPPORTED = frozenset({"run", "tools", "max_turns", "resume", "hooks"})
MISSING = {"fork": "the fake loop has no fork",
           "fallback_model": "the fake loop has no fallback model",
           "max_budget_usd": "the fake loop counts no spending"}


def _switches(extra_args: tuple[str, ...]) -> dict[str, Any]:
    switches: dict[str, Any] = {}
    args = list(extra_args)
    while args:
        flag = args.pop(0)
        if flag == "--hang":
            switches["hang"] = True
        elif flag == "--egress" and args:
            switches["egress"] = args.pop(0)
        elif flag == "--hook-input-without" and args:
            switches.setdefault("hook_input_without", []).append(args.pop(0))
        else:
            raise ValueError(f"the fake loop takes --egress HOST:PORT, --hang and "
                             f"--hook-input-without FIELD, "
                             f"not {flag!r} (extra_args {list(extra_args)})")
    return switches


def _drops_hooks(version: str) -> bool:
    return version.isdigit() and int(version) >= DROPS_HOOKS_FROM


class FakeLoopClient:
    name = "fake-loop"
    package = "loopprobe-tests/fakeloop"

    def install(self, version: str) -> ClientBinary:
        sha256 = hashlib.sha256(PROGRAM.read_bytes()).hexdigest()
        return ClientBinary(self.name, version,
                            f"{platform.system().lower()}-{platform.machine()}", self.package,
                            FOLDER, PROGRAM, (sys.executable, "-I", str(PROGRAM)), sha256)

    def installed(self) -> list[ClientBinary]:
        return [self.install(VERSION)]

    def published(self) -> list[str]:
        return list(PUBLISHED)

    def capabilities(self, binary: ClientBinary) -> Capabilities:
        return Capabilities(SUPPORTED, {name: MISSING.get(name, "not in the fake loop")
                                        for name in CAPABILITIES if name not in SUPPORTED})

    def _home(self, box: Sandbox) -> Path:
        return box.home / ".fakeloop"

    def prepare(self, box: Sandbox, seen: Callable[[Path], str] = str) -> dict[str, str]:
        box.files.make_dirs(box.inside(self._home(box)))
        return {seen(self._home(box)): "$FAKELOOP_DIR"}

    def command(self, binary: ClientBinary, invocation: Invocation,
                context: RunContext) -> Command:
        if invocation.fork or invocation.settings is not None:
            raise ValueError(f"invocation {invocation.name!r}: the fake loop has no fork and "
                             "reads no settings")
        spec: dict[str, Any] = {
            "prompt": invocation.prompt, "model": invocation.model,
            "tools": list(invocation.tools) if invocation.tools is not None else None,
            "max_turns": invocation.max_turns,
            "hooks": {"command": context.hooks.command, "events": list(context.hooks.events)}
            if context.hooks and not _drops_hooks(binary.version) else None,
            **_switches(invocation.extra_args),
        }
        if invocation.session == "new":
            spec["session_id"] = context.session_ids[invocation.name]
        elif (resumed := context.resumed_session(invocation)) is not None:
            spec["resume"] = resumed
        merged: dict[str, str | None] = {
            **base_environment(context.box), "ANTHROPIC_BASE_URL": context.base_url,
            "ANTHROPIC_API_KEY": DUMMY_API_KEY, **context.extra_env, **invocation.env}
        env = {k: v for k, v in merged.items() if v is not None}
        argv = [*binary.launcher, json.dumps(spec, sort_keys=True)]
        return Command(argv, env, context.box.workspace)

    def read_output(self, stdout: str) -> Output:
        return Output.from_json_lines(stdout)

    def session_folder(self, box: Sandbox) -> Path | None:
        return self._home(box) / "sessions"
