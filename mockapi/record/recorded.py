"""The scenario a recording writes: one rule per kept exchange, each validated and written as
YAML once, when it is kept, and the file rewritten whole from those texts after each.

A rule costs its own size once (validating it, writing its YAML), not the recording's size
again at every exchange; ``keep`` is meant to run off the event loop (the recorder calls it
through ``anyio.to_thread``), and one lock orders the rewrites, so a slower writer never
puts an older file in place of a newer one. What a rule had to leave out (a reply larger
than the recorder keeps) is said in the scenario's ``description``.
"""

from __future__ import annotations

import os
import tempfile
import threading
from pathlib import Path
from typing import Any

import yaml

from mockapi.script.scenario import Scenario, parse_scenario

__all__ = ["RecordedScenario"]


class _NoAliases(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        return True


def _yaml(data: Any) -> str:
    return yaml.dump(data, Dumper=_NoAliases, sort_keys=False, allow_unicode=True, width=100)


class RecordedScenario:
    """The scenario file at ``path``: ``keep`` adds a rule (thread-safe) and rewrites it."""

    def __init__(self, path: Path, *, name: str, upstream: str, classifier: str):
        self.path = path
        self.name, self.upstream, self.classifier = name, upstream, classifier
        self.rules: dict[int, str] = {}  # by seq: the rule as YAML (an item of `rules`)
        self.cuts: dict[int, str] = {}  # by seq: what the rule left out
        self._ids: dict[str, int] = {}
        self._lock = threading.Lock()

    def rule_text(self, seq: int, rule: dict[str, Any]) -> str:
        """``rule`` validated (as the mock loads it) and written as an item of ``rules``."""
        with self._lock:
            holder = self._ids.setdefault(rule["id"], seq)
        if holder != seq:  # never by kind, turn and attempt; kept apart all the same
            rule = {**rule, "id": f"{rule['id']}-seq{seq}"}
        data = {"classifier": self.classifier, "validation": "lenient", "rules": [rule]}
        scenario = parse_scenario(data, f"{self.path} (rule of seq {seq})")
        return _yaml(scenario.model_dump(mode="json", exclude_unset=True)["rules"])

    def keep(self, seq: int, rule: dict[str, Any], cut: str | None = None) -> None:
        """Add the rule of exchange ``seq`` (``cut``: what it left out) and rewrite the file."""
        text = self.rule_text(seq, rule)
        with self._lock:
            self.rules[seq] = text
            if cut:
                self.cuts[seq] = cut
            self._write({})

    def write(self, extra: dict[int, str] | None = None) -> Path:
        """Rewrite the file, with ``extra`` rules (by seq, as YAML) not kept."""
        with self._lock:
            self._write(extra or {})
        return self.path

    def scenario(self) -> Scenario:
        """The file as the mock loads it."""
        with self._lock:
            text = self._text({})
        return parse_scenario(yaml.safe_load(text), str(self.path))

    def _text(self, extra: dict[int, str]) -> str:
        rules = {**self.rules, **extra}
        return self._head() + ("rules:\n" + "".join(rules[s] for s in sorted(rules))
                               if rules else "rules: []\n")

    def _head(self) -> str:
        description = f"recorded from {self.upstream} by loopprobe record"
        if self.cuts:
            description += "; cut: " + "; ".join(self.cuts[s] for s in sorted(self.cuts))
        return _yaml({"name": self.name, "description": description,
                      "classifier": self.classifier, "validation": "lenient"})

    def _write(self, extra: dict[int, str]) -> None:
        """The whole file, through a temporary file renamed into place (under the lock)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=self.path.parent)
        try:
            with os.fdopen(handle, "w") as out:
                rules = {**self.rules, **extra}
                out.write(self._head())
                out.write("rules:\n" if rules else "rules: []\n")
                for seq in sorted(rules):
                    out.write(rules[seq])
            os.replace(temporary, self.path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
