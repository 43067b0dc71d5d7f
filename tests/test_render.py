"""loopprobe render: the evidence as one HTML page, checked as written and as a real browser
shows it (headless chromium; the screenshot is kept under runs/test-artefacts/)."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from probes import cli
from probes.core.verdicts import CHANGES
from probes.report.format import load_folder, read_journal_lines
from probes.report.render import render_diff, render_folder, render_matrix_page, write_page
from tests.conftest import missing_install

ROOT = Path(__file__).resolve().parent.parent
REPORTS = ROOT / "reports"
ARTEFACTS = ROOT / "runs" / "test-artefacts"


class _Elements(HTMLParser):
    """Every element's tag and attributes, in document order, with the text right inside it."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[dict[str, Any]] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append({"tag": tag, "text": "", **{k: v or "" for k, v in attrs}})

    def handle_data(self, data: str) -> None:
        if self.elements:
            self.elements[-1]["text"] += data

    def having(self, attribute: str) -> list[dict[str, Any]]:
        return [e for e in self.elements if attribute in e]


def _copy(names: tuple[str, ...], tmp_path: Path, folder: str = "2.1.235") -> Path:
    """Part of a committed version folder (some reports with their journals and timing)."""
    target = tmp_path / folder
    target.mkdir()
    for path in sorted((REPORTS / folder).iterdir()):
        if any(path.name.startswith(name + ".") for name in names):
            shutil.copy(path, target / path.name)
    return target


def _claim_statuses(directory: Path) -> dict[str, str]:
    return {c["id"]: c["status"] for r in load_folder(directory).reports.values()
            for c in r["claims"]}


# ---- the page as written ---------------------------------------------------------------------

def test_the_same_folder_gives_the_same_bytes_and_a_self_contained_page(tmp_path: Path) -> None:
    first = write_page(REPORTS / "2.1.235", tmp_path / "a.html").read_bytes()
    # another process, another hash seed: nothing depends on set or dict order by chance
    done = subprocess.run([sys.executable, "-m", "probes", "render", str(REPORTS / "2.1.235"),
                           "--out", str(tmp_path / "b.html")], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONHASHSEED": "12345"})
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "b.html").read_bytes() == first
    html = first.decode()
    # nothing fetched: no external script, style sheet, font, image or frame
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", html, re.I)
    assert "<link" not in html and "@import" not in html and "url(" not in html
    assert html.count("<script") == 1 and html.count("<style") == 1
    # reasonable in size: long bodies are cut (the journals alone are 5.5 MB)
    assert len(first) < 3_000_000


def test_every_claim_has_its_verdict_provenance_and_checks() -> None:
    page = _Elements(render_folder(REPORTS / "2.1.235"))
    claims = {e["data-claim-id"]: e["data-verdict"] for e in page.having("data-count-verdict")}
    assert claims == _claim_statuses(REPORTS / "2.1.235")
    sources = Counter(e["data-source"] for e in page.having("data-source"))
    # each kind as filed (a baseline is labelled as one, not "unstated")
    filed = Counter(c["source"]["kind"] for f in (REPORTS / "2.1.235").glob("*.json")
                    if "claims" in (r := json.loads(f.read_text())) for c in r["claims"])
    assert sources == filed and set(filed) == {"analysis", "project", "baseline"}
    report = json.loads((REPORTS / "2.1.235" / "tool-scheduling.json").read_text())
    shown = {e["data-check-id"] for e in page.having("data-check-id")}
    assert {c["id"] for c in report["checks"]} <= shown


def test_a_tool_id_has_one_colour_everywhere_and_ids_of_a_probe_differ() -> None:
    page = _Elements(render_folder(REPORTS / "2.1.235"))
    colours: dict[str, set[str]] = {}
    for e in page.having("data-tool-use-id"):
        colours.setdefault(e["data-tool-use-id"], set()).update(
            c for c in e["class"].split() if c.startswith("tid-"))
    assert len(colours) > 20
    assert {i: c for i, c in colours.items() if len(c) != 1} == {}
    # the two calls whose results come back in the other order are told apart
    assert colours["toolu_pair_fast"] != colours["toolu_pair_slow"]
    # every tool_result shown answers a tool_use shown (a scripted reply's or a request's);
    # a tool_use the loop never answered (max turns reached) is shown all the same
    uses = {e["data-tool-use-id"] for e in page.having("data-tool-use")}
    answered = {e["data-tool-result-id"] for e in page.having("data-tool-result-id")}
    assert answered and answered <= uses
    assert "toolu_max_turns_probe" in uses - answered


