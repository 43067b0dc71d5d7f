"""Files made from evidence, and what is made from those files.

``format`` (the report and fingerprint file formats, their readers), ``build`` (a report
from probe outcomes), ``normalise`` (what differs run to run, made the same; the timing
file), ``fingerprint``, ``partial`` (a report folder written as probes end),
``schemas`` (the JSON Schemas of every file, ``json_schemas/``, and the validator: a
package, one module per concern), and what readers get:
``guide`` (EVIDENCE.md) with ``guide_runs`` (how it writes a probe's runs and requests),
``render`` (HTML pages, ``templates/``) with ``probe_view`` (what a page shows of a probe),
``counterfactuals`` (counterfactuals.json: what each counterfactual did on a binary),
``junit``, ``diff``, ``matrix``, ``mechanism_table``, ``not_kept`` (what the probes' records
left out past their caps, gathered for the report), and ``github_ci`` (the one writer of a
GitHub job's summary and step outputs: escaped, or refused).

May import: ``probes.core``, ``probes.clients``, ``probes.catalog``, ``probes.cases`` (the case
file's format, for its schema).
"""

__all__: list[str] = []
