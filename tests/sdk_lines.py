"""One venv per release line of the official ``anthropic`` Python SDK, for the conformance tests.

    python -m tests.sdk_lines install     # create or reuse .venv-sdk/anthropic-<version>/

A venv is reused when its stamp file names the exact version it was installed with and
its python still exists; otherwise it is (re)created and ``anthropic==<version>`` installed.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

__all__ = ["INSTALL_COMMAND", "LINES", "SdkLineMissing", "install", "python_for", "venv_dir"]

LINES = {"2.x": "2.16.0", "0.x": "0.125.0"}
ROOT = Path(__file__).resolve().parent.parent
VENVS = ROOT / ".venv-sdk"
STAMP = ".loopprobe-anthropic-version"
INSTALL_COMMAND = "python -m tests.sdk_lines install"
INSTALL_TIMEOUT = 600


class SdkLineMissing(RuntimeError):
    pass


def venv_dir(line: str) -> Path:
    return VENVS / f"anthropic-{LINES[line]}"


def _python(venv: Path) -> Path:
    return venv / "bin" / "python"


def _ready(line: str) -> bool:
    venv = venv_dir(line)
    stamp = venv / STAMP
    return (_python(venv).exists() and stamp.exists()
            and stamp.read_text().strip() == LINES[line])


def python_for(line: str) -> Path:
    """The python of the venv holding this SDK line; raises SdkLineMissing if not installed."""
    if line not in LINES:
        raise KeyError(f"unknown SDK line {line!r}; known: {', '.join(LINES)}")
    if not _ready(line):
        raise SdkLineMissing(
            f"anthropic=={LINES[line]} (SDK line {line}) is not installed in "
            f"{venv_dir(line)}; run `{INSTALL_COMMAND}` from {ROOT}")
    return _python(venv_dir(line))


def install(line: str) -> Path:
    venv, version = venv_dir(line), LINES[line]
    if _ready(line):
        print(f"sdk_lines: {line}: anthropic=={version} already in {venv}", file=sys.stderr)
        return _python(venv)
    print(f"sdk_lines: {line}: installing anthropic=={version} into {venv}", file=sys.stderr)
    (venv / STAMP).unlink(missing_ok=True)
    if not _python(venv).exists():
        subprocess.run(["python3", "-m", "venv", str(venv)], check=True, timeout=INSTALL_TIMEOUT)
    python = str(_python(venv))
    subprocess.run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                    f"anthropic=={version}"], check=True, timeout=INSTALL_TIMEOUT)
    found = subprocess.run([python, "-c", "import anthropic; print(anthropic.__version__)"],
                           check=True, timeout=60, capture_output=True, text=True).stdout.strip()
    if found != version:
        raise RuntimeError(f"{venv}: expected anthropic {version}, imported {found}")
    (venv / STAMP).write_text(version + "\n")
    return _python(venv)


def main(argv: list[str]) -> int:
    if argv != ["install"]:
        print(f"usage: {INSTALL_COMMAND}", file=sys.stderr)
        return 2
    for line in LINES:
        install(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
