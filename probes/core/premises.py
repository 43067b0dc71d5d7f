"""Premises: what a probe's runs and checks rely on the client version having.

A verdict about behaviour means something only when the knobs the probe turns and the
fields it measures with exist in the version run. Each probe declares them
(``Probe.premises``): a command-line flag, an environment variable, a settings key, a field
of a hook's input or output, a tool, a slash command, a stream-json event. For every run,
each premise is established from evidence, the run's own first:

- ``flag``: the client refused it (``unknown option '--x'``) — missing; a run passing it
  that reached the mock — present.
- ``hook_input``: hook calls of the event were recorded and none carried the field (or all
  carried null) — missing; one carried a value — present.
- ``tool``: loop requests offered tools and none by that name — missing; one offered it —
  present.
- ``command``: the client answered ``Unknown skill``/``Unknown command`` — missing; a run
  invoking it reached the mock otherwise — present.
- ``event``: a run printed it (``type`` or ``type/subtype``) — present.

Where the run cannot tell (an environment variable, a settings key or a hook output field a
version ignores silently; an event the run did not print), the installed client's own files
decide: a byte search for the premise's ``mention`` (static evidence, recorded in the
report as ``client_mentions``). ``--help`` is never evidence: a flag can work unlisted.

A premise has a role. ``feature``: what the claim is about — missing, the claim is *absent*
on that version. ``instrument``: what only the harness measures with — missing, the claim is
*not observable* there. A premise neither the run nor the files decide is not established:
*not observable*, never a ground for *contradicted* (``probes.core.verdicts.decide_claim``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal, get_args

from probes.core.checks import Checks
from probes.core.evidence import Evidence
from probes.core.names import CatalogError, described

__all__ = ["PREMISE_KINDS", "PREMISE_ROLES", "Finding", "Premise", "PremiseKind", "PremiseRole",
           "establish", "premise_checks", "premise_mentions", "used"]

PremiseKind = Literal["flag", "env", "setting", "hook_input", "hook_output", "tool", "command",
                      "event"]
PREMISE_KINDS: tuple[str, ...] = get_args(PremiseKind)
PremiseRole = Literal["feature", "instrument"]
PREMISE_ROLES: tuple[str, ...] = get_args(PremiseRole)
# what each kind is, for a reader of a report
_KIND_WORDS = {"flag": "the command-line flag", "env": "the environment variable",
               "setting": "the settings key", "hook_input": "the hook input field",
               "hook_output": "the hook output field", "tool": "the tool",
               "command": "the slash command", "event": "the stream-json event"}
# kinds whose name is also what the client's files hold, when no ``mention`` is given
_MENTIONED_BY_NAME = ("flag", "env", "setting", "hook_input", "hook_output", "event")
_UNKNOWN_COMMAND = ("Unknown skill: {name}", "Unknown command: /{name}")
_STATIC = ("static: a byte search of the client's installed package files (the entry and the "
           "package's .js/.cjs/.mjs/.json files)")


@dataclass(frozen=True)
class Premise:
    """One thing a probe relies on the version having.

    ``claims``: the claims resting on it (empty: every claim of the probe). ``why``: what
    the probe uses it for. ``mention``: the bytes that show it in the client's files (by
    default its name, for the kinds whose name is written there; a tool's or a command's
    name is too common a word to decide anything, so they have none unless given).
    ``event``: for a ``hook_input`` field, the hook event whose input carries it (None: any).
    """

    kind: PremiseKind
    name: str
    role: PremiseRole
    why: str
    claims: tuple[str, ...] = ()
    mention: str | None = None
    event: str | None = None
    # False: the client's files decide nothing of it (a name every version writes for other
    # reasons: tool_use_id is the API's own field); only a run can establish it
    static: bool = True

    def __post_init__(self) -> None:
        owner = f"Premise {self.name!r}"
        if not isinstance(self.name, str) or not self.name.strip():
            raise CatalogError(f"Premise: name must be a non-empty string, got {described(self.name)}")
        if self.kind not in PREMISE_KINDS:
            raise CatalogError(f"{owner}: kind must be one of {', '.join(PREMISE_KINDS)}, got "
                               f"{described(self.kind)}")
        if self.role not in PREMISE_ROLES:
            raise CatalogError(f"{owner}: role must be one of {', '.join(PREMISE_ROLES)}, got "
                               f"{described(self.role)}")
        if not isinstance(self.why, str) or not self.why.strip():
            raise CatalogError(f"{owner}: why must say what the probe uses it for, got "
                               f"{described(self.why)}")
        if not isinstance(self.claims, tuple) or not all(isinstance(c, str) for c in self.claims):
            raise CatalogError(f"{owner}: claims must be a tuple of claim ids, got "
                               f"{described(self.claims)}")
        if self.kind == "flag" and not self.name.startswith("--"):
            raise CatalogError(f"{owner}: a flag is named as typed, e.g. '--max-turns'")
        needle = self.looked_for
        if needle is not None and (not needle.strip() or not needle.isascii() or len(needle) > 100):
            raise CatalogError(f"{owner}: mention must be a non-blank ASCII string of at most "
                               f"100 characters, got {needle!r}")

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "role": self.role, "why": self.why,
                **({"claims": list(self.claims)} if self.claims else {}),
                **({"mention": self.looked_for} if self.looked_for is not None else {}),
                **({"event": self.event} if self.event is not None else {})}

    @property
    def looked_for(self) -> str | None:
        """What the static search looks for in the client's files, if anything."""
        if not self.static:
            return None
        if self.mention is not None:
            return self.mention
        if self.kind == "event":
            return self.name.rsplit("/", 1)[-1]
        return self.name if self.kind in _MENTIONED_BY_NAME else None

    @property
    def words(self) -> str:
        return f"{_KIND_WORDS[self.kind]} {self.name}"

    @property
    def slug(self) -> str:
        name = re.sub(r'[^A-Za-z0-9_]+', '-', self.name).strip('-')
        return f"{self.kind}.{self.event}.{name}" if self.event else f"{self.kind}.{name}"


