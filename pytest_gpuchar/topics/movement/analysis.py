"""The movement figures' maths, pure (no CuPy, no pytest): rates from the slope of busy spans
over bytes moved, the DSM latency matrix, the L2 heatmap's near/far split and partition map,
the loaded-latency curve, the TMA size knee and the serialised-launch slope."""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field

import numpy as np

from ...core.fit import Fit, Median, Rate, fit, iqr, least_squares
from .rows import BW_SPREAD_REL, TMA_KNEE_SHARE

# --- rates: bytes per cycle from spans over bytes ------------------------------------------------


def rate_fit(spans: dict[int, list[float]], moved: dict[int, float], *,
             spread_rel: float = BW_SPREAD_REL) -> Rate:
    """Bytes per cycle: 1 / slope of the busy span (cycles) against the bytes moved, over two
    or more trip counts (the fixed costs of the launch cancel). Per-repeat slopes give the
    spread of the rate; unstable when it exceeds `spread_rel` of the value or the spans are
    not linear in the bytes."""
    f = fit(spans, moved, spread_abs=0.0, spread_rel=spread_rel)
    if f.value <= 0:
        return Rate(float("nan"), 0.0, [], f.intercept, f.residual, True,
                    f"the span does not grow with the bytes moved (slope {f.value:.3g})",
                    f.medians)
    rates = [1.0 / s for s in f.slopes if s > 0]
    spread = (max(rates) - min(rates)) if rates else 0.0
    why = f.why_unstable
    if why.startswith("per-repeat"):       # said in rates: a slope in cycles/byte reads 0.00
        why = (f"per-launch rates spread {spread:.3g} ({spread * f.value:.1%} of "
               f"{1.0 / f.value:.4g}) > {spread_rel:.0%}")
    return Rate(1.0 / f.value, spread, rates, f.intercept, f.residual, f.unstable, why,
                f.medians)


@dataclass
class Window:
    """One CTA of a stream launch: its busy span in its SM's cycles (first warp's first clock
    to last warp's last clock), its SM and its %globaltimer window (ns)."""
    span: int
    sm: int
    g0: int
    g1: int


def windows(records: np.ndarray, ctas: int, warps: int = 32) -> list[Window]:
    """Per CTA, from the warp records (u64 x 6: t0, t1, g0, g1, acc | sm << 32, rank);
    records never written (t1 == 0) are ignored (all CTAs at once: a bandwidth launch has
    thousands)."""
    rec = np.asarray(records, dtype=np.uint64).reshape(ctas, warps, 6)
    ok = rec[:, :, 1] != 0
    written = ok.any(axis=1)
    if not written.all():
        raise ValueError(f"CTA {int(np.argmin(written))} wrote no record")
    top, zero = np.uint64(np.iinfo(np.uint64).max), np.uint64(0)
    t0 = np.where(ok, rec[:, :, 0], top).min(axis=1)
    t1 = np.where(ok, rec[:, :, 1], zero).max(axis=1)
    g0 = np.where(ok, rec[:, :, 2], top).min(axis=1)
    g1 = np.where(ok, rec[:, :, 3], zero).max(axis=1)
    sm = rec[np.arange(ctas), ok.argmax(axis=1), 4] >> np.uint64(32)
    span = (t1 - t0).astype(np.int64)          # (a wrapped difference reads negative)
    return [Window(int(a), int(b), int(c), int(d))
            for a, b, c, d in zip(span.tolist(), sm.tolist(), g0.tolist(), g1.tolist())]


@dataclass
class StreamFigures:
    per_sm: Rate         # B/clk per SM (median CTA's span)
    gpu_bytes_per_clk: float
    gbps: Rate           # whole GPU, GB/s (= bytes/ns) from %globaltimer
    sms: list[int]
    checks: list[str] = field(default_factory=list)


