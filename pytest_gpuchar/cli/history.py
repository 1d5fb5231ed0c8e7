"""``gpuchar-history``: the history store (results/history.py) from the command line.

  gpuchar-history import FILE...        record gpuchar-results.json[.gz] / nightly.json[.gz]
  gpuchar-history runs [--board B] [--model M] [--since DATE] [--arch A]
  gpuchar-history boards [--model M]
  gpuchar-history show KEY [--board B | --model M] [--arch A] [--plot FILE.png|.svg]
  gpuchar-history fleet KEY --model M [--arch A]
  gpuchar-history export --csv FILE|- [--key KEY]
  gpuchar-history html -o DIR [--model M] [--arch A] [--key KEY...]

--db TARGET (before or after the command): a file path (SQLite) or a database URL
(postgresql://...); default $GPUCHAR_HISTORY, else gpuchar-history.sqlite. A board is its UUID
or an unambiguous prefix of it (GPU-fa334b31); "unknown" selects the runs of no known board.
Bad input is one line on stderr naming the file or option, exit 2.
"""
from __future__ import annotations

import argparse
import csv
import datetime as _dt
import io
import os
import sys
import time
from pathlib import Path

from ..results.files import ResultsError, read_report
from ..results.history_rows import UNKNOWN_BOARD, HistoryError, driver_changes, per_board
from .output import interruptible

DEFAULT_DB = "gpuchar-history.sqlite"
PLOT_SUFFIXES = (".png", ".svg", ".pdf")
EXIT_USAGE = 2


def default_db() -> str:
    """$GPUCHAR_HISTORY, else gpuchar-history.sqlite here (a checkout, or a directory that has
    one), else in the user's own directory (an installed package: core/locations.py)."""
    from ..core import locations
    env = os.environ.get("GPUCHAR_HISTORY")
    if env:
        return env
    if Path(DEFAULT_DB).exists() or locations.is_checkout():
        return DEFAULT_DB
    locations.user_dir().mkdir(parents=True, exist_ok=True)
    return str(locations.user_dir() / DEFAULT_DB)


def _fmt(v, width: int = 0) -> str:
    if v is None:
        s = "-"
    elif isinstance(v, float):
        s = f"{v:.6g}"
    else:
        s = str(v)
    return s.ljust(width) if width else s


