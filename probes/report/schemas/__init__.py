"""JSON Schemas of every file loopprobe writes or reads, from the code's own models, and a
validator that says where a file breaks them.

Each schema is generated from the type the writers and readers use (pydantic's JSON Schema
of a TypedDict or model), so it cannot drift from them; the generated files ship in the
package (``probes/report/json_schemas/<kind>.schema.json``, a test keeps them current) for
editors and other tools. ``validate_path`` checks a file, or every file in a folder, against them.

One module per concern: ``kinds`` (every kind of file, its schema), ``validate`` (a file held
against it), and the shapes of the files not described where they are made, by document:
``tables`` (timing, matrix, sessions, bisect, counterfactuals), ``gates`` (check,
conformance), ``almanac``, ``changelog`` (the changelog mapping, the almanac's witness
block); their names here.
"""

from __future__ import annotations

from probes.report.schemas.almanac import (
    AlmanacChange,
    AlmanacClaim,
    AlmanacCost,
    AlmanacFile,
    AlmanacFlip,
    AlmanacLine,
    AlmanacMethod,
    AlmanacRange,
    AlmanacRetraction,
    AlmanacRun,
    AlmanacSegment,
    AlmanacVersion,
)
from probes.report.schemas.changelog import (
    CHANGELOG_STATUSES,
    ChangelogDecision,
    ChangelogEntryShown,
    ChangelogMapEntry,
    ChangelogMapFile,
    ChangelogSource,
    ChangelogStatus,
    ChangelogWitness,
)
from probes.report.schemas.gates import (
    CheckFile,
    CheckNote,
    CheckRow,
    CheckUnreadable,
    CheckVersion,
    ConformanceCell,
    ConformanceClaim,
    ConformanceClient,
    ConformanceDelta,
    ConformanceFile,
    ConformanceGateRow,
    ConformanceKind,
    ConformanceVerdict,
)
from probes.report.schemas.kinds import (
    DESCRIPTIONS,
    DIALECT,
    KINDS,
    REPORT_JOURNAL_VOLATILE,
    SCHEMA_DIR,
    JournalLine,
    schema,
    write_schemas,
)
from probes.report.schemas.tables import (
    BisectFile,
    CounterfactualCheck,
    CounterfactualClaim,
    CounterfactualEntry,
    CounterfactualsFile,
    MatrixCell,
    MatrixClaim,
    MatrixFile,
    MatrixVersion,
    SessionCheck,
    SessionPair,
    SessionsFile,
    SessionSide,
    TimingFile,
)
from probes.report.schemas.validate import Problem, kind_of, validate_path

__all__ = [
    "CHANGELOG_STATUSES",
    "DESCRIPTIONS",
    "DIALECT",
    "KINDS",
    "REPORT_JOURNAL_VOLATILE",
    "SCHEMA_DIR",
    "AlmanacChange",
    "AlmanacClaim",
    "AlmanacCost",
    "AlmanacFile",
    "AlmanacFlip",
    "AlmanacLine",
    "AlmanacMethod",
    "AlmanacRange",
    "AlmanacRetraction",
    "AlmanacRun",
    "AlmanacSegment",
    "AlmanacVersion",
    "BisectFile",
    "ChangelogDecision",
    "ChangelogEntryShown",
    "ChangelogMapEntry",
    "ChangelogMapFile",
    "ChangelogSource",
    "ChangelogStatus",
    "ChangelogWitness",
    "CheckFile",
    "CheckNote",
    "CheckRow",
    "CheckUnreadable",
    "CheckVersion",
    "ConformanceCell",
    "ConformanceClaim",
    "ConformanceClient",
    "ConformanceDelta",
    "ConformanceFile",
    "ConformanceGateRow",
    "ConformanceKind",
    "ConformanceVerdict",
    "CounterfactualCheck",
    "CounterfactualClaim",
    "CounterfactualEntry",
    "CounterfactualsFile",
    "JournalLine",
    "MatrixCell",
    "MatrixClaim",
    "MatrixFile",
    "MatrixVersion",
    "Problem",
    "SessionCheck",
    "SessionPair",
    "SessionSide",
    "SessionsFile",
    "TimingFile",
    "kind_of",
    "schema",
    "validate_path",
    "write_schemas",
]
