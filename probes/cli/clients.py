"""``clients``: install, list and prune the client versions the probes run."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from probes.cli.common import (
    CLIENT_HELP,
    EXIT_HARNESS,
    EXIT_PASSED,
    HarnessInputError,
    command,
    say,
)
from probes.clients import InstallError, all_clients, parse_client_spec
from probes.clients.info_run import allow_uncontained
from probes.clients.npm import cache_root
from probes.clients.registry import prune_installs

__all__ = ["add_clients", "cmd_clients_install", "cmd_clients_list", "cmd_clients_prune"]


def cmd_clients_install(args: argparse.Namespace) -> int:
    status = 0
    # every spec checked before the first install (a bad one: exit 2, nothing fetched)
    wanted = [parse_client_spec(spec) for spec in args.specs]
    if args.no_sandbox:
        allow_uncontained()  # where bubblewrap cannot start, --version runs on the host
    for client, version in wanted:
        try:
            binary = client.install(version)
        except InstallError as error:
            print(f"loopprobe: {error}", file=sys.stderr)
            status = EXIT_HARNESS
            continue
        say(f"{binary.name}@{binary.version} {binary.platform} {binary.entry} "
             f"sha256:{binary.sha256}")
    return status



def cmd_clients_list(args: argparse.Namespace) -> int:
    found = [binary for client in all_clients() for binary in client.installed()]
    if args.json:
        print(json.dumps([{**binary.identity(), "root": str(binary.root)} for binary in found],
                         indent=2))
        return 0
    if not found:
        say(f"no clients installed under {cache_root() / 'clients'}")
    for binary in found:
        say(f"{binary.name}@{binary.version}\t{binary.platform}\t{binary.sha256}\t{binary.entry}")
    return 0



def cmd_clients_prune(args: argparse.Namespace) -> int:
    if args.keep < 0:
        raise HarnessInputError(f"--keep: expected a count >= 0, found {args.keep}")
    removed = prune_installs(args.keep, dry_run=args.dry_run)
    verb = "would remove" if args.dry_run else "removed"
    for binary in removed:
        say(f"{verb} {binary.name}@{binary.version} ({binary.root})")
    if not removed:
        say(f"nothing to prune: at most {args.keep} install(s) of each client kind")
    return EXIT_PASSED



def add_clients(commands: Any) -> None:
    """``clients install``, ``list``, ``prune``"""
    clients = command(commands, "clients", help="install and list client versions")
    client_commands = clients.add_subparsers(dest="clients_command", required=True)
    install = command(client_commands, "install", help="install exact client versions")
    install.add_argument("specs", nargs="+", metavar="KIND@VERSION", help=CLIENT_HELP)
    install.add_argument("--no-sandbox", action="store_true",
                         help="where bubblewrap cannot start, run the fresh install's --version "
                              "on this host, uncontained (it is contained otherwise)")
    install.set_defaults(func=cmd_clients_install)
    listing = command(client_commands, "list", help="list installed client versions")
    listing.add_argument("--json", action="store_true", help="machine-readable output")
    listing.set_defaults(func=cmd_clients_list)
    prune = command(client_commands,
        "prune", help="remove all but the most recently used installs (~330 MB each)")
    prune.add_argument("--keep", type=int, default=3,
                       help="installs to keep per client kind (default: %(default)s)")
    prune.add_argument("--dry-run", action="store_true", help="only say what would go")
    prune.set_defaults(func=cmd_clients_prune)
