"""Pure maths of the tensor-core sweep: the trip counts of a launch set, a sweep point
(latency and throughput of one warps x ILP launch, with its stability) from the clocks every
warp stored at each trip count, the convergence point of 004's tables, the peak, and the
sweep's invariant (throughput does not fall as warps grow); and the static checks on counted
SASS (MOVM transposes, emulation, the paper's Table III mapping). No CuPy, no pytest.
"""
from __future__ import annotations

import dataclasses
import math
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from ....core import sass
from ....core.fit import fit, iqr, least_squares
from ....core.verify import matches
from .rows import (MIN_TRIPS, PAPER_TABLE_III, SCHEDULERS, SKEW_SHARE_MAX, SPAN_PER_WARP,
                   STEP_FLOOR, STEPS, TRIP_RATIOS, Emulation, TensorRow)

SWEEP_IQR_REL = 0.05      # interquartile range of the per-launch slopes, relative to the value
# a fall of throughput is allowed the two points' launch ranges plus this share of the value:
# between two launch sets a saturated point moves by about 1% (docs/tensor.md, lab notes)
FALL_FLOOR = 0.01


def plan_trips(*, warps: int, work_per_step: float, rate_bound: float, steps: int,
               step_floor: float = STEP_FLOOR, span_per_warp: float = SPAN_PER_WARP,
               ratios: tuple[int, ...] = TRIP_RATIOS, min_trips: int = MIN_TRIPS
               ) -> tuple[int, ...]:
    """Trip counts (ratios x a base count) for which the longest per-SM span is at least
    span_per_warp x warps cycles even if the SM did the work at `rate_bound` (work per SM per
    clock no arch exceeds) and no chain step took less than `step_floor` cycles: the span
    can only come out longer, and a start skew of 1% of it is span_per_warp / 100 per warp."""
    step = max(step_floor, work_per_step / rate_bound)
    longest = span_per_warp * max(1, warps)
    base = max(min_trips, math.ceil(longest / (ratios[-1] * steps * step)))
    return tuple(r * base for r in ratios)


@dataclass
class SweepPoint:
    warps: int
    ilp: int
    latency: float        # cycles per chain step of one warp (all ILP ops of the step)
    throughput: float     # per SM per clock (fma, bytes or flop, see unit)
    lat_spread: float
    thr_spread: float
    unstable: bool
    why: str = ""
    cycles: dict = field(default_factory=dict)
    skewed: bool = False  # start skew too large a share of the span: the slope may be biased
    skew_share: float = 0.0   # largest start skew / per-SM span at the longest trip count
    trips: tuple = ()     # the trip counts timed
    steps: int = STEPS    # dependent steps of every chain per trip
    # why the per-warp latency alone is unstable (its launches' slopes, its linearity); the
    # start skew and the block span's throughput do not bias a warp's own cycles
    lat_why: str = ""


Raw = dict   # trip count -> the launches' clocks, one per warp: an array (launches, warps, 2)
#              of [start, end] (what the launch stage copies back), or [(starts, ends) per launch]


def clock_arrays(raw: Raw) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """trip count -> (starts, ends), each (launches, warps): the clocks as arrays, whichever
    form they came in (the same integers)."""
    out = {}
    for t, reps in raw.items():
        if isinstance(reps, np.ndarray):
            out[t] = (np.ascontiguousarray(reps[..., 0]), np.ascontiguousarray(reps[..., 1]))
        else:
            out[t] = (np.array([t0 for t0, _ in reps]), np.array([t1 for _, t1 in reps]))
    return out


def _warp_latencies(clocks: dict, steps: int) -> list[float]:
    """Each warp's own cycles per chain step: slope over trip counts of its median span."""
    trips = sorted(clocks)
    med = np.array([np.median(clocks[t][1] - clocks[t][0], axis=0) for t in trips])
    xs = [t * steps for t in trips]
    return [round(least_squares(xs, list(med[:, w]))[0], 3) for w in range(med.shape[1])]


