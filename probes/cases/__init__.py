"""Your own setup's cases (``loopprobe check``): the case file and what it becomes.

``format`` (the YAML case file, ``loopprobe: cases/1``, and its closed set of expectations),
``paths`` (where the folders it names may lead: only inside its repository), ``expectations``
(each expectation as a check on a run's evidence) and ``catalog`` (a case file as a report
of probes, one claim per expectation, run like the built-in ones). The
gate after the runs is ``probes.gate``.

May import: ``mockapi`` and ``probes.core`` (a catalog, like ``probes.catalog``).
"""

__all__: list[str] = []