@dataclass(frozen=True)
class Finding:
    """Whether one premise held on one run: ``present`` None when nothing decided it."""

    present: bool | None
    observed: str  # what decided it, in the client's own words where it has some
    evidence: str  # where that was seen


def premise_mentions(premises: Iterable[Premise]) -> tuple[str, ...]:
    """The strings the runner looks up in the client's files for these premises."""
    return tuple(dict.fromkeys(p.looked_for for p in premises if p.looked_for is not None))


def establish(premise: Premise, ev: Evidence) -> Finding:
    """Whether ``premise`` held on the run of ``ev``: the run's evidence first, then the
    client's files."""
    from_run = _RUN_EVIDENCE[premise.kind](premise, ev)
    if from_run is not None and from_run.present is not None:
        return from_run
    return _static(premise, ev, from_run)


def used(premise: Premise, ev: Evidence) -> bool:
    """Whether the runs of ``ev`` relied on ``premise``: a flag one passed, a command one
    typed, a variable one set, a hook field of an event that fired. A variant of the probe
    that passes no such flag (a counterfactual) rests nothing on it."""
    runs = ev.runs.values()
    if premise.kind == "flag":
        return any(premise.name in run.argv for run in runs)
    if premise.kind == "command":
        typed = f"/{premise.name.lstrip('/')}"
        return any(run.invocation.prompt.lstrip().startswith(typed) for run in runs)
    if premise.kind == "env":
        return any(premise.name in run.invocation.env or premise.name in run.env
                   for run in runs)
    if premise.kind == "hook_input":
        return any(premise.event is None or c.get("event") == premise.event
                   for c in ev.hook_calls)
    return True


def premise_checks(premises: Iterable[Premise], claims: Iterable[str], ev: Evidence,
                   checks: Checks) -> None:
    """One check per premise the runs relied on (``used``) and claim resting on it
    (``Checks.premise``)."""
    every = tuple(claims)
    for premise in premises:
        if not used(premise, ev):
            continue
        found = establish(premise, ev)
        resting = premise.claims or every
        for claim in resting:
            suffix = f".{claim.removeprefix('probe.')}" if len(resting) > 1 else ""
            checks.premise(f"premise.{premise.slug}{suffix}", claim,
                           f"this version has {premise.words} ({premise.why})",
                           present=found.present, role=premise.role,
                           expected=f"{premise.words} present", observed=found.observed,
                           evidence=found.evidence)


