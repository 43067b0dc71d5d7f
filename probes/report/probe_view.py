"""What a version folder's page shows of each probe, as data for its template.

Per probe: its claims with their source and checks (expected against observed), its runs,
every request's body and reply from the journal (text cut at ``TEXT_LIMIT`` with its full
size said, tool_use ids and their tool_result blocks given one highlight class alike), and
a timeline of the requests, hook calls, tool runs and what the caller wrote on one axis
from ``<report>.timing.json``. ``probes.report.render`` puts it on the page.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from probes.core.safe_read import loads, read_json
from probes.report.counterfactuals import claim_counterfactuals
from probes.report.format import (
    TIMING_SUFFIX,
    CheckEntry,
    Report,
    journal_path,
    read_journal_lines,
)

__all__ = ["TEXT_LIMIT", "Requests", "ToolIds", "journal_requests", "pretty", "probe_view",
           "timing_of"]

# a text, tool input or tool result longer than this is cut, with its full size said
TEXT_LIMIT = 400
_JSON_LIMIT = 2000
_PALETTE = 12  # highlight colours for tool ids (CSS classes tid-0 … tid-11)


def _cut(text: str, limit: int = TEXT_LIMIT) -> dict[str, Any]:
    """A text to show: at most ``limit`` characters, and its full size when cut."""
    return {"text": text if len(text) <= limit else text[:limit] + "…",
            "full": len(text), "cut": len(text) > limit}


def pretty(value: Any, limit: int = _JSON_LIMIT) -> str:
    """A value as a page shows it (JSON indented, keys sorted), cut at ``limit``."""
    text = value if isinstance(value, str) else json.dumps(value, indent=1, sort_keys=True,
                                                           ensure_ascii=False)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters in full)"


# ---- tool ids --------------------------------------------------------------------------------

class ToolIds:
    """Each tool_use id on a page gets one highlight class, the same wherever it appears."""

    def __init__(self) -> None:
        self.seen: dict[str, int] = {}

    def __call__(self, tool_id: Any) -> str:
        key = str(tool_id)
        if key not in self.seen:
            self.seen[key] = len(self.seen)
        return f"tid-{self.seen[key] % _PALETTE}"


# ---- request bodies --------------------------------------------------------------------------

def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_text_of(b.get("text", b.get("content", json.dumps(b, sort_keys=True))))
                         if isinstance(b, dict) else str(b) for b in content)
    return json.dumps(content, sort_keys=True, ensure_ascii=False)


def _block(block: Any, ids: ToolIds) -> dict[str, Any]:
    if not isinstance(block, dict):
        return {"type": "text", **_cut(str(block))}
    kind = str(block.get("type"))
    if kind == "tool_use":
        return {"type": kind, "id": block.get("id"), "name": block.get("name"),
                "tid": ids(block.get("id")),
                **_cut(json.dumps(block.get("input"), sort_keys=True, ensure_ascii=False))}
    if kind == "tool_result":
        return {"type": kind, "tool_use_id": block.get("tool_use_id"),
                "tid": ids(block.get("tool_use_id")), "is_error": bool(block.get("is_error")),
                **_cut(_text_of(block.get("content", "")))}
    if kind in ("text", "thinking"):
        return {"type": kind, **_cut(str(block.get(kind) or ""))}
    shown = {k: v for k, v in block.items() if k not in ("signature", "data", "source")}
    return {"type": kind, **_cut(json.dumps(shown, sort_keys=True, ensure_ascii=False))}


def _blocks(content: Any, ids: ToolIds) -> list[dict[str, Any]]:
    if isinstance(content, list):
        return [_block(b, ids) for b in content]
    return [_block({"type": "text", "text": str(content)}, ids)]


def _body(record: dict[str, Any], ids: ToolIds) -> dict[str, Any] | None:
    body = record.get("body")
    if not isinstance(body, dict):
        return None if body is None else {"raw": _cut(_text_of(body), _JSON_LIMIT)}
    system = body.get("system")
    system_text = _text_of(system) if system is not None else ""
    messages = [{"role": m.get("role"), "blocks": _blocks(m.get("content"), ids)}
                for m in body.get("messages") or [] if isinstance(m, dict)]
    rest = {k: v for k, v in body.items() if k not in ("messages", "system", "tools")}
    return {"size": record.get("body_size"), "messages": messages,
            "system": {"blocks": len(system) if isinstance(system, list) else int(bool(system)),
                       **_cut(system_text, 200)},
            "tools": [t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)],
            "rest": pretty(rest, 1000)}


def _reply(record: dict[str, Any], ids: ToolIds) -> dict[str, Any] | None:
    """The scripted reply as the scenario wrote it: its content blocks (a block with an id
    and a name is a tool_use) and its other fields (text, stop_reason, errors, stalls…)."""
    reply = record.get("reply")
    if not isinstance(reply, dict):
        return None
    blocks = []
    for block in reply.get("content") or []:
        if isinstance(block, dict) and "type" not in block:
            guessed = "tool_use" if "id" in block and "name" in block else \
                "thinking" if "thinking" in block else "text"
            block = {"type": guessed, **block}
        blocks.append(_block(block, ids))
    rest = {k: v for k, v in reply.items() if k != "content"}
    return {"blocks": blocks,
            "rest": _cut(json.dumps(rest, sort_keys=True, ensure_ascii=False), 600) if rest else None}


# ---- journals and timelines ------------------------------------------------------------------

Requests = dict[tuple[str, Any], tuple[int, dict[str, Any]]]


def journal_requests(directory: Path, report: Report) -> tuple[Requests, str]:
    """The journal's requests by (probe, seq), each with its 1-based line; or why there are none."""
    path = journal_path(directory, report)
    if not path.exists() and not path.is_symlink():
        return {}, f"{report['journal']} is not in this folder"
    found: Requests = {}
    for number, line in enumerate(read_journal_lines(path, within=directory), start=1):
        try:
            record = loads(line, f"{path}: line {number}")
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("type") == "request":
            found[(str(record.get("probe")), record.get("seq"))] = (number, record)
    return found, ""


