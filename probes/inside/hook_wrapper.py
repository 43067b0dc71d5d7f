"""Runs one of the user's own hook commands as the client would, and reports the run.

The harness rewrites each ``command`` hook of the user's setup (a plugin's hooks.json, a
settings file's ``hooks``) to ``python -I -S hook_wrapper.py SOCKET SOURCE -- COMMAND``: the
client runs it where it would have run the hook, and this runs ``COMMAND`` with ``/bin/sh -c``
(what the client's own hook runner uses: Node's ``shell: true``), with the same stdin,
environment and working directory, passes its stdout, stderr and exit code through
unchanged, and sends the collector (``probes.run.collector``) one record: the event, the input,
the exit code, stdout, stderr and the duration. A wrapper rather than the client's debug
output: every version runs hook commands, but what its debug channel prints differs from
version to version (and is not printed at all in print mode by some).

Stdlib only, so it starts fast and needs nothing from the caller's environment. If the
harness is unreachable the hook still runs and its result still reaches the client: the
record is lost, never the user's hook.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

# kept in the record (the collector takes lines of at most 1 MiB): stdout and stderr each, and
# the input when it is larger (a tool's whole response)
STREAM_LIMIT = 64 * 1024
INPUT_LIMIT = 512 * 1024
SEND_TIMEOUT = 10.0
_SHELL = "/bin/sh"
_child: subprocess.Popen[bytes] | None = None


def _report(socket_path: str, record: dict[str, object]) -> None:
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as channel:
            channel.settimeout(SEND_TIMEOUT)
            channel.connect(socket_path)
            channel.sendall((json.dumps({"stream": "hook_run"}) + "\n"
                             + json.dumps(record) + "\n").encode())
    except OSError as error:
        print(f"loopprobe hook wrapper: the harness is unreachable at {socket_path}: {error}",
              file=sys.stderr)


def _forward(signum: int, _frame: object) -> None:
    """The client stopping the hook (its timeout) stops the user's command too."""
    if _child is not None and _child.poll() is None:
        _child.send_signal(signum)


def main(argv: list[str]) -> int:
    global _child
    if len(argv) != 5 or argv[3] != "--":
        print("usage: hook_wrapper.py SOCKET SOURCE -- COMMAND", file=sys.stderr)
        return 1
    socket_path, source, command = argv[1], argv[2], argv[4]
    stdin = sys.stdin.buffer.read()
    try:
        payload = json.loads(stdin)
    except ValueError:
        payload = None
    started = time.time()
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, _forward)
    try:
        _child = subprocess.Popen([_SHELL, "-c", command], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out, err = _child.communicate(stdin)
        code = _child.returncode
    except OSError as error:  # the shell itself could not start
        out, err, code = b"", f"{_SHELL}: {error}\n".encode(), 127
    finished = time.time()
    sys.stdout.buffer.write(out)
    sys.stdout.buffer.flush()
    sys.stderr.buffer.write(err)
    sys.stderr.buffer.flush()
    event = payload.get("hook_event_name") if isinstance(payload, dict) else None
    _report(socket_path, {
        "event": event if isinstance(event, str) else "unknown", "source": source,
        "command": command, "cwd": os.getcwd(),
        "input": payload if isinstance(payload, dict) and len(stdin) <= INPUT_LIMIT
        else {"unparsed_stdin" if not isinstance(payload, dict) else "stdin_cut":
              stdin[:INPUT_LIMIT].decode("utf-8", "replace")},
        "exit_code": code, "signal": -code if code < 0 else None,
        "stdout": out[:STREAM_LIMIT].decode("utf-8", "replace"),
        "stderr": err[:STREAM_LIMIT].decode("utf-8", "replace"),
        "stdout_bytes": len(out), "stderr_bytes": len(err),
        "started": started, "duration": round(finished - started, 3)})
    # a command killed by a signal: the client sees what a shell would report
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
