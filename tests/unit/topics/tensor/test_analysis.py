"""Pure maths of the tensor sweep and the static SASS checks (CPU only)."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from pytest_gpuchar.core.sass import parse_instr
from pytest_gpuchar.topics.tensor.mma import analysis, kernels, plots, rows
from pytest_gpuchar.topics.tensor.mma.analysis import SweepPoint
from pytest_gpuchar.topics.tensor.mma.rows import Emulation


TRIPS = (10, 20, 30)


def _raw(per_step, warps, trips=TRIPS, reps=5, skew=3, steps=rows.STEPS):
    """Clocks of `reps` launches per trip count: every warp's span is a fixed 50 cycles plus
    per_step cycles per chain step (trips x steps), starts up to `skew` cycles apart."""
    rng = np.random.default_rng(0)
    return {t: [(t0 := rng.integers(0, skew, warps).astype(float),
                 t0 + 50 + t * steps * per_step) for _ in range(reps)] for t in trips}


def test_fit_point_and_convergence():
    r = rows.row("mma", "f16.f32.m16n8k16")
    pts = {}
    for w in (1, 4, 8):
        for ilp in (1, 2, 3):
            p = kernels.sweep_probe(r, "sm_80", ilp)
            step = max(25.0, 2048 * ilp * w / 1000)   # a 1000 FMA/clk/SM ceiling
            pts[(w, ilp)] = p.fit_spec(32 * w, p.steps).point(_raw(step, w))
    assert pts[(1, 1)].latency == pytest.approx(25.0, abs=0.01)
    assert pts[(8, 3)].throughput == pytest.approx(1000, rel=0.01)
    assert pts[(8, 3)].trips == TRIPS and pts[(8, 3)].steps == rows.STEPS
    c = analysis.convergence(pts, 8)
    assert c.ilp == 2 and c.throughput == pytest.approx(1000, rel=0.01)
    fig = plots.heatmap(pts, "t", "fma/clk/SM")
    assert len(fig.axes) == 4


def test_fit_point_is_the_probes_point():
    raw = _raw(30.0, 4)
    p = kernels.sweep_probe(rows.row("mma", "f16.f32.m16n8k16"), "sm_80", 2)
    assert analysis.fit_point(raw, warps=4, ilp=2, work=2048 * 2 * 4,
                              steps=rows.STEPS) == p.fit_spec(128, p.steps).point(raw)


def test_per_warp_and_per_sm_spans_are_recorded():
    """Each warp's own cycles per step (slope of its span over trips) beside the mean and the
    per-SM span; the start and end skews per trip count."""
    raw = {t: [(np.zeros(4), np.array([40.0, 40, 40, 40]) + t * 8 * np.array([20, 20, 20, 22]))]
           * 5 for t in TRIPS}
    pt = analysis.fit_point(raw, warps=4, ilp=1, work=2048 * 4, steps=8)
    assert pt.cycles["warp_latency"] == [20.0, 20.0, 20.0, 22.0]
    assert pt.latency == pytest.approx(20.5)
    assert pt.throughput == pytest.approx(2048 * 4 / 22)     # the slowest warp ends the span
    assert pt.cycles["end_skew"][30] == pytest.approx(30 * 8 * 2)
    assert pt.cycles["start_skew"][30] == 0 and pt.skew_share == 0


def _skewed(skews: dict, per_step: float = 22.0, warps: int = 8, reps: int = 15):
    return {t: [(np.linspace(0, sk, warps), np.linspace(0, sk, warps) + 50 + 8 * per_step * t)
                for _ in range(reps)] for t, sk in skews.items()}


def test_start_skew_above_one_percent_of_the_span_makes_a_point_unstable():
    """H200, 8 warps: the warps left bar.sync 120-270 cycles apart. A loop whose longest
    per-SM span is under 100 x that skew is unstable (its slope may be biased), with the skew
    and its share in the reason; one 100 times longer is stable."""
    p = kernels.sweep_probe(rows.row("mma", "f16.f32.m16n8k16"), "sm_90", 2)
    short = p.fit_spec(256, p.steps).point(_skewed({10: 270.0, 20: 270.0, 30: 270.0}))
    assert short.unstable and short.skewed
    span = 270 + 50 + 8 * 22 * 30
    assert short.skew_share == pytest.approx(270 / span)
    assert "start skew (up to 270 cycles; 270 at 10, 270 at 20, 270 at 30 trips) is 4.8% of " \
        "the longest per-SM span (5600 cycles; limit 1%)" in short.why
    long = p.fit_spec(256, p.steps).point(_skewed({100: 270.0, 200: 270.0, 300: 270.0}))
    assert not long.unstable and not long.skewed, long.why
    assert long.skew_share < rows.SKEW_SHARE_MAX
    assert analysis.peak({(8, 2): short}) is None
    assert analysis.peak({(8, 2): short, (4, 2): long}).warps == 8      # the stable one


def test_the_largest_skew_at_any_trip_count_counts():
    """A skew that shrinks with the trip count biases the slope as much as one that grows:
    the share is the largest skew over the longest span."""
    p = kernels.sweep_probe(rows.row("mma", "f16.f32.m16n8k16"), "sm_90", 2)
    pt = p.fit_spec(256, p.steps).point(_skewed({100: 1400.0, 200: 700.0, 300: 100.0}))
    assert pt.unstable and pt.skewed and pt.skew_share == pytest.approx(1400 / 52950)
    assert "up to 1400 cycles; 1400 at 100, 700 at 200, 100 at 300 trips" in pt.why


def test_one_warp_has_no_skew():
    p = kernels.sweep_probe(rows.row("mma", "f16.f32.m16n8k16"), "sm_90", 1)
    pt = p.fit_spec(32, p.steps).point(_raw(24.0, 1, trips=(2, 4, 6)))
    assert pt.skew_share == 0 and not pt.skewed and not pt.unstable


def test_trip_counts_keep_the_span_long_at_the_rate_bound():
    """The longest span is at least SPAN_PER_WARP x warps even if the SM ran at the rate
    bound with the fastest step: (1, 2, 3) x a base count, never below MIN_TRIPS."""
    for warps, ilp in ((1, 1), (8, 1), (8, 6), (16, 6)):
        trips = analysis.plan_trips(warps=warps, work_per_step=2048 * ilp * warps,
                                    rate_bound=2048, steps=8)
        step = max(rows.STEP_FLOOR, ilp * warps)
        assert [t // trips[0] for t in trips] == list(rows.TRIP_RATIOS)
        assert trips[-1] * 8 * step >= rows.SPAN_PER_WARP * warps
        assert (trips[0] - 1) * 3 * 8 * step < rows.SPAN_PER_WARP * warps or \
            trips[0] == rows.MIN_TRIPS
    assert analysis.plan_trips(warps=16, work_per_step=1e9, rate_bound=1, steps=8) == (2, 4, 6)
    # f64 m16n8k16 (2048 FMA) at 16 warps, ILP 6 against 128 FMA/clk/SM: few long trips
    assert analysis.plan_trips(warps=16, work_per_step=2048 * 6 * 16, rate_bound=128,
                               steps=8) == (5, 10, 15)


def _pt(w, ilp, thr, spread=1.0, unstable=False):
    return SweepPoint(w, ilp, 24.0, thr, 0.1, spread, unstable)


def test_throughput_must_not_fall_as_warps_grow():
    """At warp counts that are multiples of the 4 schedulers, at a fixed ILP: a fall beyond
    the two points' spreads is reported; 6 warps and unstable points are not compared."""
    pts = {(4, 1): _pt(4, 1, 700), (6, 1): _pt(6, 1, 500), (8, 1): _pt(8, 1, 1000),
           (12, 1): _pt(12, 1, 995, spread=4), (16, 1): _pt(16, 1, 1001),
           (4, 2): _pt(4, 2, 1000), (8, 2): _pt(8, 2, 900, unstable=True),
           (16, 2): _pt(16, 2, 1005)}
    falls, compared = analysis.throughput_falls(pts)
    assert falls == [] and compared == 6 + 1
    pts[(16, 1)] = _pt(16, 1, 950)
    falls, _ = analysis.throughput_falls(pts)
    assert [(f.ilp, f.warps) for f in falls] == [(1, (8, 16)), (1, (12, 16))]
    assert "ILP 1: throughput falls from 1000.0 at 8 warps to 950.0 at 16 warps" in str(falls[0])
    assert falls[0].allowed == pytest.approx(1 + 1 + 10.0)   # spreads + 1% of 1000
    assert falls[1].allowed == pytest.approx(4 + 1 + 9.95)


