"""The baseline file: the expected failures a case file's owner accepts, per client version.

```yaml
loopprobe: baseline/1
expected_failures:
  - case: blocks-rm-rf            # the case (probe) name
    expectation: hook_result-1    # an expectation id, or "*": every expectation of the case
    versions: "<2.1.94"           # a PEP 440 specifier set, a list of exact versions, or "*"
    reason: "2.0.x tells the model 'Hook requested permission behavior: deny'"
```

The semantics are the MCP conformance suite's: a listed failure passes the gate, a listed
entry that passed is stale and fails it (``probes.gate.gate``). The file is read as every
file loopprobe is given (``probes.core.safe_read``: bounded, no YAML aliases); each mistake
is one line naming the file, the entry's field and what was expected, and ``check_names``
refuses an entry naming a case or expectation the case file does not hold.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from mockapi.script.scenario_errors import ScenarioError
from probes.core.safe_read import ReadRefused, read_yaml

__all__ = ["ANY_EXPECTATION", "ANY_VERSION", "BASELINE_FORMAT", "Baseline", "BaselineError",
           "ExpectedFailure", "check_names", "load_baseline"]

BASELINE_FORMAT = "baseline/1"
ANY_EXPECTATION = "*"
ANY_VERSION = "*"  # every version (an empty specifier set says the same, less plainly)
_VERSIONS = ("expected a PEP 440 specifier set such as '<2.1.94' or '>=2.1.90,<2.1.240', a "
             "list of versions, or \"*\"")
# the keys a baseline file and each of its entries hold, as the user writes them
_KEYS = ("loopprobe", "expected_failures")
_ENTRY_KEYS = ("case", "expectation", "versions", "reason")


class BaselineError(ValueError):
    """A baseline file that cannot be used, said in one line: the file, the entry, what was
    expected and what arrived."""


class ExpectedFailure(BaseModel):
    """One accepted failure: an expectation (or every one of a case) on some versions."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    case: str = Field(min_length=1)
    expectation: str = Field(min_length=1)
    versions: str | list[str]
    reason: str = Field(min_length=1)

    @field_validator("versions", mode="before")
    @classmethod
    def _versions_parse(cls, value: Any) -> str | list[str]:
        if isinstance(value, str) and value != ANY_VERSION:
            try:
                SpecifierSet(value)
            except InvalidSpecifier:
                raise ValueError(f"{_VERSIONS}, found {value!r}") from None
        elif isinstance(value, list) and not value:
            raise ValueError("expected at least one version in the list, found none")
        elif isinstance(value, list) and not all(isinstance(v, str) for v in value):
            raise ValueError(f"{_VERSIONS}, found a list holding "
                             f"{next(v for v in value if not isinstance(v, str))!r} (quote a "
                             "version that YAML reads as a number)")
        elif not isinstance(value, str | list):
            raise ValueError(f"{_VERSIONS}, found {value!r}")
        return value  # type: ignore[no-any-return]

    def covers(self, case: str, expectation: str, version: str) -> bool:
        """Whether this entry lists ``expectation`` of ``case`` on client ``version``."""
        if self.case != case or self.expectation not in (ANY_EXPECTATION, expectation):
            return False
        if isinstance(self.versions, list):
            return version in self.versions or _same_version(version, self.versions)
        if self.versions == ANY_VERSION:
            return True
        # a prerelease is a version like any other here: a baseline says what it says
        return SpecifierSet(self.versions).contains(version, prereleases=True)


