"""Atomic writes: every file the harness writes appears whole or not at all."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = ["write_bytes", "write_json", "write_lines", "write_text"]


def write_text(path: Path, text: str) -> Path:
    """Write ``text`` to a temporary file in the same directory, then rename it into place."""
    return write_bytes(path, text.encode("utf-8"))


def write_bytes(path: Path, data: bytes) -> Path:
    """Write ``data`` to a temporary file in the same directory, then rename it into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


def write_json(path: Path, data: Any) -> Path:
    """JSON as the reports use it: sorted keys, two-space indent, UTF-8, a final newline."""
    return write_text(path, json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def write_lines(path: Path, lines: Iterable[str]) -> Path:
    return write_text(path, "".join(line + "\n" for line in lines))
