"""The ``loopprobe`` command: one module per command or command group.

May import: every package of ``probes`` (the top floor); nothing imports it.
"""

from probes.cli.commands import build_parser, main

__all__ = ["build_parser", "main"]