class Baseline(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    format: Literal["baseline/1"] = Field(alias="loopprobe")
    expected_failures: list[ExpectedFailure] = Field(default_factory=list)
    source: str = Field(default="", exclude=True)  # the file it was read from, for messages

    def entry_for(self, case: str, expectation: str, version: str) -> ExpectedFailure | None:
        """The first entry listing this expectation on this version, or None."""
        return next((e for e in self.expected_failures if e.covers(case, expectation, version)),
                    None)


def _same_version(version: str, listed: list[str]) -> bool:
    """``2.1.90`` and ``2.1.090`` are one version: compare as PEP 440 where both parse."""
    try:
        wanted = Version(version)
    except InvalidVersion:
        return False
    for item in listed:
        try:
            if Version(item) == wanted:
                return True
        except InvalidVersion:
            continue
    return False


def load_baseline(path: Path) -> Baseline:
    """The baseline file at ``path``, or a BaselineError naming the file and the entry."""
    try:
        data = read_yaml(path)
    except FileNotFoundError:
        raise BaselineError(f"{path}: expected a baseline file, but there is no such file"
                            ) from None
    except ReadRefused as error:
        raise BaselineError(str(error)) from None
    except ScenarioError as error:  # the YAML does not parse
        said = " ".join("; ".join(error.problems).split())
        raise BaselineError(f"{path}: expected a YAML baseline file, found {said}") from None
    except (OSError, ValueError) as error:  # a name too long or holding a NUL, an I/O error
        cause = error.strerror if isinstance(error, OSError) and error.strerror else error
        raise BaselineError(f"{path!s:.300}: expected a readable baseline file, but {cause}"
                            ) from None
    if not isinstance(data, dict):
        found = "an empty file" if data is None else f"a {type(data).__name__}"
        raise BaselineError(f"{path}: expected a mapping with loopprobe: {BASELINE_FORMAT} and "
                            f"expected_failures, found {found}")
    if data.get("loopprobe") != BASELINE_FORMAT:
        raise BaselineError(f"{path}: loopprobe: expected {BASELINE_FORMAT!r}, found "
                            f"{data.get('loopprobe')!r}")
    unknown = [key for key in data if key not in _KEYS]
    if unknown:
        raise BaselineError(f"{path}: {unknown[0]}: unknown key; expected only "
                            f"{', '.join(_KEYS)}")
    try:
        baseline = Baseline.model_validate(data)
    except ValidationError as error:
        problems = [_problem(e) for e in error.errors(include_url=False)]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise BaselineError(f"{path}: {problems[0]}{more}") from None
    return baseline.model_copy(update={"source": str(path)})


def _problem(error: Any) -> str:
    """One pydantic error as the user wrote the place: ``expected_failures[0].versions``."""
    where = ""
    for part in error["loc"]:
        where += f"[{part}]" if isinstance(part, int) else f".{part}" if where else str(part)
    found = " ".join(repr(error.get("input"))[:120].split())
    if error["type"] == "extra_forbidden":
        return f"{where}: unknown key; expected only {', '.join(_ENTRY_KEYS)}"
    if error["type"] in ("model_type", "dict_type"):
        keys = ", ".join(_ENTRY_KEYS if len(error["loc"]) > 1 else _KEYS)
        return f"{where}: expected a mapping of {keys}, found {found}"
    if error["type"] == "missing":
        return f"{where}: expected this key, found none"
    said = str(error["msg"]).removeprefix("Value error, ")
    return f"{where}: {said}" if said.startswith("expected") else f"{where}: {said} (found {found})"


def check_names(baseline: Baseline, known: dict[str, list[str]]) -> None:
    """A BaselineError for the first entry naming a case, or an expectation of its case,
    that ``known`` (each case's expectation ids) does not hold: a name mistyped would
    otherwise list nothing and be silently unused."""
    for index, entry in enumerate(baseline.expected_failures):
        where = f"{baseline.source}: expected_failures[{index}]"
        if entry.case not in known:
            raise BaselineError(f"{where}.case: expected a case of the case file ("
                                f"{', '.join(known)}), found {entry.case!r}")
        ids = known[entry.case]
        if entry.expectation != ANY_EXPECTATION and entry.expectation not in ids:
            raise BaselineError(f"{where}.expectation: expected \"*\" or an expectation id of "
                                f"case {entry.case} ({', '.join(ids)}), found "
                                f"{entry.expectation!r}")
