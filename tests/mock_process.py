"""Reading a ``python -m mockapi`` subprocess's first line without ever blocking forever."""

from __future__ import annotations

import os
import selectors
import subprocess
import time

__all__ = ["read_line"]


def read_line(process: subprocess.Popen[bytes], timeout: float) -> str:
    assert process.stdout is not None
    fd = process.stdout.fileno()
    buffer = b""
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while b"\n" not in buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not selector.select(left):
                raise TimeoutError(f"the mock printed no address within {timeout}s: {buffer!r}")
            chunk = os.read(fd, 4096)
            if not chunk:
                raise RuntimeError(f"the mock exited before listening: {buffer!r}")
            buffer += chunk
    return buffer.split(b"\n", 1)[0].decode()
