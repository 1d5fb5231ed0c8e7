"""Plots as inline SVG for the HTML pages: a matplotlib figure or an SVG file made embeddable
in a page (no XML prolog, scalable), and the plots the pages draw themselves from results:
lines (a value over a sweep or over nights, one line per board, events marked) and dots (one
row per characteristic, a dot per board, flagged boards in red: board to board). Reusable by
any page (the run's report, the nightly, a history)."""
from __future__ import annotations

import base64
import io
import re
from pathlib import Path

from ..plots import pyplot

_PROLOG = re.compile(r"\A.*?(?=<svg[\s>])", re.S)
_SIZE = re.compile(r'(<svg[^>]*?)\s(width|height)="[^"]*"')


def inline(text: str) -> str:
    """An SVG document as an element to put in a page: its XML prolog and doctype dropped, its
    fixed width and height removed (the viewBox keeps the aspect; the page's CSS sizes it)."""
    text = _PROLOG.sub("", text, count=1)
    for _ in range(2):
        text = _SIZE.sub(r"\1", text, count=1)
    return text.strip()


def from_file(path: Path) -> str:
    return inline(Path(path).read_text(encoding="utf-8"))


def png_data_uri(path: Path) -> str:
    """A PNG as a data: URI (an older report's plot that has no SVG twin: still inline)."""
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode()


def from_figure(fig, salt: str = "gpuchar") -> str:
    """A matplotlib figure as inline SVG (text as text, ids salted so that two plots on one
    page never share an id); the figure is closed."""
    import matplotlib
    plt = pyplot()
    buf = io.StringIO()
    try:
        with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": salt}):
            fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    finally:
        plt.close(fig)
    return inline(buf.getvalue())


def lines(series: dict[str, tuple[list, list]], *, title: str = "", xlabel: str = "",
          ylabel: str = "", marks: list[tuple[object, str]] = (), logx: bool = False,
          salt: str = "lines") -> str:
    """One line per label (x values, y values; x may be dates); `marks`: (x, label) drawn as
    labelled vertical lines (a driver upgrade on a history)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 3.6))
    for label, (xs, ys) in series.items():
        ax.plot(list(xs), list(ys), "o-", markersize=3, linewidth=1, label=label)
    for x, label in marks:
        ax.axvline(x, color="0.5", linestyle="--", linewidth=0.8)
        ax.annotate(label, (x, 1.0), xycoords=("data", "axes fraction"), rotation=90,
                    fontsize=7, va="top", ha="right", color="0.35")
    if logx:
        ax.set_xscale("log")
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, linewidth=0.3)
    if len(series) > 1:
        ax.legend(fontsize=7, loc="best")
    if series and _dates(series):
        fig.autofmt_xdate()
    return from_figure(fig, salt)


def _dates(series) -> bool:
    import datetime as dt
    first = next(iter(series.values()))[0]
    return bool(first) and isinstance(first[0], (dt.date, dt.datetime))


def dots(rows: list[tuple[str, dict[str, float], set[str]]], *, title: str = "",
         xlabel: str = "relative to the fleet's median (%)", salt: str = "dots") -> str:
    """Board to board: one row per characteristic (label, {board: value relative to the
    median in %}, the flagged boards); a dot per board, flagged ones red and larger."""
    plt = pyplot()
    boards = sorted({b for _l, vals, _f in rows for b in vals})
    fig, ax = plt.subplots(figsize=(7.5, 0.9 + 0.28 * max(1, len(rows))))
    colours = {b: f"C{k % 10}" for k, b in enumerate(boards)}
    for y, (label, vals, flagged) in enumerate(rows):
        for b, v in vals.items():
            bad = b in flagged
            ax.plot([v], [y], "o", color="red" if bad else colours[b],
                    markersize=7 if bad else 4, markeredgecolor="black" if bad else "none")
    ax.axvline(0.0, color="0.4", linewidth=0.8)
    ax.set_yticks(range(len(rows)), [r[0] for r in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel(xlabel)
    ax.set_title(title, fontsize=10)
    ax.grid(True, axis="x", linewidth=0.3)
    for b in boards:
        ax.plot([], [], "o", color=colours[b], label=b)
    if boards:
        ax.legend(fontsize=7, loc="lower right")
    return from_figure(fig, salt)
