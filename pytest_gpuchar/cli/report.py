"""``gpuchar-report html``: the HTML page of a saved run.

  gpuchar-report html RESULTS -o DIR [--artifacts DIR]

RESULTS is a run's gpuchar-results.json (plain or .gz): DIR/index.html is the page the run
itself writes with --gpuchar-report (plots from --artifacts, default RESULTS' directory's
artifacts/). A nightly.json gives DIR/nightly.html, the nightly's page (its run's plots and
artifact list from DIR/report/: -o the nightly's --out renders it again in place). -o is
required: a page written beside RESULTS by default landed in the repository's committed
results/ when RESULTS was one of them.

Exit status: 0 written; 2 a bad results file or usage (one line naming the file).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ..results.files import ResultsError, read_report
from .output import OutputError, check_dir, unwritable, interruptible


def html(args) -> int:
    from ..results import html as pages
    from ..results.files import ARTIFACTS
    src = Path(args.results)
    doc = read_report(src)
    if not isinstance(doc.get("results"), list):
        raise ResultsError(f"{src}: not a gpuchar results report (no 'results' list)")
    out = Path(args.out)
    check_dir("-o", out)
    if args.artifacts and not Path(args.artifacts).is_dir():
        raise OutputError(f"--artifacts {args.artifacts}: no such directory: give the run's "
                          f"artifacts/ (plots), or leave it out")
    t = time.perf_counter()
    if "changes" in doc and "environment" in doc:          # a nightly.json
        listed = out / "report" / "gpuchar-results.json"
        arts = read_report(listed).get("artifacts") if listed.is_file() else []
        name, text = "nightly.html", pages.nightly_html(
            doc, arts, Path(args.artifacts) if args.artifacts else out / "report" / ARTIFACTS)
    else:
        arts = Path(args.artifacts) if args.artifacts else src.parent / ARTIFACTS
        name, text = pages.INDEX, pages.report_html(doc, arts)
    try:
        path = pages.write(out / name, text)
    except OSError as e:
        raise unwritable("-o", out, e) from None
    took = time.perf_counter() - t
    print(f"gpuchar-report: wrote {path} ({len(doc['results'])} results, "
          f"{path.stat().st_size / 1024:.0f} KiB, {took:.2f} s)")
    return 0


@interruptible("gpuchar-report")
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="gpuchar-report",
                                 description="Render a saved gpuchar run as one self-contained "
                                             "HTML page.")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")
    h = sub.add_parser("html", help="DIR/index.html of a gpuchar-results.json (nightly.html of "
                                    "a nightly.json)")
    h.add_argument("results", help="gpuchar-results.json or nightly.json (plain or .gz)")
    h.add_argument("-o", "--out", required=True, metavar="DIR",
                   help="output directory: DIR/index.html (DIR/nightly.html of a nightly.json)")
    h.add_argument("--artifacts", help="the run's artifacts/ directory (plots; default: "
                                       "artifacts/ beside the results file)")
    args = ap.parse_args(argv)
    try:
        return html(args)
    except (ResultsError, OutputError) as e:
        print(f"gpuchar-report: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"gpuchar-report: {e.filename or args.out}: {e.strerror or e}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
