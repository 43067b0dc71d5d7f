"""The gate of ``loopprobe check``: each version's report folder judged per expectation against
the user's baseline, and what a CI reads from it.

``baseline`` (the expected failures a case file's owner accepts: a listed failure passes, an
unlisted one fails, a listed entry that passes fails as stale), ``gate`` (the judgement,
``check.json``), ``summary`` (the job summary), ``junit``, ``ctrf`` and ``github_outputs``.

May import: every package below the CLI but ``scale`` (on the same floor).
"""

__all__: list[str] = []
