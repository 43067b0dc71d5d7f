"""A client's public changelog read as data: its releases (``## X.Y.Z``), their entries (the
bullets under each), and which entries touch the agent loop, by topic.

The topics are the loop's mechanisms the almanac's claims are about, each a pattern over an
entry's text. An entry matching any is a *loop entry*: the reviewed mapping
(``probes.scale.changelog_map``) must say of each which claims it concerns or why no probe
sees it. The patterns lean wide: a loop entry the probes cannot see costs a reviewed
``not_probed`` line, a missed one would be a silent gap. The changelog is untrusted text: a
malformed one is refused in one line naming the line and what was expected there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

__all__ = ["MAX_ENTRY_CHARS", "TOPICS", "ChangelogError", "Entry", "Release", "loop_entries",
           "parse_changelog", "topics_of", "version_key"]

MAX_ENTRY_CHARS = 4000  # the longest entry of Claude Code's changelog has about 700
_I = re.IGNORECASE
TOPICS: dict[str, re.Pattern[str]] = {
    "hooks": re.compile(
        r"\bhooks?\b|PreToolUse|PostToolUse|UserPromptSubmit|Subagent(Stop|Start)|"
        r"Session(Start|End)\b|PreCompact|PostCompact|PermissionRequest|PermissionDenied|"
        r"\bStop\b(?! button)|stop_hook|updatedInput|updated(MCP)?ToolOutput|"
        r"additionalContext|hookSpecificOutput|decision: ?\"?block"),
    "turns and limits": re.compile(
        r"max[-_ ]?turns|max[-_ ]budget|budget_exhausted|\bmax_tokens\b|max output tokens|"
        r"output token limit|blocking[_ ]limit|num_turns|turn limit|thinking-only|"
        r"empty (response|answer|assistant|turn)|context (window|limit)|terminal_reason|"
        r"\bend_turn\b|stop_reason|\bturns?\b(?! (it |them )?(on|off)\b)|thinking block|"
        r"re-?prompts?\b|no visible output", _I),
    "queued input": re.compile(
        r"\bqueue[ds]?\b|\bqueueing\b|mid-turn|(sent|typed|submitted) while|"
        r"while (Claude|the agent|the model|it) (is|was) (working|responding|running)|"
        r"steering messages?", _I),
    "compaction": re.compile(r"compact|auto-?summar|microcompact", _I),
    "resume and fork": re.compile(
        r"\bresum(e|es|ed|ing)\b|--continue\b|claude -c\b|`-c`|\bfork(s|ed|ing)?\b|"
        r"--fork-session|/branch\b|/rewind\b", _I),
    "subagents": re.compile(
        r"sub-?agents?|\bTask tool|\bAgent tool|`(Task|Agent)`|teammates?|agent teams?|"
        r"custom agents?|background agents?|task-notification|task notifications?|"
        r"\bSendMessage\b", _I),
    "MCP": re.compile(r"\bMCP\b|list_changed|elicitation|MCP_TOOL_TIMEOUT", _I),
    "streaming": re.compile(
        r"\bstream(s|ing|ed)?\b(?!-json)|\bSSE\b|content_block|message_delta|message_stop",
        _I),
    "retries and fallback": re.compile(
        r"\bretr(y|ies|ied|ying)\b|fallback|overloaded|\b529\b|\b5xx\b|\b50[0-4]\b|"
        r"rate[- ]limit|backoff|api_retry|non-?streaming|--fallback-model", _I),
    "interrupts": re.compile(
        r"interrupt|\babort(s|ed|ing)?\b|\bcancel\w* (the |a |an |running |current |its )*"
        r"(turn|query|request|task|tool|prompt|response|stream)", _I),
    "permissions": re.compile(
        r"permission|allow rules?|deny rules?|allowedTools|disallowedTools|acceptEdits|"
        r"bypassPermissions|plan mode|auto mode|can_use_tool|canUseTool", _I),
    "structured output": re.compile(
        r"structured output|json-schema|jsonSchema|json_schema|StructuredOutput|"
        r"outputFormat", _I),
    "/goal": re.compile(r"/goal\b"),
    "/loop": re.compile(r"/loop\b|ScheduleWakeup|\bwakeups?\b", _I),
    "stream-json, print mode and SDK": re.compile(
        r"stream-json|--print\b|(?<![\w-])-p\b|print mode|headless|non-interactive|\bSDK\b|"
        r"control[_ ]requests?|--output-format|--input-format|\bset_model\b|"
        r"set_permission_mode|command_lifecycle", _I),
    "tool calls": re.compile(
        r"tool_use|tool_result|\btool (call|use|result)s?\b|parallel tool|concurren|"
        r"InputValidationError|unknown tool", _I),
}


class ChangelogError(ValueError):
    """A changelog that is not a list of ``## X.Y.Z`` sections of ``- `` entries."""