def stream_figures(runs: dict[int, list[list[Window]]], per_cta: dict[int, float], *,
                   spread_rel: float = BW_SPREAD_REL) -> StreamFigures:
    """`runs`: trip count -> per repeat, the CTAs' windows; `per_cta`: trip count -> bytes one
    CTA moved. Per SM: the rate of the median CTA's span; whole GPU: the sum of every CTA's
    own rate (B/clk) and the bytes of all CTAs over the launch's %globaltimer window (GB/s)."""
    trips = sorted(runs)
    ctas = len(runs[trips[0]][0])
    med = {t: [float(statistics.median(w.span for w in rep)) for rep in runs[t]] for t in trips}
    per_sm = rate_fit(med, per_cta, spread_rel=spread_rel)
    own = []
    for c in range(ctas):
        spans = {t: [float(statistics.median(rep[c].span for rep in runs[t]))] for t in trips}
        f = rate_fit(spans, per_cta)
        own.append(f.value)
    ns = {t: [float(max(w.g1 for w in rep) - min(w.g0 for w in rep)) for rep in runs[t]]
          for t in trips}
    gbps = rate_fit(ns, {t: per_cta[t] * ctas for t in trips}, spread_rel=max(0.05, spread_rel))
    sms = sorted({w.sm for t in trips for rep in runs[t] for w in rep})
    checks = []
    seen = [sorted(w.sm for w in rep) for t in trips for rep in runs[t]]
    if any(len(set(s)) != len(s) for s in seen):
        checks.append("two CTAs of one launch ran on the same SM: the per-SM rate is not one "
                      "CTA's")
    return StreamFigures(per_sm, float(np.nansum(own)), gbps, sms, checks)


# --- the DSM latency matrix ----------------------------------------------------------------------

@dataclass
class DsmFigures:
    local: Median
    remote: Median
    by_offset: dict[int, float]      # rank offset -> median latency over CTAs
    matrix: list[list[float]]        # [cta][offset] latency
    sms: list[int]


def _slope(cycles: dict[int, float]) -> float:
    ns = sorted(cycles)
    return least_squares(ns, [cycles[n] for n in ns])[0]


def dsm_figures(dt: dict[int, np.ndarray]) -> DsmFigures:
    """`dt`: length -> cycles [repeat, cta, pass] (passes 0..c; pass p reads the CTA at rank
    offset p mod c; pass 0 only warms the instruction cache). Per (CTA, offset): the slope
    over lengths of the median over repeats; local = offset 0 (pass c), remote = offsets
    1..c-1; per repeat the same from that repeat's cycles gives the spread."""
    lengths = sorted(dt)
    reps, ctas, passes = dt[lengths[0]].shape
    c = passes - 1

    def matrix(pick) -> np.ndarray:
        out = np.zeros((ctas, c))
        for i in range(ctas):
            for p in range(1, passes):
                out[i, p % c] = _slope({n: pick(dt[n][:, i, p]) for n in lengths})
        return out

    med = matrix(lambda xs: float(np.median(xs)))
    per_rep = [matrix(lambda xs, r=r: float(xs[r])) for r in range(reps)]

    def figure(cols: slice) -> Median:
        value = float(np.median(med[:, cols]))
        samples = [float(np.median(m[:, cols])) for m in per_rep]
        spread = max(samples) - min(samples)
        limit = max(1.0, 0.01 * value)
        why = f"per-repeat medians spread {spread:.1f} cycles > {limit:.1f}" \
            if spread > limit else ""
        return Median(value, spread, samples, why)

    remote = figure(slice(1, c)) if c > 1 else figure(slice(0, 1))
    return DsmFigures(figure(slice(0, 1)), remote,
                      {d: round(float(np.median(med[:, d])), 2) for d in range(c)},
                      [[round(float(v), 2) for v in row] for row in med], [])


# --- the L2 seen from every SM -------------------------------------------------------------------

