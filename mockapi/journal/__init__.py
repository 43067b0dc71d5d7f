"""The journal: every request written before its reply starts, and read back.

``records`` (what each line holds: its types and their builders), ``write`` (``Journal``:
append-only JSONL, each line on disk whole or not at all), ``redact`` (the secrets no line
holds: key headers, credential query parameters), ``blobs`` (a body's large repeated parts,
written once and referenced by hash), ``file`` (the journal's file and the files beside it,
never opened through a link) and ``read`` (the records back, and the lines that are not
records, skipped and listed).

May import: nothing of ``mockapi`` outside this package (the mock's ground floor).
"""

__all__: list[str] = []
