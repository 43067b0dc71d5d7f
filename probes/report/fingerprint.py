"""The request-shape fingerprint of a client version: what it sends and prints, hashed where long.

Built from the evidence of every probe of a run: headers and their values
(secrets redacted, run-specific values normalised), the ``anthropic-beta`` set,
body keys, tools with a hash of each schema, system prompt blocks (length,
hash, first line), thinking and context-management config, stream-json event
types and result fields, and the side requests seen.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from typing import Any

from probes.core.evidence import Evidence

__all__ = ["CC_VERSION_SUFFIX", "DATE", "FINGERPRINT_SCHEMA_VERSION", "VOLATILE_HEADERS", "fingerprint"]

FINGERPRINT_SCHEMA_VERSION = 1
# values that differ per request or per run, not per client version
VOLATILE_HEADERS = frozenset({"host", "content-length", "x-claude-code-session-id",
                              "x-claude-code-agent-id", "x-stainless-retry-count",
                              "x-stainless-timeout", "x-stainless-read-timeout"})
CC_VERSION_SUFFIX = re.compile(r"(cc_version=[0-9.]+)\.[0-9a-z]+")
DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")


def _digest(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _stable_text(text: str, placeholders: dict[str, str]) -> str:
    for real, name in sorted(placeholders.items(), key=lambda kv: -len(kv[0])):
        text = text.replace(real, name)
    return DATE.sub("$DATE", CC_VERSION_SUFFIX.sub(r"\1.$BUILD", text))


def _system_blocks(body: dict[str, Any], placeholders: dict[str, str]) -> list[dict[str, Any]]:
    system = body.get("system")
    blocks = [{"type": "text", "text": system}] if isinstance(system, str) else system or []
    described = []
    for block in blocks:
        text = _stable_text(str(block.get("text", "")), placeholders) if isinstance(block, dict) else ""
        described.append({"length": len(text), "sha256": _digest(text),
                          "first_line": text.strip().splitlines()[0][:120] if text.strip() else "",
                          "cache_control": block.get("cache_control") if isinstance(block, dict) else None})
    return described


def fingerprint(evidence: list[Evidence]) -> dict[str, Any]:
    """One version's fingerprint from the evidence of all its probes."""
    headers: dict[str, set[str]] = {}
    betas: set[str] = set()
    body_keys: dict[str, set[str]] = {}
    tools: dict[str, set[str]] = {}
    configs: dict[str, set[str]] = {}
    kinds: Counter[str] = Counter()
    event_types: set[str] = set()
    result_fields: set[str] = set()
    system: list[dict[str, Any]] | None = None
    for ev in evidence:
        for record in ev.all_requests():
            kinds[f"{record.get('method')} {record.get('path')} {record.get('kind') or ''}".strip()] += 1
            body = record.get("body")
            if record.get("path") != "/v1/messages" or not isinstance(body, dict):
                continue
            kind = str(record.get("kind"))
            body_keys.setdefault(kind, set()).update(body)
            if kind != "main":
                continue
            for name, value in (record.get("headers") or {}).items():
                shown = "$VOLATILE" if name in VOLATILE_HEADERS else value
                headers.setdefault(name, set()).add(shown)
            betas.update(b.strip() for b in (record.get("headers") or {}).get(
                "anthropic-beta", "").split(",") if b.strip())
            for tool in body.get("tools") or []:
                if isinstance(tool, dict):
                    tools.setdefault(str(tool.get("name")), set()).add(
                        _digest({k: v for k, v in tool.items() if k != "cache_control"}))
            for key in ("thinking", "context_management", "max_tokens", "output_config",
                        "tool_choice", "temperature"):
                if key in body:
                    configs.setdefault(key, set()).add(json.dumps(body[key], sort_keys=True))
            if system is None:
                system = _system_blocks(body, ev.placeholders)
        for run in ev.runs.values():
            for event in run.output.events:
                event_types.add("/".join(str(x) for x in (event.get("type"), event.get("subtype"))
                                         if x is not None))
            if run.result:
                result_fields.update(run.result)
    return {
        "schema_version": FINGERPRINT_SCHEMA_VERSION,
        "headers": {k: sorted(v) for k, v in sorted(headers.items())},
        "anthropic_beta": sorted(betas),
        "body_keys": {k: sorted(v) for k, v in sorted(body_keys.items())},
        "tools": {k: sorted(v) for k, v in sorted(tools.items())},
        "system_blocks": system or [],
        "request_config": {k: sorted(v) for k, v in sorted(configs.items())},
        "requests_seen": dict(sorted(kinds.items())),
        "stream_event_types": sorted(event_types),
        "result_fields": sorted(result_fields),
    }
