"""Every text written where CI renders it is escaped or refused (issue 44, item 6).

The job summary is rendered by a real Markdown renderer (markdown-it-py, CommonMark with raw
HTML on, GFM tables and strikethrough, every link target accepted) and the HTML it gives is
parsed: no element or attribute of a hostile text survives, and the text still reads as it
was written. The step outputs refuse a line break in a value and a name that is no name;
``almanac-plan`` refuses an almanac.json whose range could forge an output, and a malformed
almanac file or state is one line naming the file, exit 2.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
import yaml
from markdown_it import MarkdownIt

from probes import cli
from probes.gate.baseline import ExpectedFailure
from probes.gate.gate import GateResult, GateRow, RunNote, UnreadableFolder
from probes.gate.summary import summary_markdown
from probes.report.github_ci import (
    OutputRefused,
    append_github_outputs,
    markdown_document,
    markdown_inline,
)

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
FAKE = {"LOOPPROBE_CLIENTS": "fake-loop=tests.fakeloop:FakeLoopClient",
        "CLIENT": "fake-loop", "CATALOG": "tests.fakeloop.catalog"}

HOSTILE = [
    pytest.param('<img src=x onerror="alert(1)">', id="img-onerror"),
    pytest.param("<script>alert(document.cookie)</script>", id="script"),
    pytest.param("<details open><summary>all passed ✅</summary>hidden</details>", id="details"),
    pytest.param("<!-- everything after this is hidden -->", id="html-comment"),
    pytest.param('<a href="javascript:alert(1)">docs</a>', id="anchor-javascript"),
    pytest.param("[click me](javascript:alert(1))", id="markdown-link-javascript"),
    pytest.param("![pixel](https://tracker.example/p.png)", id="markdown-image"),
    pytest.param("[ref]\n\n[ref]: javascript:alert(1)", id="reference-definition"),
    pytest.param("<https://evil.example>", id="autolink"),
    pytest.param("&lt;script&gt; &#60;b&#62; &amp;", id="entities"),
    pytest.param('<div style="position:fixed;top:0">**Passed**</div>', id="styled-div"),
    pytest.param("x | y || `code` \\| ~~gone~~ *em* __strong__", id="table-and-emphasis"),
    pytest.param("# Passed\n\n---\n> quoted\n1. listed", id="blocks-on-new-lines"),
    pytest.param("1. looks like a list", id="ordered-list-start"),
    pytest.param("- nested bullet", id="bullet-start"),
    pytest.param("```\n<b>fenced</b>\n```", id="fence"),
    pytest.param("line\u2028break\u2029para\x85next\rreturn\x0bvt", id="unicode-line-breaks"),
    pytest.param("abc\u202edcba\x00\x1b[31m", id="bidi-and-control"),
    pytest.param("<svg/onload=alert(1)>", id="svg"),
    pytest.param("<<script>script>alert(1)<</script>/script>", id="nested-script"),
]

# what the summary's own Markdown may render to: nothing a text could add
_ALLOWED_TAGS = {"h2", "h3", "p", "strong", "em", "table", "thead", "tbody", "tr", "th", "td",
                 "ul", "li", "code"}


class _Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.comments: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))

    def handle_comment(self, data: str) -> None:
        self.comments.append(data)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _render(markdown: str) -> tuple[list[Any], _Elements]:
    """markdown-it's tokens of ``markdown`` and the elements of the HTML it renders, with
    raw HTML allowed and every link target accepted (GitHub decides those itself)."""
    md = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
    md.validateLink = lambda url: True  # type: ignore[method-assign]
    tokens = md.parse(markdown)
    elements = _Elements()
    elements.feed(md.render(markdown))
    return tokens, elements


def _flat(tokens: list[Any]) -> list[Any]:
    return [t for token in tokens for t in [token, *(token.children or [])]]


def _assert_inert(markdown: str) -> _Elements:
    tokens, elements = _render(markdown)
    kinds = {t.type for t in _flat(tokens)}
    assert not kinds & {"html_inline", "html_block", "link_open", "image", "code_block",
                        "fence", "s_open", "blockquote_open", "hr", "ordered_list_open"}, kinds
    assert not [t for t in tokens if t.type == "bullet_list_open" and t.level > 0]
    assert not elements.comments
    bad = [(tag, attrs) for tag, attrs in elements.tags
           if tag not in _ALLOWED_TAGS or [a for a in attrs if a[0] != "style"]]
    assert not bad, bad
    return elements


def _row(text: str, version: str = "2.1.90", outcome: Any = "failed") -> GateRow:
    return GateRow(version=version, case=f"case {text}", expectation=f"exp {text}",
                   claim=f"claim {text}", outcome=outcome, verdict="contradicted",
                   reason=f"reason {text}", check=None, expected={"want": text},
                   observed=[text, 1], statement=text, report="r", baseline_reason=text)


def _result(text: str) -> GateResult:
    """A gate result with ``text`` in every field the summary shows: case and expectation
    names, the versions, a baseline's reasons, what the client's run observed, notes."""
    entry = ExpectedFailure(case=f"c {text}", expectation=f"e {text}", versions="*",
                            reason=f"because {text}")
    return GateResult(
        rows=[_row(text), _row(text, outcome="stale"), _row(text, outcome="harness_problem"),
              _row(text, version=f"2.1.91 {text}", outcome="expected_failure")],
        versions=["2.1.90", f"2.1.91 {text}"], folders={},
        unreadable=[UnreadableFolder(f"v {text}", f"folder {text}", f"error {text}"),
                    UnreadableFolder(text, text, text)],  # a list item's text begins with it
        unused_baseline=[entry], notes=[RunNote("2.1.90", f"case {text}", "egress_refused",
                                                f"tried {text}")])


@pytest.mark.parametrize("text", HOSTILE)
def test_no_hostile_text_renders_in_the_gate_summary(text: str) -> None:
    """Before: `<img onerror>`, `<script>`, comments, links and images passed through."""
    markdown = summary_markdown(_result(text))
    assert "<" not in markdown  # whatever the renderer: no tag, comment or autolink can start
    elements = _assert_inert(markdown)
    shown = " ".join(elements.text)
    visible = " ".join(text.split())  # one line: every line break is a space
    visible = "".join("\ufffd" if c in "\u202e\x00\x1b" else c for c in visible)
    assert visible.replace("`", "'") in shown  # read as it was written


@pytest.mark.parametrize("text", HOSTILE)
def test_no_hostile_text_renders_from_a_markdown_document(text: str) -> None:
    """MATRIX.md (what a merge and the almanac put in the summary) holds what the client's
    runs observed; its headings, lists and tables stay, nothing of the text renders."""
    document = ("## Matrix\n\n| claim | 2.1.90 |\n|---|---|\n| `probe.x` | contradicted |\n\n"
                f"- `probe.x` on 2.1.90: contradicted — observed {text}\n")
    safe = markdown_document(document)
    tokens, _ = _render(safe)
    kinds = {t.type for t in _flat(tokens)}
    assert {"heading_open", "table_open", "bullet_list_open"} <= kinds
    assert not kinds & {"html_inline", "html_block", "link_open", "image"}, kinds
    _, elements = _render(safe)
    assert not elements.comments
    assert all(tag in _ALLOWED_TAGS | {"pre", "hr", "blockquote", "ol", "s", "h1"}
               and all(a[0] == "style" for a in attrs) for tag, attrs in elements.tags)


def test_inline_text_keeps_what_the_summary_showed_before() -> None:
    assert markdown_inline("a | b\nc `d`") == "a \\| b c 'd'"
    assert markdown_inline("2.1.90") == "2.1.90"
    assert markdown_inline(["Bash", 1]) == '\\["Bash", 1\\]'
    assert markdown_inline("x" * 400).endswith("…") and len(markdown_inline("x" * 400)) == 301


# ---- step outputs ---------------------------------------------------------------------------

FORGING = [
    pytest.param({"until": "9\nuntil=0"}, id="newline"),
    pytest.param({"until": "9\runtil=0"}, id="carriage-return"),
    pytest.param({"until": "9\r\nuntil=0"}, id="crlf"),
    pytest.param({"until": "9\x0buntil=0"}, id="vertical-tab"),
    pytest.param({"until": "9\x0cuntil=0"}, id="form-feed"),
    pytest.param({"until": "9\x85until=0"}, id="next-line"),
    pytest.param({"until": "9\u2028until=0"}, id="line-separator"),
    pytest.param({"until": "9\u2029until=0"}, id="paragraph-separator"),
    pytest.param({"until": "9\x00"}, id="nul"),
    pytest.param({"until=0\nx": "9"}, id="newline-in-name"),
    pytest.param({"until=0": "9"}, id="equals-in-name"),
    pytest.param({"until<<EOF": "0"}, id="heredoc-in-name"),
    pytest.param({"x<<ghadelimiter_1\nuntil=0\nghadelimiter_1": "y"}, id="heredoc-delimiter"),
    pytest.param({"": "9"}, id="empty-name"),
    pytest.param({"a b": "9"}, id="space-in-name"),
]


@pytest.mark.parametrize("outputs", FORGING)
def test_the_outputs_writer_refuses_what_would_forge_an_output(
        tmp_path: Path, outputs: dict[str, str]) -> None:
    path = tmp_path / "github-output"
    path.write_text("earlier=1\n")
    with pytest.raises(OutputRefused) as refused:
        append_github_outputs(path, outputs)
    said = str(refused.value)
    assert "\n" not in said and "\r" not in said and "expected" in said
    assert path.read_text() == "earlier=1\n"  # nothing of a refused set is written


def test_the_outputs_writer_appends_plain_values(tmp_path: Path) -> None:
    path = tmp_path / "github-output"
    append_github_outputs(path, {"first-bad-version": "", "shards": "[1, 2]",
                                 "covered_from": "2.0.0", "v": "a=b<<c"})
    assert path.read_text().splitlines() == ["first-bad-version=", "shards=[1, 2]",
                                             "covered_from=2.0.0", "v=a=b<<c"]


# ---- the workflows and the action write only through the writers ------------------------------

_RAW_WRITE = re.compile(r"\$\{?(GITHUB_OUTPUT|GITHUB_STEP_SUMMARY|GITHUB_ENV|GITHUB_PATH)\b")
_THROUGH_WRITER = re.compile(r"--(github-output|summary) \"\$(GITHUB_OUTPUT|GITHUB_STEP_SUMMARY)\"")


def _run_steps() -> list[tuple[str, str]]:
    found = []
    for path in [*WORKFLOWS, ROOT / "action.yml"]:
        document = yaml.safe_load(path.read_text())
        jobs = document.get("jobs") or {"action": {"steps": document["runs"]["steps"]}}
        for job, body in jobs.items():
            found += [(f"{path.name}:{job}:{step.get('id') or step.get('name')}", step["run"])
                      for step in body.get("steps", []) if "run" in step]
    return found


def test_no_step_writes_github_files_but_through_the_writers() -> None:
    """Before: `plan >> "$GITHUB_OUTPUT"`, `cat MATRIX.md >> "$GITHUB_STEP_SUMMARY"` and a sed
    of the almanac's section appended what they printed or read, unchecked."""
    for where, script in _run_steps():
        for line in script.splitlines():
            if _RAW_WRITE.search(line.split("#")[0]):
                rest = _THROUGH_WRITER.sub("", line)
                rest = rest.replace('-n "${GITHUB_STEP_SUMMARY:-}"', "")
                assert not _RAW_WRITE.search(rest), f"{where}: {line.strip()}"


