"""The Vercel AI SDK's tool loop (npm ``ai`` with ``@ai-sdk/anthropic``): ``generateText`` with tools.

Each version of ``ai`` is installed from npm into its own cache folder with the Anthropic
provider of its generation (``PROVIDER_FOR_MAJOR``; the exact provider version installed is
in the install's manifest, ``companions``); the file the reports cite (its SHA-256) is
``ai``'s ``dist/index.js``. A run is ``node vercel_ai_driver.mjs SPEC`` with the install's
``node_modules`` on ``NODE_PATH``: the loop with the driver's tools
(``probes.clients.loop_driver``). Versions before 5 (``maxSteps``, ``parameters``) are not
driven.
"""

from __future__ import annotations

from pathlib import Path

from probes.clients.loop_driver import NpmLoop
from probes.clients.npm import InstallError

__all__ = ["DRIVER", "ENTRY", "PACKAGE", "PROVIDER", "PROVIDER_FOR_MAJOR", "VercelAi"]

PACKAGE = "ai"
PROVIDER = "@ai-sdk/anthropic"
ENTRY = "dist/index.js"
DRIVER = Path(__file__).with_name("vercel_ai_driver.mjs")
# the provider's major version that each major version of `ai` was published with
PROVIDER_FOR_MAJOR = {"5": "2", "6": "3", "7": "4"}


class VercelAi(NpmLoop):
    name = "vercel-ai"
    package = PACKAGE
    entry = ENTRY
    driver = DRIVER

    def companions(self, version: str) -> tuple[str, ...]:
        major = version.split(".", 1)[0]
        if major not in PROVIDER_FOR_MAJOR:
            raise InstallError(f"ai@{version}: the driver takes ai 5, 6 or 7 (generateText "
                               f"with stopWhen and inputSchema), found major {major}")
        return (f"{PROVIDER}@^{PROVIDER_FOR_MAJOR[major]}",)
