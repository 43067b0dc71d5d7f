"""What differs from run to run, made the same in a report and kept in its timing file.

``Normaliser`` turns a run's values into the report's (placeholders for paths and the
mock's address, numbered ids, ``$VOLATILE``); ``journal_line`` is a journal line as the
report's copy holds it; ``run_timelines`` is what ``<report>.timing.json`` keeps instead: a
timeline per client run, in ms from the start of its client process.
"""

from __future__ import annotations

import json
import re
from typing import Any

from probes.core.evidence import Evidence

__all__ = ["JOURNAL_VOLATILE", "RANDOM_IDS", "REPORT_JOURNAL_OMITTED", "SHORT_AGENT_VALUE",
           "TEXT_DURATION", "VOLATILE_KEYS", "Normaliser", "journal_line", "run_timelines"]

# client-made random identifiers, each numbered by first appearance
RANDOM_IDS = re.compile(
    r"\b(?P<UUID>[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\b"
    r"|\b(?P<AGENT>a[0-9a-f]{16})\b"
    r"|(?<=device_id\":\")(?P<DEVICE>[0-9a-f]{64})\b"
    # the shorter agent ids of 2.0.x, in an agent's transcript name
    r"|(?<=agent-)(?P<SHORT_AGENT>a[0-9a-f]{6,15})\b"
    # a socket the client names by its process id
    r"|(?<=/)(?P<PID>\d+)(?=\.sock\b)")
# a value that is an agent id of 2.0.x on its own (a hook payload's agent_id)
SHORT_AGENT_VALUE = re.compile(r"a[0-9a-f]{6,15}")
# a duration the client writes into text it sends (a task notification's usage)
TEXT_DURATION = re.compile(r"(?<=<duration_ms>)\d+(?=</duration_ms>)")
JOURNAL_VOLATILE = ("time", "elapsed", "write_offsets_ms")
# what a report's copy of a journal line leaves out (journal_line)
REPORT_JOURNAL_OMITTED = ("builtin_reply",)
VOLATILE_KEYS = frozenset({"timestamp", "time", "elapsed", "started", "finished"})


def _volatile(key: str) -> bool:
    """Timing fields: kept out of the normalised output, so reruns compare equal."""
    return key in VOLATILE_KEYS or key.endswith(("_ms", "Ms", "_time", "Time", "_at", "At"))


class Normaliser:
    """A report's values with what differs run to run made the same: the run's paths and
    the mock's address as placeholders, session ids by run, other random ids numbered by
    first appearance, durations in text (and, with ``volatile``, timing fields) as
    ``$VOLATILE``."""

    def __init__(self, evidence: Evidence | None):
        self.pairs: list[tuple[str, str]] = []
        self.ids: dict[str, str] = {}
        self.counts: dict[str, int] = {}
        if evidence is None:
            return
        pairs = dict(evidence.placeholders)
        if evidence.mock_url:
            pairs[evidence.mock_url] = "$MOCK_URL"
            pairs[evidence.mock_url.split("://", 1)[-1]] = "$MOCK_HOST"
        self.pairs = sorted(pairs.items(), key=lambda kv: -len(kv[0]))
        for name, run in evidence.runs.items():
            if run.session_id and run.session_id not in self.ids:
                self.ids[run.session_id] = f"$SESSION[{name}]"

    def text(self, value: str) -> str:
        for real, placeholder in self.pairs:
            if real in value:
                value = value.replace(real, placeholder)
        if SHORT_AGENT_VALUE.fullmatch(value):
            return self._numbered(value, "AGENT")
        return TEXT_DURATION.sub("$VOLATILE", RANDOM_IDS.sub(self._random_id, value))

    def _random_id(self, match: re.Match[str]) -> str:
        kind = str(match.lastgroup)
        return self._numbered(match.group(0), "AGENT" if kind == "SHORT_AGENT" else kind)

    def _numbered(self, found: str, kind: str) -> str:
        if found not in self.ids:
            self.counts[kind] = self.counts.get(kind, 0) + 1
            self.ids[found] = f"${kind}_{self.counts[kind]}"
        return self.ids[found]

    def __call__(self, value: Any, *, volatile: bool = False) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list | tuple):
            return [self(v, volatile=volatile) for v in value]
        if isinstance(value, dict):
            return {self.text(str(k)): ("$VOLATILE" if volatile and _volatile(k)
                                        else self(v, volatile=volatile))
                    for k, v in value.items()}
        return value



