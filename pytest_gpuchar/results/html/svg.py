"""Plots as inline SVG for the HTML pages: a matplotlib figure or an SVG file made embeddable
in a page (no XML prolog, scalable), and the plots the pages draw themselves from results:
lines (a value over a sweep or over nights, one line per board, events marked) and dots (one
row per characteristic, a dot per board, flagged boards in red: board to board). Reusable by
any page (the run's report, the nightly, a history).

``timeline`` draws without matplotlib: the geometry of a value over dates, one line per board,
marked events, that the template macro ``timeline`` (macros.html.j2) turns into SVG elements.
A history has a thousand such plots; a matplotlib figure takes about 0.25 s each."""
from __future__ import annotations

import base64
import datetime as dt
import io
import math
import re
from dataclasses import dataclass
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


# --- a value over dates, drawn directly -------------------------------------------------------

# matplotlib's tab10, then tab20's lighter shades; after 20 lines the colours come again, dashed
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896",
           "#c5b0d5", "#c49c94", "#f7b6d2", "#c7c7c7", "#dbdb8d", "#9edae5")
DASHES = ("", "6 3", "2 2")
DAY = 86400
TIME_STEPS = (60, 300, 900, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, DAY, 2 * DAY, 7 * DAY,
              14 * DAY, 30 * DAY, 91 * DAY, 182 * DAY, 365 * DAY)
MAX_TICKS = 6


@dataclass
class Point:
    """One value of a line: its date (UTC), value, spread (an error bar), whether it was judged
    or measured (others are drawn hollow) and its tooltip."""
    x: dt.datetime
    y: float
    spread: float | None = None
    judged: bool = True
    title: str = ""


def style(index: int) -> tuple[str, str]:
    """The colour and dash pattern of the `index`-th line."""
    return PALETTE[index % len(PALETTE)], DASHES[(index // len(PALETTE)) % len(DASHES)]


def _epoch(x: dt.datetime) -> float:
    return x.replace(tzinfo=dt.timezone.utc).timestamp() if x.tzinfo is None else x.timestamp()


def _nice(span: float) -> float:
    """A step of 1, 2, 2.5 or 5 times a power of ten giving about five ticks over `span`."""
    raw = span / 5.0
    mag = 10.0 ** math.floor(math.log10(raw))
    return next(m * mag for m in (1.0, 2.0, 2.5, 5.0, 10.0) if raw <= m * mag * (1 + 1e-9))


def _y_ticks(lo: float, hi: float) -> list[tuple[float, str]]:
    step = _nice(hi - lo)
    top = max(abs(lo), abs(hi))
    exp = math.floor(math.log10(step) + 1e-9)
    quarter = round(step / 10.0 ** exp, 6) == 2.5         # 0.25, 2.5: one digit more
    if top < 1e6 and step >= 1e-4:
        fmt = f".{max(0, -exp + quarter)}f"
    else:
        fmt = f".{max(1, math.floor(math.log10(top)) - exp + 1 + quarter)}g"
    first = math.ceil(lo / step - 1e-9)
    return [(k * step, format(k * step, fmt)) for k in range(first, first + 20)
            if k * step <= hi + 1e-9 * step]


def _x_ticks(lo: float, hi: float) -> list[tuple[float, str]]:
    step = next((s for s in TIME_STEPS if (hi - lo) / s <= MAX_TICKS), TIME_STEPS[-1])
    fmt = "%Y-%m-%d" if step >= DAY else "%m-%d %H:%M"
    t = math.ceil(lo / step) * step
    out = []
    while t <= hi:
        out.append((t, dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime(fmt)))
        t += step
    return out


def _range(values: list[float], pad: float, empty: float) -> tuple[float, float]:
    lo, hi = min(values), max(values)
    if hi == lo:
        d = abs(lo) * 0.05 or empty
        return lo - d, hi + d
    return lo - pad * (hi - lo), hi + pad * (hi - lo)


def timeline(series: dict[str, tuple[int, list[Point]]], marks=(), *, ylabel: str = "",
             width: int = 760, height: int = 300) -> dict:
    """The geometry of a value over dates: `series` maps a line's label to (its style index,
    its points in date order); `marks` are (label, date, text, tooltip): a vertical line in
    that line's colour (a board's driver change). What the macro `timeline` draws: the box,
    the ticks, one path per line with its points and error bars (clipped to the box), the
    marks; pixel coordinates with one decimal. The value range is that of the judged points
    and their spreads (all points where none is judged): an unstable outlier does not flatten
    the lines; a point outside is drawn on the box's edge and counted in `clipped`."""
    x0, y0, x1, y1 = 64.0, 14.0, width - 24.0, height - 44.0
    pts = [p for _i, ps in series.values() for p in ps]
    xs = [_epoch(p.x) for p in pts] + [_epoch(m[1]) for m in marks]
    judged = [y for p in pts if p.judged for y in (p.y - (p.spread or 0), p.y + (p.spread or 0))]
    ylo, yhi = _range(judged or [p.y for p in pts] or [0.0], 0.06, 1.0)
    xlo, xhi = _range(xs or [0.0], 0.03, DAY / 2)
    px = (lambda t: round(x0 + (t - xlo) / (xhi - xlo) * (x1 - x0), 1))
    py = (lambda v: round(y1 - (min(max(v, ylo), yhi) - ylo) / (yhi - ylo) * (y1 - y0), 1))
    lines = []
    for label, (index, ps) in series.items():
        colour, dash = style(index)
        dots = [{"cx": px(_epoch(p.x)), "cy": py(p.y), "hollow": not p.judged,
                 "title": p.title,
                 "e0": py(p.y + p.spread) if p.spread else None,
                 "e1": py(p.y - p.spread) if p.spread else None} for p in ps]
        d = " ".join(f"{'L' if k else 'M'}{q['cx']},{q['cy']}" for k, q in enumerate(dots))
        lines.append({"label": label, "colour": colour, "dash": dash, "d": d, "points": dots})
    styles = {label: style(index)[0] for label, (index, _ps) in series.items()}
    return {"width": width, "height": height, "x0": x0, "y0": y0, "x1": x1, "y1": y1,
            "ylabel": ylabel, "lines": lines,
            "clipped": sum(not ylo <= p.y <= yhi for p in pts),
            "xticks": [(px(t), text) for t, text in _x_ticks(xlo, xhi)
                       if 30 <= px(t) <= width - 30],           # room for the label
            "yticks": [(py(v), text) for v, text in _y_ticks(ylo, yhi)],
            "marks": [{"label": label, "x": px(_epoch(x)), "colour": styles.get(label, "#555"),
                       "text": text, "title": tip} for label, x, text, tip in marks]}