def test_report_text_is_escaped(tmp_path: Path) -> None:
    folder = _copy(("tool-scheduling",), tmp_path)
    path = folder / "tool-scheduling.json"
    report = json.loads(path.read_text())
    report["claims"][0]["statement"] = "<img src=x onerror=alert(1)>"
    report["checks"][0]["observed"] = "</pre><script>alert(2)</script>"
    report["probes"][0]["runs"][0]["argv"] = ["claude", "\"><script>alert(3)</script>"]
    path.write_text(json.dumps(report))
    journal = folder / "tool-scheduling.journal.jsonl"
    lines = journal.read_text().splitlines()
    first = json.loads(lines[0])
    first["body"]["messages"][0]["content"][0]["text"] = "<script>alert(4)</script>"
    journal.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    html = render_folder(folder)
    assert html.count("<script") == 1, "report text reached the page as markup"
    assert "<img src=x" not in html
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in html
    assert "&lt;script&gt;alert(4)&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html


def test_a_long_body_is_cut_but_its_tool_ids_stay(tmp_path: Path) -> None:
    folder = _copy(("tool-scheduling",), tmp_path)
    journal = folder / "tool-scheduling.journal.jsonl"
    records = [json.loads(line) for line in read_journal_lines(journal)]
    records = [r for r in records if r["type"] != "blob"]  # written whole again below
    second = next(r for r in records if r["type"] == "request" and r["seq"] == 2)
    result = next(b for m in second["body"]["messages"] if isinstance(m["content"], list)
                  for b in m["content"] if b.get("type") == "tool_result")
    result["content"] = "x" * 200_000
    journal.write_text("".join(json.dumps(r) + "\n" for r in records))
    html = render_folder(folder)
    assert "x" * 1000 not in html and "(200000 characters in full)" in html
    assert f'data-tool-result-id="{result["tool_use_id"]}"' in html


def test_a_gzipped_journal_shows_the_same_bodies(tmp_path: Path) -> None:
    plain = _copy(("tool-scheduling",), tmp_path)
    packed = tmp_path / "packed"
    shutil.copytree(plain, packed)
    journal = packed / "tool-scheduling.journal.jsonl"
    (packed / "tool-scheduling.journal.jsonl.gz").write_bytes(
        gzip.compress(journal.read_bytes(), mtime=0))
    journal.unlink()
    path = packed / "tool-scheduling.json"
    path.write_text(path.read_text().replace('"tool-scheduling.journal.jsonl"',
                                             '"tool-scheduling.journal.jsonl.gz"'))
    shown = render_folder(plain).replace("folder <code>2.1.235</code>", "")
    assert "tool_result" in shown
    assert render_folder(packed).replace("folder <code>packed</code>", "").replace(
        "tool-scheduling.journal.jsonl.gz", "tool-scheduling.journal.jsonl") == shown


def test_without_timing_or_journal_the_page_says_so(tmp_path: Path) -> None:
    folder = _copy(("tool-scheduling",), tmp_path)
    (folder / "tool-scheduling.timing.json").unlink()
    (folder / "tool-scheduling.journal.jsonl").unlink()
    page = render_folder(folder)
    assert "No timing file beside this report: no timelines." in page
    assert "No request bodies: tool-scheduling.journal.jsonl is not in this folder." in page
    assert "<div class=\"timeline\"" not in page and "class=\"block block-tool_result\"" not in page
    claims = {e["data-claim-id"]: e["data-verdict"] for e in _Elements(page).having("data-count-verdict")}
    assert claims == _claim_statuses(folder)


