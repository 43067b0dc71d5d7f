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


# ---- a change's "why": title, details without JavaScript, side panel with it ------------------

HOSTILE = '<img src=x onerror="document.body.dataset.owned=1">'


def _explained(tmp_path: Path) -> Path:
    """The synthetic almanac with a changelog joined (an entry that agrees with claim.b2's
    change, one not probed, text trying to be markup) and premises on the change."""
    from probes.scale.almanac_changelog import with_changelog
    path = _published(tmp_path)
    document = json.loads(path.read_text())
    mapping = {"kind": "changelog-map", "format": 1, "client": "claude-code",
               "source": {"repository": "anthropics/claude-code", "path": "CHANGELOG.md",
                          "commit": "5" * 40, "newest": VERSIONS[-1], "loop_entries": 2,
                          "sections": {v: 1 for v in reversed(VERSIONS)}},
               "entries": [{"release": "2.1.113", "text": "Broke B2 " + HOSTILE,
                            "topics": ["hooks"], "claims": ["claim.b2"]},
                           {"release": "2.1.113", "text": "Changed the theme",
                            "topics": ["hooks"], "not_probed": "terminal UI " + HOSTILE}]}
    joined = with_changelog(document, mapping)
    change = next(c for c in joined["claims"] if c["id"] == "claim.b2")["changes"][0]
    change["premises"] = [{"name": "--max-turns", "kind": "flag", "present": True},
                          "hook input tool_use_id " + HOSTILE]
    path.write_text(json.dumps(joined))
    return path


def test_each_change_says_why_on_hover_and_in_details_without_javascript(
        tmp_path: Path) -> None:
    page = render_almanac_page(_explained(tmp_path))
    assert HOSTILE not in page and "&lt;img src=x" in page  # escaped, every place
    dom = _Elements(page)
    [change] = [e for e in dom.elements if e["tag"] == "li" and e.get("data-after") == "2.1.113"]
    assert change["title"].startswith("regressed in 2.1.113; flipped: claim.b2.check passed→failed")
    assert "premises: kind: flag; name: --max-turns; present: true" in change["title"]
    assert "changelog: 2 loop entries (agrees)" in change["title"]
    marks = [e for e in dom.elements if e.get("class") == "mark"
             and e["href"] == "#change-claim.b2-2.1.113"]
    assert marks and marks[0]["title"] == change["title"]
    [details] = [e for e in dom.elements if e["tag"] == "details"
                 and e.get("data-why") == "claim.b2-2.1.113"]
    statuses = {e["data-status"] for e in dom.having("data-status") if e["tag"] == "li"}
    assert statuses == {"agrees", "not probed"}
    assert not any(e["tag"] == "img" for e in dom.elements)
    assert details and "Broke B2 <img src=x" in page.replace("&lt;", "<").replace("&#34;", '"')


def test_the_why_panel_opens_in_a_real_browser(tmp_path: Path) -> None:
    path = _explained(tmp_path)
    assert cli.main(["render", str(path)]) == cli.EXIT_PASSED
    page = path.parent / "almanac.html"
    # no address: the panel stays closed
    closed = _shown(page, tmp_path / "p0")
    [panel] = [e for e in closed.elements if e.get("id") == "why-panel"]
    assert "hidden" in panel
    # a change's address (a click on its mark): the panel shows its why, as the page's nodes
    opened = _Elements(_browser_at(page.as_uri() + "#change-claim.b2-2.1.113", tmp_path / "p1"))
    [panel] = [e for e in opened.elements if e.get("id") == "why-panel"]
    assert "hidden" not in panel and panel["data-change"] == "change-claim.b2-2.1.113"
    inside = opened.elements[opened.elements.index(panel):]
    inside = inside[:next(i for i, e in enumerate(inside) if e.get("id") == "almanac-versions")]
    texts = " ".join(e["text"] for e in inside)
    assert "claim.b2.check" in texts and "Broke B2 <img src=x" in texts
    assert "agrees" in texts and "terminal UI <img" in texts
    assert not any(e["tag"] == "img" for e in opened.elements)
    body = next(e for e in opened.elements if e["tag"] == "body")
    assert "data-owned" not in body
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    _browser(page, tmp_path / "p2", f"--screenshot={ARTEFACTS / 'almanac-why.png'}",
             "--window-size=1200,900")
