"""A case file reaches only its repository (probes.cases.paths): every folder its setup names
resolves inside the enclosing git work tree (or the case file's folder when there is none) at
every step, links resolved; what does not is refused when the file loads, in one line naming
the field, the path and the root, exit 2, before any client starts. A command-line flag may
name any folder, but not through a link of the repository that leads out of it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

import probes.cli.cases as check_command
from probes.cases.catalog import case_catalog
from probes.cases.format import CaseFileError
from probes.cases.paths import repository_root
from tests.conftest import one_line_error

CASE = {"loopprobe": "cases/1", "name": "demo", "title": "Demo",
        "cases": [{"name": "one", "title": "One", "prompt": "hi",
                   "expect": [{"max_requests": 3}]}]}


@pytest.fixture
def no_client(monkeypatch: pytest.MonkeyPatch) -> None:
    """``check`` must refuse before any client runs: running one fails the test."""
    def started(*_: Any, **__: Any) -> None:
        raise AssertionError("a client run started")
    monkeypatch.setattr(check_command, "execute_suite", started)
    monkeypatch.setattr(check_command, "client_for", started)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git work tree (``.git`` is all that marks one) with the case file in ``ci/``, and a
    host folder beside it holding a secret."""
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    (root / "ci").mkdir()
    (root / "ws").mkdir()
    (tmp_path / "host" / "sub").mkdir(parents=True)
    (tmp_path / "host" / "secret.txt").write_text("HOST-SECRET\n")
    return root


def _cases(folder: Path, setup: dict[str, Any]) -> Path:
    path = folder / "cases.yaml"
    path.write_text(yaml.safe_dump({**CASE, "setup": setup}))
    return path


def _check(cases: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    said = one_line_error(["check", str(cases), "--versions", "2.1.235",
                           "--out", str(tmp_path / "out"), *extra], capsys)
    assert "internal error" not in said, said
    return said


@pytest.mark.parametrize(("setup", "field", "why"), [
    ({"workspace": "{host}"}, "setup.workspace", "an absolute path"),
    ({"home_config": "~/.aws"}, "setup.home_config", "a home folder"),
    ({"home_config": "~"}, "setup.home_config", "a home folder"),
    ({"workspace": "../../host"}, "setup.workspace", "leads to {tmp}, outside it"),
    ({"plugin_dirs": ["../ws", "../../x"]}, "setup.plugin_dirs[1]", "outside it"),
    ({"workspace": "../linked/sub"}, "setup.workspace",
     "{root}/linked is a link to {tmp}/host, outside it"),
    ({"workspace": "../ws-link"}, "setup.workspace",
     "{root}/ws-link is a link to {tmp}/host, outside it"),
    # out, then back in: still refused (each step stays inside)
    ({"home_config": "../ws/../../repo/ws"}, "setup.home_config", "outside it"),
    # the checkout's .git holds its token (actions/checkout persists it in .git/config)
    ({"home_config": "../.git"}, "setup.home_config", "{root}/.git leads to {root}/.git, "
                                                      "inside its .git"),
    ({"workspace": "../git-link/hooks"}, "setup.workspace",
     "{root}/git-link is a link to {root}/.git, inside its .git"),
    ({"workspace": ".."}, "setup.workspace", "{root}/ci/.. leads to {root}, its root itself"),
    ({"plugin_dirs": ["../root-link/ws"]}, "setup.plugin_dirs[0]",
     "{root}/root-link is a link to {root}, its root itself"),
])
def test_a_path_that_leaves_the_repository_is_refused_at_load(
        repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], no_client: None,
        setup: dict[str, Any], field: str, why: str) -> None:
    (repo / "linked").symlink_to(tmp_path / "host")  # a link committed at any step
    (repo / "ws-link").symlink_to(tmp_path / "host")  # a link as the last step
    (repo / "git-link").symlink_to(repo / ".git")
    (repo / "root-link").symlink_to(".")
    (repo / ".git" / "hooks").mkdir()
    given = {k: (v.format(host=tmp_path / "host") if isinstance(v, str) else v)
             for k, v in setup.items()}
    said = _check(_cases(repo / "ci", given), tmp_path, capsys)
    assert f"{repo / 'ci' / 'cases.yaml'}: {field}: expected a path relative to the case " \
           f"file's folder that stays inside its repository root {repo}" in said, said
    named = given[field.split(".")[1].split("[")[0]]
    shown = named[int(field[-2])] if isinstance(named, list) else named
    assert f"found {shown!r}" in said
    assert why.format(tmp=tmp_path, root=repo) in said, said
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_a_case_file_in_a_subfolder_reaches_a_sibling_folder_of_its_repository(
        repo: Path, tmp_path: Path) -> None:
    (repo / "plugins" / "guard").mkdir(parents=True)
    (repo / "home").mkdir()
    (repo / "inner").symlink_to("ws")  # a link that stays inside: allowed
    cases = _cases(repo / "ci", {"workspace": "../inner", "home_config": "../home",
                                 "plugin_dirs": ["../plugins/guard", "../plugins/../plugins/guard"]})
    (spec,) = case_catalog(cases)
    setup = spec.probes[0].setup
    assert setup is not None
    assert (setup.workspace, setup.home_config, setup.plugin_dirs) == (
        repo.resolve() / "ws", repo.resolve() / "home", (repo.resolve() / "plugins" / "guard",))


