"""A client's --version and --help are contained like its probe runs (``probes.clients.info_run``).

A hostile "client" (a script) that, when asked its version or its help, writes a file of the
host outside its install, plants one in its install and connects to a listener on the host's
loopback: contained, none of it happens; run as the old harness did (on the host, what
``--no-sandbox`` still allows where bubblewrap cannot start), all of it does. Before, the
harness ran every client's ``--version`` (at install) and ``--help`` (for its flags) on the
host as the caller, root here.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from probes.clients import info_run
from probes.clients.base import ClientBinary
from probes.clients.claude_cli import INFO_ENV, ClaudeCliBase, check_printed_version
from probes.clients.claude_code import ClaudeCode
from probes.clients.npm import InstallError
from tests.conftest import bubblewrap, installed_client

HELP = "Usage: claude [options]\n  --fallback-model <model>\n"


@pytest.fixture(autouse=True)
def _contained_unless_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    bubblewrap()  # skips (or fails, every tier required) without a working bwrap
    monkeypatch.setattr(info_run, "_uncontained_allowed", False)


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A TCP listener on the host's loopback; a connection made to it waits in its backlog."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.setblocking(False)
        yield server


def _reached(server: socket.socket) -> bool:
    try:
        server.accept()[0].close()
    except BlockingIOError:
        return False
    return True


def _hostile_client(tmp_path: Path, port: int) -> tuple[Path, Path]:
    """An install whose CLI, asked --version or --help, tries to reach out, then answers."""
    install = tmp_path / "install"
    install.mkdir()
    cli = install / "cli"
    cli.write_text(f"""#!/bin/bash
echo pwned 2>/dev/null > {tmp_path}/escaped
echo planted 2>/dev/null > {install}/planted
echo reached 2>/dev/null > /dev/tcp/127.0.0.1/{port}
if [ "$1" = --version ]; then echo 9.9.9; else printf '{HELP}'; fi
""")
    cli.chmod(0o755)
    return install, cli


def _what_got_out(tmp_path: Path, install: Path, server: socket.socket) -> dict[str, bool]:
    return {"wrote a host file": (tmp_path / "escaped").exists(),
            "wrote into its install": (install / "planted").exists(),
            "reached the host's loopback": _reached(server)}


def _ask(what: str, install: Path, cli: Path) -> None:
    if what == "--version":
        check_printed_version([str(cli)], "9.9.9", root=install)
        return
    binary = ClientBinary("claude-code", "9.9.9", "linux-x64", "p", install, cli, (str(cli),),
                          "0" * 64)
    assert "fallback_model" not in ClaudeCode(install).capabilities(binary).missing
    assert (install / "help.txt").read_text() == HELP  # kept, as before


@pytest.mark.parametrize("what", ["--version", "--help"])
def test_the_clients_informational_runs_reach_nothing_of_the_host(
        tmp_path: Path, listener: socket.socket, what: str) -> None:
    install, cli = _hostile_client(tmp_path, listener.getsockname()[1])
    _ask(what, install, cli)
    assert _what_got_out(tmp_path, install, listener) == {
        "wrote a host file": False, "wrote into its install": False,
        "reached the host's loopback": False}


@pytest.mark.parametrize("what", ["--version", "--help"])
def test_where_bubblewrap_cannot_start_only_no_sandbox_runs_them_on_the_host(
        tmp_path: Path, listener: socket.socket, monkeypatch: pytest.MonkeyPatch,
        what: str) -> None:
    """The counterfactual: the same client on the host gets out, which is what the harness
    did before, and what the user chooses with --no-sandbox."""
    install, cli = _hostile_client(tmp_path, listener.getsockname()[1])
    monkeypatch.setattr(info_run.shutil, "which", lambda name: None)
    with pytest.raises(InstallError, match=r"^cannot run cli --(version|help) contained: "
                       r"bubblewrap \(bwrap\) is not installed; install bubblewrap .*, or "
                       r"pass --no-sandbox to run the client uncontained$"):
        _ask(what, install, cli)
    assert not any(_what_got_out(tmp_path, install, listener).values())
    info_run.allow_uncontained()
    _ask(what, install, cli)
    assert _what_got_out(tmp_path, install, listener) == {
        "wrote a host file": True, "wrote into its install": True,
        "reached the host's loopback": True}


def test_no_sandbox_lets_them_run_uncontained(monkeypatch: pytest.MonkeyPatch) -> None:
    from probes.run.containment import find_containment
    find_containment(no_sandbox=False)
    assert not info_run._uncontained_allowed
    find_containment(no_sandbox=True)
    assert info_run._uncontained_allowed


def test_an_informational_run_is_bounded_in_time_and_output(tmp_path: Path) -> None:
    endless = tmp_path / "endless"
    endless.write_text("#!/bin/bash\n(sleep 300) & head -c 5000000 /dev/zero | tr '\\0' x\n"
                       "sleep 300\n")
    endless.chmod(0o755)
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        info_run.informational_run([str(endless)], [tmp_path], timeout=2, cap=1000)
    assert time.monotonic() - started < 10
    flood = tmp_path / "flood"
    flood.write_text("#!/bin/bash\nhead -c 5000000 /dev/zero | tr '\\0' x\necho done >&2\n")
    flood.chmod(0o755)
    done = info_run.informational_run([str(flood)], [tmp_path], cap=1000)
    assert (done.returncode, done.stdout, done.stderr, done.contained) == (
        0, "x" * 1000, "done\n", True)


def test_it_sees_only_the_system_and_what_it_is_shown(tmp_path: Path) -> None:
    shown = tmp_path / "shown"
    shown.mkdir()
    (tmp_path / "beside").write_text("SECRET-BESIDE-THE-INSTALL")
    look = shown / "look"
    look.write_text(f"#!/bin/bash\nls -A /; echo \"home=$HOME\"; cat {tmp_path}/beside; "
                    "grep CapEff /proc/self/status; env | sort\n")
    look.chmod(0o755)
    done = info_run.informational_run([str(look)], [shown], {"EXTRA": "1"})
    lines = done.stdout.splitlines()
    assert done.returncode == 0, done.stderr
    root_entries = set(lines[:lines.index("home=/sandbox/home")])
    assert root_entries <= {"bin", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc",
                            "sandbox", "sbin", "tmp", "usr", "root"}
    assert "CapEff:\t0000000000000000" in lines
    assert "SECRET" not in done.stdout and "beside: No such file" in done.stderr
    assert sorted(line.split("=")[0] for line in lines if "=" in line
                  and not line.startswith("home=")) == [
        "EXTRA", "HOME", "PATH", "PWD", "SHLVL", "TERM", "TMPDIR", "_"]


def test_a_venvs_python_runs_contained_with_its_interpreter_shown(tmp_path: Path) -> None:
    """How a PyPI loop's import check runs: the venv shown, the interpreter it links to found."""
    venv = Path(sys.prefix)
    done = info_run.informational_run(
        [str(venv / "bin" / "python"), "-c", "import orjson, sys; print(sys.prefix)"], [venv])
    assert (done.returncode, done.stdout, done.contained) == (0, f"{venv}\n", True), done.stderr