# ---- almanac-plan on a committed almanac.json, and a malformed almanac state ----------------

def _plan(tmp_path: Path, almanac: str | bytes, **env: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "almanac.json"
    path.write_bytes(almanac if isinstance(almanac, bytes) else almanac.encode())
    return subprocess.run([sys.executable, "-m", "probes.scale.workflow", "almanac-plan"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **FAKE,
                               "ALMANAC": str(path), "ALMANAC_STATE": str(tmp_path / "none"),
                               **env})


def _almanac(first: Any = "1", last: Any = "3") -> dict[str, Any]:
    document = json.loads((ROOT / "reports" / "almanac.json").read_text())
    document["range"] = {**document["range"], "first": first, "last": last}
    return document


def test_almanac_plan_refuses_a_range_that_would_forge_an_output(tmp_path: Path) -> None:
    """Before: `from=3` then `until=0` was printed, and the later `until=` won."""
    done = _plan(tmp_path, json.dumps(_almanac(last="3\nuntil=0")))
    assert done.returncode == 2 and done.stdout == "", done.stdout
    assert done.stderr.count("\n") == 1 and "almanac.json: range/last" in done.stderr
    assert "expected a version name" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(("almanac", "said"), [
    pytest.param(json.dumps({**_almanac(), "range": "x"}),
                 "range: 'x' is not of type 'object'", id="range-not-an-object"),
    pytest.param(json.dumps(_almanac(last=3)), "range/last: 3 is not of type 'string'",
                 id="range-last-a-number"),
    pytest.param(json.dumps(_almanac())[:5000], "not JSON", id="truncated"),
    pytest.param("[" * 100_000 + "]" * 100_000, "nested deeper than", id="nested-too-deep"),
    pytest.param('{"kind": "almanac", "schema_version": 1}', "(top level)", id="no-range"),
])
def test_almanac_plan_says_what_is_wrong_with_almanac_json_in_one_line(
        tmp_path: Path, almanac: str, said: str) -> None:
    """Before: a traceback (TypeError, KeyError), or a JSON error naming no file."""
    done = _plan(tmp_path, almanac)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert str(tmp_path / "almanac.json") in done.stderr and said in done.stderr, done.stderr


def test_the_nightly_plan_step_fails_on_a_forging_almanac_and_writes_no_output(
        tmp_path: Path) -> None:
    """The nightly's own step, run as the job runs it, on a committed almanac.json whose
    range.last holds a line break."""
    workflow = yaml.safe_load((ROOT / ".github/workflows/loopprobe-nightly.yml").read_text())
    step = next(s["run"] for s in workflow["jobs"]["almanac-plan"]["steps"]
                if s.get("id") == "plan")
    (tmp_path / "almanac.json").write_text(json.dumps(_almanac(last="3\nuntil=0")))
    outputs = tmp_path / "github-output"
    done = subprocess.run(["bash", "-e", "-c", "source() { :; }\n" + step], cwd=ROOT,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **FAKE,
                               "ALMANAC": str(tmp_path / "almanac.json"),
                               "ALMANAC_STATE": str(tmp_path / "none"),
                               "GITHUB_OUTPUT": str(outputs), "SHARDS": "2"})
    assert done.returncode == 2, done.stderr
    assert "until=0" not in (outputs.read_text() if outputs.exists() else "")


