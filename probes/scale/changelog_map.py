"""The reviewed mapping from a client's public changelog to the claims: for every entry that
touches the agent loop (``probes.scale.changelog``), the claims it concerns, or why no probe
sees it (``not_probed``). A person decides each; this module reads, checks, updates and
writes the file (``reports/changelog/<client>.yaml``).

Reading refuses anything a reviewer could get wrong in one line naming the file, the entry
and the field: the schema (``changelog-map``), an entry both mapped and not probed, an entry
twice, a claim id the catalog does not have, counts that do not add up. An update from a
newer changelog keeps every reviewed entry still in it and adds the new loop entries
unreviewed; a reviewed entry whose text changed is offered beside its successor.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from probes.core.probe import ReportSpec
from probes.core.safe_read import ReadRefused, read_yaml
from probes.report.format import ReportError
from probes.report.schemas import schema
from probes.scale.changelog import Release, loop_entries, topics_of

__all__ = ["MAPPING_DIR", "MappingError", "Update", "claim_ids_of", "entry_key", "load_mapping",
           "mapping_path", "mapping_text", "unmapped", "update_mapping"]

MAPPING_DIR = "changelog"  # <reports>/changelog/<client>.yaml, beside almanac.json
_HEADER = """\
# The public changelog as a witness of the almanac: every entry of {repository}'s {path}
# that touches the agent loop (probes/scale/changelog.py decides which), quoted, with the
# claims it concerns or why no probe sees it (not_probed). Reviewed by hand: keep
# `claims` to the claims whose verdict the entry's change could move. Comments are not
# kept by `loopprobe almanac changelog --write`: put reasoning in `note`.
"""


class MappingError(ReportError):
    """A mapping file that cannot be used, said in one line (a ``ReportError``: the
    commands say it and exit 2)."""


def mapping_path(folder: Path, client: str) -> Path:
    return folder / MAPPING_DIR / f"{client}.yaml"


def claim_ids_of(catalog: Sequence[ReportSpec]) -> list[str]:
    return [claim.id for spec in catalog for probe in spec.probes for claim in probe.claims]


def entry_key(entry: Any) -> tuple[str, str]:
    return (str(entry["release"]), str(entry["text"]))


def _quote(entry: Any) -> str:
    if not isinstance(entry, dict):
        return ""
    text = " ".join(str(entry.get("text", "")).split())
    short = text if len(text) <= 50 else text[:49].rstrip() + "…"
    return f" ({entry.get('release', '?')} {short!r})"


def _where(data: Any, path: Sequence[Any]) -> str:
    """``entries[12] (2.1.239 'Fixed a race…'): claims`` for a schema error's path."""
    parts = list(path)
    if len(parts) >= 2 and parts[0] == "entries" and isinstance(parts[1], int):
        entries = data.get("entries") if isinstance(data, dict) else None
        entry = entries[parts[1]] if isinstance(entries, list) and parts[1] < len(entries) \
            else None
        rest = "/".join(str(p) for p in parts[2:])
        return f"entries[{parts[1]}]{_quote(entry)}" + (f": {rest}" if rest else "")
    return "/".join(str(p) for p in parts) or "(top level)"


_TYPES = {"array": "a list", "object": "a mapping", "string": "text", "integer": "a whole number",
          "boolean": "true or false"}


def _expected(error: jsonschema.ValidationError) -> str:
    value: Any = error.validator_value
    found: Any = error.instance
    if error.validator == "additionalProperties":
        properties: dict[str, Any] = dict(error.schema).get("properties", {})  # type: ignore[arg-type]
        unknown = sorted(set(found) - set(properties))
        return (f"only the fields {', '.join(properties)}, found unknown field "
                f"{', '.join(unknown)}")
    if error.validator == "required":
        missing = [k for k in value if k not in found]
        return f"the field {', '.join(missing)}, found it missing"
    said = {"type": _TYPES.get(str(value), f"a {value}"), "minLength": "non-empty text",
            "minItems": "a non-empty list", "pattern": f"text matching {value}",
            "const": repr(value), "enum": f"one of {value}",
            "minimum": f"at least {value}"}.get(str(error.validator), error.message)
    return f"{said}, found {' '.join(repr(error.instance).split())[:80]}"


