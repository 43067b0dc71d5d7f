"""What the shipped GitHub Actions workflow computes: ``python -m probes.scale.workflow plan``.

Reads ``VERSIONS`` (comma-separated; empty: the newest ``LATEST`` published versions),
``BASELINE`` and ``SHARDS`` from the environment and prints the job matrix as
``versions=[...]`` and ``shards=[...]`` lines for ``$GITHUB_OUTPUT``. The baseline is always
probed too, so every diff has both sides.
"""

from __future__ import annotations

import json
import os
import sys

from probes.clients.npm import InstallError
from probes.clients.registry import DEFAULT_KIND, client_for, parse_client_spec
from probes.scale.bisect import order_versions

__all__ = ["main", "plan"]


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


def main(argv: list[str]) -> int:
    if argv[1:] != ["plan"]:
        print("usage: python -m probes.scale.workflow plan", file=sys.stderr)
        return 2
    env = os.environ
    try:
        result = plan(env.get("VERSIONS", ""), int(env.get("LATEST") or 1),
                      env.get("BASELINE", ""), int(env.get("SHARDS") or 1),
                      env.get("CLIENT") or "claude-code")
    except (ValueError, InstallError) as error:
        print(f"probes.scale.workflow: {error}", file=sys.stderr)
        return 2
    for key, value in result.items():
        print(f"{key}={json.dumps(value)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
