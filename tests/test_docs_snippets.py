"""Every code block of README.md, CONTRIBUTING.md and docs/*.md runs or is checked.

``python`` blocks are executed (their ``test_*`` functions called with the ``mock_api``
fixture; a block written against ``http://127.0.0.1:8080`` talks to a mock serving the
scenario shown before it); ``sh`` lines name a known program, their ``loopprobe`` (and
``python -m mockapi``) commands are parsed by the real parser, and every repository path
they name exists; ``yaml`` and ``json`` blocks parse, scenarios through the scenario loader;
``text`` blocks are output or diagrams, never commands, and the loader's error listing is
what the loader says. Every repository path the prose names exists. The checkers are shown
failing on planted bad snippets.
"""

from __future__ import annotations

import contextlib
import io
import json
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from mockapi import Scenario, ScenarioError, load_scenario, parse_scenario

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
LANGUAGES = ("python", "py", "sh", "yaml", "json", "text")
# what a shell line may run besides the repository's own scripts
PROGRAMS = {"loopprobe", "python", "python3", "pip", "curl", "claude", "mkdocs"}
SERVED_URL = "http://127.0.0.1:8080"


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    language: str
    text: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks_of(path: Path) -> list[Block]:
    """The fenced blocks of a Markdown file, in order."""
    found: list[Block] = []
    current: list[str] | None = None
    start, language = 0, ""
    for number, line in enumerate(path.read_text().splitlines(keepends=True), 1):
        if line.startswith("```"):
            if current is None:
                current, start, language = [], number, line[3:].strip()
            else:
                found.append(Block(path, start, language, "".join(current)))
                current = None
        elif current is not None:
            current.append(line)
    assert current is None, f"{path}: a code block opened at line {start} is never closed"
    return found


BLOCKS = [block for page in PAGES for block in blocks_of(page)]


def _of(*languages: str) -> list[Any]:
    return [pytest.param(b, id=b.where) for b in BLOCKS if b.language in languages]


# ---- the checkers ---------------------------------------------------------------------------


def shell_commands(text: str) -> list[list[str]]:
    """Each command of a shell block as words: continuations joined, quotes spanning lines
    kept whole, comments dropped, leading NAME=VALUE assignments dropped."""
    commands, pending = [], ""
    for line in text.splitlines():
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        pending += line + "\n"
        try:
            words = shlex.split(pending, comments=True)
        except ValueError:  # a quotation still open: the command goes on
            continue
        pending = ""
        while words and "=" in words[0] and words[0].split("=", 1)[0].isidentifier():
            words.pop(0)
        if words:
            commands.append(words)
    assert not pending.strip(), f"an unfinished command: {pending!r}"
    return commands


def _repository_path(word: str) -> Path | None:
    """The path a word names inside the repository, when it names one (``reports/…``,
    ``./scripts/…``); ``.venv/`` is made by the set-up and ``runs/`` by runs (whichever ran
    before: ``./scripts/probe`` makes ``runs/probe/``), neither is committed."""
    candidate = word.split("::", 1)[0].removeprefix("./")
    head = candidate.split("/", 1)[0]
    if "/" not in candidate or "://" in word or head in ("", ".venv", "runs", "..") \
            or "$" in word:
        return None
    return ROOT / candidate if (ROOT / head).exists() else None


def check_shell(text: str) -> None:
    """Every command runs a known program or a script of the repository, every repository
    path it names exists, and each ``loopprobe`` command parses."""
    from probes.cli import build_parser

    for words in shell_commands(text):
        program = words[0].removeprefix(".venv/bin/")  # the set-up's venv
        if "/" in program:
            path = _repository_path(program)
            assert path is not None and path.is_file(), f"{program}: no such script"
        else:
            assert program in PROGRAMS, f"{program}: not a program the docs may run " \
                                        f"({', '.join(sorted(PROGRAMS))}, or a script)"
        for word in words[1:]:
            path = _repository_path(word)
            assert path is None or path.exists(), f"{' '.join(words)}: {word} does not exist"
        args = None
        if program == "loopprobe":
            args = words[1:]
        elif program.startswith("python") and words[1:3] == ["-m", "mockapi"]:
            args = ["serve", *words[3:]]  # the same options as `loopprobe serve`
        if args is not None:
            errors = io.StringIO()
            try:
                with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
                    build_parser().parse_args(args)
            except SystemExit as exit:
                if exit.code == 0:  # --help, --version
                    continue
                raise AssertionError(f"{' '.join(words)}: the parser refuses it: "
                                     f"{errors.getvalue().strip()}") from exit


def check_data(text: str, language: str) -> None:
    """A yaml or json block parses; one that is a scenario loads as one."""
    data = json.loads(text) if language == "json" else yaml.safe_load(text)
    if isinstance(data, dict) and "rules" in data:
        parse_scenario(data, "snippet")


def run_python(text: str, where: str, mock_api: Any, scenario: Scenario | None = None) -> None:
    """Execute a block; call every ``test_*`` function it defines with ``mock_api``."""
    if SERVED_URL in text:
        assert scenario is not None, f"{where}: talks to {SERVED_URL} with no scenario shown before it"
        text = text.replace(SERVED_URL, mock_api(scenario).url)
    namespace: dict[str, Any] = {"__name__": "snippet"}
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(text, where, "exec"), namespace)
        for name, value in list(namespace.items()):
            if name.startswith("test_") and callable(value):
                value(mock_api)


