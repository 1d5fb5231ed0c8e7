"""Plots of the tensor-core sweep: throughput and latency over warps x ILP (004 Figs 6-7)."""
from __future__ import annotations

import numpy as np

from ....results.plots import pyplot
from .analysis import SweepPoint


def heatmap(points: dict[tuple[int, int], SweepPoint], title: str, unit: str):
    """Throughput and latency over warps x ILP (as 004 Figs 6-7): a matplotlib Figure."""
    plt = pyplot()
    warps = sorted({w for w, _ in points})
    ilps = sorted({k for _, k in points})
    thr = np.full((len(ilps), len(warps)), np.nan)
    lat = np.full((len(ilps), len(warps)), np.nan)
    for (w, k), pt in points.items():
        thr[ilps.index(k), warps.index(w)] = pt.throughput
        lat[ilps.index(k), warps.index(w)] = pt.latency
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    for ax, data, label in ((axes[0], thr, f"throughput ({unit})"),
                            (axes[1], lat, "latency (cycles per ILP step)")):
        im = ax.imshow(data, origin="lower", aspect="auto", cmap="viridis")
        ax.set_xticks(range(len(warps)), [str(w) for w in warps])
        ax.set_yticks(range(len(ilps)), [str(k) for k in ilps])
        ax.set_xlabel("warps per SM")
        ax.set_ylabel("ILP")
        ax.set_title(label, fontsize=9)
        for i in range(len(ilps)):
            for j in range(len(warps)):
                if np.isfinite(data[i, j]):
                    ax.text(j, i, f"{data[i, j]:.0f}" if data[i, j] >= 100 else
                            f"{data[i, j]:.1f}", ha="center", va="center", fontsize=7,
                            color="white" if data[i, j] < np.nanmax(data) * 0.6 else "black")
        fig.colorbar(im, ax=ax)
    fig.suptitle(title, fontsize=10)
    return fig
