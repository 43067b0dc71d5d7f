"""Claude Code (npm ``@anthropic-ai/claude-code``): install, launch in a sandbox, read output.

2.1.x ships a native executable (``bin/claude.exe``); 2.0.x ships a JavaScript
bundle (``cli.js``) run with node. Print mode with ``stream-json`` output is the
observable surface: every event on stdout, the final ``result`` last.

npm installs it without running its scripts (``probes.clients.npm``), so the harness does
what the postinstall of the 2.1.x versions that have one (``install.cjs``) does: link the
native ``claude`` of the platform package npm installed (``@anthropic-ai/claude-code-linux-x64``
and the like, of the same version) to ``bin/claude.exe``, where a placeholder script is.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
from pathlib import Path

from probes.clients.base import ClientBinary, Command, RunContext, read_manifest, scan_installs
from probes.clients.claude_cli import ClaudeCliBase, check_printed_version
from probes.clients.npm import (
    InstallError,
    cache_root,
    cached_or_installed,
    published_versions,
    resolve_version,
)
from probes.clients.specs import check_version, install_folder
from probes.core.invocation import Invocation

__all__ = ["ELF_MAGIC", "PACKAGE", "ClaudeCode", "platform_packages"]

PACKAGE = "@anthropic-ai/claude-code"
ELF_MAGIC = b"\x7fELF"


def _is_native(path: Path) -> bool:
    if path.is_symlink() or not path.is_file():
        return False
    with path.open("rb") as handle:
        return handle.read(4) == ELF_MAGIC


def platform_packages() -> list[str]:
    """The platform packages whose ``claude`` suits this machine, in the order tried (its
    own libc first), as ``install.cjs`` names them."""
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64"}.get(
        platform.machine().lower(), platform.machine().lower())
    glibc, musl = f"{PACKAGE}-linux-{arch}", f"{PACKAGE}-linux-{arch}-musl"
    return [glibc, musl] if platform.libc_ver()[0] == "glibc" else [musl, glibc]


def _place_native(package_dir: Path) -> Path | None:
    """``bin/claude.exe`` as the package's postinstall leaves it: the native executable of
    the platform package of the same version, linked (copied across filesystems)."""
    placed = package_dir / "bin" / "claude.exe"
    if _is_native(placed):
        return placed
    version = json.loads((package_dir / "package.json").read_text()).get("version")
    for name in platform_packages():
        source = package_dir.parent.parent / name / "claude"
        manifest = source.parent / "package.json"
        if not _is_native(source) or not manifest.is_file() \
                or json.loads(manifest.read_text()).get("version") != version:
            continue
        placed.unlink(missing_ok=True)
        try:
            os.link(source, placed)
        except OSError:
            shutil.copyfile(source, placed)
        placed.chmod(0o755)
        return placed
    return None


def _locate_entry(prefix: Path) -> tuple[Path, list[str | Path]]:
    package_dir = prefix / "node_modules" / PACKAGE
    native = _place_native(package_dir)
    if native is not None:
        return native, [native]
    bundle = package_dir / "cli.js"
    if bundle.is_file():
        node = shutil.which("node")
        if node is None:
            raise InstallError(f"{bundle} needs node, which is not on PATH")
        return bundle, [node, bundle]
    raise InstallError(
        f"{PACKAGE} installed without a runnable entry point: neither a native "
        f"bin/claude.exe (2.1.x) nor cli.js (2.0.x) in {package_dir} "
        "(a platform package may be missing for this machine)")


class ClaudeCode(ClaudeCliBase):
    name = "claude-code"
    package = PACKAGE
    registry = "npm"  # the grammar of its versions (probes.clients.specs)

    def __init__(self, cache: Path | None = None):
        self.cache = (cache or cache_root()) / "clients" / self.name

    # ---- installs ------------------------------------------------------------

    def _binary(self, directory: Path) -> ClientBinary | None:
        manifest = read_manifest(directory)
        if manifest is None:
            return None
        entry = directory / manifest["entry"]
        launcher = tuple(a if Path(a).is_absolute() else str(directory / a)
                         for a in manifest["launcher"])
        return ClientBinary(self.name, manifest["version"], manifest["platform"], PACKAGE,
                            directory, entry, launcher, manifest["sha256"])

    def installed(self) -> list[ClientBinary]:
        return scan_installs(self.cache, self._binary)

    def published(self) -> list[str]:
        return published_versions(PACKAGE)

    def install(self, version: str) -> ClientBinary:
        """The cached install of ``version`` (``latest`` allowed), installing it if needed."""
        check_version(self, version)
        exact = resolve_version(PACKAGE, version)
        check_version(self, exact, exact=True)  # the registry's answer is input too
        binary, fresh = cached_or_installed(PACKAGE, exact, install_folder(self.cache, exact),
                                            self._binary, _locate_entry)
        if fresh:
            check_printed_version(list(binary.launcher), binary.version, root=binary.root)
        return binary

    # ---- runs ----------------------------------------------------------------

    def command(self, binary: ClientBinary, invocation: Invocation,
                context: RunContext) -> Command:
        invocation = self.cli_invocation(invocation)
        box = context.box
        argv = [*binary.launcher, "--print", *self.input_args(invocation),
                "--output-format", "stream-json", "--verbose",
                "--model", invocation.model, *self.permission_args(invocation)]
        if invocation.tools is not None:
            # before --tools existed (2.0.3x and older) the closest is --allowedTools, which
            # allows the tools without removing the others from the list the model sees
            flag = "--tools" if "--tools" in self.help_text(binary) else "--allowedTools"
            argv += [flag, ",".join(invocation.tools)]
        if invocation.max_turns is not None:
            argv += ["--max-turns", str(invocation.max_turns)]
        if invocation.session == "new":
            argv += ["--session-id", context.session_ids[invocation.name]]
        elif (resumed := context.resumed_session(invocation)) is not None:
            argv += ["--resume", resumed]
            if invocation.fork:
                argv.append("--fork-session")
        argv += self.mcp_args(invocation, context)
        for plugin in context.plugin_dirs:
            argv += ["--plugin-dir", plugin]
        argv += list(invocation.extra_args)
        env = self.run_environment(box, context.base_url, invocation, dict(context.extra_env))
        return Command(argv, env, box.workspace,
                       {**self.settings_files(box, invocation, context.hooks),
                        **self.mcp_files(invocation, context)})