def split_levels(values, min_gap: float = 10.0, rel_gap: float = 0.05):
    """Two latency levels in `values` (one SM's latency to each line): split at the largest
    gap between sorted values when it is at least max(min_gap, rel_gap x median); (near
    median, far median, threshold), or None when the values form one level."""
    v = np.sort(np.asarray(values, float))
    if len(v) < 4:
        return None
    gaps = np.diff(v)
    k = int(np.argmax(gaps))
    if gaps[k] < max(min_gap, rel_gap * float(np.median(v))):
        return None
    thr = float((v[k] + v[k + 1]) / 2)
    return float(np.median(v[:k + 1])), float(np.median(v[k + 1:])), thr


def partitions(near: np.ndarray, tolerance: float = 0.1) -> list[list[int]]:
    """Group SMs (rows of the boolean near-mask [sm, line]) whose near lines agree on all
    but `tolerance` of the lines: the L2 partitions as the SMs see them."""
    groups: list[list[int]] = []
    heads: list[np.ndarray] = []
    lines = near.shape[1]
    for s in range(near.shape[0]):
        for g, head in zip(groups, heads):
            if np.count_nonzero(near[s] != head) <= tolerance * lines:
                g.append(s)
                break
        else:
            groups.append([s])
            heads.append(near[s])
    return groups


@dataclass
class L2Map:
    near: float
    far: float
    groups: list[list[int]]          # row indices of `lat` per partition
    per_sm: list[tuple[float, float] | None]
    spread: dict[str, float]
    one_level: list[int]             # rows whose lines showed a single latency level
    far_repeats: int = 0             # launches in which some SM showed a far level


def l2_map(lat: np.ndarray, per_repeat: list[np.ndarray]) -> L2Map:
    """`lat` [sm, line]: each SM's latency to each line (slope over lengths of the median
    over repeats); `per_repeat`: the same matrix from each repeat. Near / far: medians over
    SMs of each SM's two levels (an SM with one level: near only); partitions: SMs grouped by
    which lines are near."""
    def summary(m: np.ndarray):
        splits = [split_levels(row) for row in m]
        # an SM whose lines show one level: all its lines are near
        nears = [s[0] if s else float(np.median(row)) for s, row in zip(splits, m)]
        fars = [s[1] for s in splits if s]
        return splits, (float(np.median(nears)) if nears else float("nan")), \
            (float(np.median(fars)) if fars else float("nan"))

    splits, near, far = summary(lat)
    mask = np.array([row < s[2] if s else np.ones_like(row, bool)
                     for row, s in zip(lat, splits)])
    reps = [summary(m)[1:] for m in per_repeat]
    # a launch in which no SM showed a far level has no far figure (NaN), and so neither has
    # the far level's spread: l2_by_sm reports it unstable with the count
    spread = {"near": float(np.ptp([r[0] for r in reps])) if reps else 0.0,
              "far": float(np.ptp([r[1] for r in reps])) if reps else 0.0}
    return L2Map(near, far, partitions(mask), [s[:2] if s else None for s in splits], spread,
                 [i for i, s in enumerate(splits) if s is None],
                 sum(1 for r in reps if r[1] == r[1]))


def slopes(dt: dict[int, np.ndarray]) -> np.ndarray:
    """Vectorised least-squares slope over lengths: `dt` length -> array [...]; returns the
    slope per element."""
    ns = np.array(sorted(dt), float)
    ys = np.stack([np.asarray(dt[int(n)], float) for n in ns])
    x = ns - ns.mean()
    return np.tensordot(x, ys - ys.mean(axis=0), axes=(0, 0)) / float((x * x).sum())


# --- latency under load --------------------------------------------------------------------------

@dataclass
class LoadedPoint:
    share: int                  # percent of the other SMs streaming
    streamers: int
    latency: Fit                # cycles per dependent device-memory load
    gbps: float                 # the streamers' bandwidth during the launches (median)
    covered: bool               # every chase ran inside every streamer's window


