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
file loopprobe is given (``probes.core.safe_read``: bounded, no YAML aliases).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from mockapi.scenario_errors import problems_of
from probes.core.safe_read import ReadRefused, read_yaml

__all__ = ["ANY_EXPECTATION", "ANY_VERSION", "BASELINE_FORMAT", "Baseline", "BaselineError",
           "ExpectedFailure", "load_baseline"]

BASELINE_FORMAT = "baseline/1"
ANY_EXPECTATION = "*"
ANY_VERSION = "*"  # every version (an empty specifier set says the same, less plainly)


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

    @field_validator("versions")
    @classmethod
    def _versions_parse(cls, value: str | list[str]) -> str | list[str]:
        if isinstance(value, str) and value != ANY_VERSION:
            try:
                SpecifierSet(value)
            except InvalidSpecifier:
                raise ValueError(f"expected a PEP 440 specifier set such as '<2.1.94' or "
                                 f"'>=2.1.90,<2.1.240', a list of versions, or \"*\", found "
                                 f"{value!r}") from None
        elif isinstance(value, list) and not value:
            raise ValueError("expected at least one version in the list, found none")
        return value

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
        raise BaselineError(f"{path}: no such baseline file") from None
    except ReadRefused as error:
        raise BaselineError(str(error)) from None
    except ValueError as error:  # a ScenarioError: the YAML does not parse
        said = " ".join(str(error).split())
        raise BaselineError(f"{path}: expected a YAML baseline file, found: {said}") from None
    if not isinstance(data, dict):
        raise BaselineError(f"{path}: expected a mapping with loopprobe: {BASELINE_FORMAT} and "
                            f"expected_failures, found {type(data).__name__}")
    if data.get("loopprobe") != BASELINE_FORMAT:
        raise BaselineError(f"{path}: loopprobe: expected {BASELINE_FORMAT!r}, found "
                            f"{data.get('loopprobe')!r}")
    try:
        baseline = Baseline.model_validate(data)
    except ValidationError as error:
        problems = problems_of(error, Baseline)
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise BaselineError(f"{path}: {problems[0]}{more}") from None
    return baseline.model_copy(update={"source": str(path)})
