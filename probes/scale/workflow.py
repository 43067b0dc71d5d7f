"""What the shipped GitHub Actions workflows compute: ``python -m probes.scale.workflow plan``
and ``python -m probes.scale.workflow almanac-plan``.

``plan`` reads ``VERSIONS`` (comma-separated; empty: the newest ``LATEST`` published
versions), ``BASELINE`` and ``SHARDS`` from the environment and prints the job matrix as
``versions=[...]`` and ``shards=[...]`` lines for ``$GITHUB_OUTPUT``. The baseline is always
probed too, so every diff has both sides.

``almanac-plan`` (the nightly's almanac) reads ``ALMANAC`` (the published almanac.json),
``SHARDS`` and ``CLIENT`` and prints ``until=`` (the newest published version), ``from=`` (the
last version the almanac covers: the build goes on from the grid version at or before it)
``covered_from=`` (the first it covers: the published almanac keeps its whole range) and
``shards=[...]``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from probes.clients.npm import InstallError
from probes.clients.registry import DEFAULT_KIND, client_for, parse_client_spec
from probes.core.safe_read import read_json
from probes.scale.bisect import order_versions

__all__ = ["almanac_plan", "main", "plan"]


def plan(versions: str, latest: int, baseline: str, shards: int,
         client: str = "claude-code") -> dict[str, list[str] | list[int]]:
    chosen = [v.strip() for v in versions.split(",") if v.strip()]
    for spec in [*chosen, *([baseline] if baseline else [])]:
        parse_client_spec(spec)  # refused here as the matrix would refuse it
    if not chosen:
        kind = client_for(client)
        prefix = "" if client == DEFAULT_KIND else f"{client}@"
        chosen = [prefix + v for v in order_versions(kind.published())[-latest:]]
    if baseline and baseline not in chosen:
        chosen.insert(0, baseline)
    if shards < 1:
        raise ValueError(f"SHARDS: expected a count >= 1, found {shards}")
    return {"versions": chosen, "shards": list(range(1, shards + 1))}


def almanac_plan(almanac: Path, shards: int, client: str = "claude-code"
                 ) -> dict[str, str | list[int]]:
    """The nightly almanac's jobs: the newest version, where the published almanac ends."""
    if shards < 1:
        raise ValueError(f"SHARDS: expected a count >= 1, found {shards}")
    newest = order_versions(client_for(client).published())[-1]
    start = covered = ""
    if almanac.is_file():
        document = read_json(almanac)
        if isinstance(document, dict):
            start, covered = str(document["range"]["last"]), str(document["range"]["first"])
    return {"until": newest, "from": start, "covered_from": covered,
            "shards": list(range(1, shards + 1))}


def main(argv: list[str]) -> int:
    if argv[1:] not in (["plan"], ["almanac-plan"]):
        print("usage: python -m probes.scale.workflow plan|almanac-plan", file=sys.stderr)
        return 2
    env = os.environ
    try:
        result: dict[str, Any] = plan(
            env.get("VERSIONS", ""), int(env.get("LATEST") or 1), env.get("BASELINE", ""),
            int(env.get("SHARDS") or 1), env.get("CLIENT") or "claude-code") \
            if argv[1] == "plan" else almanac_plan(
                Path(env.get("ALMANAC") or "reports/almanac.json"),
                int(env.get("SHARDS") or 1), env.get("CLIENT") or "claude-code")
    except (ValueError, InstallError) as error:
        print(f"probes.scale.workflow: {error}", file=sys.stderr)
        return 2
    for key, value in result.items():
        print(f"{key}={value if isinstance(value, str) else json.dumps(value)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