def test_a_partial_or_merged_report_says_so(tmp_path: Path) -> None:
    folder = _copy(("tool-scheduling",), tmp_path)
    path = folder / "tool-scheduling.json"
    report = json.loads(path.read_text())
    report["partial"] = {"probes_run": ["result-pairing"], "probes_not_run": ["<b>x</b>"]}
    report["merged"] = {"probes_run_now": ["result-pairing"], "probes_from_earlier_run": []}
    path.write_text(json.dumps(report))
    page = render_folder(folder)
    assert "only result-pairing ran; not run: &lt;b&gt;x&lt;/b&gt;." in page
    assert "result-pairing run later into this report of the same binary; from the earlier " \
           "run: none." in page


def test_the_matrix_page_is_the_claim_by_version_table(tmp_path: Path) -> None:
    shutil.copy(REPORTS / "matrix.json", tmp_path / "matrix.json")
    assert cli.main(["render", str(tmp_path)]) == 0
    page = _Elements((tmp_path / "matrix.html").read_text())
    matrix = json.loads((REPORTS / "matrix.json").read_text())
    cells: dict[tuple[str, str], str | None] = {}
    row: str | None = None
    for e in page.elements:
        if e.get("class") == "matrix-row":
            row = e["data-claim-id"]
        elif e["tag"] == "td" and "data-client" in e and row is not None:
            cells[(row, e["data-client"])] = e.get("data-count-verdict")
    expected = {(c["id"], v["client"]): (c["results"].get(v["client"]) or {}).get("status")
                for c in matrix["claims"] for v in matrix["versions"]}
    assert cells == expected
    assert render_matrix_page(tmp_path / "matrix.json") == (tmp_path / "matrix.html").read_text()


