"""probes: run real agent-loop clients against the mock and turn what they do into evidence.

Packages, from the ground up (a package imports only those above it in this list):

- ``inside``   programs that run inside the sandbox (imported only for their paths)
- ``core``     what a probe is and how it is judged: declarations, evidence, checks, verdicts
- ``sandbox``  the client's folders, and the only way the harness touches them
- ``catalog``  the built-in probes, grouped into reports (imports ``core`` only)
- ``cases``    your own setup's case files (``loopprobe check``) as a catalog (``core`` only)
- ``clients``  one module per client kind, its driver, the registry
- ``run``      one probe run: containment, the client process, hooks, MCP, the runner
- ``report``   files made from evidence: report format, guide, pages, JUnit, diff, matrix
- ``scale``    many runs: schedule, shard, bisect, almanac, sessions
- ``gate``     after a case file's runs: the baseline, the gate, its summary, JUnit and CTRF
- ``cli``      the ``loopprobe`` command

``model``, ``checks``, ``evidence`` and ``provenance`` are the public faces your own catalog
imports (re-exports of ``probes.core``). ``tests/test_architecture.py`` keeps the order.
"""

import importlib.metadata

__all__ = ["__version__"]

try:  # the one version: the installed distribution's (pyproject.toml's [project] version)
    __version__ = importlib.metadata.version("loopprobe")
except importlib.metadata.PackageNotFoundError:  # imported from a checkout that was never installed
    __version__ = "0+unknown"