def _state(tmp_path: Path, line: str) -> Path:
    state = tmp_path / "state"
    (state / "cells").mkdir(parents=True)
    (state / "build.json").write_text(json.dumps({"client": "fake-loop", "since": "1",
                                                  "grid": 4}))
    good = {"version": "1", "binary_sha256": "0" * 64, "folder": "1/a1-1", "screen": "s"}
    (state / "cells" / "1.runs.jsonl").write_text(json.dumps(good) + "\n" + line + "\n")
    return state


@pytest.mark.parametrize(("line", "said"), [
    pytest.param('{"version": "1", "x": ' + "[" * 100_000 + "]" * 100_000 + "}",
                 "nested deeper than", id="nested-too-deep"),
    pytest.param('{"version": "1", "folder": "f", "probe": "p", "attempt": "two"}',
                 "attempt: expected an integer", id="attempt-a-string"),
    pytest.param('{"version": "1", "folder": "f", "probe": "p", "claims": ["x"]}',
                 "claims: expected an object", id="claims-a-list"),
    pytest.param('{"version": "../../x", "folder": "f", "screen": "s"}',
                 "version: expected a version name", id="version-a-path"),
    pytest.param('[1, 2]', "expected an object, found list", id="not-an-object"),
])
def test_a_malformed_almanac_state_line_is_the_users_file_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str, said: str) -> None:
    """Before: a deep line was "internal error (a bug in loopprobe, not a verdict)", as was
    a field of another type (ValueError, TypeError)."""
    state = _state(tmp_path, line)
    code = cli.main(["almanac", "merge", str(state), "--state", str(tmp_path / "merged")])
    err = capsys.readouterr().err
    assert code == 2 and "internal error" not in err, err
    assert err.count("\n") == 1 and said in err, err
    assert f"{state / 'cells' / '1.runs.jsonl'}: line 2" in err, err