def timing_of(directory: Path, report: Report) -> dict[str, Any] | None:
    name = report.get("timing") or f"{report['report']}{TIMING_SUFFIX}"
    path = directory / name
    if not path.exists() and not path.is_symlink():
        return None
    try:
        data = read_json(path, within=directory)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


_LANES = ("run", "request", "hook", "tool", "caller", "egress")


def _timeline(probe: dict[str, Any], timing: dict[str, Any] | None,
              ids: ToolIds) -> dict[str, Any] | None:
    """Every timed thing of a probe's runs on one axis: runs end to end, in the order they ran."""
    if not timing:
        return None
    runs_timing = timing.get("runs") or {}
    timelines = timing.get("timelines") or {}
    entries: list[dict[str, Any]] = []
    rules = {r.get("seq"): r.get("rule") or r.get("outcome") for r in probe.get("requests", [])}
    offset = 0.0
    for run in probe.get("runs", []):
        name = run["name"]
        duration = float((runs_timing.get(name) or {}).get("duration_ms") or 0.0)
        entries.append({"lane": "run", "kind": "run", "start": offset, "end": offset + duration,
                        "label": f"run {name}", "detail": f"exit {run.get('exit_code')}",
                        "run": name})
        own = timelines.get(name) or []
        ends = {e.get("seq"): e for e in own if e.get("what") == "response_end"}
        open_hooks: dict[tuple[Any, Any], list[float]] = {}
        tool_start: dict[Any, float] = {}
        for e in own:
            t = e.get("t_ms")
            if not isinstance(t, (int, float)):
                continue
            at = offset + float(t)
            what = e.get("what")
            if what == "request":
                end = ends.get(e.get("seq"), {}).get("t_ms")
                entries.append({"lane": "request", "kind": "request", "start": at,
                                "end": offset + float(end) if isinstance(end, (int, float)) else at,
                                "label": f"#{e.get('seq')} {e.get('kind') or e.get('path')} → "
                                         f"{rules.get(e.get('seq'))}",
                                "detail": "" if end is not None else "no response end recorded",
                                "run": name, "seq": e.get("seq")})
            elif what in ("hook_start", "hook_end"):
                key = (e.get("event"), e.get("tool_use_id"))
                if what == "hook_start":
                    open_hooks.setdefault(key, []).append(at)
                    if str(e.get("event", "")).startswith("Post") and key[1] in tool_start:
                        began = tool_start.pop(key[1])
                        entries.append({"lane": "tool", "kind": "tool", "start": began, "end": at,
                                        "label": f"tool {key[1]}", "run": name,
                                        "detail": "from its PreToolUse end to its "
                                                  f"{e.get('event')} start",
                                        "tool_use_id": key[1], "tid": ids(key[1])})
                    continue
                began = open_hooks.get(key, [at]).pop(0) if open_hooks.get(key) else at
                entries.append({"lane": "hook", "kind": "hook", "start": began, "end": at,
                                "label": f"{e.get('event')}" + (f" {key[1]}" if key[1] else ""),
                                "detail": "", "run": name, "tool_use_id": key[1],
                                **({"tid": ids(key[1])} if key[1] else {})})
                if e.get("event") == "PreToolUse" and key[1]:
                    tool_start[key[1]] = at
            elif what == "egress":
                entries.append({"lane": "egress", "kind": "egress", "start": at, "end": at,
                                "label": f"egress {e.get('method') or ''} {e.get('host')}",
                                "detail": "refused by the egress guard", "run": name})
        written = (runs_timing.get(name) or {}).get("stdin_written_at_s") or []
        for moment, line in zip(written, run.get("stdin") or [], strict=False):
            if not isinstance(moment, (int, float)):
                continue
            at = offset + float(moment) * 1000
            shown = "stdin closed" if line.get("close") else _short_line(line.get("line"))
            entries.append({"lane": "caller", "kind": "caller", "start": at, "end": at,
                            "label": shown, "detail": str(line.get("why") or ""), "run": name})
        offset += duration
    total = max([offset, *(e["end"] for e in entries)]) or 1.0
    lanes = [lane for lane in _LANES if any(e["lane"] == lane for e in entries)]
    for e in entries:
        for field in ("seq", "tool_use_id", "tid"):
            e.setdefault(field, None)
        e["left"] = round(100 * e["start"] / total, 3)
        e["width"] = round(max(100 * (e["end"] - e["start"]) / total, 0.0), 3)
        e["row"] = lanes.index(e["lane"])
    entries.sort(key=lambda e: (e["start"], _LANES.index(e["lane"]), e["label"]))
    return {"total": round(total, 1), "lanes": lanes, "entries": entries}


