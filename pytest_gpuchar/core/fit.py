"""Differential measurement, pure maths: slopes of cycles against chain length, their spread
over repeats, and whether a characteristic is stable enough to be judged. No CuPy, no pytest.
"""
from __future__ import annotations

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


def least_squares(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """(slope, intercept) of the least-squares line through (xs, ys)."""
    x = np.asarray(xs, float)
    y = np.asarray(ys, float)
    a = np.vstack([x, np.ones_like(x)]).T
    (m, c), *_ = np.linalg.lstsq(a, y, rcond=None)
    return float(m), float(c)


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
    residual = max(abs(medians[n] - (value * ops[n] + intercept)) for n in lengths)
    limit = max(spread_abs, spread_rel * abs(value))
    why = ""
    if spread > limit:
        why = f"per-repeat slopes spread {spread:.2f} cycles/op > {limit:.2f}"
    elif residual > max(2.0, 0.02 * max(medians.values())):
        why = f"cycles not linear in chain length (residual {residual:.1f} cycles)"
    return Fit(value, spread, slopes, intercept, residual, bool(why), why, medians)


def iqr(xs) -> float:
    """Interquartile range."""
    q1, q3 = np.quantile(np.asarray(xs, float), [0.25, 0.75])
    return float(q3 - q1)
