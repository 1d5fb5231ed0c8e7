"""Cache capacities by bisection, pure (no CuPy, no pytest): which plateau of the staircase
each knee leaves, the rule that says whether a footprint is still on it, the grid bracket the
staircase gives and the bisection that narrows it.

The rule: a level's capacity is the **largest footprint whose latency is at most KNEE_REL
(5%) above the level's plateau**, the plateau being the median latency of the level's run of
staircase points (``analysis.plateaus``: points within 8% of their median) without the
partial-miss points at its upper end (``analysis.without_rising_edge``). The staircase's grid
(3 points per doubling) brackets that footprint to one sweep step (26%); bisection between
the bracket's ends, each step one more chase at the geometric mid-point, narrows it until
(hi - lo) / lo <= KNEE_RESOLUTION (3%): three steps from one sweep step.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum
from typing import Callable

from .analysis import Plateau, plateaus, without_rising_edge
from .rows import LINE

# A point is still on its level while its latency is at most this far above the plateau.
# It must clear a point's own scatter around its level: L1 and near-L2 points repeat within
# about 1%, far-L2 points (a mix of near and far lines that the pages decide) within about
# 2%; past a knee the latency climbs by 8x (L1), 1.8x (near to far) and 1.3x (far L2 to
# device memory) within a few % of footprint, so 3% or 5% read the same knee to well under
# the bisection's resolution (docs/memory.md, lab notes).
KNEE_REL = 0.05
# Bisection stops when the bracket [lo, hi) is at most this fraction of lo wide.
KNEE_RESOLUTION = 0.03


class CacheKnee(str, Enum):
    """The capacities bisected: the L1, the near L2 partition, the whole L2 (as one SM's
    chase sees them)."""
    L1 = "l1"
    L2_NEAR = "l2_near"
    L2 = "l2"


@dataclass(frozen=True)
class Levels:
    """Which staircase plateau each knee leaves (`below`) and which it reaches (`above`)."""
    below: dict[CacheKnee, Plateau]
    above: dict[CacheKnee, Plateau]
    why: dict[CacheKnee, str] = field(default_factory=dict)   # a knee with no levels: why


def levels(footprints: list[int], latency: list[float]) -> Levels:
    """The plateaus around each knee. The first plateau is the L1, the last device memory;
    with four or more, the second is the near L2 and the third the far L2 (further plateaus
    between the far L2 and device memory, seen just past the L2, are partial hits, never a
    level: the L2 knee is read upward from the far plateau); with three there is one L2
    level and no near/far knee."""
    ps = plateaus(footprints, latency)
    below: dict[CacheKnee, Plateau] = {}
    above: dict[CacheKnee, Plateau] = {}
    why: dict[CacheKnee, str] = {}
    if len(ps) < 2:
        why = {k: f"the staircase shows {len(ps)} latency plateau(s)" for k in CacheKnee}
        return Levels(below, above, why)
    cut = [without_rising_edge(p, footprints, latency) for p in ps]
    below[CacheKnee.L1], above[CacheKnee.L1] = cut[0], ps[1]
    if len(ps) >= 4:
        below[CacheKnee.L2_NEAR], above[CacheKnee.L2_NEAR] = cut[1], ps[2]
        below[CacheKnee.L2], above[CacheKnee.L2] = cut[2], ps[-1]
    else:
        why[CacheKnee.L2_NEAR] = (f"near/far L2 not separated: the staircase shows {len(ps)} "
                             f"plateaus ({[round(p.latency) for p in ps]} cycles)")
        if len(ps) == 3:
            below[CacheKnee.L2], above[CacheKnee.L2] = cut[1], ps[-1]
        else:
            why[CacheKnee.L2] = "no device-memory plateau with a cache level below it"
    return Levels(below, above, why)


def limit(plateau: float, rel: float = KNEE_REL) -> float:
    """The highest latency still on a level of `plateau` cycles."""
    return plateau * (1 + rel)


def on_level(latency: float, plateau: float, rel: float = KNEE_REL) -> bool:
    return latency <= limit(plateau, rel)


def grid_bracket(footprints: list[int], latency: list[float], below: Plateau, above: Plateau,
                 rel: float = KNEE_REL) -> tuple[int, int] | None:
    """(i, i + 1): indices of the largest staircase point from the lower plateau's first to
    before the upper plateau's first whose latency is on the lower level, and the point after
    it (the first not on it). None when the upper plateau itself is on the lower level (the
    two are not distinct levels)."""
    if on_level(above.latency, below.latency, rel):
        return None
    inside = [i for i in range(below.first, above.first)
              if on_level(latency[i], below.latency, rel)]
    if not inside:
        return None
    return inside[-1], inside[-1] + 1


@dataclass(frozen=True)
class Step:
    """One bisection point: its footprint, its latency, whether it is on the level."""
    footprint: int
    latency: float
    on_level: bool


@dataclass
class Bisection:
    """A knee found by bisection: the capacity lies in [lo, hi); lo is the largest footprint
    measured on the level, hi the smallest above it measured off it."""
    knee: CacheKnee
    lo: int
    hi: int
    plateau: float          # the level's latency (cycles)
    limit: float            # the rule's bound: plateau x (1 + rel)
    above: float            # the next level's latency
    rel: float
    steps: list[Step] = field(default_factory=list)

    @property
    def resolution(self) -> float:
        """(hi - lo) / lo: how well the capacity is known."""
        return (self.hi - self.lo) / self.lo

    def rule(self) -> str:
        return (f"largest footprint whose latency is at most {self.rel:.0%} above the "
                f"plateau ({self.plateau:.1f} cycles, so <= {self.limit:.1f})")

    def as_data(self) -> dict:
        return {"knee": self.knee.value, "lo": self.lo, "hi": self.hi,
                "resolution": round(self.resolution, 4), "plateau_cycles": round(self.plateau, 2),
                "limit_cycles": round(self.limit, 2), "above_cycles": round(self.above, 2),
                "rel": self.rel,
                "steps": [{"footprint_bytes": s.footprint, "latency_cycles": round(s.latency, 2),
                           "on_level": s.on_level} for s in self.steps]}


def midpoint(lo: int, hi: int, line: int = LINE) -> int:
    """The geometric mid-point of [lo, hi), a whole number of lines."""
    return int(round(math.sqrt(lo * hi) / line)) * line


def steps_needed(lo: int, hi: int, resolution: float = KNEE_RESOLUTION, line: int = LINE) -> int:
    """The most bisection steps that narrow [lo, hi) to `resolution`: each halves the
    log-width, and rounding its mid-point to a whole line may widen the half kept by up to
    log1p(line / (2 lo - line)) (so a bracket whose halving would land just under the
    resolution can take one step more). ValueError where twice that rounding reaches the
    resolution (a bracket of a few lines: the bisection then stops when no line is left
    between, not at the resolution)."""
    target, w, n = math.log1p(resolution), math.log(hi / lo), 0
    slack = math.log1p(line / (2 * lo - line)) if 2 * lo > line else math.inf
    if w > target and 2 * slack >= target:
        raise ValueError(f"[{lo}, {hi}): mid-points rounded to {line} B lines do not narrow "
                         f"it to {resolution:.0%} by halving")
    while w > target:
        w, n = w / 2 + slack, n + 1
    return n


def bisect(knee: CacheKnee, lo: int, hi: int, measure: Callable[[int], float], plateau: float,
           above: float, *, rel: float = KNEE_REL, resolution: float = KNEE_RESOLUTION,
           line: int = LINE, prepare: Callable[[list[int]], None] | None = None) -> Bisection:
    """Narrow [lo, hi) (lo on the level, hi off it) by measuring the latency at the geometric
    mid-point (`measure(footprint)`, a whole number of lines) until (hi - lo) / lo <=
    `resolution` or no line is left between them. `prepare(footprints)`, before each
    measurement: the two footprints the next step may measure (host work made ahead)."""
    if not lo < hi:
        raise ValueError(f"{knee.value}: bisection needs lo < hi, got [{lo}, {hi})")
    b = Bisection(knee, lo, hi, plateau, limit(plateau, rel), above, rel)
    while b.hi > b.lo * (1 + resolution):
        mid = midpoint(b.lo, b.hi, line)
        if not b.lo < mid < b.hi:
            break
        if prepare is not None:
            prepare([midpoint(b.lo, mid, line), midpoint(mid, b.hi, line)])
        lat = float(measure(mid))
        ok = on_level(lat, plateau, rel)
        b.steps.append(Step(mid, lat, ok))
        if ok:
            b.lo = mid
        else:
            b.hi = mid
    return b


def find(knee: CacheKnee, footprints: list[int], latency: list[float], lv: Levels,
         measure: Callable[[int], float], **kw) -> Bisection | str:
    """The knee's bisection on the staircase (`measure` takes more points), or why there is
    none."""
    if knee not in lv.below:
        return lv.why.get(knee, f"no levels for the {knee.value} knee")
    below, above = lv.below[knee], lv.above[knee]
    rel = kw.get("rel", KNEE_REL)
    br = grid_bracket(footprints, latency, below, above, rel)
    if br is None:
        return (f"the {knee.value} knee: the next level ({above.latency:.0f} cycles) is within "
                f"{rel:.0%} of the plateau ({below.latency:.0f}) or no point is on it")
    i, j = br
    return bisect(knee, footprints[i], footprints[j], measure, below.latency, above.latency,
                  **kw)


def first_midpoint(knee: CacheKnee, footprints: list[int], latency: list[float], lv: Levels,
                   rel: float = KNEE_REL, line: int = LINE) -> int | None:
    """The footprint the knee's bisection measures first (None: no bisection)."""
    if knee not in lv.below:
        return None
    br = grid_bracket(footprints, latency, lv.below[knee], lv.above[knee], rel)
    return None if br is None else midpoint(footprints[br[0]], footprints[br[1]], line)
