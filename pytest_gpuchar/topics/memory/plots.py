"""The cache staircase figure (latency against footprint, log x) with the device's L1/L2
sizes and the detected knees marked, and its data, written into the run's report."""
from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Callable

from ...results.plots import plain_log_ticks, pyplot, save
from .analysis import Geometry, Knee


def plot_staircase(footprints: list[int], latency: list[float], found: list[Knee],
                   g: Geometry, title: str):
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.semilogx([f / 1024 for f in footprints], latency, "o-", ms=3, lw=1,
                label="load-to-use latency (slope)")
    ax.axvline(g.l1_bytes / 1024, color="grey", ls=":", lw=1, label="L1/shared per SM (device)")
    ax.axvline(g.l2_bytes / 1024, color="grey", ls="--", lw=1, label="L2 (device attribute)")
    for k in found:
        ax.axvspan(k.lo / 1024, k.hi / 1024, color="tab:orange", alpha=0.2)
    plain_log_ticks(ax, "x")
    ax.set_xlabel("footprint (KiB, log scale)")
    ax.set_ylabel("cycles per dependent load")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    return fig


def save_staircase(artifact: Callable[[str, str], Path | None], curve, found: list[Knee],
                   g: Geometry, dev) -> None:
    """The staircase PNG and its JSON into the report (nothing without a report directory).
    `curve` is the sweep (chase.Curve), `artifact` the gpuchar_artifact fixture."""
    png = artifact("memory-staircase.png",
                   f"Pointer-chase latency against footprint, {dev.name}")
    if png is None:
        return
    fig = plot_staircase(curve.footprints, curve.latency, found, g,
                         f"{dev.name} ({dev.arch}): ld.global.ca chase, 1 thread")
    save(fig, png)
    data = artifact("memory-staircase.json", "Staircase data (JSON)")
    data.write_text(json.dumps({**curve.as_data(), "knees": [asdict(k) for k in found],
                                "l1_shared_bytes": g.l1_bytes, "l2_bytes": g.l2_bytes,
                                "notes": g.notes}, indent=1))