def test_a_torn_state_line_is_still_read_past(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """A kill mid-write leaves a torn line: the build resumes past it (not refused)."""
    state = _state(tmp_path, '{"version": "1", "folder": "1/a1-2", "probe": "p", "cla')
    assert cli.main(["almanac", "merge", str(state), "--state", str(tmp_path / "m")]) == 0


@pytest.mark.parametrize("command", [
    ["almanac", "retract", "--version", "1", "--folder", "1/a1-1", "--reason", "r"],
    ["almanac", "publish", "--until", "1"],
], ids=["retract", "publish"])
@pytest.mark.parametrize("build", ["[1]", '{"client": "fake-loop", "grid": "4"}', "{"],
                         ids=["a-list", "grid-a-string", "truncated"])
def test_a_malformed_build_file_is_the_users_file_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str],
        build: str) -> None:
    """Before: an AttributeError or a JSON error escaped as an "internal error"."""
    state = _state(tmp_path, "")
    (state / "build.json").write_text(build)
    code = cli.main([*command, "--state", str(state), "--work", str(tmp_path / "w"),
                     "--out", str(tmp_path / "o")] if command[1] == "publish"
                    else [*command, "--state", str(state)])
    err = capsys.readouterr().err
    assert code == 2 and "internal error" not in err and err.count("\n") == 1, err
    assert f"{state / 'build.json'}: expected" in err, err


HOSTILE_CASES = """\
loopprobe: cases/1
name: fork
title: A fork's case file
cases:
  - name: answers
    title: The client answers
    prompt: say hello
    model:
      - text: "<img src=x onerror=alert(1)> [x](javascript:alert(1))"
    expect:
      - result: {subtype: "<img src=x onerror=alert(1)><!-- all passed -->"}
"""


def test_the_actions_check_step_writes_a_fork_case_files_text_escaped(tmp_path: Path) -> None:
    """The action's own check step, as a runner runs it, on the fake loop: the expectation
    a fork wrote reaches the job summary as text. Before: `<img onerror>` as it was."""
    from tests.test_action import check_step_on_the_fake_loop
    done = check_step_on_the_fake_loop(tmp_path, HOSTILE_CASES)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    summary = (tmp_path / "summary.md").read_text()
    assert "onerror=alert(1)" in summary and "<" not in summary
    _assert_inert(summary)
    assert "failed=true" in (tmp_path / "github-output").read_text().splitlines()
