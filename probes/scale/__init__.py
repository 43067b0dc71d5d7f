"""Many runs: across cores, CI shards, versions and sessions.

``schedule`` (``-j``: probes run side by side), ``shard`` (a suite split across CI jobs and
merged back), ``bisect`` (the first release where a claim changed), ``almanac`` (every
release of a range), ``workflow`` (the CI matrix of versions), ``sessions`` (one version
writes a session, another resumes it).

May import: every package below the CLI.
"""

__all__: list[str] = []
