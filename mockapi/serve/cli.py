"""``python -m mockapi`` and ``loopprobe serve``: the mock as a standalone server."""

from __future__ import annotations

import argparse
import os
import secrets
import sys
from datetime import UTC, datetime
from pathlib import Path

from mockapi.journal.write import Journal, JournalError
from mockapi.script.scenario import Scenario, ScenarioError, load_scenario

__all__ = ["add_serve_arguments", "default_journal_path", "main", "serve"]


def _var(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name.isidentifier():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return name, value


def default_journal_path(port: int, now: datetime | None = None) -> Path:
    """Where ``serve`` journals without ``--journal``: one file per server, out of the
    working directory, under the user's state directory: ``$XDG_STATE_HOME`` (else
    ``~/.local/state``) ``/loopprobe/journals/<UTC start time>-<port>.jsonl``."""
    state = os.environ.get("XDG_STATE_HOME", "")
    base = Path(state) if os.path.isabs(state) else Path.home() / ".local" / "state"
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    return base / "loopprobe" / "journals" / f"{stamp}-{port}.jsonl"


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scenario", help="scenario file (.yaml/.yml/.json); default: no rules")
    parser.add_argument("--journal",
                        help="JSONL file the requests are appended to (default: a new file "
                        "per server under $XDG_STATE_HOME, else ~/.local/state, "
                        "/loopprobe/journals/<UTC time>-<port>.jsonl; printed at start)")
    parser.add_argument("--host", default="127.0.0.1", help="default: %(default)s")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port (default)")
    parser.add_argument("--allow-remote", action="store_true",
                        help="allow binding a non-loopback address")
    parser.add_argument("--var", action="append", type=_var, default=[], metavar="NAME=VALUE",
                        help="placeholder value, e.g. --var workspace=/tmp/ws (repeatable)")
    parser.add_argument("--fsync", action="store_true",
                        help="fsync every journal line before replying")
    parser.add_argument("--admin-token", help="the x-loopprobe-admin-token /_mock/ requires "
                        "(default: a random one, printed at start)")
    parser.add_argument("--lenient", action="store_true",
                        help="answer requests the real API refuses (empty messages, unpaired "
                        "tool_use/tool_result, ...) instead of refusing them with its 400")
    parser.add_argument("--admin-open", action="store_true",
                        help="serve /_mock/ without a token (any local process, or a page "
                        "your browser opens, could then script the mock)")


def serve(args: argparse.Namespace) -> int:
    # imported here: add_serve_arguments is used by CLIs that must not load the server stack
    from mockapi.serve.app import MockApp
    from mockapi.serve.server import NonLoopbackRefused, bind_socket, mock_server, own_hosts

    if args.admin_open and args.admin_token:
        print("mockapi: --admin-open and --admin-token exclude each other", file=sys.stderr)
        return 2
    token = None if args.admin_open else args.admin_token or secrets.token_urlsafe(24)
    try:
        scenario = load_scenario(args.scenario) if args.scenario else Scenario()
    except ScenarioError as error:
        print(f"mockapi: {error}", file=sys.stderr)
        return 2
    try:
        sock = bind_socket(args.host, args.port, allow_remote=args.allow_remote)
    except NonLoopbackRefused as error:
        print(f"mockapi: {error}", file=sys.stderr)
        return 2
    except OSError as error:
        print(f"mockapi: cannot listen on {args.host}:{args.port}: {error.strerror}",
              file=sys.stderr)
        return 2
    host, port = sock.getsockname()[:2]
    journal_path = Path(args.journal) if args.journal else default_journal_path(port)
    try:
        if not args.journal:
            journal_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        journal = Journal(journal_path, fsync=args.fsync)
    except JournalError as error:
        sock.close()
        print(f"mockapi: {error}", file=sys.stderr)
        return 2
    except OSError as error:
        sock.close()
        print(f"mockapi: cannot write the journal {journal_path}: "
              f"{error.strerror or error}", file=sys.stderr)
        return 2
    shown_host = f"[{host}]" if ":" in host else host
    try:
        app = MockApp(scenario, journal, context=dict(args.var), admin_token=token,
                      lenient=args.lenient,
                      allowed_hosts=own_hosts(f"http://{shown_host}:{port}"))
    except ScenarioError as error:  # a placeholder without a --var
        journal.close()
        sock.close()
        print(f"mockapi: {error}", file=sys.stderr)
        return 2
    if args.allow_remote and args.host not in ("127.0.0.1", "::1", "localhost"):
        print(f"mockapi: WARNING: listening on {host}, reachable from other machines",
              file=sys.stderr)
    shown = f"[{host}]" if ":" in host else host
    print(f"mockapi listening on http://{shown}:{port} (scenario: {scenario.name}, "
          f"journal: {journal_path.absolute()})", flush=True)
    if token is None:
        print("mockapi: WARNING: /_mock/ is open (--admin-open): any local process can "
              "install scenarios", file=sys.stderr, flush=True)
    elif not args.admin_token:
        print(f"mockapi admin token: {token} (send it as x-loopprobe-admin-token to "
              f"/_mock/)", flush=True)
    server = mock_server(app)
    cap = app.connection_cap
    if cap is not None and cap.max < cap.configured:
        print(f"mockapi: serving at most {cap.max} connections at once ({cap.why})",
              file=sys.stderr, flush=True)
    try:
        server.run(sockets=[sock])
    finally:
        journal.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mockapi",
                                     description="A scripted, recording Messages API mock.")
    add_serve_arguments(parser)
    return serve(parser.parse_args(argv))