def test_convergence_candidates_are_the_points_that_can_cross_the_threshold():
    """H200 ldmatrix x2, 4 warps: ILP 3 (123.4 +- 9.0) sits at the 95% threshold of 128.7, so
    the convergence point is ILP 3 or ILP 4 depending on the run."""
    def pt(ilp, thr, sp, lat):
        return SweepPoint(4, ilp, lat, thr, 0.5, sp, False)
    pts = {(4, i): pt(i, t, sp, lat) for i, t, sp, lat in
           [(1, 40.96, 1.65, 25.0), (2, 81.95, 1.64, 25.0), (3, 123.41, 9.04, 25.08),
            (4, 128.72, 2.79, 31.78), (5, 127.43, 3.71, 40.0), (6, 128.02, 3.58, 48.0)]}
    assert [p.ilp for p in analysis.convergence_candidates(pts, 4)] == [3, 4]
    assert analysis.convergence(pts, 4).ilp == 3


def test_one_odd_launch_does_not_make_a_point_unstable():
    """Spreads are interquartile ranges of the per-launch slopes: one launch of 15 in another
    scheduling mode is tolerated (the median is unaffected), a bimodal batch is not."""
    r = rows.row("mma", "f16.f32.m16n8k16")
    p = kernels.sweep_probe(r, "sm_90", 1)
    raw = _raw(24.0, 4, reps=15)
    longest = max(raw)
    t0, t1 = raw[longest][0]
    bump = 0.1 * float((t1 - t0).max())     # a launch 10% slower than the others
    raw[longest][0] = (t0, t1 + bump)
    pt = p.fit_spec(128, p.steps).point(raw)
    assert not pt.unstable and pt.latency == pytest.approx(24.0, abs=0.05)
    for i in range(0, 15, 2):
        t0, t1 = raw[longest][i]
        raw[longest][i] = (t0, t1 + bump)
    assert p.fit_spec(128, p.steps).point(raw).unstable


