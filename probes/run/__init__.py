"""One probe run: a contained client against the mock, and the evidence it leaves.

``runner`` (a probe: its invocations in one sandbox, the mock, the evidence, the verdict)
with ``applicable`` (what is decided before it runs: binaries, absent or not applicable),
``containment`` (what the sandbox promises, finding bwrap), ``sandbox_place`` (the view a
run is shown, its bwrap command), ``bounds`` (memory, processes, disk, time),
``cgroups`` (the per-run cgroups that bound memory and processes), ``sandbox_fs`` and
``sandbox_bound`` (the sandbox folder on a tmpfs of its bound's size, and its watch),
``owner`` and ``leftovers`` (what a killed harness left on the machine, swept),
``process`` and ``pipes`` (the client process and its bounded output), ``conversation``
(streamed input carried out), ``collector``, ``collected``, ``ancestry`` and ``hook_policy``
(what hooks, MCP and egress report, on the host: the socket, what is kept of it under its
caps, which process a reporter is, the hook answers) and ``mcp_runtime`` (the MCP server's
venv). Static evidence (whether the installed client's files mention a string) is
``probes.clients.mentions``.

May import: ``probes.core``, ``probes.sandbox``, ``probes.inside`` (paths), ``probes.clients``.
"""

__all__: list[str] = []
