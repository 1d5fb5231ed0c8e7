"""Plot output for the run's report: matplotlib on its non-interactive backend, written
atomically (a half-written PNG never lands in a report). Each topic draws its own figures and
saves them with `save`; a PNG gets an SVG twin beside it, which the HTML report inlines."""
from __future__ import annotations

from pathlib import Path

from ..core.atomic import replacing


def pyplot():
    """matplotlib.pyplot on the Agg backend (no display needed)."""
    import matplotlib
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    return plt


def plain_log_ticks(ax, *axes: str) -> None:
    """Tick labels of log axes as plain numbers ("1024", "0.001") instead of matplotlib's
    $10^{3}$: those go through mathtext, whose first parse builds a pyparsing grammar (about
    a second of a night's test thread, more while compiles run beside it)."""
    from matplotlib.ticker import FuncFormatter, NullFormatter
    for name in axes or ("x", "y"):
        axis = ax.xaxis if name == "x" else ax.yaxis
        axis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
        axis.set_minor_formatter(NullFormatter())


def save(fig, path: str | Path, *, dpi: int = 120) -> Path:
    """Write `fig` to `path` (format from the suffix) atomically and close it. A PNG gets an
    SVG twin (`<stem>.svg`, text as text, no date: the HTML report inlines it), both cropped
    to the one tight box (computed once: the two saves lay the figure out once each)."""
    import matplotlib
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fig.canvas.draw()
        box = fig.get_tightbbox(fig.canvas.get_renderer()).padded(0.1)   # "tight", 0.1 in
        with replacing(path, suffix=path.suffix) as tmp:
            fig.savefig(tmp, dpi=dpi, bbox_inches=box)
        if path.suffix == ".png":
            with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": path.stem}):
                with replacing(path.with_suffix(".svg"), suffix=".svg") as tmp:
                    fig.savefig(tmp, bbox_inches=box, metadata={"Date": None})
    finally:
        pyplot().close(fig)
    return path