def _static(premise: Premise, ev: Evidence, from_run: Finding | None) -> Finding:
    needle = premise.looked_for
    found = ev.mentions(needle) if needle is not None else None
    ran = f"{from_run.observed}; " if from_run is not None else ""
    if found is None:
        return Finding(None, f"{ran}not decided: " + (
            "no run showed it, and the client's files were not searched" if needle is not None
            else "no run showed it, and the client's files cannot decide it (its name is "
                 "written there for other reasons)"),
            from_run.evidence if from_run is not None else "the runs")
    sha = str((ev.client_mentions or {}).get("binary_sha256") or ev.client.get("binary_sha256"))
    said = "mentions" if found else "never mentions"
    return Finding(found, f"{ran}the installed client (sha256 {sha[:12]}…) {said} {needle}",
                   _STATIC)


def _flag(premise: Premise, ev: Evidence) -> Finding | None:
    for name, run in ev.runs.items():
        if premise.name not in run.argv:
            continue
        refused = _refusal(run.stderr + run.stdout, premise.name)
        if refused:
            return Finding(False, refused, f"run {name}: its output")
        if ev.requests(name, kind=None):
            return Finding(True, f"run {name} passed {premise.name} and reached the mock",
                           f"run {name}: argv and journal")
    return None


def _refusal(output: str, flag: str) -> str | None:
    for line in output.splitlines():
        if flag in line and re.search(r"unknown option|unrecognized option|unexpected argument",
                                      line, re.IGNORECASE):
            return line.strip()[:200]
    return None


def _hook_input(premise: Premise, ev: Evidence) -> Finding | None:
    calls = [c for c in ev.hook_calls
             if premise.event is None or c.get("event") == premise.event]
    if not calls:
        return None
    where = f"hook calls{'' if premise.event is None else ' of ' + premise.event}"
    carrying = [c for c in calls if (c.get("input") or {}).get(premise.name) is not None]
    if carrying:
        return Finding(True, f"{len(carrying)} of {len(calls)} {where} carry {premise.name}",
                       f"recorded {where}: input.{premise.name}")
    return Finding(False, f"none of the {len(calls)} {where} carries {premise.name} (absent or "
                          "null in every input)", f"recorded {where}: input.{premise.name}")


def _tool(premise: Premise, ev: Evidence) -> Finding | None:
    offering = [r for r in ev.requests(None) if isinstance((r.get("body") or {}).get("tools"), list)
                and r["body"]["tools"]]
    if not offering:
        return None
    for record in offering:
        names = {t.get("name") for t in record["body"]["tools"] if isinstance(t, dict)}
        if premise.name in names:
            return Finding(True, f"request {record.get('seq')} offers {premise.name}",
                           "journal: the tools of the loop's requests")
    return Finding(False, f"none of the {len(offering)} loop requests offering tools offers "
                          f"{premise.name}", "journal: the tools of the loop's requests")


def _command(premise: Premise, ev: Evidence) -> Finding | None:
    for name, run in ev.runs.items():
        said = _said_by(run)
        for pattern in _UNKNOWN_COMMAND:
            refusal = pattern.format(name=premise.name.lstrip("/"))
            if refusal in said:
                return Finding(False, f"run {name}: {refusal}", f"run {name}: its output")
    typed = f"/{premise.name.lstrip('/')}"
    for name, run in ev.runs.items():
        if run.invocation.prompt.lstrip().startswith(typed) and ev.requests(name, kind=None):
            return Finding(True, f"run {name} typed {typed}, the client took it without "
                                 "refusal and reached the mock", f"run {name}: its output and "
                                                                  "journal")
    return None


def _said_by(run: Any) -> str:
    result = run.result or {}
    return "\n".join([run.stdout, run.stderr, str(result.get("result") or "")])


def _event(premise: Premise, ev: Evidence) -> Finding | None:
    kind, _, subtype = premise.name.partition("/")
    for name, run in ev.runs.items():
        if run.output.of_type(kind, subtype or None):
            return Finding(True, f"run {name} printed {premise.name}", f"run {name}: stdout events")
    return None


def _silent(premise: Premise, ev: Evidence) -> Finding | None:
    """A kind no run can show missing: a version ignores it without a word."""
    return None


_RUN_EVIDENCE = {"flag": _flag, "env": _silent, "setting": _silent, "hook_input": _hook_input,
                 "hook_output": _silent, "tool": _tool, "command": _command, "event": _event}
