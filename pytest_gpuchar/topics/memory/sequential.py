"""The L2 capacity by a second method that does not rest on a random chase (issue 42 item 4):
a **sequential** walk, pointer i -> i + 1 one per 128 B line over the footprint (the fill
sweep's chains.sequential_layout), timed by the same SASS-verified ld.global.ca chase kernel
as the staircase (the footprint and its order are data), over the sweep's footprints from just
past the near L2 partition to the device-memory plateau, and bisected by the staircase's own
rule (capacity.py: the largest footprint whose latency is at most KNEE_REL above the lower
plateau) to KNEE_RESOLUTION.

Why it is a second opinion: the random single cycle visits the lines in an order no cache or
prefetcher can follow; a forward walk visits them in address order, so each L2 set receives
its lines in turn and, whatever the replacement policy, a footprint the L2 holds stays held
(no set takes more of the walk's lines than another). Where the random chase loses lines to
set conflicts or to a replacement that is not LRU before the cache is full, this walk's knee
lies higher; where both read one knee, the capacity is the cache's. Its device-memory plateau
may lie lower than the random chase's (DRAM row-buffer hits of a forward walk); the rule reads
the knee against the lower plateau only.

The pure part (``knee``) is unit-tested; ``point`` and ``measure`` launch through chase.py.
"""
from __future__ import annotations

from ...core.runner import Bounds
from ...core.topic import Context
from . import chase
from .analysis import human_bytes, plateaus, without_rising_edge
from .capacity import (KNEE_REL, KNEE_RESOLUTION, Bisection, CacheKnee, bisect, grid_bracket,
                       midpoint)
from .chains import Layout, sequential_layout
from .rows import LINE, STAIRCASE_LAUNCHES

# the sweep's span, as fractions of the driver's L2 size: from past the near partition (half
# the L2; one SM reads the near half at another latency, a knee this method does not look for)
# to the device-memory plateau (three grid points of it)
SPAN = (0.55, 2.0)
# below LEVEL x the L2 the sweep adds the geometric mid-point of each pair of grid points: the
# L2 level is the median of four points, not of two. With two, one point read a few percent
# low set the level (and its limit) under the L2's true latency, and the bisection then read
# the walk's own L2 hits as misses: one board's forward walk read 41.5 MiB on one night and
# 57 MiB on the next (docs/memory.md)
LEVEL = 0.9

METHOD = ("knee of a sequential walk (pointer i -> i + 1, one per {line} B line over the "
          "footprint, address order; the staircase's ld.global.ca chase kernel, slope over "
          "the same chain lengths, median of {reps} launches over the staircase's places of "
          "the buffer, the staircase's warm-up policy) at the staircase's "
          "footprints from {lo:.2f} to {hi:.1f} x the driver's L2 and their geometric "
          "mid-points below {level:.1f} x (the L2 level: the median of its points), bisected "
          "(geometric "
          "mid-points, the same walk) to within {res:.0%}: the largest footprint whose latency "
          "is at most {rel:.0%} above the far-L2 plateau; not a random chase")


def footprints(grid: list[int], l2_bytes: int) -> list[int]:
    """The staircase grid's footprints inside SPAN x the L2, and below LEVEL x the L2 the
    geometric mid-point of each pair of grid points (a whole number of lines): the L2 level
    sampled at twice the grid's density."""
    lo, hi = SPAN[0] * l2_bytes, SPAN[1] * l2_bytes
    points = set(f for f in grid if lo <= f <= hi)
    for a, b in zip(grid, grid[1:]):
        m = midpoint(a, b, LINE)
        if lo <= m and b <= LEVEL * l2_bytes:
            points.add(m)
    return sorted(points)


def knee(fps: list[int], latency: list[float], measure, *, rel: float = KNEE_REL,
         resolution: float = KNEE_RESOLUTION, prepare=None) -> Bisection | str:
    """The L2 knee of a sequential sweep: between its first plateau (the L2 as one SM's walk
    sees it past the near partition, its partial-miss edge cut) and its last (device memory),
    bracketed on the grid and bisected with `measure(footprint) -> cycles` (`prepare`: as
    capacity.bisect's); or why not."""
    ps = plateaus(fps, latency)
    if len(ps) < 2:
        return (f"the sequential sweep shows {len(ps)} latency plateau(s) "
                f"({[round(v) for v in latency]} cycles at {[human_bytes(f) for f in fps]})")
    below = without_rising_edge(ps[0], fps, latency)
    above = ps[-1]
    br = grid_bracket(fps, latency, below, above, rel)
    if br is None:
        return (f"device memory ({above.latency:.0f} cycles) is within {rel:.0%} of the L2 "
                f"plateau ({below.latency:.0f}) for a forward walk, or no point is on it")
    i, j = br
    return bisect(CacheKnee.L2, fps[i], fps[j], measure, below.latency, above.latency,
                  rel=rel, resolution=resolution, line=LINE, prepare=prepare)


def walk_layout(f: int) -> Layout:
    """The forward walk's chain over `f` bytes, ready for its chases."""
    return sequential_layout(f // LINE, LINE).ready()


def layout_key(f: int) -> tuple:
    return ("memory", "sequential_layout", f)


def point(session: Context, f: int,
          launches: Bounds = STAIRCASE_LAUNCHES) -> chase.StairPoint:
    """The forward walk over `f` bytes: the staircase's point
    (chase.point: its chase kernel, places and warm-up policy, Geometry.sweep_warm: walked
    once in the first launch up to 1.25 x the L2, beyond it no warm-up and the L2 flushed
    after the upload) with the walk's chain, `launches` at every footprint."""
    lay = session.runs.take(layout_key(f), lambda: walk_layout(f))
    return chase.point(session, f, launches, launches, layout=lay)


def sweep(session: Context, measure) -> chase.Curve:
    """The sequential walk at `footprints` (`measure(f)`: a StairPoint), the next walks built
    while the GPU chases (chase.sweep_ahead)."""
    geo = chase.geometry_of(session)
    return chase.sweep_ahead(session, footprints(geo.sweep(), geo.l2_bytes), measure,
                             layout_key, walk_layout)


def method() -> str:
    return METHOD.format(line=LINE, reps=STAIRCASE_LAUNCHES.least, lo=SPAN[0], hi=SPAN[1],
                         level=LEVEL, res=KNEE_RESOLUTION, rel=KNEE_REL)
