"""What a GitHub Actions job renders or reads of ours: its job summary and its step outputs.

Both take text a stranger wrote (a fork's case file and baseline, the client's output, a
committed report), so each has one writer here and nothing else appends to them.

The job summary ($GITHUB_STEP_SUMMARY) is Markdown that GitHub renders with some HTML
allowed (``<img>``, ``<details>``, styles): any ``<`` or ``&`` that reaches it could draw
or hide what the maintainers read. ``markdown_inline`` makes a value one line of literal
text, fit for a table cell or a list item (HTML and Markdown escaped, pipes and backticks
too); ``markdown_document`` makes a Markdown file loopprobe wrote (``MATRIX.md``) safe to
show whole: no ``<`` or ``&`` survives unescaped (so no tag, comment or entity), nor a
``[`` (so no link or image of its text). Escaping is done everywhere, code spans included,
where an escape shows as written: a parser's idea of where a code span ends is never trusted.

The step outputs ($GITHUB_OUTPUT) are ``name=value`` lines; a line break in a value, or a
``=`` or ``<<`` in a name, would let a value forge another output (``until=`` after a
forged ``until=`` wins): ``github_output_text`` refuses them, whatever the command.

The job's log is read too, and by the runner first: a line of it that starts with ``::`` is
a workflow command (``::error file=...::`` draws an annotation on the pull request,
``::add-mask::`` hides text, ``::set-output`` sets an output where the runner still takes
it). What loopprobe prints quotes what the client and the case file said, so inside
GitHub Actions ``workflow_commands_stopped`` stops the runner's commands for as long as
loopprobe runs, with a token nobody else knows (GitHub's ``stop-commands``), and starts
them again when it ends.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import sys
import unicodedata
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from probes.report.format import ReportError

__all__ = ["SHOWN_CHARS", "OutputRefused", "append_github_outputs", "append_summary",
           "github_output_text", "markdown_document", "markdown_inline",
           "workflow_commands_stopped"]

SHOWN_CHARS = 300  # a table cell's value is cut here: a summary is read, not searched
_INLINE = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "\\": "\\\\", "|": "\\|",
                         "`": "'", "[": "\\[", "]": "\\]", "*": "\\*", "_": "\\_",
                         "~": "\\~"})
_DOCUMENT = str.maketrans({"&": "&amp;", "<": "&lt;", "[": "\\[", "]": "\\]"})
# what starts a block when a value opens a list item's text: a heading, a quote, a list,
# a rule, a setext underline (a fence's "`" and "~" are escaped anywhere)
_BLOCK_START = re.compile(r"[#>+\-=]|\d{1,9}[.)](?=\s|$)")
_OUTPUT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
# bidirectional overrides and isolates: text that reads in another order than it is written
_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f")


class OutputRefused(ReportError):
    """A step output that would forge another one; said in one line (exit 2, as a file
    that is not what loopprobe expects)."""


def _visible(text: str) -> str:
    """``text`` with control and bidirectional-override characters shown as U+FFFD."""
    return "".join("\ufffd" if ch in _BIDI or (unicodedata.category(ch) == "Cc"
                                               and ch not in "\n\t") else ch for ch in text)


def markdown_inline(value: Any, limit: int | None = SHOWN_CHARS) -> str:
    """``value`` (a string, or anything JSON shows) as one line of literal Markdown text,
    cut at ``limit`` characters: nothing in it renders as HTML, a link, an image,
    emphasis, code, a table's column or a block."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False,
                                                           sort_keys=True, default=str)
    text = _visible(" ".join(text.split()))  # every Unicode line break and space run: one space
    if limit is not None and len(text) > limit:
        text = text[:limit] + "…"
    escaped = text.translate(_INLINE)
    start = _BLOCK_START.match(escaped)
    if start:  # the character that would make a block, escaped (`1.` as `1\.`)
        escaped = f"{escaped[:start.end() - 1]}\\{escaped[start.end() - 1:]}"
    return escaped


def markdown_document(text: str) -> str:
    """A Markdown document loopprobe wrote (its headings, lists and tables kept), with every
    ``<``, ``&``, ``[`` and ``]`` escaped and control characters replaced: no HTML, entity,
    link or image of its text renders. An escape inside a code span shows as written."""
    return _visible(text).translate(_DOCUMENT)


def append_summary(path: Path, markdown: str) -> Path:
    """Append ``markdown`` (made by ``markdown_inline`` and ``markdown_document`` pieces) to
    the job summary file, after what other steps wrote there."""
    with path.open("a", encoding="utf-8") as handle:
        handle.write(markdown.rstrip("\n") + "\n\n")  # a blank line: the next part starts apart
    return path


def github_output_text(outputs: Mapping[str, str]) -> str:
    """``name=value`` lines of ``outputs``, or ``OutputRefused`` naming the first name or
    value that could forge another output (nothing is written then)."""
    for name, value in outputs.items():
        if not isinstance(name, str) or not _OUTPUT_NAME.fullmatch(name):
            raise OutputRefused(f"output name {name!r}: expected letters, digits, '-' and '_' "
                                "(starting with a letter or '_'), as GitHub names outputs")
        if not isinstance(value, str):
            raise OutputRefused(f"output {name}: expected a string, found "
                                f"{type(value).__name__}")
        breaking = next((ch for ch in value
                         if unicodedata.category(ch) in ("Cc", "Zl", "Zp")), None)
        if breaking is not None:
            shown = unicodedata.name(breaking, f"U+{ord(breaking):04X}")
            raise OutputRefused(f"output {name}: expected one line of text, found {shown} "
                                f"in {value[:120]!r}: refused (it could forge another output)")
    return "".join(f"{name}={value}\n" for name, value in outputs.items())


def append_github_outputs(path: Path, outputs: Mapping[str, str]) -> Path:
    """Append ``outputs`` to the step outputs file in one write, every one checked first."""
    text = github_output_text(outputs)
    with path.open("a", encoding="utf-8") as handle:  # appended: other steps' outputs stay
        handle.write(text)
    return path


@contextmanager
def workflow_commands_stopped(environ: Mapping[str, str] = os.environ) -> Iterator[str | None]:
    """Inside GitHub Actions (``GITHUB_ACTIONS=true``), no line printed in the block is a
    workflow command: ``::stop-commands::TOKEN`` before it and ``::TOKEN::`` after it,
    whatever ends it. Both go to stderr (the runner reads the two streams as one log, and
    stdout may be data a step parses); the token (yielded; None outside Actions) is random,
    so nothing printed in the block can start the commands again early."""
    if environ.get("GITHUB_ACTIONS") != "true":
        yield None
        return
    token = f"loopprobe-{secrets.token_hex(16)}"
    sys.stdout.flush()
    print(f"::stop-commands::{token}", file=sys.stderr, flush=True)
    try:
        yield token
    finally:
        sys.stdout.flush()
        print(f"::{token}::", file=sys.stderr, flush=True)
