"""Client specs (``KIND@VERSION``) and client kinds (``LOOPPROBE_CLIENTS``) under attack.

Every way a spec reaches the code goes through one validation, per registry (semver or a
dist-tag for npm kinds, PEP 440 for PyPI kinds), before anything runs: a refused spec is one
line and exit 2, and no installer process is started (``no_subprocess`` would notice one).
Installs stay inside their kind's cache folder; a plugin kind cannot take a built-in kind's
name, and its reports name the plugin that ran.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from probes import cli
from probes.clients import InstallError, parse_client_spec, pypi, registry
from probes.clients.agent_sdk import ClaudeAgentSdk
from probes.clients.base import ClientBinary
from probes.clients.claude_cli import check_printed_version
from probes.clients.claude_code import ClaudeCode
from probes.clients.specs import (
    SEMVER,
    check_version,
    expected_version,
    install_folder,
    resolve_versions,
)
from probes.clients.tool_runner import AnthropicToolRunner
from probes.scale import workflow
from tests.conftest import one_line_error
from tests.fakeloop import FakeLoopClient

CATALOG = "tests.fakeloop.catalog"
FAKE_PLUGIN = "fake-loop=tests.fakeloop:FakeLoopClient"


@pytest.fixture
def no_subprocess(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[Any]:
    """A temporary cache, and any process started (npm, pip, venv, bwrap) recorded and
    refused: the tests assert none was."""
    started: list[Any] = []

    class Refused(subprocess.Popen):  # type: ignore[type-arg]
        def __init__(self, args: Any, *more: Any, **options: Any) -> None:
            started.append(args)
            raise AssertionError(f"a process was started: {args}")

    monkeypatch.setattr(subprocess, "Popen", Refused)
    monkeypatch.setenv("LOOPPROBE_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("LOOPPROBE_CLIENTS", raising=False)
    return started


def _outside(tmp_path: Path) -> list[Path]:
    """What was made in tmp_path outside the cache (the planted folder's neighbours)."""
    return sorted(p for p in tmp_path.rglob("*")
                  if not p.is_relative_to(tmp_path / "cache") and p != tmp_path / "cache")


# ---- the grammar ------------------------------------------------------------------------

SEMVER_VALID = ["0.0.0", "2.1.235", "10.20.30", "1.0.0-alpha", "1.0.0-alpha.1",
                "1.0.0-0.3.7", "1.0.0-x.7.z.92", "1.0.0-alpha+001", "1.0.0+20130313144700",
                "1.0.0-beta+exp.sha.5114f85", "1.0.0--", "1.2.3----RC-SNAPSHOT.12.9.1--.12+788"]
SEMVER_INVALID = ["1", "1.2", "1.2.3.4", "01.2.3", "1.02.3", "1.2.03", "1.2.3-01",
                  "1.2.3-alpha..1", "1.2.3-", "1.2.3+", "1.2.3+a..b", "v1.2.3", " 1.2.3",
                  "1.2.3 ", "1.2.3\n", "\u0661.2.3", "1.2.3-a/b", "../1.2.3", "1.2.3/.."]


@pytest.mark.parametrize("version", SEMVER_VALID)
def test_semver_takes_the_grammar_of_semver_2(version: str) -> None:
    assert SEMVER.fullmatch(version)
    assert expected_version("npm", version, exact=True) is None


@pytest.mark.parametrize("version", SEMVER_INVALID)
def test_semver_refuses_what_the_grammar_does_not_make(version: str) -> None:
    assert not SEMVER.fullmatch(version)
    assert expected_version("npm", version, exact=True) is not None


@pytest.mark.parametrize(("registry_name", "version", "fits"), [
    ("npm", "latest", True), ("npm", "next", True), ("npm", "stable", True),
    ("npm", "Latest", False), ("npm", "$(id)", False), ("npm", "../../x", False),
    ("pypi", "0.2.140", True), ("pypi", "2.16.0", True), ("pypi", "1.0rc1", True),
    ("pypi", "1!2.0.post1.dev3+local.7", True), ("pypi", "latest", True),
    ("pypi", "1.0-rc1", False), ("pypi", "v1.0", False), ("pypi", " 1.0", False),
    ("pypi", "../../x", False), ("pypi", "$(id)", False), ("pypi", "next", False),
    (None, "1", True), (None, "9.9.9", True), (None, "latest", True), (None, "1.0_a+b", True),
    (None, "..", False), (None, "a/b", False), (None, "-rf", False), (None, "", False),
])
def test_each_registry_has_its_grammar(registry_name: str | None, version: str,
                                       fits: bool) -> None:
    assert (expected_version(registry_name, version) is None) == fits


def test_an_exact_version_is_no_tag() -> None:
    assert expected_version("npm", "latest", exact=True) is not None
    assert expected_version("pypi", "latest", exact=True) is not None


@pytest.mark.parametrize("spec", ["2.1.235", "claude-code@2.1.235", "claude-code@latest",
                                  "claude-code@1.0.0-beta.1+build.5", "claude-agent-sdk@0.2.140",
                                  "claude-agent-sdk@latest", "anthropic-tool-runner@2.16.0",
                                  "anthropic-tool-runner@2.0.0rc1", "@2.1.235"])
def test_good_specs_still_parse(spec: str) -> None:
    client, version = parse_client_spec(spec)
    assert f"{client.name}@{version}".endswith(spec.lstrip("@"))


# ---- the attacks: refused in one line, before any process ---------------------------------

ATTACKS = ["claude-agent-sdk@../../x", "claude-agent-sdk@$(id)",
           "anthropic-tool-runner@$(touch /tmp/loopprobe-pwned)",
           "claude-agent-sdk@../../../planted", "anthropic-tool-runner@/tmp/planted",
           "claude-agent-sdk@0.2.140/../../..", "claude-agent-sdk@0.2.140 ",
           "claude-code@../../x", "claude-code@$(id)", "claude-code@-rf", "../../x",
           "claude-code@2.1.235/../..", "claude-code@..", "claude-agent-sdk@.."]


@pytest.mark.parametrize("spec", ATTACKS)
def test_a_bad_version_is_one_line_and_nothing_runs(
        spec: str, no_subprocess: list[Any], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    err = one_line_error(["clients", "install", spec], capsys)
    version = spec.rpartition("@")[2]
    assert f"found {version!r}" in err and "expected" in err, err
    assert "claude-code, claude-agent-sdk, anthropic-tool-runner" in err, err
    assert no_subprocess == []
    assert _outside(tmp_path) == []
    assert not Path("/tmp/loopprobe-pwned").exists()


@pytest.mark.parametrize("spec", ["claude-agent-sdk@../../x", "claude-code@1.2"])
def test_the_message_says_what_each_registry_expects(spec: str, no_subprocess: list[Any],
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    err = one_line_error(["clients", "install", spec], capsys)
    assert ("PEP 440" if "sdk" in spec else "semver") in err, err


def test_an_unknown_kind_lists_the_kinds(no_subprocess: list[Any],
                                         capsys: pytest.CaptureFixture[str]) -> None:
    err = one_line_error(["clients", "install", "claude-sdk@0.2.140"], capsys)
    assert "unknown client 'claude-sdk'" in err
    assert "claude-code, claude-agent-sdk, anthropic-tool-runner" in err


BAD = "claude-agent-sdk@../../../planted"
# every way a spec or a version reaches the code
EVERY_WAY = {
    "run --client": ["run", "--client", BAD, "--out", "{tmp}/r"],
    "probes --client": ["probes", "--client", BAD],
    "clients install": ["clients", "install", "claude-agent-sdk@0.2.140", BAD],
    "matrix --clients": ["matrix", "--clients", f"2.1.235,{BAD}", "--out", "{tmp}/m"],
    "matrix --baseline": ["matrix", "--clients", "2.1.235", "--baseline", BAD,
                          "--out", "{tmp}/m"],
    "matrix latest": ["matrix", "--clients", "claude-agent-sdk@latest!", "--out", "{tmp}/m"],
    "bisect --good": ["bisect", "--client", "claude-agent-sdk", "--good", "../../../planted",
                      "--bad", "0.2.140", "--claim", "x", "--out", "{tmp}/b"],
    "bisect --bad": ["bisect", "--client", "claude-code", "--good", "2.1.235",
                     "--bad", "$(id)", "--probe", "x", "--out", "{tmp}/b"],
    "bisect --client": ["bisect", "--client", "../x", "--good", "1", "--bad", "2",
                        "--probe", "x", "--out", "{tmp}/b"],
    "versions --since": ["versions", "claude-agent-sdk", "--since", "../../../planted"],
    "versions kind": ["versions", "claude-agent-sdk@0.2.140"],
    "sessions --clients": ["sessions", "--clients", "2.1.235,../../../planted",
                           "--out", "{tmp}/s"],
}


@pytest.mark.parametrize("way", sorted(EVERY_WAY))
def test_every_way_in_takes_the_same_validation(way: str, no_subprocess: list[Any],
                                                tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    err = one_line_error([a.format(tmp=tmp_path) for a in EVERY_WAY[way]], capsys)
    assert "expected" in err and "found" in err, err
    assert no_subprocess == []


def test_clients_install_refuses_each_bad_spec_and_installs_none(
        no_subprocess: list[Any], capsys: pytest.CaptureFixture[str]) -> None:
    """All specs are checked before the first install: a typo in the third refuses the
    command before the first is downloaded."""
    err = one_line_error(["clients", "install", "2.1.235", "claude-agent-sdk@0.2.140",
                           "claude-code@2.1.x/.."], capsys)
    assert "'2.1.x/..'" in err
    assert no_subprocess == []


def test_the_workflow_plan_takes_the_same_validation(no_subprocess: list[Any],
                                                     capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERSIONS", f"2.1.235,{BAD}")
    assert workflow.main(["workflow", "plan"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "'../../../planted'" in err, err
    assert no_subprocess == []


# ---- installs stay in the cache -----------------------------------------------------------

def _plant(folder: Path) -> None:
    """An install that would be run if it were trusted: its driver python is the planter's."""
    (folder / "venv" / "bin").mkdir(parents=True)
    (folder / "venv" / "bin" / "python").write_text("#!/bin/sh\necho planted\n")
    (folder / "entry").write_text("")
    (folder / "install.json").write_text(json.dumps({
        "package": "claude-agent-sdk", "version": "0.2.140", "platform": "linux-x86_64",
        "entry": "entry", "sha256": "0" * 64}))


@pytest.mark.parametrize("kind", [ClaudeAgentSdk, AnthropicToolRunner, ClaudeCode])
def test_a_planted_install_outside_the_cache_is_never_used(
        kind: Any, no_subprocess: list[Any], tmp_path: Path) -> None:
    """Called directly, past the spec parser: the kind checks the version itself."""
    _plant(tmp_path / "planted")
    client = kind(tmp_path / "cache")
    with pytest.raises(InstallError, match="expected"):
        client.install("../../../planted")
    assert no_subprocess == []


@pytest.mark.parametrize("kind", [ClaudeAgentSdk, AnthropicToolRunner])
def test_a_cache_entry_linked_elsewhere_is_refused(kind: Any, no_subprocess: list[Any],
                                                    tmp_path: Path) -> None:
    _plant(tmp_path / "planted")
    client = kind(tmp_path / "cache")
    client.cache.mkdir(parents=True)
    (client.cache / "0.2.140").symlink_to(tmp_path / "planted")
    with pytest.raises(InstallError, match="inside"):
        client.install("0.2.140")
    assert no_subprocess == []


@pytest.mark.parametrize("version", ["..", ".", "../x", "/tmp/x", "a/b", ""])
def test_an_install_folder_is_one_folder_inside_the_cache(version: str, tmp_path: Path) -> None:
    with pytest.raises(InstallError):
        install_folder(tmp_path / "cache", version)
    assert install_folder(tmp_path / "cache", "0.2.140") == tmp_path / "cache" / "0.2.140"


def test_what_npm_answers_is_checked_too(no_subprocess: list[Any], tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """``latest`` resolved by the registry to something that is no version is refused
    before the install."""
    from probes.clients import claude_code
    monkeypatch.setattr(claude_code, "resolve_version", lambda package, wanted: "../../x")
    with pytest.raises(InstallError, match=re.escape("found '../../x'")):
        ClaudeCode(tmp_path / "cache").install("latest")
    assert no_subprocess == []


@pytest.mark.parametrize("kind", [ClaudeAgentSdk, AnthropicToolRunner])
def test_latest_of_a_pypi_kind_is_resolved_before_the_install(
        kind: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    client = kind(tmp_path / "cache")
    monkeypatch.setattr(client, "published", lambda: ["0.2.9", "0.2.140", "0.2.10", "0.1.0"])
    asked: list[str] = []

    def install_venv(cache: Path, package: str, version: str, entry: Any,
                     companions: tuple[str, ...] = ()) -> Path:
        asked.append(version)
        raise InstallError("stop here")

    monkeypatch.setattr(pypi, "install_venv", install_venv)
    with pytest.raises(InstallError, match="stop here"):
        client.install("latest")
    assert asked == ["0.2.140"]
    assert client.resolve("latest") == "0.2.140"


def test_check_version_names_the_kind(tmp_path: Path) -> None:
    with pytest.raises(InstallError) as caught:
        check_version(ClaudeAgentSdk(tmp_path), "$(id)")
    assert str(caught.value).startswith("claude-agent-sdk@$(id): expected a PEP 440 version")


# ---- plugin kinds -------------------------------------------------------------------------

class _RaisesWhenMade:
    name = "boom"

    def __init__(self) -> None:
        raise RuntimeError("no config")


class _NamedClaudeCode(FakeLoopClient):
    """A plugin posing as the built-in kind: its binaries say claude-code."""

    name = "poser"

    def install(self, version: str) -> ClientBinary:
        binary = super().install(version)
        return ClientBinary("claude-code", "2.1.235", binary.platform, binary.package,
                            binary.root, binary.entry, binary.launcher, binary.sha256)


PLUGIN_ENTRIES = {
    "garbage": "found 'garbage'",
    "x=": "found 'x='",
    "=tests.fakeloop:FakeLoopClient": "found '=tests.fakeloop:FakeLoopClient'",
    "x=os.path": "found 'x=os.path'",
    "../x=tests.fakeloop:FakeLoopClient": "found '../x=tests.fakeloop:FakeLoopClient'",
    "x@y=tests.fakeloop:FakeLoopClient": "found 'x@y=tests.fakeloop:FakeLoopClient'",
    "x=tests.fakeloop:FakeLoopClient:extra": "found 'x=tests.fakeloop:FakeLoopClient:extra'",
    "x=no_such_module_here:C": "ModuleNotFoundError",
    "x=tests.bad_plugin_raises:C": "RuntimeError: planted",
    "x=os:nosuch": "no attribute 'nosuch'",
    "x=json:dumps": "TypeError",
    "x=json:JSONDecoder": "found a JSONDecoder without name, package, install",
    "boom=tests.test_client_specs:_RaisesWhenMade": "RuntimeError: no config",
    "x=tests.fakeloop:FakeLoopClient": "expected a client named 'x', found one named "
                                       "'fake-loop'",
    "claude-code=tests.fakeloop:FakeLoopClient": "built-in kind 'claude-code'",
    "anthropic-tool-runner=tests.fakeloop:FakeLoopClient": "built-in kind",
    f"{FAKE_PLUGIN},{FAKE_PLUGIN}": "'fake-loop' twice",
}


@pytest.mark.parametrize("entry", sorted(PLUGIN_ENTRIES))
def test_a_bad_plugin_entry_is_one_line(entry: str, no_subprocess: list[Any],
                                        monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "plugins" / "tests").mkdir(parents=True)
    (tmp_path / "plugins" / "tests" / "bad_plugin_raises.py").write_text(
        "raise RuntimeError('planted')\n")
    monkeypatch.syspath_prepend(str(tmp_path / "plugins"))
    monkeypatch.setattr("tests.__path__", [*__import__("tests").__path__,
                                           str(tmp_path / "plugins" / "tests")])
    monkeypatch.setenv("LOOPPROBE_CLIENTS", entry)
    err = one_line_error(["clients", "list"], capsys)
    assert err.startswith("loopprobe: LOOPPROBE_CLIENTS"), err
    assert "expected" in err and PLUGIN_ENTRIES[entry] in err, err
    assert no_subprocess == []


def test_a_plugin_cannot_take_a_built_in_kind(no_subprocess: list[Any],
                                              monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("LOOPPROBE_CLIENTS", "claude-code=tests.fakeloop:FakeLoopClient")
    err = one_line_error(["clients", "install", "claude-code@2.1.235"], capsys)
    assert "a plugin cannot replace" in err
    assert "claude-code, claude-agent-sdk, anthropic-tool-runner" in err
    assert no_subprocess == []


def test_a_plugin_binary_must_bear_its_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOOPPROBE_CLIENTS", "poser=tests.test_client_specs:_NamedClaudeCode")
    client = registry.client_for("poser")
    with pytest.raises(InstallError, match="expected a binary named 'poser', found one "
                                           "named 'claude-code'"):
        client.install("1")


def test_a_plugin_binary_names_the_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOOPPROBE_CLIENTS", FAKE_PLUGIN)
    client, version = parse_client_spec("fake-loop@1")
    binary = client.install(version)
    assert binary.identity()["plugin"] == "tests.fakeloop:FakeLoopClient"
    assert [b.identity()["plugin"] for b in client.installed()] == [
        "tests.fakeloop:FakeLoopClient"]
    # what the plugin's own class offers beyond the protocol is still there
    assert client.published() == FakeLoopClient().published()
    # built-in kinds' identities are as they were: no plugin field
    assert "plugin" not in FakeLoopClient().install("1").identity()


def test_a_plugin_kinds_report_names_the_module_that_ran(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("LOOPPROBE_CLIENTS", FAKE_PLUGIN)
    out = tmp_path / "out"
    assert cli.main(["run", "--client", "fake-loop@1", "--catalog", CATALOG, "-j", "1",
                     "--out", str(out), "--work-dir", str(tmp_path / "work"),
                     "--probe", "read-file"]) == 0, capsys.readouterr()
    reports = [json.loads(p.read_text()) for p in sorted(out.glob("*.json"))
               if "client" in json.loads(p.read_text())]
    assert reports and {r["client"]["plugin"] for r in reports} == {
        "tests.fakeloop:FakeLoopClient"}
    assert "tests.fakeloop:FakeLoopClient" in (out / "EVIDENCE.md").read_text()
    assert cli.main(["validate", str(out)]) == 0, capsys.readouterr()


# resolve_versions: what `loopprobe check --versions` names, from a fixed published list
_PUBLISHED = ["2.0.77", "2.1.90", "2.1.94", "2.1.100", "2.1.235", "2.1.240", "2.1.300-beta.1",
              "2.1.9", "2.1.332"]


@pytest.mark.parametrize(("spec", "versions"), [
    ("latest", ["2.1.332"]),
    ("latest~0", ["2.1.332"]),
    ("latest~2", ["2.1.235", "2.1.240", "2.1.332"]),  # oldest first; the prerelease left out
    ("latest~99", ["2.0.77", "2.1.9", "2.1.90", "2.1.94", "2.1.100", "2.1.235", "2.1.240",
                   "2.1.332"]),
    (">=2.1.90,<2.1.240", ["2.1.90", "2.1.94", "2.1.100", "2.1.235"]),
    ("<2.1.94", ["2.0.77", "2.1.9", "2.1.90"]),
    ("==2.1.235", ["2.1.235"]),
    ("2.1.235", ["2.1.235"]),
    ("2.1.332, 2.1.90,2.1.332", ["2.1.332", "2.1.90"]),  # as given, once each
    ("2.1.300-beta.1", ["2.1.300-beta.1"]),  # named exactly: a prerelease is allowed
])
def test_a_versions_spec_resolves_against_the_published_list(spec: str,
                                                             versions: list[str]) -> None:
    assert resolve_versions(spec, _PUBLISHED) == versions


@pytest.mark.parametrize(("spec", "said"), [
    ("", "expected a comma-separated list"),
    ("newest", "'newest' is not a published version"),
    ("2.1.999", "'2.1.999' is not a published version"),
    ("latest~x", "a list holds exact versions only"),
    ("2.1.90,>=2.1.100", "a list holds exact versions only"),
    (">=2.1.90,,<", "not a PEP 440 range"),
    (">=3", "found none in it (published: 2.0.77 to 2.1.332)"),
])
def test_a_wrong_versions_spec_is_refused_in_one_line(spec: str, said: str) -> None:
    with pytest.raises(InstallError) as raised:
        resolve_versions(spec, _PUBLISHED)
    assert said in str(raised.value) and "\n" not in str(raised.value), str(raised.value)


@pytest.mark.parametrize("printed, exit_code, expected, exact, refused", [
    ("2.1.235 (Claude Code)", 0, "2.1.235", False, False),
    ("2.1.235 (Claude Code)", 0, "2.1.235", True, True),   # exact: the whole output
    ("1.18.33", 0, "1.18.33", True, False),
    ("2.1.234 (Claude Code)", 0, "2.1.235", False, True),
    ("2.1.235", 3, "2.1.235", False, True),                 # printed it, but failed
    ("anything", 0, None, False, False),
    ("anything", 1, None, False, True),
])
def test_a_fresh_install_must_print_the_version_it_was_installed_as(
        tmp_path: Path, printed: str, exit_code: int, expected: str | None, exact: bool,
        refused: bool) -> None:
    cli = tmp_path / "cli"
    cli.write_text(f"#!/bin/sh\necho '{printed}'\nexit {exit_code}\n")
    cli.chmod(0o755)
    if not refused:
        check_printed_version([str(cli)], expected, exact, root=tmp_path)
        return
    with pytest.raises(InstallError) as refusal:
        check_printed_version([str(cli)], expected, exact, root=tmp_path)
    assert f"found {printed!r} and exit {exit_code}" in str(refusal.value)


@pytest.mark.parametrize("script, read", [
    ("echo 'Usage: claude [options]'; echo '  --fallback-model <model>'", True),
    ("exit 1", False),                                    # crashed, printing nothing
    ("echo 'Usage: claude [options]'; exit 2", False),    # failed
    ("true", False),                                      # exited 0 printing nothing
])
def test_a_help_that_fails_is_a_harness_error_never_kept(tmp_path: Path, script: str,
                                                         read: bool) -> None:
    """Before: a --help run that failed was kept as the version's help, and every flag's probe
    was absent on that version (2.1.74's fallback-model once answered absent this way)."""
    cli = tmp_path / "cli"
    cli.write_text(f"#!/bin/sh\n{script}\n")
    cli.chmod(0o755)
    binary = ClientBinary("claude-code", "9.9.9", "linux-x64", "p", tmp_path, cli, (str(cli),),
                          "0" * 64)
    if read:
        assert "fallback_model" not in ClaudeCode(tmp_path).capabilities(binary).missing
        assert (tmp_path / "help.txt").is_file()
        return
    with pytest.raises(RuntimeError, match=r"9\.9\.9: --help exited \d+ printing \d+ bytes"):
        ClaudeCode(tmp_path).capabilities(binary)
    assert not (tmp_path / "help.txt").exists()