def scenario_before(block: Block) -> Scenario | None:
    """The last scenario shown in a yaml block above ``block`` on its page."""
    shown = [b for b in blocks_of(block.path) if b.line < block.line and b.language == "yaml"]
    for candidate in reversed(shown):
        data = yaml.safe_load(candidate.text)
        if isinstance(data, dict) and "rules" in data:
            return parse_scenario(data, candidate.where)
    return None


# ---- every block of the docs ----------------------------------------------------------------


def test_every_block_names_its_language() -> None:
    unnamed = [f"{b.where} ({b.language or 'no language'})" for b in BLOCKS
               if b.language not in LANGUAGES]
    assert unnamed == [], f"tag each block with one of {', '.join(LANGUAGES)}: {unnamed}"
    assert len(BLOCKS) > 20


@pytest.mark.parametrize("block", _of("python", "py"))
def test_python_block_runs(block: Block, mock_api: Any) -> None:
    run_python(block.text, block.where, mock_api, scenario_before(block))


@pytest.mark.parametrize("block", _of("sh"))
def test_shell_block_is_sound(block: Block) -> None:
    check_shell(block.text)


@pytest.mark.parametrize("block", _of("yaml", "json"))
def test_data_block_parses(block: Block) -> None:
    check_data(block.text, block.language)


@pytest.mark.parametrize("block", _of("text"))
def test_text_block_is_no_command(block: Block) -> None:
    commands = [line for line in block.text.splitlines()
                if line.lstrip().startswith(("loopprobe ", "$ ", "./scripts/", "python "))]
    assert commands == [], f"commands belong in an sh block, where they are checked: {commands}"


def test_the_scenario_shown_first_is_the_shipped_example() -> None:
    shipped = load_scenario(ROOT / "examples/scenarios/tool-then-text.yaml")
    (block,) = [b for b in BLOCKS if b.language == "yaml"
                and b.text.startswith("name: tool-then-text")]
    assert parse_scenario(yaml.safe_load(block.text)).rules == shipped.rules


def test_the_error_listing_shown_is_what_the_loader_says() -> None:
    (shown,) = [b for b in BLOCKS if b.language == "text"
                and b.text.startswith("invalid scenario")]
    with pytest.raises(ScenarioError) as caught:
        parse_scenario({"rules": [{"match": {"turn": "one"}, "reply": {"text": "x"}},
                                  {"match": {}}]}, "bad.yaml")
    assert str(caught.value).strip() == shown.text.strip()


def test_every_repository_path_named_in_the_prose_exists() -> None:
    """`probes/clients/base.py`, `reports/MATRIX.md`…: a module moved or a report renamed
    leaves no page pointing at nothing (patterns and placeholders aside)."""
    import re

    missing = []
    for page in PAGES:
        prose = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M)
        for span in re.findall(r"`([^`\s]+)`", prose):
            path = None if re.search(r"[*<{]", span) else _repository_path(span)
            if path is not None and not path.exists():
                missing.append(f"{page.relative_to(ROOT)}: {span}")
    assert missing == []


# ---- the checkers catch bad snippets ---------------------------------------------------------


@pytest.mark.parametrize("text", [
    "loopprobe run --clinet 2.1.235 --out /tmp/r\n",                  # a misspelled option
    "loopprobe frobnicate reports/2.1.235\n",                         # no such command
    "loopprobe run --client 2.1.235 \\\n  --catalog examples/probes/nope.py\n",  # no such file
    "./scripts/nope\n",                                               # no such script
    "rm -rf /tmp/x\n",                                                # a program not named
    "python -m mockapi --scenario a.yaml --prot 8080\n",              # the mock's parser refuses
])
def test_check_shell_fails_on_a_bad_command(text: str) -> None:
    with pytest.raises(AssertionError):
        check_shell(text)


@pytest.mark.parametrize("text, language", [
    ("rules:\n  - replys: [{text: a}]\n", "yaml"),  # a misspelled key of a scenario
    ("a: [1, 2\n", "yaml"),
    ('{"a": 1,}', "json"),
])
def test_check_data_fails_on_bad_data(text: str, language: str) -> None:
    with pytest.raises((ScenarioError, yaml.YAMLError, json.JSONDecodeError)):
        check_data(text, language)


def test_run_python_fails_on_a_failing_example(mock_api: Any) -> None:
    failing = ("import anthropic\nfrom mockapi import Rule, Scenario, text\n"
               "def test_x(mock_api):\n"
               "    mock = mock_api(Scenario(rules=[Rule(reply=text('a'))]))\n"
               "    client = anthropic.Anthropic(base_url=mock.url, api_key='k', max_retries=0)\n"
               "    reply = client.messages.create(model='m', max_tokens=5,\n"
               "        messages=[{'role': 'user', 'content': 'hi'}])\n"
               "    assert reply.content[0].text == 'b'\n")
    with pytest.raises(AssertionError):
        run_python(failing, "planted", mock_api)
    with pytest.raises(SyntaxError):
        run_python("def broken(:\n", "planted", mock_api)
