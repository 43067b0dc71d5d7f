"""The shapes of the changelog as a witness: the reviewed mapping from a client's public
changelog entries to the claims they concern (``reports/changelog/<client>.yaml``), and what
the almanac says of each entry (``almanac.json``: a ``changelog`` block, and per change the
entries of the releases in its interval)."""

from __future__ import annotations

from typing import Annotated, Literal, NotRequired

from pydantic import ConfigDict, Field, with_config
from typing_extensions import TypedDict

__all__ = ["CHANGELOG_STATUSES", "ChangelogDecision", "ChangelogEntryShown", "ChangelogMapEntry",
           "ChangelogMapFile", "ChangelogSource", "ChangelogStatus", "ChangelogWitness"]

_Text = Annotated[str, Field(min_length=1)]
_Version = Annotated[str, Field(pattern=r"^\d+\.\d+\.\d+$")]
_ClaimId = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")]
# what the almanac's verdicts say of an entry mapped to claims (probes.scale.almanac_changelog)
ChangelogStatus = Literal["agrees", "near", "not seen by the probe", "disagrees"]
CHANGELOG_STATUSES: tuple[str, ...] = ("agrees", "near", "not seen by the probe", "disagrees")


@with_config(ConfigDict(extra="forbid"))
class ChangelogSource(TypedDict):
    repository: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")]
    path: _Text
    commit: Annotated[str, Field(pattern=r"^[0-9a-f]{40}$")]
    newest: _Version  # its newest release heading
    loop_entries: Annotated[int, Field(ge=0)]  # entries touching the loop (probes.scale.changelog)
    sections: dict[str, Annotated[int, Field(ge=0)]]  # every release heading -> its entries


@with_config(ConfigDict(extra="forbid"))
class ChangelogMapEntry(TypedDict):
    """One loop entry, quoted, and the reviewer's judgement: the claims it concerns, or why no
    probe sees it; neither is an entry not reviewed yet."""

    release: _Version
    text: _Text  # the entry as the changelog has it
    topics: list[_Text]  # the loop topics its text touches (recomputed by the update)
    claims: NotRequired[Annotated[list[_ClaimId], Field(min_length=1)]]
    not_probed: NotRequired[_Text]  # why no claim's verdict can show it
    note: NotRequired[_Text]  # the reviewer's reasoning, when the mapping needs one


@with_config(ConfigDict(extra="forbid"))
class ChangelogMapFile(TypedDict):
    """A reviewed mapping of a changelog's loop entries (``loopprobe almanac changelog``)."""

    kind: Literal["changelog-map"]
    format: Literal[1]
    client: _Text
    source: ChangelogSource
    entries: list[ChangelogMapEntry]


class ChangelogWitness(TypedDict):
    """A claim's verdict on both sides of an entry's release: the runs that decided."""

    claim: str
    verdict: str  # held across the release
    probed: list[str]  # the probed versions nearest the release on either side
    witnesses: list[str]  # their evidence folders, where committed
    located_at: list[str]  # where the claim's nearest change is located instead (before, after)


class ChangelogEntryShown(TypedDict):
    release: str
    text: str
    claims: NotRequired[list[str]]
    not_probed: NotRequired[str]
    status: NotRequired[ChangelogStatus]  # mapped to claims, released inside the range
    releases_away: NotRequired[int]  # near: how many releases from the nearest change
    decided_by: NotRequired[list[ChangelogWitness]]  # disagrees


class ChangelogDecision(TypedDict):
    """The almanac's ``changelog`` block: the source, the window, every entry mapped to claims
    with what the verdicts say, and the releases one side has and the other not."""

    source: dict[str, str]  # repository, path, commit, newest
    mapping: str  # the mapping file, as publish found it
    near_window: int  # near: at most this many releases from a change
    seen_window: int  # farther than this from every change of its claims: not seen
    counts: dict[str, int]
    entries: list[ChangelogEntryShown]  # the entries mapped to claims
    skipped: list[str]  # versions of the range, up to its newest section, with no section
    unpublished: list[str]  # sections inside the range's span that are no version of it
    after_newest: int  # versions of the range newer than the changelog read