def load_mapping(path: Path, claim_ids: Collection[str] | None = None) -> dict[str, Any]:
    """The mapping at ``path``, checked; claim ids outside ``claim_ids`` (when given) are
    refused. A ``MappingError`` in one line otherwise."""
    try:
        data = read_yaml(path)
    except FileNotFoundError:
        raise MappingError(f"{path}: expected a changelog mapping, but there is no such file"
                           ) from None
    except (ReadRefused, ValueError, OSError) as error:
        raise MappingError(" ".join(str(error).split())[:300]) from None
    validator = jsonschema.Draft202012Validator(schema("changelog-map"))
    for problem in sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path)):
        raise MappingError(f"{path}: {_where(data, list(problem.absolute_path))}: expected "
                           f"{_expected(problem)}")
    seen: dict[tuple[str, str], int] = {}
    sections = data["source"]["sections"]
    known = set(claim_ids or ())
    for number, entry in enumerate(data["entries"]):
        where = f"{path}: entries[{number}]{_quote(entry)}"
        if "claims" in entry and "not_probed" in entry:
            raise MappingError(f"{where}: expected claims or not_probed, found both")
        if entry["release"] not in sections:
            raise MappingError(f"{where}: release: expected a section of the source "
                               f"(source/sections), found {entry['release']}")
        if entry_key(entry) in seen:
            raise MappingError(f"{where}: expected each entry once, found it again (first at "
                               f"entries[{seen[entry_key(entry)]}])")
        seen[entry_key(entry)] = number
        for claim in entry.get("claims", []) if claim_ids is not None else []:
            if claim not in known:
                close = difflib.get_close_matches(claim, sorted(known), n=3, cutoff=0.5)
                raise MappingError(f"{where}: claims: expected a claim id of the catalog, found "
                                   f"{claim!r}" + (f" (close: {', '.join(close)})" if close
                                                    else ""))
    if data["source"]["loop_entries"] != len(data["entries"]):
        raise MappingError(f"{path}: source/loop_entries: expected the number of entries "
                           f"({len(data['entries'])}), found {data['source']['loop_entries']}")
    if data["source"]["newest"] not in sections:
        raise MappingError(f"{path}: source/newest: expected a section of source/sections, "
                           f"found {data['source']['newest']}")
    mapping: dict[str, Any] = data
    return mapping


def unmapped(mapping: dict[str, Any]) -> list[dict[str, Any]]:
    """The entries not reviewed yet: neither claims nor not_probed."""
    return [e for e in mapping["entries"] if "claims" not in e and "not_probed" not in e]


@dataclass
class Update:
    mapping: dict[str, Any]
    added: list[dict[str, Any]] = field(default_factory=list)  # new loop entries, unreviewed
    dropped: list[dict[str, Any]] = field(default_factory=list)  # reviewed, no longer there
    # an added entry -> the dropped reviewed entry of its release whose text is closest
    was: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)


def update_mapping(mapping: dict[str, Any] | None, releases: Sequence[Release], *,
                   client: str, source: dict[str, str]) -> Update:
    """The mapping for ``releases`` (a newer changelog): every loop entry, in the changelog's
    order, with its review kept where one was made; the new ones unreviewed. ``source``:
    repository, path and commit of the changelog read."""
    reviewed = {entry_key(e): e for e in (mapping or {}).get("entries", [])}
    entries, added = [], []
    for item in loop_entries(list(releases)):
        kept = reviewed.pop((item.release, item.text), None)
        entry: dict[str, Any] = {"release": item.release, "text": item.text,
                                 "topics": list(topics_of(item.text))}
        for name in ("claims", "not_probed", "note"):
            if kept is not None and name in kept:
                entry[name] = kept[name]
        if kept is None:
            added.append(entry)
        entries.append(entry)
    dropped = [e for e in reviewed.values() if "claims" in e or "not_probed" in e]
    was: dict[tuple[str, str], dict[str, Any]] = {}
    for entry in added:
        same_release = [d for d in dropped if d["release"] == entry["release"]]
        close = difflib.get_close_matches(entry["text"], [d["text"] for d in same_release],
                                          n=1, cutoff=0.6)
        if close:
            was[entry_key(entry)] = next(d for d in same_release if d["text"] == close[0])
    sections = {r.version: len(r.entries) for r in releases}
    document = {"kind": "changelog-map", "format": 1, "client": client,
                "source": {**source, "newest": releases[0].version,
                           "loop_entries": len(entries), "sections": sections},
                "entries": entries}
    return Update(document, added, dropped, was)


class _Dumper(yaml.SafeDumper):
    """No anchors and aliases (the reader refuses them)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def mapping_text(mapping: dict[str, Any]) -> str:
    """The file a reviewer edits: a header, the source with one section a line, then the
    entries, each one's scalars a line and its lists inline."""
    head = {k: v for k, v in mapping.items() if k != "entries"}
    return (_HEADER.format(**mapping["source"])
            + yaml.dump(head, Dumper=_Dumper, sort_keys=False, allow_unicode=True,
                        width=1 << 16, default_flow_style=False)
            + yaml.dump({"entries": mapping["entries"]}, Dumper=_Dumper, sort_keys=False,
                        allow_unicode=True, width=1 << 16, default_flow_style=None))