def test_the_diff_page_puts_flipped_claims_first(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "2.1.235"
    shutil.copytree(REPORTS / "2.1.235", broken)
    path = broken / "runtime-controls.json"
    report = json.loads(path.read_text())
    claim = next(c for c in report["claims"] if c["id"] == "probe.stop-hook-reentry")
    claim.update(status="contradicted", passed=False, reason="failed checks: injected")
    next(c for c in report["checks"] if c["id"] == "stop-hook-reentry.hook-calls").update(
        passed=False, observed=1)
    path.write_text(json.dumps(report))
    html = render_diff(REPORTS / "2.1.235", broken)
    rows = [(e["data-claim-id"], e["data-change"]) for e in _Elements(html).having("data-change")]
    assert rows[0] == ("probe.stop-hook-reentry", "regressed")
    assert {change for _, change in rows[1:]} == {"same"}
    assert len(rows) == len(_claim_statuses(broken))
    assert html.index('data-check-id="stop-hook-reentry.hook-calls"') < html.index('id="same"')
    # with many changes: what broke first, then other changes, fixes, claims run on one side
    order = list(CHANGES)
    older = tmp_path / "2.0.77"  # with one report left out: its claims are "not run"
    shutil.copytree(REPORTS / "2.0.77", older)
    for left_out in older.glob("goal.*"):
        left_out.unlink()
    changes = [e["data-change"] for e in
               _Elements(render_diff(REPORTS / "2.1.235", older)).having("data-change")]
    assert changes == sorted(changes, key=order.index) and changes[0] == "regressed"
    assert {"not run", "same"} <= set(changes)
    # the command: the page beside B, named as `loopprobe matrix` names its diffs
    assert cli.main(["render", "--diff", str(REPORTS / "2.1.235"), str(broken)]) == 0
    assert (tmp_path / "diff-2.1.235-to-2.1.235.html").read_text() == html
    assert capsys.readouterr().out.strip() == f"wrote {tmp_path / 'diff-2.1.235-to-2.1.235.html'}"


@pytest.mark.parametrize("args", [
    ["render", "{tmp}/missing"],
    ["render", "{tmp}"],                    # an empty folder: no reports, no matrix.json
    ["render", "{tmp}/matrix.json"],        # not a matrix
    ["render"],
    ["render", "{reports}", "--diff", "{reports}", "{reports}"],
    ["render", "--diff", "{reports}", "{tmp}/missing"],
])
def test_bad_input_is_one_line_and_exit_2(args: list[str], tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "sub").mkdir()
    if "{tmp}/matrix.json" in args:
        (tmp_path / "matrix.json").write_text('{"kind": "fingerprint"}')
    filled = [a.format(tmp=tmp_path / "sub" if a == "{tmp}" else tmp_path,
                       reports=REPORTS / "2.1.235") for a in args]
    assert cli.main(filled) == cli.EXIT_HARNESS
    captured = capsys.readouterr()
    assert len(captured.err.strip().splitlines()) == 1 and "Traceback" not in captured.err
    assert captured.err.startswith("loopprobe: ")
    assert not list(tmp_path.rglob("*.html"))


# ---- the page in a browser -------------------------------------------------------------------

def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        missing_install("chromium", "apt-get install chromium")
    assert found is not None
    return found


def _browser(page: Path, profile: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([_chromium(), "--headless=new", "--no-sandbox", "--disable-gpu",
                           f"--user-data-dir={profile}", *flags, page.as_uri()],
                          capture_output=True, text=True, timeout=120)


def test_the_page_works_in_a_real_browser(tmp_path: Path) -> None:
    page = write_page(REPORTS / "2.1.235", tmp_path / "evidence.html")
    done = _browser(page, tmp_path / "profile", "--dump-dom")
    assert done.returncode == 0, done.stderr[-2000:]
    dom = _Elements(done.stdout)
    body = next(e for e in dom.elements if e["tag"] == "body")
    assert body.get("data-js") == "ready", "the page's script did not run"

    # the verdict of every claim, and the summary the script counted from them
    statuses = _claim_statuses(REPORTS / "2.1.235")
    claims = {e["data-claim-id"]: e["data-verdict"] for e in dom.elements
              if e["tag"] == "section" and "data-claim-id" in e}
    assert claims == statuses
    summary = next(e for e in dom.elements if e.get("id") == "verdict-summary")
    assert summary["data-total"] == str(len(statuses))
    # each count is an <li data-verdict> holding a <span> with "<verdict>: <n>"
    counted = {e["data-verdict"]: dom.elements[i + 1]["text"].strip()
               for i, e in enumerate(dom.elements)
               if e.get("class") == "verdict-count"}
    assert counted == {v: f"{v.replace('_', ' ')}: {n}"
                       for v, n in Counter(statuses.values()).items()}

    # the timelines: requests and tool runs on each probe's axis, the axis drawn by the script
    entries = Counter(e["data-kind"] for e in dom.elements if e.get("class") == "tl-entry")
    timed_requests = sum(1 for t in (REPORTS / "2.1.235").glob("*.timing.json")
                         for p in json.loads(t.read_text())["probes"].values()
                         for line in (p.get("timelines") or {}).values()
                         for e in line if e["what"] == "request")
    assert entries["request"] == timed_requests > 0
    assert entries["tool"] > 0 and entries["hook"] > 0 and entries["caller"] > 0
    axes = [e for e in dom.elements if "data-total-ms" in e]
    assert axes and all(e.get("data-axis") == "built" for e in axes)

    # a tool_use id and the tool_result answering it are marked alike, and the script paired them
    marked = [e for e in dom.elements if e.get("data-tool-use-id") == "toolu_pair_fast"]
    uses = [e for e in marked if "data-tool-use" in e]
    results = [e for e in marked if "data-tool-result-id" in e]
    assert uses and results
    colours = {c for e in marked for c in e["class"].split() if c.startswith("tid-")}
    assert len(colours) == 1
    assert all(int(e["data-results"]) >= 1 for e in uses)
    never = [e for e in dom.elements if e.get("data-tool-use-id") == "toolu_max_turns_probe"
             and "data-tool-use" in e]
    assert never and all(e["data-results"] == "0" for e in never)

    # what it looks like, kept for people to see
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTEFACTS / "render-2.1.235.png"
    shot.unlink(missing_ok=True)
    done = _browser(page, tmp_path / "profile", f"--screenshot={shot}", "--window-size=1280,2000",
                    "--hide-scrollbars")
    assert done.returncode == 0, done.stderr[-2000:]
    data = shot.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 20_000
