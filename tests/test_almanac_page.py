"""The almanac's page: one bar per claim over every version, its parts as wide as the versions
they hold, each change marked and linked to both witnesses; filtered by area in a real
browser (headless chromium)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from probes import cli
from probes.report.render import render_almanac_page
from probes.scale.almanac_doc import publish
from tests.test_almanac_publish import PUBLISHED, _state
from tests.test_almanac_search import VERSIONS
from tests.test_render import ARTEFACTS, ROOT, _browser, _chromium, _Elements


def _published(tmp_path: Path) -> Path:
    state = _state(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    path = publish(state, tmp_path / "state" / "w", out, PUBLISHED, VERSIONS[-1], ())
    document = json.loads(path.read_text())
    for claim in document["claims"]:  # the synthetic catalog has no reports: name two areas
        claim["area"] = "recovery" if claim["id"] == "claim.a" else "tool-pipeline"
    path.write_text(json.dumps(document))
    return path


def test_the_page_has_a_bar_per_claim_and_links_each_change(tmp_path: Path) -> None:
    path = _published(tmp_path)
    document = json.loads(path.read_text())
    dom = _Elements(render_almanac_page(path))
    sections = {e["data-claim-id"]: e for e in dom.having("data-claim-id")
                if e["tag"] == "section"}
    assert set(sections) == {c["id"] for c in document["claims"]}
    for claim in document["claims"]:
        parts = [e for e in dom.having("data-verdict") if e.get("class", "").startswith("seg ")
                 and e["title"].split(":")[0] in {f"{s['first']}–{s['last']}" if s["first"] !=
                                                  s["last"] else s["first"]
                                                  for s in claim["segments"]}]
        assert parts
    # the parts of one bar cover every version of the range
    bar = [e for e in dom.elements if e.get("class", "").startswith("seg ")][:2]
    assert sum(int(e["style"].split(":")[1]) for e in bar) == len(VERSIONS)
    [change] = [e for e in dom.having("data-after") if e["tag"] == "li"
                and e["data-after"] == "2.1.113"]
    witnesses = [e["href"] for e in dom.elements if e.get("class") == "witness"]
    assert "almanac/witnesses/2.1.112" in witnesses and "almanac/witnesses/2.1.113" in witnesses
    assert [e for e in dom.having("data-introduced") if e["data-introduced"] == "2.1.130"]
    assert change["data-located"] == "true"
    assert dom.having("data-count")[0]["data-count"] == "1"  # 2.2.0 not built


def test_render_writes_it_beside_the_almanac(tmp_path: Path) -> None:
    path = _published(tmp_path)
    assert cli.main(["render", str(path)]) == cli.EXIT_PASSED
    assert (path.parent / "almanac.html").is_file()


def test_the_almanac_page_works_in_a_real_browser(tmp_path: Path) -> None:
    path = _published(tmp_path)
    assert cli.main(["render", str(path)]) == cli.EXIT_PASSED
    page = path.parent / "almanac.html"
    dom = _shown(page, tmp_path / "profile")
    claims = [e for e in dom.elements if e["tag"] == "section" and "data-area" in e]
    assert dom.having("data-shown")[0]["data-shown"] == str(len(claims)) == "4"
    # #area=recovery: only that area's claims stay shown
    filtered = _Elements(_browser_at(page.as_uri() + "#area=recovery", tmp_path / "p2"))
    sections = [e for e in filtered.elements if e["tag"] == "section" and "data-area" in e]
    assert {e["data-area"] for e in sections if "hidden" not in e} == {"recovery"}
    assert filtered.having("data-shown")[0]["data-shown"] == "1"
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    _browser(page, tmp_path / "p3", f"--screenshot={ARTEFACTS / 'almanac.png'}",
             "--window-size=1200,900")


def _shown(page: Path, profile: Path) -> _Elements:
    """The page's DOM after its script ran in headless chromium."""
    done = _browser(page, profile, "--dump-dom")
    assert done.returncode == 0, done.stderr[-2000:]
    dom = _Elements(done.stdout)
    body = next(e for e in dom.elements if e["tag"] == "body")
    assert body.get("data-js") == "ready", "the page's script did not run"
    return dom


def _browser_at(url: str, profile: Path) -> str:
    done = subprocess.run([_chromium(), "--headless=new", "--no-sandbox", "--disable-gpu",
                           f"--user-data-dir={profile}", "--dump-dom", url],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_the_committed_almanac_page_is_current_works_and_links_only_committed_witnesses(
        tmp_path: Path) -> None:
    """reports/almanac.html is the page of reports/almanac.json as rendered now; in a real
    browser its script runs and shows every claim; every witness it links is committed, and
    every committed witness folder is linked (a stale one would be evidence of nothing)."""
    reports = ROOT / "reports"
    document = json.loads((reports / "almanac.json").read_text())
    page = render_almanac_page(reports / "almanac.json")
    assert page == (reports / "almanac.html").read_text(), \
        "reports/almanac.html is stale: run loopprobe render reports/almanac.json"
    linked = {e["href"] for e in _Elements(page).elements if e.get("class") == "witness"}
    assert linked and all((reports / href).is_dir() for href in linked), \
        sorted(h for h in linked if not (reports / h).is_dir())
    on_disk = {f"almanac/witnesses/{p.name}"
               for p in (reports / "almanac" / "witnesses").iterdir()}
    anchors = {f"almanac/witnesses/{v['version']}" for v in document["versions"]
               if v.get("witness")}
    assert on_disk == linked | anchors
    copy = tmp_path / "almanac.html"
    copy.write_text(page)
    dom = _shown(copy, tmp_path / "profile")
    shown = [e for e in dom.elements if e["tag"] == "section" and "data-area" in e]
    assert len(shown) == len(document["claims"])
    assert dom.having("data-shown")[0]["data-shown"] == str(len(document["claims"]))
