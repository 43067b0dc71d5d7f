"""What is decided before a probe runs: the binary of each of its runs, whether the client
can run it at all (``absent``: this version lacks what it needs; ``not_applicable``: the kind
does), and its script in the client's terms.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from probes.clients.base import Capabilities, Client, ClientBinary
from probes.core.outcome import ProbeOutcome
from probes.core.probe import Probe, served_scenario, with_tool_names

__all__ = ["Decided", "as_the_client_sees_it", "decide_before_running"]

# the probe as served, the binary of each invocation, the loop tools' names as the client
# names them
Decided = tuple[Probe, Mapping[str, ClientBinary], Mapping[str, str]]


def decide_before_running(probe: Probe, client: Client,
                          binary: ClientBinary) -> Decided | ProbeOutcome:
    """What a run of ``probe`` needs, or the outcome that ends it before any run: a verdict
    of ``absent`` or ``not_applicable``, or an error (an install of another version failed,
    what the client offers could not be read: nothing decided)."""
    try:
        binaries = _binaries(probe, client, binary)
    except Exception as error:  # an install of another version failed
        return ProbeOutcome(probe, None, [], None, error=f"{type(error).__name__}: {error}")
    # its Claude Code requests told apart as ever (probes.core.probe.HARNESS_CLASSIFIER)
    probe = replace(probe, scenario=served_scenario(probe.scenario))
    try:
        cannot = _not_applicable(probe, client, binary, binaries)
    except Exception as error:  # what the client offers could not be read: nothing decided
        return ProbeOutcome(probe, None, [], None, error=f"{type(error).__name__}: {error}")
    if cannot is not None:
        verdict, why = cannot
        if verdict == "absent":
            return ProbeOutcome(probe, None, [], None, absent=why)
        return ProbeOutcome(probe, None, [], None, not_applicable=why)
    probe, tool_names = as_the_client_sees_it(probe, client.capabilities(binary))
    return probe, binaries, tool_names


def _binaries(probe: Probe, client: Client, binary: ClientBinary) -> dict[str, ClientBinary]:
    """The binary of each invocation: the probe's, or the other version it names."""
    found = {binary.version: binary}
    for invocation in probe.invocations:
        version = invocation.client_version
        if version is not None and version not in found:
            found[version] = client.install(version)
    return {i.name: found[i.client_version or binary.version] for i in probe.invocations}


def _not_applicable(probe: Probe, client: Client, binary: ClientBinary,
                    binaries: Mapping[str, ClientBinary]) -> tuple[str, str] | None:
    """Why the probe cannot run on this client, and which verdict that is: ``absent`` when
    only this version lacks what it needs (the kind has it in other versions),
    ``not_applicable`` when the client kind lacks it."""
    runs = [(binary, probe.capabilities(), "")]
    runs += [(binaries[i.name], sorted(i.capabilities()), f" (run {i.name})")
             for i in probe.invocations if binaries[i.name] != binary]
    for one, needed, run in runs:
        capabilities = client.capabilities(one)
        if capabilities.lacking(needed):
            verdict = ("absent" if capabilities.only_this_version_lacks(needed)
                       else "not_applicable")
            return verdict, (f"{one.name} {one.version}{run} lacks what this probe needs: "
                             f"{capabilities.explain(needed)}")
    return None


def as_the_client_sees_it(probe: Probe, capabilities: Capabilities) -> tuple[Probe, Mapping[str, str]]:
    """A loop-tools probe's script in the client's terms: each scripted call named as the
    client names the tool (the loop tools over MCP), and a script that tells no requests
    apart (``plain``) told the client's apart, as the client declares (Claude Code's warmups,
    side requests). Any other probe is served as written."""
    if not any(i.loop_tools for i in probe.invocations):
        return probe, {}
    scenario, names = probe.scenario, capabilities.tool_names
    if names:
        scenario = with_tool_names(scenario, names)
    if capabilities.classifier and scenario.classifier == "plain":
        scenario = scenario.model_copy(update={"classifier": capabilities.classifier})
    return (replace(probe, scenario=scenario) if scenario is not probe.scenario else probe), names
