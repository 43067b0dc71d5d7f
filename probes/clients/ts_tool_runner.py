"""The TypeScript SDK's tool runner (npm ``@anthropic-ai/sdk``, ``client.beta.messages.toolRunner``).

Each version is installed from npm into its own cache folder; the file the reports cite (its
SHA-256) is the SDK's tool runner module, ``lib/tools/BetaToolRunner.js``. A run is
``node ts_tool_runner_driver.cjs SPEC`` with the install's ``node_modules`` on ``NODE_PATH``:
the runner with the driver's tools (``probes.clients.loop_driver``).
"""

from __future__ import annotations

from pathlib import Path

from probes.clients.loop_driver import NpmLoop

__all__ = ["DRIVER", "ENTRY", "PACKAGE", "TsToolRunner"]

PACKAGE = "@anthropic-ai/sdk"
ENTRY = "lib/tools/BetaToolRunner.js"
DRIVER = Path(__file__).with_name("ts_tool_runner_driver.cjs")


class TsToolRunner(NpmLoop):
    name = "anthropic-ts-tool-runner"
    package = PACKAGE
    entry = ENTRY
    driver = DRIVER
