"""Every kind of file loopprobe writes or reads, and its JSON Schema generated from the type
its writers and readers use."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, TypeAdapter

from mockapi.journal.records import BlobRecord, JournalNote, RequestRecord, ResponseEndRecord
from mockapi.script.scenario import Scenario
from probes.cases.format import CaseFile
from probes.report.format import FingerprintFile, Report
from probes.report.normalise import JOURNAL_VOLATILE, REPORT_JOURNAL_OMITTED
from probes.report.schemas.almanac import AlmanacFile, AlmanacLine
from probes.report.schemas.changelog import ChangelogMapFile
from probes.report.schemas.gates import CheckFile, ConformanceFile
from probes.report.schemas.tables import (
    BisectFile,
    CounterfactualsFile,
    MatrixFile,
    SessionsFile,
    TimingFile,
)

__all__ = ["DESCRIPTIONS", "DIALECT", "KINDS", "REPORT_JOURNAL_VOLATILE", "SCHEMA_DIR",
           "JournalLine", "schema", "write_schemas"]

SCHEMA_DIR = Path(__file__).parent.with_name("json_schemas")
DIALECT = "https://json-schema.org/draft/2020-12/schema"

JournalLine = Annotated[RequestRecord | ResponseEndRecord | JournalNote | BlobRecord,
                        Field(discriminator="type")]

KINDS: dict[str, Any] = {
    "report": Report, "fingerprint": FingerprintFile, "matrix": MatrixFile,
    "timing": TimingFile, "sessions": SessionsFile, "bisect": BisectFile,
    "counterfactuals": CounterfactualsFile, "check": CheckFile,
    "conformance": ConformanceFile, "almanac": AlmanacFile, "almanac-run": AlmanacLine,
    "journal-line": JournalLine, "report-journal-line": JournalLine, "scenario": Scenario,
    "cases": CaseFile, "changelog-map": ChangelogMapFile,
}
# what a report's copy of the journal changes in each line (probes.report.normalise.journal_line)
REPORT_JOURNAL_VOLATILE = (*JOURNAL_VOLATILE, "body_size")
DESCRIPTIONS = {
    "report": "a loopprobe report (<report>.json): claims, checks, probes, trust",
    "fingerprint": "a client version's fingerprint (fingerprint.json)",
    "matrix": "claims × client versions (matrix.json)",
    "timing": "a report's timing (<report>.timing.json)",
    "sessions": "the cross-version session table (sessions.json)",
    "bisect": "a bisect result (bisect-<claim>.json)",
    "counterfactuals": "what each counterfactual did on a folder's binary (counterfactuals.json)",
    "check": "what loopprobe check's gate decided per version and expectation (check.json)",
    "conformance": "the agent-loop conformance table: claims × client versions, scores, tiers, "
                   "deltas and the baseline gate (conformance.json)",
    "almanac": "every version of a range per claim: ranges, change points, witnesses "
               "(almanac.json)",
    "almanac-run": "one line of an almanac build's state: a finished run or a retraction "
                   "(cells/<version>.runs.jsonl)",
    "journal-line": "one line of a mock's journal (JSONL, one record per line)",
    "report-journal-line": "one line of a report's journal (<report>.journal.jsonl): the "
                           "mock's record with its probe, timing fields \"$VOLATILE\"",
    "scenario": "a mock scenario (YAML or JSON); point an editor at this with `$schema`",
    "cases": "a case file (loopprobe: cases/1): your own setup, the scripted model and what "
             "you expect (loopprobe check)",
    "changelog-map": "a reviewed mapping of a client's changelog entries touching the agent "
                     "loop to the claims they concern, or why no probe sees them "
                     "(reports/changelog/<client>.yaml)",
}


@cache
def schema(kind: str) -> dict[str, Any]:
    """The JSON Schema of one kind of file."""
    if kind not in KINDS:
        raise KeyError(f"no schema {kind!r}; known: {', '.join(KINDS)}")
    model = KINDS[kind]
    generated: dict[str, Any] = (model.model_json_schema() if kind in ("scenario", "cases")
                                 else TypeAdapter(model).json_schema())
    if kind == "scenario":  # an editor's pointer to this schema is allowed in the file
        generated.setdefault("properties", {})["$schema"] = {"type": "string"}
    if kind == "report-journal-line":
        for record in generated["$defs"].values():
            properties = record.get("properties", {})
            if "type" not in properties or record.get("title") == "BlobRecord":
                continue  # a blob belongs to no probe: requests of any probe reference it
            for key in REPORT_JOURNAL_VOLATILE:
                if key in properties:
                    properties[key] = {"anyOf": [properties[key], {"const": "$VOLATILE"}]}
            for key in REPORT_JOURNAL_OMITTED:
                properties.pop(key, None)
            properties["probe"] = {"type": "string"}
            record["required"] = [*record.get("required", []), "probe"]
    return {"$schema": DIALECT, "$id": f"loopprobe:{kind}", "title": f"loopprobe {kind}",
            "description": DESCRIPTIONS[kind], **generated}


def write_schemas(directory: Path = SCHEMA_DIR) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for kind in KINDS:
        path = directory / f"{kind}.schema.json"
        path.write_text(json.dumps(schema(kind), indent=2, sort_keys=True) + "\n")
        written.append(path)
    return written