def test_a_higher_unstable_point_makes_the_peak_unstable_not_low():
    def pt(w, ilp, thr, unstable=False, why="", skewed=False):
        return SweepPoint(w, ilp, 24.0, thr, 0.1, 1.0, unstable, why, skewed=skewed)
    pts = {(4, 3): pt(4, 3, 1024.0), (4, 4): pt(4, 4, 1413.0, True, "per-launch throughput: "
                                                   "interquartile range 90"),
           (8, 2): pt(8, 2, 1677.0, True, "the warps' start skew changes with chain length",
                      skewed=True)}
    best = analysis.peak(pts)
    assert best.throughput == 1024.0
    over = analysis.higher_unstable(pts, best)
    assert over.ilp == 4 and over.warps == 4             # the skew-biased 8-warp point is not
    pts[(4, 4)] = pt(4, 4, 1060.0, True, "per-launch throughput: interquartile range 90")
    assert analysis.higher_unstable(pts, best) is None     # within 5%: the stable best stands


# --- static checks --------------------------------------------------------------------------

def _movm(rr, rc, cc, cr, types="f16.f16"):
    return {f"{lay}/{types}": c for lay, c in
            (("row.row", rr), ("row.col", rc), ("col.col", cc), ("col.row", cr))}


def test_movm_layout_order():
    good = _movm(2, 0, 4, 6)
    assert all(not analysis.movm_problems(good, 80, lay, "f16.f16") for lay in rows.WMMA_LAYOUTS)
    assert analysis.movm_problems(_movm(2, 1, 4, 6), 80, "row.col", "f16.f16")
    assert analysis.movm_problems(_movm(2, 0, 2, 6), 80, "col.col", "f16.f16")   # not > row.row
    assert not analysis.movm_problems(_movm(2, 0, 2, 6, "f32.f32"), 80, "col.col", "f32.f32")
    assert analysis.movm_problems(_movm(0, 0, 0, 0), 80, "row.row", "f16.f16")   # no transpose
    assert not analysis.movm_problems(_movm(0, 0, 0, 0), 70, "col.row", "f16.f16")   # Volta
    assert analysis.movm_problems(_movm(1, 0, 0, 0), 70, "row.row", "f16.f16")


def _region(*ops):
    return [parse_instr(16 * k, op) for k, op in enumerate(ops)]