def loaded_point(share: int, streamers: int, cycles: dict[int, list[float]],
                 windows_: list[tuple[tuple[int, int], list[tuple[int, int]]]],
                 bytes_per_streamer: int, spread_rel: float = 0.01) -> LoadedPoint:
    """`cycles`: length -> chase cycles per repeat; `windows_`: per launch, the chase's
    (start, end) and every streamer's (start, end) in %globaltimer ns."""
    f = fit(cycles, {n: n for n in cycles}, spread_abs=1.0, spread_rel=spread_rel)
    rates, covered = [], True
    for chase, streams in windows_:
        if not streams:
            continue
        durations = [e - s for s, e in streams]
        rates.append(bytes_per_streamer * len(streams) / max(1.0, statistics.median(durations)))
        covered &= max(s for s, _ in streams) <= chase[0] and chase[1] <= min(e for _, e in streams)
    return LoadedPoint(share, streamers, f, float(statistics.median(rates)) if rates else 0.0,
                       covered)


# --- TMA transfer size, serialised launches ------------------------------------------------------

def knee(sizes: list[int], rates: list[float], share: float = TMA_KNEE_SHARE) -> int | None:
    """The smallest size whose rate reaches `share` of the best rate (None: no finite rate)."""
    good = [(s, r) for s, r in zip(sizes, rates) if r == r and r > 0]
    if not good:
        return None
    best = max(r for _, r in good)
    return min(s for s, r in good if r >= share * best)


@dataclass
class Serial:
    value: float                # cycles per serialised block (slope)
    spread: float
    gap: float                  # median exit-to-next-entry gap on one SM
    overlapped: bool
    why: str
    counts: list[int]


def serial_blocks(per_repeat: list[list[np.ndarray]], spread_rel: float = 0.05) -> Serial:
    """Blocks run one after another on each SM (one fits at a time). `per_repeat`: per repeat,
    per grid size, the block records (u64 x 4: t0, t1, sm | rank << 32, -). Per repeat: the
    least-squares slope of every SM's busy span against how many blocks it ran."""
    slopes_, gaps, counts, overlapped = [], [], set(), False
    for grids in per_repeat:
        pairs = []
        for rec in grids:
            rec = np.asarray(rec, dtype=np.uint64)
            sm = (rec[:, 2] & np.uint64(0xFFFFFFFF)).astype(np.int64)
            order = np.lexsort((rec[:, 0], sm))          # by SM, then start
            sm, t0 = sm[order], rec[order, 0].astype(np.int64)
            t1 = rec[order, 1].astype(np.int64)
            same = sm[1:] == sm[:-1]
            gap = (t0[1:] - t1[:-1])[same]               # between blocks of one SM
            overlapped |= bool((gap < 0).any())
            gaps += gap.tolist()
            starts = np.flatnonzero(np.r_[True, ~same])
            n = np.diff(np.r_[starts, len(sm)])
            busy = np.maximum.reduceat(t1, starts) - np.minimum.reduceat(t0, starts)
            pairs += list(zip(n.tolist(), busy.tolist()))
            counts.update(n.tolist())
        if len({c for c, _ in pairs}) >= 2:
            slopes_.append(least_squares([c for c, _ in pairs], [s for _, s in pairs])[0])
    if not slopes_:
        return Serial(float("nan"), 0.0, float("nan"), overlapped,
                      "fewer than two distinct block counts per SM", sorted(counts))
    value = float(statistics.median(slopes_))
    spread = max(slopes_) - min(slopes_)
    # stable on the interquartile range (the full range is reported): one launch of a batch
    # can land in another placement of the clusters while the median holds (docs/movement.md,
    # lab notes)
    scatter = iqr(slopes_)
    why = ("blocks of one SM overlapped in time: not serialised" if overlapped else
           f"per-repeat slopes: interquartile range {scatter:.1f} cycles/block (full range "
           f"{spread:.1f})" if scatter > max(5.0, spread_rel * abs(value)) else "")
    return Serial(value, spread, float(np.median(gaps)) if gaps else float("nan"), overlapped,
                  why, sorted(counts))
