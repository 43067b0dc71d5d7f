"""The docs site builds strictly, and the strict build catches what rots: a link to a page
that is not there, an anchor no heading makes, a page no one can reach from the nav. The
README's and CONTRIBUTING's own links point at files that exist."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import missing_install

ROOT = Path(__file__).resolve().parent.parent


def _build(root: Path, out: Path) -> subprocess.CompletedProcess[str]:
    try:
        import material  # noqa: F401
        import mkdocs  # noqa: F401
    except ImportError:
        missing_install("mkdocs (the docs extra)", "pip install -e '.[docs]'")
    # not --quiet: it hides the warnings that --strict counts, and the build passes
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict",
                           "-f", str(root / "mkdocs.yml"), "-d", str(out)],
                          capture_output=True, text=True, timeout=300, cwd=root,
                          env={"PATH": "/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1",
                               "PYTHONPATH": str(ROOT)})


def test_the_site_builds_strictly_with_the_generated_pages(tmp_path: Path) -> None:
    done = _build(ROOT, tmp_path / "site")
    assert done.returncode == 0, done.stdout + done.stderr
    cli = (tmp_path / "site" / "cli" / "index.html").read_text()
    for command in ("run", "matrix", "diff", "bisect", "serve", "clients-install"):
        assert f'id="loopprobe-{command}"' in cli, command
    assert "--catalog" in cli
    schemas = (tmp_path / "site" / "schemas" / "index.html").read_text()
    for path in sorted((ROOT / "probes" / "report" / "json_schemas").glob("*.schema.json")):
        assert f'id="{path.name.removesuffix(".schema.json")}"' in schemas, path.name


@pytest.mark.parametrize("plant, named", [
    (lambda docs: _append(docs / "index.md", "\nSee [the gone page](no-such-page.md).\n"),
     "no-such-page.md"),
    (lambda docs: _append(docs / "index.md", "\nSee [the mock](mock.md#no-such-heading).\n"),
     "no-such-heading"),
    (lambda docs: (docs / "orphan.md").write_text("# Orphan\n\nNo nav entry leads here.\n"),
     "orphan.md"),
], ids=["broken link", "broken anchor", "orphan page"])
def test_the_strict_build_fails_on_a_planted_fault(tmp_path: Path, plant, named: str) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(ROOT / "docs", copy / "docs")
    shutil.copy(ROOT / "mkdocs.yml", copy / "mkdocs.yml")
    assert _build(copy, tmp_path / "clean").returncode == 0, "the copy builds before planting"
    plant(copy / "docs")
    done = _build(copy, tmp_path / "planted")
    assert done.returncode != 0, f"the build passed with a planted fault ({named})"
    assert named in done.stdout + done.stderr


def _append(path: Path, text: str) -> None:
    path.write_text(path.read_text() + text)


@pytest.mark.parametrize("page", ["README.md", "CONTRIBUTING.md"])
def test_the_links_of_the_front_pages_resolve(page: str) -> None:
    text = (ROOT / page).read_text()
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    local = [t.split("#", 1)[0] for t in targets if not re.match(r"[a-z]+:", t)]
    assert local, page
    assert [t for t in local if t and not (ROOT / t).exists()] == []