def _skew_reasons(warps: int, skew: dict, block: dict) -> tuple[float, list[str]]:
    """The warps' start skew (the largest at any trip count) as a share of the longest
    per-SM span, and why it makes the point unstable: at SKEW_SHARE_MAX or above. The
    differential method's premise is a fixed cost equal at every trip count; a skew under 1%
    of the longest span can change the per-SM slope by at most 1.5% even if it vanished
    between the shortest and the longest loop (their spans differ by 2/3 of the longest)."""
    hi = max(block)
    worst = max(skew.values())
    share = worst / block[hi] if block[hi] > 0 else float("inf")
    if warps <= 1:
        return 0.0, []
    if share < SKEW_SHARE_MAX:
        return share, []
    at = ", ".join(f"{skew[t]:.0f} at {t}" for t in sorted(skew))
    return share, [f"the warps' start skew (up to {worst:.0f} cycles; {at} trips) is "
                   f"{share:.1%} of the longest per-SM span ({block[hi]:.0f} cycles; limit "
                   f"{SKEW_SHARE_MAX:.0%}): the span's slope may be biased"]


def fit_point(raw: Raw, *, warps: int, ilp: int, work: float, steps: int) -> SweepPoint:
    """Per-warp latency (mean over warps of end - start, slope over the chain steps timed:
    trips x `steps`) and per-SM throughput (`work`, the block's work per chain step, / slope
    of max end - min start over the block's warps).

    Stability (the sweep launches every point many times, and one launch in a batch can land
    in another scheduling mode): the spreads are the interquartile ranges of the per-launch
    slopes (the reported spreads are the full ranges), and a point is unstable when either
    interquartile range is above SWEEP_IQR_REL of its value, when the cycles are not linear
    in the trip count, or - several warps - when the warps' start skew is not negligible
    (_skew_reasons). 8 warps of short unrolled HMMA chains left bar.sync apart by a skew that
    depended on the length, which biased block-span slopes while each launch looked
    repeatable (docs/tensor.md, lab notes): hence loops long enough for the skew to vanish."""
    ops = {t: t * steps for t in raw}
    # per trip count, the launches' clocks as (launches, warps) arrays: each statistic over
    # every launch at once (integer clocks: the float sums are exact, the same values as
    # launch by launch)
    clocks = clock_arrays(raw)
    lat_cycles = {t: (t1 - t0).mean(axis=1).tolist() for t, (t0, t1) in clocks.items()}
    blk_cycles = {t: (t1.max(axis=1) - t0.min(axis=1)).astype(float).tolist()
                  for t, (t0, t1) in clocks.items()}
    skew = {t: float(np.median(t0.max(axis=1) - t0.min(axis=1)))
            for t, (t0, _) in clocks.items()}
    end_skew = {t: float(np.median(t1.max(axis=1) - t1.min(axis=1)))
                for t, (_, t1) in clocks.items()}
    lf = fit(lat_cycles, ops)
    bf = fit(blk_cycles, ops)
    thr = work / bf.value if bf.value > 0 else float("nan")
    thr_each = [work / s for s in bf.slopes if s > 0]
    whole = bool(thr_each) and len(thr_each) == len(bf.slopes)
    thr_iqr = iqr(thr_each) if whole else float("inf")
    lat_iqr = iqr(lf.slopes) if lf.slopes else lf.spread
    # the spreads reported (and used by the nightly as the in-run noise) are the full ranges
    # over launches; the stability test uses the interquartile ranges
    thr_spread = float(max(thr_each) - min(thr_each)) if whole else float("inf")
    why = []
    if lat_iqr > max(0.5, SWEEP_IQR_REL * abs(lf.value)):
        why.append(f"per-launch latency slopes: interquartile range {lat_iqr:.2f} cycles")
    lat_why = why + ([lf.why_unstable] if lf.why_unstable.startswith("cycles not linear")
                     else [])
    if not np.isfinite(thr) or thr_iqr > SWEEP_IQR_REL * abs(thr):
        why.append(f"per-launch throughput: interquartile range {thr_iqr:.1f}")
    for f in (lf, bf):
        if f.why_unstable.startswith("cycles not linear"):
            why.append(f.why_unstable)
    share, skew_why = _skew_reasons(warps, skew, bf.medians)
    why += skew_why
    cycles = {"warp_mean": lf.medians, "block": bf.medians, "start_skew": skew,
              "end_skew": end_skew, "warp_latency": _warp_latencies(clocks, steps)}
    return SweepPoint(warps, ilp, lf.value, thr, lf.spread, thr_spread, bool(why),
                      "; ".join(dict.fromkeys(why)), cycles, bool(skew_why), share,
                      tuple(sorted(raw)), steps, "; ".join(lat_why))