def test_emulation_checks():
    fpu = _region("HFMA2 R0, R1, R2, R3", "CALL.REL.NOINC 0x100")
    assert not analysis.emulation_problems(Emulation.FPU, 80, fpu)
    assert analysis.emulation_problems(Emulation.FPU, 80,
                                       _region("HMMA.884.F32.F32 R0, R2, R4, R0"))
    assert not analysis.emulation_problems(Emulation.FPU, 75,
                                           _region("HMMA.884.F32.F32.STEP0 R0, R2, R4, R0"))
    assert analysis.emulation_problems(Emulation.FPU, 75, fpu)
    conv = _region("F2FP.F16.E4M3.UNPACK_B R0, R1", "HMMA.16816.F32 R4, R8, R12, R4")
    assert not analysis.emulation_problems(Emulation.FP8_CONVERT, 90, conv)
    assert analysis.emulation_problems(Emulation.FP8_CONVERT, 90,
                                       _region("QMMA.16832.F32.E4M3.E4M3 R4, R8, R12, R4"))
    assert not analysis.emulation_problems(Emulation.INT4_CALL, 90, _region("CALL.REL 0x10"))
    assert analysis.emulation_problems(Emulation.INT4_CALL, 90,
                                       _region("IMMA.8832.U4.U4 R0, R2, R4, R0"))


def test_table_iii_and_op_counts():
    r = rows.row("wmma", "f16.f32.m16n16k16")
    per_trip = 2 * rows.STEPS           # 003 Table III: 2 x HMMA.16816.F32 per wmma on sm_80
    assert not analysis.table_iii_problems(r, "sm_80", Counter({"HMMA.16816.F32": per_trip}))
    assert analysis.table_iii_problems(r, "sm_80", Counter({"HMMA.16816.F32": per_trip - 1}))
    assert not analysis.table_iii_problems(r, "sm_90", Counter())      # the paper is sm_80
    m = rows.row("mma", "f16.f32.m16n8k16")
    assert not analysis.one_op_problems(m, "sm_80", Counter({"HMMA.16816.F32": rows.STEPS}))
    assert analysis.one_op_problems(m, "sm_80", Counter({"HMMA.16816.F32": 2 * rows.STEPS}))
    f64 = rows.row("mma", "f64.f64.m16n8k16")
    assert not analysis.one_op_problems(f64, "sm_90", Counter({"DMMA.16x8x16": rows.STEPS}))
    assert not analysis.one_op_problems(f64, "sm_100", Counter({"DMMA.8x8x4": 8 * rows.STEPS}))
    sp = rows.row("mma.sp", "f16.f32.m16n8k32")
    assert not analysis.sparse_problems(sp, Counter({"HMMA.SP.16832.F32": 8}))
    assert analysis.sparse_problems(sp, Counter({"HMMA.16816.F32": 8}))
    region = _region("HMMA.16816.F32 R4, R8, R12, R4", "IADD3 R0, R1, R2, RZ")
    assert analysis.tensor_opcodes(region) == Counter({"HMMA.16816.F32": 1})


def test_a_warps_own_latency_is_stable_when_only_the_block_span_scatters():
    """The wgmma completion-latency loop (one warpgroup, fitted as one warp): each warp's own
    cycles repeat, while the warps' start times jitter between launches, so the block span's
    throughput scatters. The latency's own reasons (lat_why) are empty; the point's are not."""
    rng = np.random.default_rng(7)
    raw = {}
    for t in (32, 64, 96):
        reps = []
        for _ in range(15):
            t0 = rng.integers(0, 4000, size=4).astype(float)      # start jitter per launch
            reps.append((t0, t0 + 250.0 * t + 40.0))               # each warp: 250 per trip
        raw[t] = reps
    pt = analysis.fit_point(raw, warps=1, ilp=1, work=2 * 64 * 128 * 16, steps=1)
    assert pt.latency == pytest.approx(250.0)
    assert pt.lat_why == ""
    assert pt.unstable and "throughput" in pt.why


def test_a_sweep_point_fitted_over_all_launches_at_once_reads_launch_by_launch():
    rng = np.random.default_rng(4)
    raw = {}
    for t in (8, 16, 24):
        reps = []
        for _ in range(5):
            t0 = rng.integers(10 ** 9, 10 ** 9 + 100, 4)
            reps.append((t0, t0 + t * 264 + rng.integers(0, 40, 4)))
        raw[t] = reps
    p = analysis.fit_point(raw, warps=4, ilp=2, work=4096.0, steps=8)
    for t, reps in raw.items():
        assert p.cycles["start_skew"][t] == float(np.median([a.max() - a.min() for a, _ in reps]))
        assert p.cycles["end_skew"][t] == float(np.median([b.max() - b.min() for _, b in reps]))
    means = {t: [float(np.mean(b - a)) for a, b in reps] for t, reps in raw.items()}
    assert p.cycles["warp_mean"] == analysis.fit(means, {t: t * 8 for t in raw}).medians
