"""HTML pages of the results: the run's report (index.html beside the JSON and Markdown) and the
nightly's (nightly.html), one self-contained file each (CSS and the table-sorting script
inline, plots inline as SVG, no network). Jinja2 templates and static files are package data
(templates/, static/); env.py is the environment, svg.py the plot helpers, page.py and
nightly.py what each page is given."""
from __future__ import annotations

from pathlib import Path

from .env import render
from .page import report_context

INDEX = "index.html"


def report_html(doc: dict, artifacts_dir: Path | None = None, generations=None) -> str:
    """The page of a report document (gpuchar-results.json's content); plots are looked up
    in `artifacts_dir` (the report's artifacts/)."""
    return render("report.html.j2", **report_context(doc, artifacts_dir, generations))


def write(path: Path, text: str) -> Path:
    """Write a page atomically, as UTF-8 whatever the locale (a half-written page never lands
    in a report; the one atomic write of the package)."""
    from ...core.atomic import replacing
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with replacing(path) as tmp:
        Path(tmp).write_text(text, encoding="utf-8")
    return path


def write_report(doc: dict, directory: Path, generations=None) -> Path:
    """DIR/index.html of the report in DIR (its artifacts/ beside it)."""
    from ..files import ARTIFACTS
    directory = Path(directory)
    return write(directory / INDEX, report_html(doc, directory / ARTIFACTS, generations))


def nightly_html(doc: dict, artifacts: list[dict] | None = None,
                 artifacts_dir: Path | None = None) -> str:
    """The nightly's page of nightly.json's document (`artifacts`: the run's report's list)."""
    from .nightly import nightly_context
    return render("nightly.html.j2", **nightly_context(doc, artifacts, artifacts_dir))


def write_nightly(doc: dict, out: Path, artifacts: list[dict] | None = None) -> Path:
    """OUT/nightly.html (the run's plots from OUT/report/artifacts)."""
    from ..files import ARTIFACTS
    out = Path(out)
    return write(out / "nightly.html", nightly_html(doc, artifacts, out / "report" / ARTIFACTS))
