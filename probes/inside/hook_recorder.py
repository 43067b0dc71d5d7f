"""A hook command for probes: carries one hook call to the harness and its answer back.

Run by the client as ``python -I -S hook_recorder.py SOCKET``, stdlib only, so it starts fast
and needs nothing from the caller's environment. It sends the hook's stdin to the harness's
collector (``probes.run.collector``) on the Unix socket, which records the call on the host,
applies the probe's hook policy (``probes.run.hook_policy``), holds the call as the policy says
and answers; the answer is printed as the hook's output. Nothing is kept in the sandbox.
"""

from __future__ import annotations

import json
import socket
import sys

STDIN_LIMIT = 4 * 1024 * 1024
ANSWER_TIMEOUT = 900.0


def main(argv: list[str]) -> int:
    raw = sys.stdin.buffer.read(STDIN_LIMIT).decode("utf-8", "replace")
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as channel:
            channel.settimeout(ANSWER_TIMEOUT)
            channel.connect(argv[1])
            channel.sendall((json.dumps({"stream": "hook"}) + "\n"
                             + json.dumps({"stdin": raw}) + "\n").encode())
            answer = channel.makefile("rb").readline()
    except (BrokenPipeError, ConnectionResetError):  # closed on the call, unread: refused
        answer = b""
    except OSError as error:
        print(f"loopprobe hook recorder: the harness is unreachable at {argv[1]}: {error}",
              file=sys.stderr)
        return 1
    if not answer:  # refused: more reporters at once than the harness serves (the client's)
        print(f"loopprobe hook recorder: the harness at {argv[1]} closed the call unanswered "
              "(refused; its evidence says why)", file=sys.stderr)
        return 1
    try:
        output = json.loads(answer).get("output")
    except (ValueError, AttributeError):
        print(f"loopprobe hook recorder: unreadable answer {answer[:200]!r}", file=sys.stderr)
        return 1
    if output is not None:
        print(json.dumps(output))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
