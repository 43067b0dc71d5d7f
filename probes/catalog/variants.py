"""Building a probe's counterfactuals: variants in which the claimed behaviour cannot happen.

Run on the real client, each variant must make the claims it names fail through their own
checks (the run itself completes normally). That shows the checks can fail on real
behaviour, not only on edited evidence. Variants that concern one run keep only that run,
which keeps them cheap; the claims they do not name are not judged. Each probe declares its
counterfactuals beside it; these helpers build them without mutating the catalog's objects.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal

from mockapi import Rule
from mockapi.script.replies import Reply
from probes.core.probe import Hooks, Probe
from probes.core.streamed import Step

__all__ = ["answering", "recording_hooks", "scripted_rule", "with_rules", "with_runs",
           "with_steps", "without_hook_rules"]


def scripted_rule(probe: Probe, rule_id: str) -> Rule:
    """The rule ``rule_id`` of ``probe``'s scenario."""
    for rule, found in zip(probe.scenario.rules, probe.scenario.rule_ids(), strict=True):
        if found == rule_id:
            return rule
    raise KeyError(f"probe {probe.name!r} has no rule {rule_id!r}; "
                   f"it has {probe.scenario.rule_ids()}")


def answering(probe: Probe, rule_id: str, *replies: Reply,
              repeat: Literal["once", "always"] | None = None) -> Rule:
    """The rule ``rule_id`` of ``probe`` (same id and match) answering with other replies."""
    old = scripted_rule(probe, rule_id)
    form: dict[str, Any] = {"reply": replies[0]} if len(replies) == 1 else {"replies": list(replies)}
    return Rule(id=old.id, match=old.match, repeat=repeat or old.repeat, **form)


def with_rules(probe: Probe, changed: Sequence[Rule] = (), *, added: Sequence[Rule] = ()) -> Probe:
    """``probe`` with the rules of the same ids replaced by ``changed``, and ``added`` first."""
    by_id = {rule.id: rule for rule in changed}
    ids = probe.scenario.rule_ids()
    unknown = sorted(str(i) for i in set(by_id) - set(ids))
    if unknown:
        raise KeyError(f"probe {probe.name!r} has no rules {unknown}")
    rules = [*added, *(by_id.get(i, rule) for i, rule in zip(ids, probe.scenario.rules, strict=True))]
    return replace(probe, scenario=probe.scenario.model_copy(update={"rules": rules}))


def with_runs(probe: Probe, keep: Sequence[str] | None = None,
              changes: Mapping[str, Mapping[str, Any]] | None = None) -> Probe:
    """``probe`` with only the invocations named in ``keep`` (all by default), each changed."""
    names = [i.name for i in probe.invocations]
    unknown = sorted((set(keep or ()) | set(changes or {})) - set(names))
    if unknown:
        raise KeyError(f"probe {probe.name!r} has no invocations {unknown}; it has {names}")
    kept = [i for i in probe.invocations if keep is None or i.name in keep]
    return replace(probe, invocations=tuple(replace(i, **(changes or {}).get(i.name, {}))
                                            for i in kept))


def with_steps(probe: Probe, run: str, *steps: Step, **changes: Any) -> Probe:
    """``probe`` whose streamed run ``run`` writes ``steps`` instead of its own."""
    invocation = next(i for i in probe.invocations if i.name == run)
    assert invocation.streamed is not None, (probe.name, run)
    script = replace(invocation.streamed, steps=steps, **changes)
    return with_runs(probe, changes={run: {"streamed": script}})


def without_hook_rules(probe: Probe, event: str, action: str) -> Probe:
    """``probe`` whose hook policy for ``event`` no longer has rules with ``action``."""
    assert probe.hooks is not None, probe.name
    rules = probe.hooks.policy.get(event, [])
    rules = [rules] if isinstance(rules, Mapping) else list(rules)
    if not any(r.get("action") == action for r in rules):
        raise KeyError(f"probe {probe.name!r} has no {event} hook rule with action {action!r}")
    policy = {**probe.hooks.policy, event: [r for r in rules if r.get("action") != action]}
    return replace(probe, hooks=Hooks(policy))


def recording_hooks(probe: Probe) -> Probe:
    """``probe`` whose hooks only record (every call still logged, nothing decided)."""
    return replace(probe, hooks=Hooks())
