"""core.fit: differential measurement (slopes over chain lengths), pure numpy, no GPU."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_gpuchar.core import fit as measure

LENGTHS = (8, 16, 32)


def synth(slope: float, intercept: float, *, repeats: int = 7, noise=None, lengths=LENGTHS):
    rng = np.random.default_rng(0)
    cycles = {}
    for n in lengths:
        cycles[n] = [int(round(slope * n + intercept + (rng.integers(-1, 2) if noise is None
                                                        else noise[r % len(noise)])))
                     for r in range(repeats)]
    return cycles, {n: n for n in lengths}


def test_exact_slope_without_noise():
    cycles, ops = synth(5, 200, noise=[0])
    f = measure.fit(cycles, ops)
    assert f.value == pytest.approx(5.0)
    assert f.intercept == pytest.approx(200.0)
    assert f.spread == pytest.approx(0.0, abs=1e-9)
    assert not f.unstable and f.why_unstable == ""
    assert f.medians == {8: 240.0, 16: 280.0, 32: 360.0}
    assert len(f.slopes) == 7


def test_slope_recovered_with_small_noise():
    cycles, ops = synth(5, 200)
    f = measure.fit(cycles, ops)
    assert abs(f.value - 5) < 0.2
    assert not f.unstable, f.why_unstable


def test_fixed_cost_cancels():
    a = measure.fit(*synth(4, 20, noise=[0]))
    b = measure.fit(*synth(4, 2580, noise=[0]))
    assert a.value == pytest.approx(b.value) == pytest.approx(4.0)
    assert b.intercept - a.intercept == pytest.approx(2560.0)


def test_per_op_division_would_be_wrong_but_slope_is_not():
    # 258 cycles of fixed cost in front of a 16-op chain of latency 4
    cycles, ops = synth(4, 258, noise=[0], lengths=(16, 32, 64))
    assert cycles[16][0] / 16 > 20           # what one reading divided by n would claim
    assert measure.fit(cycles, ops).value == pytest.approx(4.0)


def test_ops_per_length_are_used():
    # two PTX ops per chain step: the slope is per op, not per step
    cycles = {n: [6 * n + 100] * 3 for n in LENGTHS}
    f = measure.fit(cycles, {n: 2 * n for n in LENGTHS})
    assert f.value == pytest.approx(3.0)


def test_wide_spread_is_unstable_with_reason():
    # repeat r has slope 5 + r: the per-repeat slopes disagree by 6 cycles/op
    cycles = {n: [(5 + r) * n + 200 for r in range(7)] for n in LENGTHS}
    f = measure.fit(cycles, {n: n for n in LENGTHS})
    assert f.unstable
    assert "spread" in f.why_unstable
    assert f.spread == pytest.approx(6.0)


def test_non_linear_is_unstable_with_reason():
    cycles = {n: [n * n + 100] * 5 for n in (4, 8, 16, 32, 64)}
    f = measure.fit(cycles, {n: n for n in cycles})
    assert f.unstable
    assert "not linear" in f.why_unstable


def test_outlier_repeat_does_not_move_the_median():
    cycles = {n: [5 * n + 200] * 6 + [5 * n + 200 + (5000 if n == 32 else 0)] for n in LENGTHS}
    f = measure.fit(cycles, {n: n for n in LENGTHS})
    assert f.value == pytest.approx(5.0)
    assert f.unstable   # but the spread shows it


@pytest.mark.parametrize("cycles", [{}, {8: [100, 101]}])
def test_fewer_than_two_lengths_raises(cycles):
    with pytest.raises(ValueError, match="at least two chain lengths"):
        measure.fit(cycles, {n: n for n in cycles})


def test_least_squares():
    m, c = measure.least_squares([1, 2, 3], [5, 7, 9])
    assert m == pytest.approx(2.0) and c == pytest.approx(3.0)


@settings(max_examples=200, deadline=None)
@given(slope=st.floats(min_value=0.25, max_value=200.0, allow_nan=False),
       intercept=st.floats(min_value=0.0, max_value=5000.0, allow_nan=False),
       noise=st.lists(st.integers(min_value=-2, max_value=2), min_size=3 * 5, max_size=3 * 5),
       lengths=st.sampled_from([(8, 16, 32), (4, 8, 16, 32), (16, 64), (8, 16, 32, 64)]))
def test_fitted_slope_close_to_true_slope(slope, intercept, noise, lengths):
    """Chain lengths spanning 16+ ops keep +-2 cycles of noise (plus rounding) under 0.5."""
    reps = 5
    cycles = {n: [int(round(slope * n + intercept)) + noise[(k * reps + r) % len(noise)]
                  for r in range(reps)] for k, n in enumerate(lengths)}
    f = measure.fit(cycles, {n: n for n in lengths})
    assert abs(f.value - slope) <= 0.5
    assert len(f.slopes) == reps
    assert f.spread >= 0


@given(st.lists(st.tuples(st.integers(-10**6, 10**6), st.floats(-1e6, 1e6)), min_size=2,
                max_size=8, unique_by=lambda p: p[0]))
def test_the_closed_form_line_is_numpys_least_squares(points):
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    a = np.vstack([np.asarray(xs, float), np.ones(len(xs))]).T
    (m, c), *_ = np.linalg.lstsq(a, np.asarray(ys), rcond=None)
    got = measure.least_squares(xs, ys)
    scale = max(1.0, max(abs(y) for y in ys))
    assert got[0] == pytest.approx(m, rel=1e-9, abs=1e-9 * scale)
    assert got[1] == pytest.approx(c, rel=1e-9, abs=1e-6 * scale)


def test_every_x_the_same_is_numpys_minimum_norm_answer():
    assert measure.least_squares([2, 2], [1.0, 3.0]) == pytest.approx((0.8, 0.4))


def _spans_by_loop(rec):
    out = {}
    for start, end, smid in rec[:, :3].tolist():
        s = out.setdefault(int(smid), [start, end, 0])
        s[0], s[1], s[2] = min(s[0], start), max(s[1], end), s[2] + 1
    return {k: (v[1] - v[0], v[2]) for k, v in out.items()}


@given(st.lists(st.tuples(st.integers(0, 2**40), st.integers(0, 5000), st.integers(0, 7)),
                max_size=60))
def test_per_sm_spans_is_the_first_start_to_the_last_end_of_each_sm(warps):
    rec = np.array([[s, s + d, sm] for s, d, sm in warps], dtype=np.uint64).reshape(-1, 3)
    assert measure.per_sm_spans(rec) == _spans_by_loop(rec)
