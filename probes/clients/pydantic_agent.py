"""pydantic-ai (PyPI ``pydantic-ai-slim[anthropic]``): an ``Agent`` on its Anthropic model.

Each version is installed into a venv of its own in the cache; the file the reports cite (its
SHA-256) is the agent's loop, ``pydantic_ai/_agent_graph.py``. A run is
``pydantic_ai_driver.py`` in that venv: the agent with the driver's tools
(``probes.clients.loop_driver``).
"""

from __future__ import annotations

from pathlib import Path

from probes.clients.loop_driver import PypiLoop

__all__ = ["DRIVER", "ENTRY", "EXTRA", "IMPORTS", "PACKAGE", "PydanticAi"]

PACKAGE = "pydantic-ai-slim"
EXTRA = "anthropic"
ENTRY = "pydantic_ai/_agent_graph.py"
DRIVER = Path(__file__).with_name("pydantic_ai_driver.py")
IMPORTS = ("import pydantic_ai.models.anthropic, pydantic_ai.providers.anthropic, "
           "pydantic_ai.usage")


class PydanticAi(PypiLoop):
    name = "pydantic-ai"
    package = PACKAGE
    requirement = f"{PACKAGE}[{EXTRA}]"
    entry, what, driver, imports = ENTRY, "agent graph", DRIVER, IMPORTS