def _ms(moment: float | None, start: float) -> float | None:
    return None if moment is None else round((moment - start) * 1000, 1)


def run_timelines(ev: Evidence | None, runs: dict[str, Any]) -> dict[str, Any]:
    """What differs per run, as a timeline per client run: each request's arrival and its
    response's end (with when each body write went out), each hook call's start and end per
    tool_use_id, each refused egress attempt; ``t_ms`` counts from the start of that run's
    client process. Every timing check names the entries it compares."""
    if ev is None:
        return {"runs": runs}
    timelines: dict[str, list[dict[str, Any]]] = {}
    for name, run in ev.runs.items():
        start, end = run.started, run.started + run.duration
        entries: list[dict[str, Any]] = []
        seqs = {r["seq"] for r in ev.all_requests() if run.seqs[0] < r["seq"] <= run.seqs[1]}
        for record in ev.journal:
            if record.get("seq") not in seqs:
                continue
            if record["type"] == "request":
                entries.append({"t_ms": _ms(record["time"], start), "what": "request",
                                "seq": record["seq"], "path": record.get("path"),
                                "kind": record.get("kind")})
            elif record["type"] == "response_end":
                entries.append({"t_ms": _ms(record["time"], start), "what": "response_end",
                                "seq": record["seq"], "reason": record.get("reason"),
                                "write_offsets_ms": record.get("write_offsets_ms")})
        for call in ev.hook_calls:  # the recorder logs a call's start and end as two lines
            what, moment = (("hook_start", call.get("started")) if "started" in call
                            else ("hook_end", call.get("finished")))
            if not isinstance(moment, (int, float)) or not start <= moment <= end + 1:
                continue
            tool = call.get("tool_use_id") or (call.get("input") or {}).get("tool_use_id")
            entries.append({"t_ms": _ms(moment, start), "what": what,
                            "event": call.get("event"), "tool_use_id": tool})
        for hook in ev.hook_runs:  # the user's own hook commands, timed by their wrapper
            moment = hook.get("started")
            if isinstance(moment, (int, float)) and start <= moment <= end + 1:
                entries.append({"t_ms": _ms(moment, start), "what": "hook_run",
                                "event": hook.get("event"), "source": hook.get("source"),
                                "duration_ms": round(float(hook.get("duration") or 0) * 1000)})
        for attempt in ev.egress:
            if start <= attempt.get("time", 0) <= end + 1:
                entries.append({"t_ms": _ms(attempt["time"], start), "what": "egress",
                                "method": attempt.get("method"), "host": attempt.get("host")})
        entries.sort(key=lambda e: (e["t_ms"] is None, e["t_ms"] or 0, e["what"]))
        timelines[name] = entries
        runs[name]["duration_ms"] = round(run.duration * 1000, 1)
    return {"runs": runs, "timelines": timelines}


def journal_line(probe: str, record: dict[str, Any], norm: Normaliser) -> str:
    # the report's copy keeps the line format reports were written with: a built-in reply is
    # already named by its rule ("builtin:side", "builtin:warmup", "builtin:count_tokens")
    shown = norm({k: v for k, v in record.items() if k not in REPORT_JOURNAL_OMITTED})
    for key in JOURNAL_VOLATILE:
        if key in shown:
            shown[key] = "$VOLATILE"
    if TEXT_DURATION.search(json.dumps(record.get("body"))):
        # a duration the client wrote into the body: its digits change the raw size
        shown["body_size"] = "$VOLATILE"
        if isinstance(shown.get("headers"), dict) and "content-length" in shown["headers"]:
            shown["headers"]["content-length"] = "$VOLATILE"
    return json.dumps({"probe": probe, **shown}, sort_keys=True, ensure_ascii=False)
