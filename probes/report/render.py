"""The evidence as one self-contained HTML page: a version folder, a matrix, an almanac, or a
diff.

The page needs nothing but itself (CSS and a little JS inline, no network, no fonts), is
the same bytes for the same input (no rendering time in it), and escapes everything it
shows: report text is client output, untrusted. A version folder's page has per claim its
verdict and provenance and its checks (expected against observed), and per probe a
timeline of the requests, hook calls, tool runs and what the caller wrote, on one time
axis from ``<report>.timing.json``, and every request's body from the journal, tool_use
ids and their tool_result blocks marked alike: what is shown of a probe is gathered by
``probes.report.probe_view`` (``TEXT_LIMIT`` is re-exported from there), put on the page
here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from probes.core.files import write_text
from probes.core.verdicts import CHANGES, LABELS
from probes.report.counterfactuals import load_counterfactuals
from probes.report.diff import DiffResult, diff_directories
from probes.report.format import (
    FINGERPRINT_FILE,
    NOT_REPORTS,
    TIMING_SUFFIX,
    VERDICTS,
    ReportError,
    load_folder,
    load_json_file,
)
from probes.report.matrix import READABLE_MATRIX_VERSIONS
from probes.report.probe_view import (
    TEXT_LIMIT,
    ToolIds,
    journal_requests,
    pretty,
    probe_view,
    timing_of,
)

__all__ = ["ALMANAC_FILE", "ALMANAC_LEGEND", "ALMANAC_PAGE", "CONFORMANCE_PAGE", "FOLDER_PAGE",
           "MATRIX_FILE", "MATRIX_PAGE", "TEXT_LIMIT", "diff_page_path", "render_almanac_page",
           "render_conformance_page", "render_diff", "render_folder", "render_matrix_page",
           "write_page"]

FOLDER_PAGE = "evidence.html"
MATRIX_FILE = "matrix.json"
MATRIX_PAGE = "matrix.html"
CONFORMANCE_PAGE = "conformance.html"
ALMANAC_FILE = "almanac.json"
ALMANAC_PAGE = "almanac.html"


def _environment() -> Environment:
    return Environment(loader=PackageLoader("probes.report", "templates"), autoescape=True,
                       undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                       keep_trailing_newline=True)


def _static(env: Environment, name: str) -> Markup:
    """A CSS or JS file of the templates folder, inlined as it is (it holds no report text)."""
    assert env.loader is not None
    return Markup(env.loader.get_source(env, name)[0])


def _page(template: str, **context: Any) -> str:
    env = _environment()
    env.filters["pretty"] = pretty
    env.filters["verdict_label"] = _verdict_label
    return env.get_template(template).render(
        css=_static(env, "page.css"), js=_static(env, "page.js"), verdicts=VERDICTS, **context)


def _verdict_label(status: str | None) -> str:
    return "—" if status is None else LABELS.get(status, status.replace("_", " "))


# ---- a version folder ------------------------------------------------------------------------

def render_folder(directory: Path) -> str:
    """The page of one version folder (``reports/2.1.235``)."""
    folder = load_folder(directory)
    record = load_counterfactuals(directory)
    ids = ToolIds()
    reports: list[dict[str, Any]] = []
    for report in folder.reports.values():
        journal, missing = journal_requests(directory, report)
        timing = timing_of(directory, report)
        reports.append({
            "name": report["report"], "title": report["title"], "summary": report["summary"],
            "status": report["status"], "journal": report["journal"],
            "journal_missing": missing, "timing": timing is not None,
            "partial": report.get("partial"), "merged": report.get("merged"),
            "probes": [probe_view(report, p, journal, timing, ids, record)
                       for p in report["probes"]]})
    claims = [(report, probe, claim) for report in reports for probe in report["probes"]
              for claim in probe["claims"]]
    egress = sorted({h for r in folder.reports.values()
                     for h in r.get("trust", {}).get("egress_refused", [])})
    return _page("folder.html", client=folder.client, folder=directory.name, reports=reports,
                 claims=claims, egress=egress, fingerprint=folder.fingerprint is not None,
                 fingerprint_file=FINGERPRINT_FILE)


# ---- a matrix --------------------------------------------------------------------------------

def _load_matrix(path: Path) -> dict[str, Any]:
    data = load_json_file(path, "matrix", READABLE_MATRIX_VERSIONS)
    if data.get("kind") != "matrix" or "claims" not in data:
        raise ReportError(f"{path}: not a loopprobe matrix (expected kind 'matrix')")
    return data


def render_matrix_page(path: Path) -> str:
    """The claim × version table of a ``matrix.json``."""
    matrix = _load_matrix(path)
    return _page("matrix.html", matrix=matrix, versions=[v["client"] for v in matrix["versions"]],
                 source=path.name)


# ---- the conformance table -------------------------------------------------------------------

def render_conformance_page(path: Path) -> str:
    """The claims × clients table of a ``conformance.json``, with scores, tiers and the gate."""
    table = load_json_file(path, "conformance", (1,))
    if table.get("kind") != "conformance" or "clients" not in table:
        raise ReportError(f"{path}: not a loopprobe conformance table (expected kind "
                          "'conformance')")
    return _page("conformance.html", table=table, source=path.name)
# ---- an almanac ------------------------------------------------------------------------------

ALMANAC_LEGEND = ("confirmed", "not_observable", "contradicted", "differs_from_baseline",
                  "absent", "not_reached", "not_applicable", "error", "flaky", "unresolved")


def render_almanac_page(path: Path) -> str:
    """Every version of a range per claim (``almanac.json``): a bar per claim coloured by
    verdict, each change marked and linked to both witnesses."""
    doc = load_json_file(path, "almanac", (1,))
    if doc.get("kind") != "almanac" or "claims" not in doc:
        raise ReportError(f"{path}: not a loopprobe almanac (expected kind 'almanac')")
    index = {v["version"]: i for i, v in enumerate(doc["versions"])}
    return _page("almanac.html", doc=doc, index=index, legend=ALMANAC_LEGEND,
                 areas=sorted({c["area"] for c in doc["claims"] if c["area"]}),
                 changes=sum(1 for c in doc["claims"] for ch in c["changes"] if ch["located"]),
                 flaky=sum(1 for c in doc["claims"] for s in c["segments"]
                           if s["verdict"] == "flaky"),
                 not_built=sum(r["count"] for r in doc["not_built"]))


# ---- a diff ----------------------------------------------------------------------------------

# the changed claims in this order: what broke first, what was not run on one side last
_CHANGE_ORDER = CHANGES


def render_diff(a: Path, b: Path) -> str:
    """Two version folders compared: flipped claims first, then the rest."""
    result: DiffResult = diff_directories(a, b)
    flipped = sorted((c for c in result["claims"] if c["change"] != "same"),
                     key=lambda c: _CHANGE_ORDER.index(c["change"]))
    same = [c for c in result["claims"] if c["change"] == "same"]
    return _page("diff.html", result=result, flipped=flipped, same=same,
                 ca=result["a"]["client"], cb=result["b"]["client"],
                 regressions=result.regressions, a=a.name, b=b.name, changes=list(CHANGES))


def diff_page_path(a: Path, b: Path) -> Path:
    """Where a diff page goes by default: beside B, named as ``loopprobe matrix`` names diffs."""
    beside = b.parent if b.name else b.resolve().parent
    return beside / f"diff-{a.resolve().name}-to-{b.resolve().name}.html"


# ---- writing ---------------------------------------------------------------------------------

def _has_reports(directory: Path) -> bool:
    return any(p.name not in (*NOT_REPORTS, MATRIX_FILE) and not p.name.endswith(TIMING_SUFFIX)
               for p in directory.glob("*.json"))


def write_page(target: Path, out: Path | None = None) -> Path:
    """Render ``target``: a version folder (to ``evidence.html`` in it), or a ``matrix.json``
    or a folder holding one (to ``matrix.html`` beside it). ``ReportError`` when it is none."""
    if target.is_file() and target.name == ALMANAC_FILE:
        html, default = render_almanac_page(target), target.parent / ALMANAC_PAGE
    elif target.is_file():
        html, default = render_matrix_page(target), target.parent / MATRIX_PAGE
    elif not target.is_dir():
        raise ReportError(f"{target}: no such folder or matrix.json")
    elif _has_reports(target):
        html, default = render_folder(target), target / FOLDER_PAGE
    elif (target / MATRIX_FILE).is_file():
        html, default = render_matrix_page(target / MATRIX_FILE), target / MATRIX_PAGE
    else:
        raise ReportError(f"{target}: neither a report folder (no <report>.json) nor a folder "
                          f"with {MATRIX_FILE}")
    return write_text(out or default, html)
