"""What a probe is: a scenario, client invocations in one sandbox, and checks stating claims.

A probe is declarative; adding one is adding one module to ``probes/catalog``.
Reports group probes (one JSON file per report). This module is also the authoring
API for your own probes: it re-exports ``Invocation`` and ``Hooks``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import BaseModel

from mockapi.script.replies import ToolUseBlock
from mockapi.script.scenario import Scenario
from probes.core.checks import Checks
from probes.core.evidence import Evidence
from probes.core.invocation import CAPABILITIES, Hooks, Invocation
from probes.core.names import NAME_LENGTH, CatalogError, described, simple_name_problem
from probes.core.premises import Premise, premise_mentions
from probes.core.provenance import Source, unstated
from probes.core.setup import UserSetup

__all__ = ["HARNESS_CLASSIFIER", "HARNESS_MESSAGE_IDS", "CatalogError", "Claim", "Counterfactual",
           "Hooks", "Invocation", "Premise", "Probe", "ReportSpec", "Source", "served_scenario",
           "shown_scenario", "with_tool_names"]

# Probes script Claude Code: its side requests (titles, summaries…), warmups, compactions and
# subagents are told apart, as they always were here (the mock's own default is "plain")
HARNESS_CLASSIFIER = "claude-code"
# Evidence reproduces byte for byte, reply ids too (a client echoes them, the tool runner
# continues a thread by them): msg_loopprobe_<seq>, as they always were here (the mock's own
# default is unguessable; a thread still answers only the key that created it)
HARNESS_MESSAGE_IDS = "sequential"
_HARNESS_DEFAULTS = {"classifier": HARNESS_CLASSIFIER, "message_ids": HARNESS_MESSAGE_IDS}


def served_scenario(scenario: Scenario) -> Scenario:
    """A probe's scenario as the harness serves it: with ``HARNESS_CLASSIFIER`` and
    ``HARNESS_MESSAGE_IDS`` unless the probe names its own (the tool runner's ``plain``)."""
    update = {k: v for k, v in _HARNESS_DEFAULTS.items() if k not in scenario.model_fields_set}
    return scenario.model_copy(update=update) if update else scenario


def with_tool_names(scenario: Scenario, names: Mapping[str, str]) -> Scenario:
    """The scenario with each scripted tool call named as the client names that tool
    (``Capabilities.tool_names``: ``add`` -> ``mcp__loop__add``); calls of other tools, and
    everything else, as scripted."""
    def renamed(value: Any) -> Any:
        if isinstance(value, ToolUseBlock):
            return value.model_copy(update={"name": names[value.name]}) \
                if value.name in names else value
        if isinstance(value, BaseModel):
            update = {key: new for key in type(value).model_fields
                      if (new := renamed(old := getattr(value, key))) is not old}
            return value.model_copy(update=update) if update else value
        if isinstance(value, list | tuple):
            items = [renamed(item) for item in value]
            return type(value)(items) if any(a is not b for a, b in zip(items, value,
                                                                       strict=True)) else value
        return value

    result: Scenario = renamed(scenario)
    return result


def shown_scenario(scenario: Scenario) -> dict[str, Any]:
    """A served scenario as a report shows it: what was scripted, without the defaults — the
    harness's own for the classifier and the message ids, so that reports keep the shape
    they always had."""
    shown: dict[str, Any] = scenario.model_dump(mode="json", exclude_defaults=True)
    for name, value in _HARNESS_DEFAULTS.items():
        shown.pop(name, None)
        if getattr(scenario, name) != value:
            shown[name] = getattr(scenario, name)
    return shown


def _expect(owner: str, name: str, value: object, kind: type | tuple[type, ...],
            what: str) -> None:
    if not isinstance(value, kind):
        raise CatalogError(f"{owner}: {name} must be {what}, got {described(value)}")


def _expect_text(owner: str, name: str, value: object) -> None:
    if not isinstance(value, str) or not value.strip():
        raise CatalogError(f"{owner}: {name} must be a non-empty string, got {described(value)}")


def _expect_items(owner: str, name: str, value: object, kind: type, what: str) -> None:
    """``value`` is a tuple (a list is taken too) of ``kind`` only."""
    if not isinstance(value, tuple | list):
        raise CatalogError(f"{owner}: {name} must be a tuple of {what}, got {described(value)}")
    for index, item in enumerate(value):
        if not isinstance(item, kind):
            raise CatalogError(f"{owner}: {name}[{index}] must be {what}, got {described(item)}")


def _unique(owner: str, what: str, names: list[str]) -> None:
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise CatalogError(f"{owner}: {what} must be unique, but {', '.join(map(repr, repeated))} "
                           "repeat")


@dataclass(frozen=True)
class Claim:
    id: str
    statement: str
    source: Source = field(default_factory=unstated)
    # what the statement expects beyond what its source states, and why we expect it
    beyond_source: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id.strip():
            raise CatalogError(f"Claim: id must be a non-empty string, got {described(self.id)}")
        owner = f"Claim {self.id!r}"
        _expect_text(owner, "statement", self.statement)
        _expect(owner, "source", self.source, Source,
                "a Source(...) (probes.provenance: from_analysis, project_expectation, unstated)")
        _expect(owner, "beyond_source", self.beyond_source, (str, type(None)), "a string or None")


@dataclass(frozen=True)
class Counterfactual:
    """A variant of a probe in which the claimed behaviour cannot happen: run on the real
    client, each of ``claims`` must then fail (shows the checks can fail on real behaviour)."""

    name: str
    description: str  # the setup, and why the behaviour cannot happen in it
    claims: tuple[str, ...]
    change: Callable[[Probe], Probe]

    def __post_init__(self) -> None:
        # its probe's name, then ".counterfactual.<name>", names the variant's sandbox
        problem = simple_name_problem("counterfactual", self.name)
        if problem:
            raise CatalogError(problem)
        owner = f"Counterfactual {self.name!r}"
        _expect_text(owner, "description", self.description)
        _expect_items(owner, "claims", self.claims, str, "a claim id (str)")
        if not self.claims:
            raise CatalogError(f"{owner}: claims must name at least one claim that the variant "
                               "makes fail, got ()")
        if not callable(self.change):
            raise CatalogError(f"{owner}: change must be a function of the probe returning the "
                               f"changed probe, got {described(self.change)}")

    def probe(self, original: Probe) -> Probe:
        changed = self.change(original)
        return replace(changed, name=f"{original.name}.counterfactual.{self.name}",
                       counterfactuals=())


@dataclass(frozen=True)
class Probe:
    name: str
    title: str
    claims: tuple[Claim, ...]
    scenario: Scenario
    invocations: tuple[Invocation, ...]
    check: Callable[[Evidence, Checks], None]
    fixtures: dict[str, str] = field(default_factory=dict)
    hooks: Hooks | None = None  # None: no hook is installed at all
    boundaries: tuple[str, ...] = ()
    # capabilities beyond what the invocations imply (see probes.core.invocation.CAPABILITIES);
    # a client that lacks one is not applicable
    requires: tuple[str, ...] = ()
    counterfactuals: tuple[Counterfactual, ...] = ()
    # whether its requests count in the version's fingerprint: probes that give the client
    # tools or flags of their own (an MCP server, --json-schema, streamed input) do not, so
    # fingerprints compare versions on the same plain runs whatever the suite grew to hold
    fingerprinted: bool = True
    # strings the runner looks up in the installed client's files (static evidence, kept in
    # Evidence.client_mentions), for the reach of a feature no run can show absent: a hook
    # output field or an environment variable a version ignores silently
    client_mentions: tuple[str, ...] = ()
    # what its runs and checks rely on the version having (probes.core.premises): each is
    # established per run, from the run or the client's files, before a check may contradict
    premises: tuple[Premise, ...] = ()
    # the user's own folders copied into the sandbox (a workspace, ~/.claude, plugins)
    setup: UserSetup | None = None
    # raised by one whenever a change to the probe (a check, a rule, a run) may change what it
    # concludes on some version: results kept from an earlier revision (an almanac's state,
    # probes.scale.almanac_state) are then superseded and the probe is run again
    revision: int = 1

    def __post_init__(self) -> None:
        # its sandbox is a folder named after it; a counterfactual's name adds to its probe's
        problem = simple_name_problem("probe", self.name, longest=2 * NAME_LENGTH)
        if problem:
            raise CatalogError(problem)
        owner = f"Probe {self.name!r}"
        _expect_text(owner, "title", self.title)
        _expect_items(owner, "claims", self.claims, Claim, "a Claim(...)")
        _unique(owner, "claim ids", [c.id for c in self.claims])
        _expect(owner, "scenario", self.scenario, Scenario, "a mockapi Scenario(...)")
        _expect_items(owner, "invocations", self.invocations, Invocation, "an Invocation(...)")
        if not self.invocations:
            raise CatalogError(f"{owner}: invocations must hold at least one Invocation(...), "
                               "got ()")
        names = [i.name for i in self.invocations]
        _unique(owner, "invocation names", names)
        for index, invocation in enumerate(self.invocations):
            if invocation.resume_from is not None and invocation.resume_from not in names[:index]:
                raise CatalogError(f"{owner}: invocation {invocation.name!r} resumes from "
                                   f"{invocation.resume_from!r}, expected one of the invocations "
                                   f"before it: {names[:index]}")
        if not callable(self.check):
            raise CatalogError(f"{owner}: check must be a function (evidence, checks), got "
                               f"{described(self.check)}")
        _expect(owner, "fixtures", self.fixtures, Mapping, "a dict of file name to content")
        for path, content in self.fixtures.items():
            _expect(owner, f"fixtures[{path!r}]", content, str, "the file's content (str)")
        _expect(owner, "hooks", self.hooks, (Hooks, type(None)), "Hooks(...) or None")
        _expect_items(owner, "boundaries", self.boundaries, str, "a string")
        _expect_items(owner, "requires", self.requires, str, "a capability name (str)")
        unknown = sorted(set(self.requires) - set(CAPABILITIES))
        if unknown:
            raise CatalogError(f"{owner} requires unknown capabilities {unknown}; "
                               f"known: {', '.join(CAPABILITIES)}")
        _expect_items(owner, "counterfactuals", self.counterfactuals, Counterfactual,
                      "a Counterfactual(...)")
        _unique(owner, "counterfactual names", [cf.name for cf in self.counterfactuals])
        claims = {c.id for c in self.claims}
        for counterfactual in self.counterfactuals:
            if not set(counterfactual.claims) <= claims:
                raise CatalogError(f"{owner}: counterfactual {counterfactual.name!r} names claims "
                                   f"{sorted(set(counterfactual.claims) - claims)} that are not "
                                   f"the probe's: {sorted(claims)}")
        _expect(owner, "fingerprinted", self.fingerprinted, bool, "True or False")
        _expect_items(owner, "client_mentions", self.client_mentions, str, "a string")
        _expect_items(owner, "premises", self.premises, Premise, "a Premise(...)")
        _unique(owner, "premises", [p.slug for p in self.premises])
        for premise in self.premises:
            if not set(premise.claims) <= claims:
                raise CatalogError(f"{owner}: premise {premise.name!r} names claims "
                                   f"{sorted(set(premise.claims) - claims)} that are not the "
                                   f"probe's: {sorted(claims)}")
        _expect(owner, "setup", self.setup, (UserSetup, type(None)), "UserSetup(...) or None")
        if not isinstance(self.revision, int) or isinstance(self.revision, bool) \
                or self.revision < 1:
            raise CatalogError(f"{owner}: revision must be a whole number >= 1, got "
                               f"{described(self.revision)}")
        for needle in self.client_mentions:
            if not needle.strip() or not needle.isascii() or len(needle) > 100:
                raise CatalogError(f"{owner}: client_mentions holds {needle!r}, expected a "
                                   "non-blank ASCII string of at most 100 characters")

    @property
    def looked_up(self) -> tuple[str, ...]:
        """Every string the runner looks up in the client's files: the probe's own
        ``client_mentions`` and its premises'."""
        return tuple(dict.fromkeys((*self.client_mentions, *premise_mentions(self.premises))))

    def capabilities(self) -> list[str]:
        """Everything a client must support to run this probe, in a stable order."""
        needed = set(self.requires).union(*(i.capabilities() for i in self.invocations))
        if self.hooks is not None:
            needed.add("hooks")
        if self.setup is not None and self.setup.plugin_dirs:
            needed.add("plugin_dir")
        return [name for name in CAPABILITIES if name in needed]


@dataclass(frozen=True)
class ReportSpec:
    name: str
    title: str
    probes: tuple[Probe, ...]
    summary: str = ""

    def __post_init__(self) -> None:
        # its evidence is written to files and folders named after it
        problem = simple_name_problem("report", self.name)
        if problem:
            raise CatalogError(problem)
        owner = f"ReportSpec {self.name!r}"
        _expect_text(owner, "title", self.title)
        _expect(owner, "summary", self.summary, str, "a string")
        _expect_items(owner, "probes", self.probes, Probe, "a Probe(...)")
        if not self.probes:
            raise CatalogError(f"{owner}: probes must hold at least one Probe(...), got ()")
        _unique(owner, "probe names", [p.name for p in self.probes])
        _unique(owner, "claim ids across its probes", [c.id for p in self.probes for c in p.claims])