# what the real clients print (their --version, and their --help kept as help.txt by the
# runs before these were contained): the same, contained
REAL = [("claude-code@2.0.77", "2.0.77 (Claude Code)"),
        ("claude-code@2.1.235", "2.1.235 (Claude Code)"),
        ("claude-code@2.1.332", "2.1.332 (Claude Code)"), ("opencode@1.18.33", "1.18.33"),
        ("claude-agent-sdk-ts@0.3.337", "2.1.337 (Claude Code)")]


@pytest.mark.client
@pytest.mark.parametrize(("spec", "printed"), REAL)
def test_the_real_clients_print_the_same_contained(spec: str, printed: str) -> None:
    client, binary = installed_client(spec)
    if isinstance(client, ClaudeCliBase):
        argv = client.help_argv(binary)
        done = info_run.informational_run(argv, [binary.root], INFO_ENV)
        assert done.contained and done.returncode == 0
        assert done.stdout + done.stderr == (binary.root / "help.txt").read_text()
        argv = argv[:-1]
    else:
        argv = list(binary.launcher)
    done = info_run.informational_run([*argv, "--version"], [binary.root], INFO_ENV)
    assert (done.returncode, done.stdout.strip(), done.contained) == (0, printed, True)


@pytest.mark.client
def test_clients_install_takes_no_sandbox(capsys: pytest.CaptureFixture[str]) -> None:
    from probes import cli
    installed_client("claude-code@2.1.332")  # cached: nothing is fetched
    assert cli.main(["clients", "install", "claude-code@2.1.332"]) == 0
    assert not info_run._uncontained_allowed
    assert cli.main(["clients", "install", "--no-sandbox", "claude-code@2.1.332"]) == 0
    assert info_run._uncontained_allowed