def table(header: list[str], rows: list[list]) -> list[str]:
    """Plain text columns, each as wide as its widest cell."""
    cells = [[_fmt(c) for c in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(header)]
    line = (lambda r: "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    return [line(header)] + [line(r) for r in cells]


def _board(b) -> str:
    return b or UNKNOWN_BOARD


def _open(args, create: bool = False):
    from ..results.history import open_history
    why = read_only_folder(str(args.db))
    if why:                 # said at once: SQLite tries for its busy timeout (30 s) first
        raise HistoryError(why)
    return open_history(args.db, create=create)


def read_only_folder(db: str) -> str:
    """Why the SQLite file `db` cannot be opened when its folder is read-only ("" when that is
    not the case): SQLite writes DB-wal and DB-shm beside a database in WAL mode (the
    history's) even to read it."""
    p = Path(db).expanduser()
    if "://" in db or not p.is_file() or os.access(p.parent, os.W_OK):
        return ""
    return (f"--db {db}: cannot open it: its folder {p.parent} is read-only, and SQLite writes "
            f"{p.name}-wal and {p.name}-shm beside the database even to read it (WAL mode): "
            f"copy it into a writable folder and give the copy to --db")


# --- commands ------------------------------------------------------------------------------------

def _record_file(h, path: Path):
    """Record one report, or every run of a fleet sample (JSON Lines, one run a line:
    results/sample.py); the run ids, those already there in `.existing`."""
    if path.name.endswith((".jsonl", ".jsonl.gz")):
        from ..results import sample
        from ..results.history import Recorded
        ids, existing = [], []
        for i, doc in enumerate(sample.read(path), 1):
            got = h.record(doc, source="import", path=f"{path}:{i}")
            ids += list(got)
            existing += got.existing
        return Recorded(ids, existing)
    return h.record(read_report(path), source="import", path=str(path))


def cmd_import(args) -> int:
    failed = 0
    added = again = 0
    with _open(args, create=True) as h:
        for f in args.files:
            try:
                ids = _record_file(h, Path(f))
            except (ResultsError, HistoryError) as e:
                print(f"gpuchar-history: {e}", file=sys.stderr)
                failed += 1
                continue
            runs = {r["id"]: r for r in h.runs() if r["id"] in set(ids)}
            for rid in ids:
                r = runs[rid]
                what = ("already recorded (run {}): nothing imported" if rid in ids.existing
                        else "recorded run {}").format(rid)
                print(f"{f}: {what} ({_board(r['board'])}, {r['device'] or 'no GPU'}, "
                      f"{r['date'] or 'no date'}, {r['n_results']} results)")
            added += len(ids.new)
            again += len(ids.existing)
        print(f"gpuchar-history: {added} run(s) recorded, {again} already there, "
              f"{failed} file(s) refused; {h.name}")
    return EXIT_USAGE if failed else 0


def cmd_runs(args) -> int:
    with _open(args) as h:
        runs = h.runs(board=args.board, model=args.model, since=args.since, arch=args.arch)
    rows = [[r["id"], r["date"], _board(r["board"]), r["device"] or "no GPU", r["driver"],
             r["arch"], r["source"] + ("/nightly" if r["doc_kind"] == "nightly" and
                                       r["source"] != "nightly" else ""),
             r["pytest_exit"], r["nightly_exit"], r["n_results"], r["path"]] for r in runs]
    print("\n".join(table(["run", "date", "board", "device", "driver", "arch", "source",
                           "pytest", "nightly", "results", "file"], rows)))
    print(f"{len(rows)} run(s)")
    return 0


def cmd_boards(args) -> int:
    with _open(args) as h:
        boards = h.boards(model=args.model)
    rows = [[_board(b["board"]), b["device"] or "no GPU", b["arch"], b["runs"], b["first"],
             b["last"], ", ".join(b["drivers"])] for b in boards]
    print("\n".join(table(["board", "device", "arch", "runs", "first", "last", "drivers"],
                          rows)))
    print(f"{sum(b['board'] is not None for b in boards)} board(s)")
    return 0


def cmd_show(args) -> int:
    if args.board and args.model:
        raise HistoryError("show: give --board or --model, not both")
    if args.plot and Path(args.plot).suffix.lower() not in PLOT_SUFFIXES:
        raise HistoryError(f"--plot {args.plot}: the file name must end in "
                           f"{', '.join(PLOT_SUFFIXES)}")
    with _open(args) as h:
        h.check_key(args.key)
        rows = h.series(args.key, board=args.board, model=args.model, arch=args.arch)
        name = h.name
    if not rows:
        raise HistoryError(f"{args.key}: no result of the board/model/arch asked for in {name}")
    boards = list(dict.fromkeys(r["board"] for r in rows))
    unit = next((r["unit"] for r in rows if r["unit"]), "")
    print(f"{args.key} [{unit}]: {len(rows)} result(s) of {len(boards)} board(s) in {name}")
    print("\n".join(table(
        ["board", "date", "device", "driver", "arch", "value", "spread", "status", "expected",
         "run"],
        [[_board(r["board"]), r["date"], r["device"], r["driver"], r["arch"], r["value"],
          r["spread"], r["status"], r["expected"], r["run"]] for r in rows])))
    for board, date, old, new in driver_changes(rows):
        print(f"driver change: {_board(board)} {old} -> {new} at {date}")
    if args.plot:
        path = plot(rows, args.key, unit, Path(args.plot))
        print(f"plot: {path}")
    return 0


def cmd_fleet(args) -> int:
    with _open(args) as h:
        h.check_key(args.key)
        f = h.fleet(args.key, args.model, arch=args.arch)
        name = h.name
    if not f["boards"]:
        raise HistoryError(f"{args.key}: no judged or measured value of {f['model']} in {name}")
    print(f"{args.key} [{f['unit']}] on {f['model']}: {f['n_boards']} board(s) in {name}")
    print("\n".join(table(["board", "latest", "date", "driver", "runs", "min", "max",
                           "median"],
                          [[_board(b["board"]), b["latest"], b["latest_date"], b["driver"],
                            b["runs"], b["min"], b["max"], b["median"]] for b in f["boards"]])))
    if f["n_boards"]:
        rel = f"{100 * f['spread_rel']:.2f}%" if f.get("spread_rel") is not None else "-"
        print(f"across boards (latest values): min {_fmt(f['min'])}, max {_fmt(f['max'])}, "
              f"median {_fmt(f['median'])}, spread {_fmt(f['spread'])} {f['unit']} ({rel})")
    if any(b["board"] is None for b in f["boards"]):
        print(f"runs of an {UNKNOWN_BOARD} are listed, not counted across boards")
    if f["left_out"]:
        print(f"{f['left_out']} result(s) left out: not judged or measured (unstable, invalid, "
              f"error, info) or without a value")
    return 0


def cmd_export(args) -> int:
    from ..results.history import EXPORT_FIELDS
    if args.csv != "-" and Path(args.csv).is_dir():
        raise HistoryError(f"--csv {args.csv}: is a directory: give a file name (- for "
                           f"stdout)")
    with _open(args) as h:
        if args.key:
            h.check_key(args.key)
        buf = io.StringIO() if args.csv != "-" else sys.stdout
        w = csv.DictWriter(buf, fieldnames=EXPORT_FIELDS, lineterminator="\n")
        w.writeheader()
        n = 0
        for row in h.export_rows(args.key):
            w.writerow(row)
            n += 1
    if args.csv != "-":
        from .output import OutputError, write
        out = Path(args.csv)
        try:
            write("--csv", out, buf.getvalue())
        except OutputError as e:
            raise HistoryError(str(e)) from None
        print(f"gpuchar-history: {n} result(s) written to {out}", file=sys.stderr)
    return 0


def cmd_html(args) -> int:
    from ..results.html.history import write_history
    start = time.perf_counter()
    with _open(args) as h:
        site = write_history(h, Path(args.out), model=args.model, arch=args.arch,
                             keys=args.key, name=f"-o {args.out}")
    print(f"gpuchar-history: {site.directory / 'index.html'}: {site.keys} characteristic "
          f"page(s) of {len(site.models)} model(s) ({', '.join(site.models)}), "
          f"{site.bytes / 1e6:.1f} MB in {time.perf_counter() - start:.1f} s")
    return 0


# --- the plot ------------------------------------------------------------------------------------

def plot(rows: list[dict], key: str, unit: str, path: Path) -> Path:
    """The figure over time, one line per board (spread as error bars), each change of a
    board's driver marked with a dotted line and the new driver's version."""
    from ..results import plots
    plt = plots.pyplot()
    fig, ax = plt.subplots(figsize=(9, 4.8))
    per = per_board(rows)
    colors = {}
    for board, rs in per.items():
        xs = [_dt.datetime.fromisoformat(r["date"]) for r in rs]
        label = f"{(board or UNKNOWN_BOARD)[:12]} ({rs[0]['device']})"
        line = ax.errorbar(xs, [r["value"] for r in rs], yerr=[r["spread"] or 0.0 for r in rs],
                           marker="o", ms=4, capsize=2, label=label)
        colors[board] = line[0].get_color()
    for board, date, _old, new in driver_changes(rows):
        x = _dt.datetime.fromisoformat(date)
        ax.axvline(x, color=colors[board], ls=":", lw=1)
        ax.annotate(f"driver {new}", (x, 1.0), xycoords=("data", "axes fraction"),
                    rotation=90, va="top", ha="right", fontsize=7, color=colors[board])
    ax.set_title(key)
    ax.set_ylabel(unit or "value")
    ax.set_xlabel("run date (UTC)")
    ax.grid(True, alpha=0.3)
    if per:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.autofmt_xdate()
    try:
        return plots.save(fig, path)
    except OSError as e:
        raise HistoryError(f"--plot {path}: cannot write: {e.strerror or e}") from None


# --- the command line ----------------------------------------------------------------------------

def parser() -> argparse.ArgumentParser:
    db = argparse.ArgumentParser(add_help=False)
    db.add_argument("--db", default=argparse.SUPPRESS, metavar="TARGET",
                    help="the history: a file path (SQLite) or a database URL "
                         "(postgresql://...); default $GPUCHAR_HISTORY, else " + DEFAULT_DB
                         + " (installed: in the user's own directory, $GPUCHAR_HOME)")
    ap = argparse.ArgumentParser(
        prog="gpuchar-history", parents=[db],
        description="The history of gpuchar runs in a database (SQLite file or PostgreSQL): "
                    "import reports, list runs and boards, show one figure over time, its "
                    "spread across a model's boards, export CSV, render it as HTML pages.")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")
    p = sub.add_parser("import", parents=[db], help="record gpuchar-results.json[.gz] or "
                                                    "nightly.json[.gz] files")
    p.add_argument("files", nargs="+", metavar="FILE")
    p = sub.add_parser("runs", parents=[db], help="list the runs (oldest first)")
    p.add_argument("--board", help="a board's UUID or an unambiguous prefix; 'unknown'")
    p.add_argument("--model", help="a device name (or an unambiguous part of it)")
    p.add_argument("--since", metavar="DATE", help="runs on or after DATE (ISO, UTC)")
    p.add_argument("--arch", help="runs with results of this arch (sm_90)")
    p = sub.add_parser("boards", parents=[db], help="list the boards")
    p.add_argument("--model")
    p = sub.add_parser("show", parents=[db], help="one figure over time, one row per run")
    p.add_argument("key")
    p.add_argument("--board")
    p.add_argument("--model")
    p.add_argument("--arch")
    p.add_argument("--plot", metavar="FILE", help="also draw it (.png, .svg or .pdf)")
    p = sub.add_parser("fleet", parents=[db], help="one figure across the boards of a model")
    p.add_argument("key")
    p.add_argument("--model", required=True)
    p.add_argument("--arch")
    p = sub.add_parser("export", parents=[db], help="every result with its run as CSV")
    p.add_argument("--csv", required=True, metavar="FILE", help="output file, or - for stdout")
    p.add_argument("--key", help="only this result key")
    p = sub.add_parser("html", parents=[db], help="the history as pages: per characteristic "
                                                  "its value over the runs, per model its "
                                                  "boards")
    p.add_argument("-o", "--out", required=True, metavar="DIR",
                   help="the directory of the pages (index.html, keys/): new, empty, or "
                        "written by this command before (then replaced whole)")
    p.add_argument("--model", help="only this model (a device name or a part of it)")
    p.add_argument("--arch", help="only results of this arch (sm_90)")
    p.add_argument("--key", nargs="+", action="extend", metavar="KEY",
                   help="only these result keys")
    return ap


COMMANDS = {"import": cmd_import, "runs": cmd_runs, "boards": cmd_boards, "show": cmd_show,
            "fleet": cmd_fleet, "export": cmd_export, "html": cmd_html}


@interruptible("gpuchar-history")
def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if not hasattr(args, "db"):
        args.db = default_db()
    try:
        return COMMANDS[args.command](args)
    except HistoryError as e:
        print(f"gpuchar-history: {e}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
