"""Programs that run inside the sandbox, never in the harness's process.

``sandbox_init`` (the sandbox's first process: loopback, the refusing proxy and resolver of
``egress``), ``hook_recorder`` (the hook command: relays each hook's input to the host's
collector and prints its answer) and ``mcp_server`` (the harness's MCP server, on the ``mcp``
SDK in its own venv). Standard library only (``mcp_server`` excepted); the harness mounts
them read-only by path (``TOOLS_DIR``) and reads what they report through the collector.

May import: nothing of loopprobe. Others may import these modules only for their paths.
"""

__all__: list[str] = []
