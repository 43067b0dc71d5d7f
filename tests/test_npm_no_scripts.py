"""npm installs a client without running its scripts (``--ignore-scripts``).

A package's preinstall, install and postinstall run on the host as the caller, before any
sandbox: a client (trusted for nothing) is installed from a local registry with all three
writing a file of the host; none runs (before: all three did). Claude Code 2.1.x needs what
its postinstall did (its native executable linked to ``bin/claude.exe``): the harness does it.
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import io
import json
import shutil
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from probes.clients import claude_code
from probes.clients.claude_code import ELF_MAGIC, PACKAGE, platform_packages
from probes.clients.loop_driver import npm_install
from probes.clients.npm import InstallError, install_package

NAME = "loopprobe-hostile-client"
SCRIPTS = ("preinstall", "install", "postinstall")

pytestmark = pytest.mark.skipif(shutil.which("npm") is None, reason="npm is not installed")


def _scripts(tmp_path: Path) -> dict[str, str]:
    return {s: f"node -e \"require('fs').writeFileSync('{tmp_path}/{s}', 'ran')\""
            for s in SCRIPTS}


def _tarball(tmp_path: Path) -> bytes:
    manifest = {"name": NAME, "version": "1.0.0", "main": "cli.js", "scripts": _scripts(tmp_path)}
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w:gz") as tar:
        for name, text in (("package/package.json", json.dumps(manifest)),
                           ("package/cli.js", "console.log('1.0.0')\n")):
            info = tarfile.TarInfo(name)
            info.size = len(text.encode())
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(text.encode()))
    return data.getvalue()


@pytest.fixture
def registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A registry on the host's loopback serving one package whose scripts write files."""
    tarball = _tarball(tmp_path)
    served: dict[str, bytes] = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = served.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Length", str(len(body or b"")))
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    integrity = "sha512-" + base64.b64encode(hashlib.sha512(tarball).digest()).decode()
    served[f"/{NAME}"] = json.dumps({"name": NAME, "dist-tags": {"latest": "1.0.0"}, "versions": {
        "1.0.0": {"name": NAME, "version": "1.0.0", "hasInstallScript": True,
                  "scripts": _scripts(tmp_path),
                  "dist": {"tarball": f"{url}/{NAME}/-/{NAME}-1.0.0.tgz",
                           "integrity": integrity}}}}).encode()
    served[f"/{NAME}/-/{NAME}-1.0.0.tgz"] = tarball
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("npm_config_registry", url + "/")
    monkeypatch.setenv("npm_config_cache", str(tmp_path / "npm-cache"))
    yield url
    server.shutdown()
    server.server_close()


def _entry(prefix: Path) -> tuple[Path, list[str | Path]]:
    entry = prefix / "node_modules" / NAME / "cli.js"
    return entry, ["node", entry]


@pytest.mark.parametrize("how", ["a CLI kind (probes.clients.npm)", "a loop kind (npm_install)"])
def test_installing_a_client_runs_none_of_its_scripts(tmp_path: Path, registry: str,
                                                      how: str) -> None:
    if how.startswith("a CLI"):
        install_package(NAME, "1.0.0", tmp_path / "cache" / "1.0.0", _entry)
    else:
        npm_install(tmp_path / "cache", NAME, "1.0.0", (), "cli.js", tmp_path / "driver.cjs")
    assert (tmp_path / "cache" / "1.0.0" / "node_modules" / NAME / "cli.js").is_file()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name in SCRIPTS) == []


# ---- Claude Code's native executable, placed as its postinstall did --------------------


def _claude_package(prefix: Path, version: str = "2.1.400",
                    platform_version: str = "2.1.400") -> tuple[Path, Path]:
    package = prefix / "node_modules" / PACKAGE
    (package / "bin").mkdir(parents=True)
    (package / "package.json").write_text(json.dumps({"name": PACKAGE, "version": version}))
    (package / "bin" / "claude.exe").write_text("#!/bin/sh\necho 'native binary not installed'\n")
    native = prefix / "node_modules" / platform_packages()[0] / "claude"
    native.parent.mkdir(parents=True)
    native.write_bytes(ELF_MAGIC + b"the native claude")
    (native.parent / "package.json").write_text(json.dumps({"version": platform_version}))
    return package / "bin" / "claude.exe", native


def test_the_native_executable_is_placed_where_the_postinstall_put_it(tmp_path: Path) -> None:
    placed, native = _claude_package(tmp_path)
    entry, launcher = claude_code._locate_entry(tmp_path)
    assert (entry, launcher) == (placed, [placed])
    assert placed.read_bytes() == native.read_bytes() and placed.stat().st_mode & 0o111
    assert claude_code._locate_entry(tmp_path)[0] == placed  # placed once, found after


def test_a_platform_package_of_another_version_or_a_link_is_not_placed(tmp_path: Path) -> None:
    _claude_package(tmp_path / "other", platform_version="2.1.399")
    with pytest.raises(InstallError, match=r"neither a native bin/claude\.exe"):
        claude_code._locate_entry(tmp_path / "other")
    _, native = _claude_package(tmp_path / "link")
    outside = tmp_path / "outside"
    outside.write_bytes(ELF_MAGIC + b"not the package's")
    native.unlink()
    native.symlink_to(outside)
    with pytest.raises(InstallError, match=r"neither a native bin/claude\.exe"):
        claude_code._locate_entry(tmp_path / "link")
