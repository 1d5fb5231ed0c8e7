"""The movement topic's figures for the run's report (each with its data as JSON): the
bandwidth staircase (per-SM bytes per clock from shared memory to device memory, drawn beside
the memory topic's latency staircase), TMA rate against transfer size, the L2 latency
heatmap by SM and line, and the loaded-latency curve. `artifact` is the gpuchar_artifact
fixture: nothing is drawn without a report directory."""
from __future__ import annotations

import json
from typing import Callable

import numpy as np

from ...results.plots import draw, plain_log_ticks, pyplot
from .rows import SHARED_PEAK


def _write(artifact: Callable, stem: str, caption: str, build: Callable, args: tuple,
           data: dict) -> None:
    """The figure `build(*args)` and its data as JSON (nothing without a report directory;
    drawn by the background renderer while one runs)."""
    png = artifact(f"{stem}.png", caption)
    if png is None:
        return
    draw(build, png, *args)
    artifact(f"{stem}.json", f"{caption} (data)").write_text(json.dumps(data, indent=1,
                                                                        default=str))


def save_staircase(artifact: Callable, points: list[tuple[str, float]], dev) -> None:
    """Per-SM bandwidth of each level, shared memory to device memory (log scale)."""
    names = [n for n, _ in points]
    values = [v for _, v in points]
    _write(artifact, "movement-bandwidth-staircase",
           f"Bandwidth staircase (B/clk/SM), {dev.name}", staircase_figure,
           (names, values, f"{dev.name} ({dev.arch}): bandwidth staircase"),
           {"levels": names, "bytes_per_clk_per_sm": values})


def staircase_figure(names: list[str], values: list[float], title: str):
    fig, ax = pyplot().subplots(figsize=(7, 4))
    ax.step(range(len(values)), values, where="mid", color="tab:blue")
    ax.plot(range(len(values)), values, "o", color="tab:blue")
    for k, v in enumerate(values):
        ax.annotate(f"{v:.1f}", (k, v), textcoords="offset points", xytext=(0, 6), ha="center",
                    fontsize=8)
    ax.axhline(SHARED_PEAK, color="grey", ls=":", lw=1, label="documented shared-memory peak")
    ax.set_yscale("log")
    plain_log_ticks(ax, "y")
    ax.set_xticks(range(len(values)), names)
    ax.set_ylabel("bytes per clock per SM (all SMs streaming)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def save_tma_sizes(artifact: Callable, level: str, sizes: list[int], rates: list[float],
                   dev) -> bool:
    _write(artifact, f"movement-tma-sizes-{level}", f"TMA rate against size ({level}), "
           f"{dev.name}", tma_sizes_figure,
           (sizes, rates, f"{dev.name}: TMA bulk copies from {level} against transfer size"),
           {"sizes": sizes, "bytes_per_clk_per_sm": rates})
    return True


def tma_sizes_figure(sizes: list[int], rates: list[float], title: str):
    fig, ax = pyplot().subplots(figsize=(7, 4))
    ax.semilogx(sizes, rates, "o-", base=2)
    plain_log_ticks(ax, "x")
    ax.set_xlabel("cp.async.bulk transfer size (bytes)")
    ax.set_ylabel("bytes per clock per SM")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    return fig


def save_heatmap(artifact: Callable, op: str, lat: np.ndarray, sms: list[int], m, dev) -> bool:
    """SMs (rows, grouped by partition) against lines (columns, near lines of the first
    partition first), of one step kind (load or atomic)."""
    rows = [i for g in m.groups for i in g]
    first = m.groups[0][0] if m.groups else 0
    split = m.per_sm[first]
    cols = np.argsort(lat[first]) if split else np.arange(lat.shape[1])
    _write(artifact, f"movement-l2-heatmap-{op}", f"L2 {op} latency by SM and line, "
           f"{dev.name}", heatmap_figure,
           (lat[rows][:, cols], f"{dev.name}: L2 {op} latency by SM and line, "
                                f"{len(m.groups)} group(s)"),
           {"sms": sms, "latency": [[round(float(v), 1) for v in row] for row in lat],
            "groups": [[sms[i] for i in g] for g in m.groups]})
    return True


def heatmap_figure(img: np.ndarray, title: str):
    fig, ax = pyplot().subplots(figsize=(9, 6))
    im = ax.imshow(img, aspect="auto", interpolation="nearest", cmap="viridis")
    fig.colorbar(im, ax=ax, label="cycles per dependent step")
    ax.set_xlabel("line (sorted by the first partition's latency)")
    ax.set_ylabel("SM (grouped by partition)")
    ax.set_title(title, fontsize=10)
    return fig


def save_loaded(artifact: Callable, points: list, dev) -> bool:
    """Latency against the bandwidth the other SMs achieved meanwhile."""
    xs = [p.gbps for p in points]
    ys = [p.latency.value for p in points]
    streamers = [p.streamers for p in points]
    _write(artifact, "movement-loaded-latency", f"Loaded latency curve, {dev.name}",
           loaded_figure, (xs, ys, streamers, f"{dev.name}: loaded latency"),
           {"gbps": xs, "latency_cycles": ys, "streamers": streamers})
    return True


def loaded_figure(xs: list[float], ys: list[float], streamers: list[int], title: str):
    fig, ax = pyplot().subplots(figsize=(7, 4))
    ax.plot(xs, ys, "o-")
    for x, y, n in zip(xs, ys, streamers):
        ax.annotate(f"{n} SMs", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
    ax.set_xlabel("bandwidth of the streaming SMs (GB/s)")
    ax.set_ylabel("device-memory load latency (cycles)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3)
    return fig
