"""The mock on its own: ``serve`` it, or ``record`` a real endpoint as a scenario it replays."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from mockapi.serve.cli import add_serve_arguments
from probes.cli.common import EXIT_HARNESS, check_out, command, mark_output_files

__all__ = ["add_record", "add_serve", "cmd_record", "cmd_serve"]


def cmd_serve(args: argparse.Namespace) -> int:
    from mockapi.serve.cli import serve
    return serve(args)



def cmd_record(args: argparse.Namespace) -> int:
    # imported here: the proxy brings the server stack (uvicorn, httpx)
    from mockapi.record import UpstreamError, check_upstream, record
    try:
        check_upstream(args.upstream)
    except UpstreamError as error:
        print(f"loopprobe record: {error}", file=sys.stderr)
        return EXIT_HARNESS
    check_out(Path(args.out))
    return record(args.upstream, Path(args.out), host=args.host, port=args.port,
                  classifier=args.classifier)


def add_serve(commands: Any) -> None:
    """``serve``"""
    serve_cmd = command(commands, "serve", help="run the Messages API mock")
    add_serve_arguments(serve_cmd)
    mark_output_files(serve_cmd, "--journal")
    serve_cmd.set_defaults(func=cmd_serve)



def add_record(commands: Any) -> None:
    """``record``"""
    recorder = command(
        commands, "record", help="a recording proxy in front of a Messages API endpoint: "
                                 "relays every request, writes a scenario the mock replays "
                                 "and the journal")
    recorder.add_argument("--upstream", required=True,
                          help="the endpoint's base URL, e.g. https://api.anthropic.com")
    recorder.add_argument("--out", default="recording",
                          help="folder for scenario.yaml and journal.jsonl (default: %(default)s)")
    recorder.add_argument("--host", default="127.0.0.1", help="default: %(default)s (loopback only)")
    recorder.add_argument("--port", type=int, default=0, help="0 picks a free port (default)")
    recorder.add_argument("--classifier", choices=("claude-code", "plain"), default="claude-code",
                          help="how request kinds are told apart (default: %(default)s)")
    recorder.set_defaults(func=cmd_record)
