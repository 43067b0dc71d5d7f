"""What a client left in its sandbox, read for the evidence: its session files (digested
around each run, read after the last), the workspace's small files, and what the harness
would not read there.

Every read goes through ``Sandbox.files`` (``probes.sandbox.files``); this module decides
what is read and how it is shown: paths relative to the client's part, a name that is not
UTF-8 with its bytes escaped (so that every report can be written), and each refusal as
``{"path", "found"}`` (the client's doing, listed in the probe's ``sandbox_refusals``: the
first ``REFUSALS_KEPT``, the rest counted, ``probes.core.tally``).
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from probes.core.evidence import SANDBOX_REFUSALS
from probes.core.tally import Cap, NotKept, Tally
from probes.sandbox.files import Refused
from probes.sandbox.folders import Sandbox

__all__ = ["REFUSALS_KEPT", "SESSION_FILE_LIMIT", "WORKSPACE_FILE_LIMIT", "ClientFiles",
           "shown"]

SESSION_FILE_LIMIT = 16 * 1024 * 1024  # a transcript beyond this is kept cut, and said so
WORKSPACE_FILE_LIMIT = 65536  # workspace files are kept whole up to this size
# a client can leave a FIFO or a link at each of the sandbox's 200,000 names
REFUSALS_KEPT = Cap(1000, 256 * 1024)


def shown(relative: str | PurePosixPath) -> str:
    """A sandbox path as evidence shows it: a name that is not UTF-8 (the client chose it)
    with its bytes escaped."""
    return str(relative).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


class ClientFiles:
    """Reads of one sandbox's client part; what was refused is kept in ``refused``."""

    def __init__(self, box: Sandbox):
        self.box = box
        self.refused: list[dict[str, str]] = []
        self._refusals = Tally(REFUSALS_KEPT)
        # workspace files over WORKSPACE_FILE_LIMIT: there, their size, not their text
        self.large_files: dict[str, int] = {}

    def _refuse(self, path: str | PurePosixPath, found: str) -> None:
        refusal = {"path": shown(path), "found": shown(found)}
        if self._refusals.admit(len(refusal["path"]) + len(refusal["found"])):
            self.refused.append(refusal)

    def not_kept(self) -> list[NotKept]:
        """The refusals past their cap, counted."""
        left_out = self._refusals.not_kept(SANDBOX_REFUSALS)
        return [left_out] if left_out is not None else []

    def session_files(self, folder: Path | None) -> list[PurePosixPath]:
        """The regular files beneath a client's session folder (None: it keeps none)."""
        if folder is None:
            return []
        found = []
        try:
            for entry in self.box.files.walk(self.box.inside(folder)):
                if entry.regular:
                    found.append(PurePosixPath(entry.relative))
                elif entry.kind != "a directory":
                    self._refuse(entry.relative, entry.kind)
        except Refused as why:
            self._refuse(why.relative, why.found)
        return found

    def session_digests(self, folder: Path | None) -> dict[str, str]:
        """Each session file's SHA-256, or why it could not be read."""
        found = {}
        for relative in self.session_files(folder):
            try:
                found[shown(relative)] = self.box.files.digest(relative)
            except (FileNotFoundError, Refused) as why:
                found[shown(relative)] = f"unread: {shown(str(why))}"
        return found

    def sessions(self, folder: Path | None) -> dict[str, str]:
        """The session files' texts (relative path -> text), cut at their limit."""
        texts = {}
        for relative in self.session_files(folder):
            try:
                read = self.box.files.read(relative, limit=SESSION_FILE_LIMIT)
            except (FileNotFoundError, Refused) as why:
                self._refuse(relative, str(why))
                continue
            if read.truncated:
                self._refuse(relative, f"{read.size} bytes: kept the first {len(read.data)}")
            texts[shown(relative)] = read.text()
        return texts

    def workspace(self) -> dict[str, str]:
        """The workspace's small regular files (path relative to it -> text)."""
        kept = {}
        workspace = self.box.inside(self.box.workspace)
        try:
            for entry in self.box.files.walk(workspace):
                if not entry.regular:
                    if entry.kind != "a directory":
                        self._refuse(entry.relative, entry.kind)
                    continue
                name = shown(PurePosixPath(entry.relative).relative_to(workspace))
                if entry.size >= WORKSPACE_FILE_LIMIT:
                    self.large_files[name] = entry.size  # there, too large to keep
                    continue
                try:
                    kept[name] = self.box.files.read(entry.relative,
                                                     limit=WORKSPACE_FILE_LIMIT).text()
                except (FileNotFoundError, Refused) as why:
                    self._refuse(entry.relative, str(why))
        except Refused as why:
            self._refuse(why.relative, why.found)
        return kept