@dataclass(frozen=True)
class FitSpec:
    """How one launch set's clocks become its sweep point: fit_point's arguments, and the
    count the point reports as its warps where that is not the launch's (wgmma: warpgroups).
    A probe says it (TensorProbe.fit_spec); the fit itself needs no probe, so it can run in
    a worker process (fit_points)."""
    warps: int
    ilp: int
    work: float
    steps: int
    reported_warps: int | None = None

    def point(self, raw: Raw) -> SweepPoint:
        pt = fit_point(raw, warps=self.warps, ilp=self.ilp, work=self.work, steps=self.steps)
        if self.reported_warps is None:
            return pt
        return dataclasses.replace(pt, warps=self.reported_warps)


def fit_points(specs: list[tuple[FitSpec, Raw]]) -> list[SweepPoint]:
    """Each launch set's sweep point, in order: pure numpy, module level (the session's
    worker processes fit one module's launch sets while the test thread launches the next:
    topics/tensor/mma/run.py)."""
    return [spec.point(raw) for spec, raw in specs]


Points = dict   # (warps, ilp) -> SweepPoint


def convergence(points: Points, warps: int, frac: float = 0.95) -> SweepPoint | None:
    """The convergence point at `warps` (as 004 Tables 3-9 report it): the smallest ILP whose
    throughput reaches `frac` of the best over ILP at that warp count."""
    row = [pt for (w, _), pt in sorted(points.items()) if w == warps]
    if not row:
        return None
    best = max(pt.throughput for pt in row)
    for pt in sorted(row, key=lambda q: q.ilp):
        if pt.throughput >= frac * best:
            return pt
    return None


def convergence_candidates(points: Points, warps: int, frac: float = 0.95) -> list[SweepPoint]:
    """The points at `warps` that could be the convergence point given their own launch
    spreads: in ILP order, each whose throughput plus spread reaches the threshold, up to the
    first whose throughput minus spread is surely above it."""
    row = sorted((pt for (w, _), pt in points.items() if w == warps), key=lambda q: q.ilp)
    if not row:
        return []
    limit = frac * max(pt.throughput for pt in row)
    out = []
    for pt in row:
        if pt.throughput + pt.thr_spread >= limit:
            out.append(pt)
            if pt.throughput - pt.thr_spread >= limit:
                break
    return out or [convergence(points, warps, frac)]


def peak(points: Points, *, max_warps: int | None = None) -> SweepPoint | None:
    """The point of highest throughput among the stable ones (fit_point) with at most
    `max_warps` warps. (The maximum over unstable points is the maximum of the noise: before
    the skew check, the best point over all warps moved between runs, docs/tensor.md.)"""
    pts = [p for (w, _), p in points.items() if (max_warps is None or w <= max_warps)
           and np.isfinite(p.throughput) and not p.unstable]
    return max(pts, key=lambda p: p.throughput) if pts else None


