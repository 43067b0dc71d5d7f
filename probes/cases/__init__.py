"""User-written cases (``loopprobe check``): the case file, its runs, and the gate after them.

``baseline`` (the expected failures a case file's owner accepts), ``gate`` (each version's
report folder judged per expectation against the baseline) and ``outputs`` (what CI reads
from the gate: a job summary, JUnit XML, CTRF JSON, GitHub step outputs).

May import: every package below the CLI but ``scale`` (on the same floor).
"""

__all__: list[str] = []