def _short_line(line: Any) -> str:
    if not isinstance(line, dict):
        return str(line)
    if line.get("type") == "control_request":
        return f"control_request {(line.get('request') or {}).get('subtype')}"
    if line.get("type") == "user":
        return "user message"
    return str(line.get("type"))


# ---- a probe ---------------------------------------------------------------------------------

def _source(source: dict[str, Any]) -> dict[str, Any]:
    kind = source.get("kind")
    if kind == "analysis":
        return {"kind": "analysis", "title": source.get("title"), "section": source.get("section"),
                "line": source.get("line"), "quote": _cut(str(source.get("quote") or ""), 300)}
    if kind == "project":
        return {"kind": "project", "reason": source.get("reason"),
                "reference": source.get("reference")}
    if kind == "baseline":  # loopprobe's own recording of one version, labelled as such
        return {"kind": "baseline", "citation": source.get("citation")}
    return {"kind": "unstated", "citation": source.get("citation")}


def probe_view(report: Report, probe: dict[str, Any], journal: Requests,
                timing: dict[str, Any] | None, ids: ToolIds,
                counterfactuals: dict[str, Any] | None = None) -> dict[str, Any]:
    anchor = f"{report['report']}--{probe['name']}"
    checks = {c["id"]: c for c in report["checks"]}
    claims = []
    for claim in report["claims"]:
        if claim["probe"] != probe["name"]:
            continue
        claims.append({
            "id": claim["id"], "statement": claim["statement"], "status": claim["status"],
            "reason": claim["reason"], "source": _source(claim["source"]),
            "beyond_source": claim.get("beyond_source"),
            "counterfactuals": claim_counterfactuals(counterfactuals, claim),
            "checks": [_check_view(checks[c], report) for c in claim["checks"] if c in checks]})
    requests = []
    for summary in probe.get("requests", []):
        line, record = journal.get((probe["name"], summary.get("seq")), (None, {}))
        requests.append({"summary": summary, "line": line,
                         "anchor": f"{report['report']}--L{line}" if line else None,
                         "body": _body(record, ids) if record else None,
                         "reply": _reply(record, ids) if record else None})
    runs = [{"name": r["name"], "argv": " ".join(r.get("argv") or []), "exit": r.get("exit_code"),
             "timed_out": r.get("timed_out"), "result": (r.get("result") or {}).get("subtype"),
             "events": [_event_line(e) for e in r.get("stdout") or []]}
            for r in probe.get("runs", [])]
    harness = [_check_view(c, report) for c in report["checks"]
               if c["claim"] is None and c["id"].startswith(probe["name"] + ".")]
    return {"name": probe["name"], "title": probe.get("title"), "status": probe.get("status"),
            "anchor": anchor, "claims": claims, "requests": requests, "runs": runs,
            "harness_checks": harness, "not_applicable": probe.get("not_applicable"),
            "error": probe.get("error"), "boundaries": probe.get("boundaries") or [],
            "timeline": _timeline(probe, ((timing or {}).get("probes") or {}).get(probe["name"]),
                                  ids)}


def _event_line(event: Any) -> str:
    if not isinstance(event, dict):
        return str(event)[:200]
    parts = [str(event.get("type"))]
    if event.get("subtype"):
        parts.append(str(event["subtype"]))
    message = event.get("message")
    if isinstance(message, dict) and isinstance(message.get("content"), list):
        for block in message["content"]:
            if isinstance(block, dict):
                parts.append(str(block.get("type")) + (f" {block.get('id') or block.get('tool_use_id')}"
                                                       if block.get("type") in ("tool_use", "tool_result")
                                                       else ""))
    if event.get("type") == "result":
        parts.append(_cut(str(event.get("result")), 120)["text"])
    return " ".join(parts)


def _check_view(check: CheckEntry, report: Report) -> dict[str, Any]:
    status = str(check.get("status") or ("passed" if check["passed"] else "failed"))
    return {"id": check["id"], "status": status, "description": check.get("description"),
            "expected": check.get("expected"), "observed": check.get("observed"),
            "evidence": check.get("evidence"),
            "lines": [(n, f"{report['report']}--L{n}") for n in check.get("journal_lines") or []]}
