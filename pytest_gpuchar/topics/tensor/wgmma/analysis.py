"""Pure maths of the wgmma depth loops: one launch set's point (cycles per trip of the SM and
of each warp, FLOP per clock per SM, stability) from the warps' clocks over trip counts, the
best stable point of a row. No CuPy, no pytest."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ....core.fit import fit
from .rows import Config, DepthRow

SPREAD_REL = 0.01        # per-repeat slopes must agree within 1% (integer cycles: 0.5)
SPREAD_ABS = 0.5


@dataclass
class Point:
    """One kernel (config) launched with `warpgroups` warpgroups on one SM."""
    config: Config
    warpgroups: int
    trip_cycles: float         # the SM's cycles per trip (slope of the block's span)
    warp_trip_cycles: float    # a warp's cycles per trip (slope of its own span, mean)
    throughput: float          # FLOP per clock per SM
    spread: float              # max - min of the per-repeat throughputs
    unstable: bool
    why: str = ""
    spans: dict = field(default_factory=dict)     # trip -> median block span
    warp_spread: float = float("nan")  # max - min of the per-repeat warp cycles per trip

    @property
    def label(self) -> str:
        return f"wg{self.warpgroups}_{self.config.tag}"


def point(row: DepthRow, config: Config, warpgroups: int, records: dict) -> Point:
    """records: trip -> [(starts, ends) per repeat] (one clock per warp). Per repeat, the
    block's span (max end - min start) and each warp's span are fitted against the trip
    count: the warpgroups' start skew and the drain after the loop are the same at every
    trip count and cancel. Unstable when the per-repeat slopes spread more than 1% (0.5
    cycles) or the spans are not linear in the trip count."""
    block = {t: [float(np.max(t1) - np.min(t0)) for t0, t1 in reps] for t, reps in records.items()}
    warp = {t: [float(np.mean(np.asarray(t1, float) - np.asarray(t0, float))) for t0, t1 in reps]
            for t, reps in records.items()}
    trips = {t: t for t in records}
    bf = fit(block, trips, spread_abs=SPREAD_ABS, spread_rel=SPREAD_REL)
    wf = fit(warp, trips, spread_abs=SPREAD_ABS, spread_rel=SPREAD_REL)
    work = row.flop * config.per_trip * warpgroups
    thr = work / bf.value if bf.value > 0 else float("nan")
    each = [work / s for s in bf.slopes if s > 0]
    why = "; ".join(w for w in (bf.why_unstable, wf.why_unstable) if w)
    return Point(config, warpgroups, bf.value, wf.value, thr,
                 (max(each) - min(each)) if each else float("inf"), bool(why), why, bf.medians,
                 wf.spread)


def best(points: list[Point]) -> Point | None:
    """The stable point of highest throughput (None when none is stable)."""
    stable = [p for p in points if not p.unstable and np.isfinite(p.throughput)]
    return max(stable, key=lambda p: p.throughput) if stable else None


def higher_unstable(points: list[Point], top: Point, margin: float = 0.02) -> Point | None:
    """An unstable point more than `margin` above the best stable one: then the best is not
    the peak and the figure is reported unstable rather than low."""
    over = [p for p in points if p.unstable and np.isfinite(p.throughput)
            and p.throughput > top.throughput * (1 + margin)]
    return max(over, key=lambda p: p.throughput) if over else None


def concurrency_to(points: list[Point], fraction: float, peak: float) -> Point | None:
    """The stable point with the fewest wgmma in flight per SM (warpgroups x chains x
    groups in flight) that reaches `fraction` of `peak`."""
    ok = [p for p in points if not p.unstable and p.throughput >= fraction * peak]
    return min(ok, key=lambda p: (in_flight(p), p.warpgroups)) if ok else None


def concurrency_spread(points: list[Point], fraction: float, peak: float) -> float:
    """How far the in-flight count of concurrency_to moves within the points' own scatter:
    the fewest in flight of the stable points whose throughput less its spread reaches
    `fraction` of `peak` (the largest in flight when none does) minus the fewest of those
    whose throughput plus its spread does; 0 when the scatter moves no point across."""
    ok = [p for p in points if not p.unstable]
    line = fraction * peak
    high = [in_flight(p) for p in ok if p.throughput + p.spread >= line]
    low = [in_flight(p) for p in ok if p.throughput - p.spread >= line]
    if not high:
        return float("nan")
    return float((min(low) if low else max(in_flight(p) for p in ok)) - min(high))


def in_flight(p: Point) -> int:
    """wgmma in flight on the SM at most: per warpgroup `chains` x `steps` per group, two
    groups when the trip waits only for the previous one."""
    return p.warpgroups * p.config.per_trip * (1 + p.config.wait)


def grid(points: list[Point]) -> dict:
    """The points as JSON-able data."""
    return {p.label: {"throughput": round(p.throughput, 1), "trip_cycles": round(p.trip_cycles, 2),
                      "warp_trip_cycles": round(p.warp_trip_cycles, 2),
                      "spread": round(p.spread, 1), "unstable": p.why}
            for p in points}