def higher_unstable(points: Points, best: SweepPoint, *, max_warps: int | None = None,
                    margin: float = 0.05) -> SweepPoint | None:
    """An unstable point (launch spread, not the start-skew bias, which is known to be wrong)
    whose throughput is more than `margin` above the best stable one: then the stable best is
    not the peak, and the peak is reported unstable rather than low (a run whose high points
    were all unstable left a best stable point far lower: docs/tensor.md, lab notes)."""
    worse = [p for (w, _), p in points.items() if (max_warps is None or w <= max_warps)
             and p.unstable and not p.skewed and np.isfinite(p.throughput)
             and p.throughput > best.throughput * (1 + margin)]
    return max(worse, key=lambda p: p.throughput) if worse else None


@dataclass(frozen=True)
class Fall:
    """Throughput that fell as warps grew at one ILP (both points stable)."""
    ilp: int
    warps: tuple[int, int]
    throughput: tuple[float, float]
    allowed: float        # the fall the two points' launch spreads allow

    def __str__(self) -> str:
        (w1, w2), (t1, t2) = self.warps, self.throughput
        return (f"ILP {self.ilp}: throughput falls from {t1:.1f} at {w1} warps to {t2:.1f} at "
                f"{w2} warps ({t1 - t2:.1f} > {self.allowed:.1f}, the two points' launch "
                f"spreads)")


def throughput_falls(points: Points, *, schedulers: int = SCHEDULERS,
                     floor: float = FALL_FLOOR) -> tuple[list[Fall], int]:
    """The sweep's invariant: at warp counts that are multiples of the schedulers per SM
    (every scheduler holds as many warps), throughput at a fixed ILP does not fall as warps
    grow, within the spread (the sum of the two points' launch ranges plus `floor` of the
    smaller warp count's value). Stable points only (an unstable one has no figure to
    compare). Returns (the falls, the number of pairs compared)."""
    falls, compared = [], 0
    for ilp in sorted({i for _, i in points}):
        row = sorted((w, p) for (w, i), p in points.items() if i == ilp and w % schedulers == 0
                     and not p.unstable and np.isfinite(p.throughput))
        for k, (w1, p1) in enumerate(row):
            for w2, p2 in row[k + 1:]:
                compared += 1
                allowed = p1.thr_spread + p2.thr_spread + floor * p1.throughput
                if p1.throughput - p2.throughput > allowed:
                    falls.append(Fall(ilp, (w1, w2), (p1.throughput, p2.throughput), allowed))
    return falls, compared


# --- static checks on counted SASS -------------------------------------------------------------

TENSOR_OPS = tuple(f"{op}*" for op in sass.TENSOR_OPCODES)


def tensor_opcodes(instrs) -> Counter:
    """The tensor-core instructions among `instrs`, by opcode."""
    return Counter(i.opcode for i in instrs if matches(i.opcode, "|".join(TENSOR_OPS)))


def table_iii_problems(r: TensorRow, arch: str, tc: Counter) -> list[str]:
    """On sm_80 the wmma rows must map as 003 Table III printed them (N x its SASS), and the
    loop's trip hold exactly STEPS x that many of it (`tc`: its tensor opcodes)."""
    if arch != "sm_80":
        return []
    glob, per = r.sass_for(arch)
    types = ".".join(r.name.split(".")[:2])
    if (per, glob) != PAPER_TABLE_III[types]:
        return [f"catalogue differs from 003 Table III for {r.name}"]
    if not (sum(tc.values()) == STEPS * per and set(tc) == {glob}):
        return [f"{r.name}: {dict(tc)} in the timed loop, wanted {STEPS * per} x {glob}"]
    return []


def one_op_problems(r: TensorRow, arch: str, tc: Counter) -> list[str]:
    """004 Tables 3-5: one mma.sync is `per_op` tensor-core instructions."""
    glob, per = r.sass_for(arch)
    if sum(tc.values()) != STEPS * per:
        return [f"{r.name}: {sum(tc.values())} tensor instructions {dict(tc)} in the timed "
                f"loop, wanted {STEPS * per} ({STEPS} steps x {per} x {glob})"]
    return []