@dataclass(frozen=True)
class Entry:
    release: str
    text: str
    topics: tuple[str, ...]  # the loop topics its text touches (none: not a loop entry)

    @property
    def loop(self) -> bool:
        return bool(self.topics)


@dataclass(frozen=True)
class Release:
    version: str
    entries: tuple[Entry, ...]


def version_key(version: str) -> Version:
    return Version(version)


def topics_of(text: str) -> tuple[str, ...]:
    """The loop topics an entry's text touches, in ``TOPICS`` order."""
    return tuple(name for name, pattern in TOPICS.items() if pattern.search(text))


_SECTION = re.compile(r"##\s+(\S+)\s*")
_BULLET = re.compile(r"[-*]\s+(.*)")


def parse_changelog(text: str, source: str = "CHANGELOG.md") -> list[Release]:
    """The releases of a changelog, newest first as written: each ``## X.Y.Z`` heading opens
    one, each ``- `` bullet under it is an entry (indented lines continue the entry above).
    A ``ChangelogError`` names the line of anything else."""
    sections: list[tuple[str, list[str]]] = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        if not line.strip() or (line.startswith("# ") and not sections):
            continue  # blank lines, and the title above the first release
        where = f"{source}: line {number}"
        if line.startswith("##"):
            sections.append((_version_of(line, where), []))
            if sections[-1][0] in seen:
                raise ChangelogError(f"{where}: expected each release once, found "
                                     f"{sections[-1][0]} again (first on line "
                                     f"{seen[sections[-1][0]]})")
            seen[sections[-1][0]] = number
            continue
        bullet = _BULLET.fullmatch(line)
        if bullet and sections:
            sections[-1][1].append(bullet.group(1).strip())
        elif line[:1].isspace() and sections and sections[-1][1]:
            sections[-1][1][-1] += " " + line.strip().removeprefix("- ").strip()
        else:
            raise ChangelogError(f"{where}: expected a '## X.Y.Z' release heading, a '- ' entry "
                                 f"under one, or an indented continuation, found "
                                 f"{line[:80]!r}")
        if len(sections[-1][1][-1]) > MAX_ENTRY_CHARS:
            raise ChangelogError(f"{where}: expected an entry of at most {MAX_ENTRY_CHARS} "
                                 f"characters, found {len(sections[-1][1][-1])}")
    if not sections:
        raise ChangelogError(f"{source}: expected '## X.Y.Z' release headings, found none")
    return [Release(version, tuple(Entry(version, entry, topics_of(entry)) for entry in entries))
            for version, entries in sections]


def _version_of(line: str, where: str) -> str:
    found = _SECTION.fullmatch(line)
    name = found.group(1) if found else ""
    try:
        if not re.fullmatch(r"\d+\.\d+\.\d+", name):
            raise InvalidVersion(name)
        version_key(name)
    except InvalidVersion:
        raise ChangelogError(f"{where}: expected a release heading '## X.Y.Z', found "
                             f"{line[:80]!r}") from None
    return name


def loop_entries(releases: list[Release]) -> list[Entry]:
    """Every entry touching the agent loop, in the changelog's order."""
    return [entry for release in releases for entry in release.entries if entry.loop]
