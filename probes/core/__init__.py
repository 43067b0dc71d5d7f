"""The ground floor: what a probe is and how it is judged.

The declarations a catalog writes (``probe``: Probe, Claim, ReportSpec, Counterfactual;
``invocation``: one client run and its hooks; ``mcp``, ``streamed``: the MCP server and the
streamed input a run is given; ``names``), the record a run yields (``evidence``), the checks
stated over it (``checks``), where each expectation comes from (``provenance``), and the
verdict they give (``verdicts``, ``outcome``); ``files`` is how every file loopprobe writes is
written (atomically), ``safe_read`` how every file it is given is read (bounded, regular,
inside its folder, or refused in one line), ``blob_store`` the journals' large parts kept
once across folders (put back by ``safe_read``), ``tally`` the one bound on every record a
client can cause (the first kept, the rest counted). Pure data and pure functions.

May import: ``mockapi`` and this package only. Catalog authors import these names through
the public faces ``probes.model``, ``probes.checks``, ``probes.evidence``, ``probes.provenance``.
"""

__all__: list[str] = []