def sparse_problems(r: TensorRow, tc: Counter) -> list[str]:
    """004 Tables 6-7: mma.sp becomes .SP tensor-core instructions only."""
    dense = [op for op in tc if ".SP." not in op]
    return [f"{r.name}: dense tensor instructions {dense} for mma.sp"] if dense else []


def movm_problems(counts: dict[str, int], arch_number: int, layout: str, types: str) -> list[str]:
    """003 section IV-C: MOVM.16.MT88 transposes appear or vanish with the layouts: none for
    row.col, some for row.row (B), more for col.col (A and C, with f16 C), most for col.row.
    `counts`: "<layout>/<types>" -> MOVM instructions in that kernel."""
    here = counts[f"{layout}/{types}"]
    if arch_number < 75:
        # Volta's HMMA.884 takes either layout: no MOVM at all
        return [f"sm_{arch_number}: {here} MOVM for {layout}"] if here else []
    out = []
    if counts[f"row.col/{types}"] != 0:
        out.append(f"row.col {types}: {counts[f'row.col/{types}']} MOVM, wanted none")
    if layout != "row.col" and not here > 0:
        out.append(f"sm_{arch_number} {layout} {types}: no MOVM transpose")
    order = [counts[f"{lay}/{types}"] for lay in ("col.row", "col.col", "row.row")]
    if not order[0] >= order[1] >= order[2]:
        out.append(f"{types}: MOVM counts col.row {order[0]} >= col.col {order[1]} >= row.row "
                   f"{order[2]} do not hold")
    if types == "f16.f16" and not counts["col.col/f16.f16"] > counts["row.row/f16.f16"]:
        out.append("col.col should transpose A and the f16 C (003), more than row.row's B")
    return out


def emulation_problems(how: Emulation, arch_number: int, region: list) -> list[str]:
    """What a row that is no tensor-core instruction on the arch must become (`region`: its
    timed region, filler removed)."""
    tc = tensor_opcodes(region)
    ops = dict(tc)
    if how is Emulation.FPU:
        if arch_number < 80:
            ok = tc and all(op.startswith("HMMA.884") for op in tc)
            return [] if ok else [f"mma.m8n8k4 f16: {ops}, wanted HMMA.884"]
        if tc:
            return [f"sm_{arch_number}: mma.m8n8k4 f16 became tensor-core code {ops}"]
        if not any(i.base == "CALL" or i.base.startswith(("HFMA", "FFMA")) for i in region):
            return ["mma.m8n8k4 f16: expected FPU code or a call"]
        return []
    if how is Emulation.FP8_CONVERT:
        if any(op.startswith("QMMA") for op in tc):
            return [f"FP8 mma.sync: {ops}: an FP8 tensor op"]
        if not any(i.opcode.startswith("F2FP") for i in region):
            return ["FP8 mma.sync: no FP8->F16 conversion"]
        return []
    if how is Emulation.IMMA_PADDED:
        ok = tc and all(op.startswith("IMMA.16816") for op in tc) and \
            sum(1 for i in region if i.opcode == "CS2R") >= sum(tc.values())
        return [] if ok else [f"s8 mma.m8n8k16: {ops}, wanted IMMA.16816 + a CS2R per op"]
    if how is Emulation.SPARSE_CALL:
        calls = sum(1 for i in region if i.base == "CALL")
        sp = sum(c for op, c in tc.items() if ".SP." in op)
        ok = sp and calls >= sp
        return [] if ok else [f"mma.sp: {ops}, {calls} CALL, wanted a CALL per sparse op"]
    if tc or not any(i.base == "CALL" for i in region):
        return [f"u4 wmma: {ops}, wanted a subroutine CALL and no tensor op"]
    return []
