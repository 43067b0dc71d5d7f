"""A LangGraph agent (PyPI ``langgraph`` with ``langchain-anthropic``): ``create_react_agent``.

Each version of ``langgraph`` is installed into a venv of its own in the cache with the
newest ``langchain-anthropic`` of the day (its version is in the install's manifest,
``companions``); the file the reports cite (its SHA-256) is the ReAct agent's module,
``langgraph/prebuilt/chat_agent_executor.py``. A run is ``langgraph_driver.py`` in that venv:
the agent with the driver's tools (``probes.clients.loop_driver``).
"""

from __future__ import annotations

from pathlib import Path

from probes.clients.loop_driver import PypiLoop

__all__ = ["COMPANION", "DRIVER", "ENTRY", "PACKAGE", "LangGraph"]

PACKAGE = "langgraph"
COMPANION = "langchain-anthropic"
ENTRY = "langgraph/prebuilt/chat_agent_executor.py"
DRIVER = Path(__file__).with_name("langgraph_driver.py")
# what the driver imports must import (langgraph-prebuilt, a package of its own, may resolve
# to a release this langgraph cannot load); then the companions' versions, for the manifest
_VERSIONS = ("import langgraph.prebuilt, langchain_anthropic, importlib.metadata as m, json; "
             "print(json.dumps({n: m.version(n) for n in ('langgraph-prebuilt', "
             "'langchain-anthropic', 'langchain-core', 'anthropic')}))")


class LangGraph(PypiLoop):
    name = "langgraph"
    package = PACKAGE
    entry, what, driver, imports = ENTRY, "ReAct agent", DRIVER, _VERSIONS
    companions = (COMPANION,)
