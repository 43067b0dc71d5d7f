"""Many runs: across cores, CI shards, versions and sessions.

``schedule`` (``-j``: probes run side by side), ``shard`` (a suite split across CI jobs and
merged back), ``bisect`` (the first release where a claim changed), ``almanac`` (the
timeline of a matrix), the almanac of every release of a range: ``almanac_search`` (where
to run next: grid, screen, interval search, re-verification), ``almanac_state`` (its runs on
disk, resumable, merged across shards), ``almanac_build`` (the loop that runs them) and
``almanac_doc`` (``almanac.json``) with ``almanac_witness`` (the evidence folders copied
beside it); the public changelog as a witness: ``changelog`` (its releases, entries and
loop topics), ``changelog_map`` (the reviewed mapping of its loop entries to claims),
``almanac_changelog`` (the mapping joined to the almanac's changes); ``almanac_query``
(a claim's story, every verdict on one release); ``workflow`` (the CI matrix of
versions, the nightly almanac), ``sessions`` (one version writes a session, another
resumes it).

May import: every package below the CLI.
"""

__all__: list[str] = []