def test_the_root_is_the_work_tree_holding_git_as_a_file_or_the_case_file_s_folder(
        tmp_path: Path) -> None:
    (tmp_path / "worktree" / "a" / "b").mkdir(parents=True)
    (tmp_path / "worktree" / ".git").write_text("gitdir: /elsewhere\n")  # a git worktree's
    assert repository_root(tmp_path / "worktree" / "a" / "b" / "c.yaml") == \
        (tmp_path / "worktree").resolve()
    (tmp_path / "loose").mkdir()
    assert repository_root(tmp_path / "loose" / "c.yaml") == (tmp_path / "loose").resolve()


def test_without_a_work_tree_the_case_file_s_folder_is_the_root(tmp_path: Path) -> None:
    (tmp_path / "plugin").mkdir()
    (tmp_path / "cases").mkdir()
    cases = _cases(tmp_path / "cases", {"plugin_dirs": ["../plugin"]})
    with pytest.raises(CaseFileError, match=f"inside its repository root {tmp_path / 'cases'}"):
        case_catalog(cases)


def test_a_case_file_that_is_a_link_out_of_its_repository_is_not_read(
        repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], no_client: None) -> None:
    (tmp_path / "host" / "cases.yaml").write_text(yaml.safe_dump(CASE))
    (repo / "ci" / "cases.yaml").symlink_to(tmp_path / "host" / "cases.yaml")
    said = _check(repo / "ci" / "cases.yaml", tmp_path, capsys)
    assert f"the case file {repo / 'ci' / 'cases.yaml'}: expected a path whose links inside " \
           f"the case file's repository {repo} stay inside it" in said, said


@pytest.mark.parametrize("flag", ["--workspace", "--home-config", "--plugin-dir", "--baseline"])
def test_a_flag_may_name_any_folder_but_not_through_a_link_of_the_repository_leading_out(
        repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], no_client: None,
        flag: str) -> None:
    """The action passes its inputs as these flags, relative to the checkout a pull request
    wrote: a link there is the pull request's, not the workflow author's."""
    (tmp_path / "host" / "baseline.yaml").write_text("loopprobe: baseline/1\n")
    (repo / "ws-link").symlink_to(tmp_path / "host" / ("baseline.yaml" if flag == "--baseline"
                                                       else ""))
    cases = _cases(repo / "ci", {})
    said = _check(cases, tmp_path, capsys, flag, str(repo / "ws-link"))
    assert f"{flag} {repo / 'ws-link'}: expected a path whose links inside the case file's " \
           f"repository {repo} stay inside it, but {repo / 'ws-link'} is a link to " \
           f"{tmp_path / 'host'}" in said, said


def test_a_flag_naming_a_folder_outside_the_repository_is_handed_over(
        repo: Path, tmp_path: Path) -> None:
    (tmp_path / "elsewhere").symlink_to(tmp_path / "host")  # the user's own link: theirs
    (spec,) = case_catalog(_cases(repo / "ci", {"workspace": "../ws"}),
                           workspace=tmp_path / "elsewhere", home_config=tmp_path / "host",
                           plugin_dirs=(tmp_path / "host",))
    setup = spec.probes[0].setup
    assert setup is not None
    assert (setup.workspace, setup.home_config, setup.plugin_dirs) == (
        tmp_path / "elsewhere", tmp_path / "host", (tmp_path / "host",))


def test_a_link_inside_a_copied_folder_is_kept_as_a_link_not_followed(
        repo: Path, tmp_path: Path) -> None:
    """Decided: a link inside a folder that is copied is copied as a link (it resolves inside
    the sandbox, where nothing of the host is), so the load lets it through and the copy never
    reads through it (tests/test_cases.py copies one; the client tier shows the sandbox)."""
    from probes.sandbox.user_setup import read_tree
    (repo / "ws" / "key").symlink_to(tmp_path / "host" / "secret.txt")
    (spec,) = case_catalog(_cases(repo / "ci", {"workspace": "../ws"}))
    assert spec.probes[0].setup is not None
    items = read_tree(repo / "ws", "workspace")
    assert [(i.relative, i.kind, i.target, i.data) for i in items] == [
        ("key", "link", str(tmp_path / "host" / "secret.txt"), b"")]
    assert not any(b"HOST-SECRET" in i.data for i in items)


def test_a_nul_in_a_path_is_refused(repo: Path, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str], no_client: None) -> None:
    said = _check(_cases(repo / "ci", {"workspace": "ws\0x"}), tmp_path, capsys)
    assert "setup.workspace" in said and "a NUL byte" in said, said
    assert os.path.exists(repo / "ws")


@pytest.mark.parametrize(("target", "said"), [("{root}/.git", "inside its .git"),
                                              (".", "its root itself")])
def test_a_flag_through_a_link_of_the_repository_into_its_git_is_refused(
        repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], no_client: None,
        target: str, said: str) -> None:
    """The workflow names ``workspace: ws``; the pull request made ``ws`` a link to the
    checkout's ``.git`` (or to the checkout itself, which holds it)."""
    (repo / "ws").rmdir()
    (repo / "ws").symlink_to(target.format(root=repo))
    line = _check(_cases(repo / "ci", {}), tmp_path, capsys, "--workspace", str(repo / "ws"))
    assert f"--workspace {repo / 'ws'}: expected a path whose links inside the case file's " \
           f"repository {repo} stay inside it, but {repo / 'ws'} is a link to" in line, line
    assert said in line, line


def test_a_flag_naming_the_repository_itself_is_the_user_s_choice(repo: Path) -> None:
    (spec,) = case_catalog(_cases(repo / "ci", {}), workspace=repo)
    assert spec.probes[0].setup is not None and spec.probes[0].setup.workspace == repo
