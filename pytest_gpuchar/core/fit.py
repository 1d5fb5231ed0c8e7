"""Differential measurement, pure maths: slopes of cycles against chain length, their spread
over repeats, and whether a characteristic is stable enough to be judged. No CuPy, no pytest.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

import numpy as np

SPREAD_ABS = 0.5      # cycles/op: per-repeat slopes spread wider than this and ...
SPREAD_REL = 0.05     # ... this share of the value make a characteristic unstable


@dataclass
class Fit:
    value: float                 # median per-op cycles (slope)
    spread: float                # max - min of the per-repeat slopes
    slopes: list[float]
    intercept: float             # fixed cost (clock reads, fill, pending loads)
    residual: float              # largest deviation of the length medians from the line
    unstable: bool
    why_unstable: str = ""
    medians: dict[int, float] = field(default_factory=dict)


@dataclass
class Rate:
    """A rate read as the inverse of a fitted slope (results, calls or bytes per cycle): the
    median rate, the spread of the per-repeat rates, the fit's fixed cost and residual, why it
    is unstable, the length medians the slope was fitted to."""
    value: float
    spread: float
    rates: list[float]
    intercept: float
    residual: float
    unstable: bool
    why_unstable: str = ""
    medians: dict[int, float] = field(default_factory=dict)


@dataclass
class Median:
    """A figure read as the median of per-repeat samples, not a slope of its own (a median of
    many slopes, a point of a sweep): the value, the samples' range, why it is unstable."""
    value: float
    spread: float
    samples: list[float]
    why_unstable: str = ""

    @property
    def unstable(self) -> bool:
        return bool(self.why_unstable)


def least_squares(xs, ys) -> tuple[float, float]:
    """(slope, intercept) of the least-squares line through (xs, ys): the closed form over
    the centred points (a run fits tens of thousands of lines of two to five points, where
    numpy's general solver cost 50 us a line); numpy's solver where every x is the same."""
    xs = [float(x) for x in xs]
    ys = [float(y) for y in ys]
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0.0 or not math.isfinite(sxx):
        a = np.vstack([np.asarray(xs), np.ones(n)]).T
        (m, c), *_ = np.linalg.lstsq(a, np.asarray(ys), rcond=None)
        return float(m), float(c)
    m = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return m, my - m * mx


def per_sm_spans(rec) -> dict[int, tuple[int, int]]:
    """Per-warp clock stamps, rec (warps, 3+) [start, end, smid, ...] (u64 %clock64 of the
    warp's SM) -> {smid: (busy cycles: the SM's last end minus its first start, warps)}."""
    r = np.asarray(rec)[:, :3].astype(np.int64)
    if not len(r):
        return {}
    sm, inv, warps = np.unique(r[:, 2], return_inverse=True, return_counts=True)
    first = np.full(len(sm), np.iinfo(np.int64).max)
    last = np.full(len(sm), np.iinfo(np.int64).min)
    np.minimum.at(first, inv, r[:, 0])
    np.maximum.at(last, inv, r[:, 1])
    return {int(s): (int(b), int(w)) for s, b, w in zip(sm, last - first, warps)}


def residual(medians: dict, ops: dict, slope: float, intercept: float) -> float:
    """The largest deviation of the length medians from the line slope x ops + intercept."""
    return max(abs(medians[n] - (slope * ops[n] + intercept)) for n in medians)


def fit(cycles: dict[int, list[float]], ops: dict[int, int], *, spread_abs: float = SPREAD_ABS,
        spread_rel: float = SPREAD_REL) -> Fit:
    """Slope of cycles against op count over two or more chain lengths; per-repeat slopes give
    the spread. Unstable when the spread exceeds max(spread_abs, spread_rel * value) or the
    length medians are not on a line."""
    lengths = sorted(cycles)
    if len(lengths) < 2:
        raise ValueError("differential measurement needs at least two chain lengths")
    xs = [ops[n] for n in lengths]
    medians = {n: float(statistics.median(cycles[n])) for n in lengths}
    value, intercept = least_squares(xs, [medians[n] for n in lengths])
    reps = min(len(cycles[n]) for n in lengths)
    slopes = [least_squares(xs, [cycles[n][r] for n in lengths])[0] for r in range(reps)]
    spread = max(slopes) - min(slopes) if slopes else 0.0
    off = residual(medians, ops, value, intercept)
    limit = max(spread_abs, spread_rel * abs(value))
    why = ""
    if spread > limit:
        why = f"per-repeat slopes spread {spread:.2f} cycles/op > {limit:.2f}"
    elif off > max(2.0, 0.02 * max(medians.values())):
        why = f"cycles not linear in chain length (residual {off:.1f} cycles)"
    return Fit(value, spread, slopes, intercept, off, bool(why), why, medians)


def iqr(xs) -> float:
    """Interquartile range."""
    q1, q3 = np.quantile(np.asarray(xs, float), [0.25, 0.75])
    return float(q3 - q1)
