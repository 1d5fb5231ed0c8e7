"""The numerics figures: seed 004's Fig 20 (chain matmul error against chain length)."""
from __future__ import annotations

import numpy as np

from ...results import plots
from .reference import ChainCurve

COLOURS = {"tf32": "tab:blue", "bf16": "tab:red", "f16": "tab:green"}


def plot_chain(curves: list[ChainCurve], path, title: str = "") -> None:
    """Fig 20 written to `path` (by the background renderer while one runs)."""
    plots.draw(chain_figure, path, curves, title)


def chain_figure(curves: list[ChainCurve], title: str = ""):
    """Fig 20: mean l2 relative error against chain length, per type and initialisation;
    links after which most FP16 chains overflowed are marked."""
    plt = plots.pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for c in curves:
        colour = COLOURS.get(c.in_type)
        x = np.arange(1, len(c.mean_err) + 1)
        y = np.array(c.mean_err, dtype=float)
        ax.semilogy(x, np.where(y > 0, y, np.nan), marker="o" if c.init == "low" else "x",
                    ms=3, ls="-" if c.init == "low" else "--", color=colour,
                    label=f"{c.in_type}, init {c.init if c.init == 'fp32' else c.in_type}")
        ov = c.overflow_link()
        if ov:
            ax.axvline(ov, color=colour, ls=":", lw=1)
            ax.annotate(f"{c.in_type} overflow (inf)\n>=50% chains from N={ov}", (ov, 1e-3),
                        fontsize=7, color=colour)
    plots.plain_log_ticks(ax, "y")
    ax.set_xlabel("chain length N")
    ax.set_ylabel("mean l2 relative error vs float64 CPU")
    ax.set_title(title or "Chain matrix multiplication (seed 004 Fig 20)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return fig
