"""The cache staircase figure (latency against footprint, log x) with the device's L1/L2
sizes and the detected knees marked, and its data, written into the run's report."""
from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Callable, Sequence

from ...results.plots import draw, plain_log_ticks, pyplot
from .analysis import Geometry, Knee


def plot_staircase(footprints: list[int], latency: list[float], found: list[Knee],
                   g: Geometry, title: str, bisections: Sequence = ()):
    """The staircase; shaded: each grid knee's bracket; crosses: the bisection points, a
    black bar at each bisected capacity."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.semilogx([f / 1024 for f in footprints], latency, "o-", ms=3, lw=1,
                label="load-to-use latency (slope)")
    steps = [s for b in bisections for s in b.steps]
    if steps:
        ax.plot([s.footprint / 1024 for s in steps], [s.latency for s in steps], "x",
                color="tab:red", ms=5, label="bisection points")
    for i, b in enumerate(bisections):
        ax.axvline(b.lo / 1024, color="k", lw=0.8,
                   label=f"capacities (within {b.rel:.0%} of the plateau)" if i == 0 else None)
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
                   g: Geometry, dev, bisections: Sequence = ()) -> None:
    """The staircase PNG and its JSON into the report (nothing without a report directory).
    `curve` is the sweep (chase.Curve), `artifact` the gpuchar_artifact fixture,
    `bisections` the knees bisected on it (capacity.Bisection)."""
    png = artifact("memory-staircase.png",
                   f"Pointer-chase latency against footprint, {dev.name}")
    if png is None:
        return
    draw(plot_staircase, png, curve.footprints, curve.latency, found, g,
         f"{dev.name} ({dev.arch}): ld.global.ca chase, 1 thread", list(bisections))
    data = artifact("memory-staircase.json", "Staircase data (JSON)")
    data.write_text(json.dumps({**curve.as_data(), "knees": [asdict(k) for k in found],
                                "bisections": [b.as_data() for b in bisections],
                                "l1_shared_bytes": g.l1_bytes, "l2_bytes": g.l2_bytes,
                                "notes": g.notes}, indent=1))
