"""The movement figures' maths (topics/movement/analysis.py) on synthetic data: rates from
spans over bytes, the per-CTA windows of stream records, the DSM matrix, the L2 heatmap's
near/far split and partition grouping, the loaded-latency points, the TMA size knee and
the serialised-launch slope."""
from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_gpuchar.topics.movement import analysis


def _spans(rate: float, fixed: float, trips, per_trip: float, reps: int = 5, noise: float = 0.0,
           seed: int = 1):
    rng = np.random.default_rng(seed)
    moved = {t: t * per_trip for t in trips}
    spans = {t: [fixed + moved[t] / rate + noise * rng.standard_normal() for _ in range(reps)]
             for t in trips}
    return spans, moved


def test_rate_is_the_inverse_slope_and_cancels_fixed_cost():
    spans, moved = _spans(rate=96.0, fixed=5000.0, trips=(16, 32, 64), per_trip=131072)
    f = analysis.rate_fit(spans, moved)
    assert f.value == pytest.approx(96.0, rel=1e-9)
    assert not f.unstable and f.spread == pytest.approx(0.0, abs=1e-9)
    assert len(f.rates) == 5 and all(r == pytest.approx(96.0) for r in f.rates)


def test_rate_noise_beyond_the_limit_is_unstable():
    spans, moved = _spans(rate=96.0, fixed=5000.0, trips=(16, 32, 64), per_trip=131072,
                          noise=2000.0)
    f = analysis.rate_fit(spans, moved)
    assert f.unstable and "spread" in f.why_unstable
    assert math.isfinite(f.value)
    # said in rates (B/clk), with its share of the value: not a slope of 0.00 cycles/byte
    share = f.spread / f.value
    assert f"({share:.1%} of {f.value:.4g}) > 2%" in f.why_unstable
    # a level whose launches scatter more (device memory) takes a wider limit
    wide = analysis.rate_fit(spans, moved, spread_rel=share + 0.01)
    assert not wide.unstable and wide.value == f.value


def test_rate_of_a_span_that_does_not_grow_is_not_a_number():
    f = analysis.rate_fit({1: [10.0, 10.0], 2: [10.0, 10.0]}, {1: 100.0, 2: 200.0})
    assert f.unstable and math.isnan(f.value)


def _records(ctas: int, span_of, sm_of, warps: int = 32, g0: int = 1_000, written=None):
    rec = np.zeros((ctas, warps, 6), dtype=np.uint64)
    for c in range(ctas):
        for w in range(warps if written is None else written):
            t0 = 100 + w
            rec[c, w] = (t0, t0 + span_of(c) - w, g0 + w, g0 + 500 + c,
                         np.uint64(sm_of(c)) << np.uint64(32) | np.uint64(7), 0)
    return rec.reshape(-1, 6)


def test_windows_span_first_warp_start_to_last_warp_end():
    rec = _records(3, span_of=lambda c: 1000 * (c + 1), sm_of=lambda c: 10 + c)
    ws = analysis.windows(rec, 3)
    assert [w.span for w in ws] == [1000, 2000, 3000]
    assert [w.sm for w in ws] == [10, 11, 12]
    assert ws[2].g0 == 1_000 and ws[2].g1 == 1_000 + 500 + 2


def test_windows_ignore_unwritten_warps_and_reject_silent_ctas():
    rec = _records(2, span_of=lambda c: 500, sm_of=lambda c: c, written=1)
    assert [w.span for w in analysis.windows(rec, 2)] == [500, 500]
    rec[-6:] = 0
    rec[:] = 0
    with pytest.raises(ValueError, match="CTA 0 wrote no record"):
        analysis.windows(rec, 2)


def _window_runs(ctas, rate_of, trips, per_trip, ns_per_byte, reps=3, sm_of=None):
    sm_of = sm_of or (lambda c: c)
    runs = {}
    for t in trips:
        b = t * per_trip
        runs[t] = [[analysis.Window(int(800 + b / rate_of(c)), sm_of(c), 0,
                                    int(2000 + b * ctas * ns_per_byte)) for c in range(ctas)]
                   for _ in range(reps)]
    return runs


def test_stream_figures_per_sm_gpu_and_globaltimer():
    runs = _window_runs(4, lambda c: 32.0 + c, (8, 16, 32), 65536, ns_per_byte=1 / 2000.0)
    figs = analysis.stream_figures(runs, {t: t * 65536 for t in (8, 16, 32)})
    # the median CTA's span: between the 2nd and 3rd CTA's rate
    assert 33.0 < figs.per_sm.value < 34.0
    assert figs.gpu_bytes_per_clk == pytest.approx(32 + 33 + 34 + 35, rel=1e-3)
    assert figs.gbps.value == pytest.approx(2000.0, rel=1e-3)
    assert figs.sms == [0, 1, 2, 3] and figs.checks == []


def test_stream_figures_flag_two_ctas_on_one_sm():
    runs = _window_runs(3, lambda c: 32.0, (8, 16), 65536, 1e-3, sm_of=lambda c: c // 2)
    figs = analysis.stream_figures(runs, {8: 8 * 65536, 16: 16 * 65536})
    assert figs.checks and "same SM" in figs.checks[0]


def test_dsm_matrix_local_remote_and_by_offset():
    c, reps = 4, 5
    lat = {0: 31.0, 1: 190.0, 2: 200.0, 3: 210.0}
    dt = {}
    for n in (16, 32, 64):
        a = np.zeros((reps, c, c + 1))
        for p in range(c + 1):
            a[:, :, p] = 400 + n * lat[p % c]
        dt[n] = a
    figs = analysis.dsm_figures(dt)
    assert figs.local.value == pytest.approx(31.0)
    assert figs.remote.value == pytest.approx(200.0)
    assert figs.by_offset == {0: 31.0, 1: 190.0, 2: 200.0, 3: 210.0}
    assert not figs.local.unstable and figs.local.spread == pytest.approx(0.0, abs=1e-9)
    assert len(figs.matrix) == c and len(figs.matrix[0]) == c


def test_dsm_per_repeat_scatter_is_unstable():
    dt = {n: np.full((3, 2, 3), 100.0 + n * 30) for n in (16, 32, 64)}
    dt[64][1] += 64 * 5.0            # one repeat's slope moves by several cycles
    figs = analysis.dsm_figures(dt)
    assert figs.local.unstable and figs.remote.unstable


def test_split_levels():
    near, far, thr = analysis.split_levels([250, 252, 251, 249, 400, 402, 398, 401])
    assert (near, far) == (250.5, 400.5) and 252 < thr < 398
    assert analysis.split_levels([250, 251, 252, 253, 254, 255]) is None
    assert analysis.split_levels([1, 2]) is None


def _heat(sms=8, lines=40, near=260.0, far=420.0, seed=3):
    rng = np.random.default_rng(seed)
    part = np.arange(lines) % 2 == 0          # which lines sit in partition A
    lat = np.empty((sms, lines))
    for s in range(sms):
        mine = part if s < sms // 2 else ~part
        lat[s] = np.where(mine, near, far) + rng.uniform(-2, 2, lines)
    return lat


def test_partitions_group_sms_by_their_near_lines():
    lat = _heat()
    m = analysis.l2_map(lat, [lat, lat + 0.4])
    assert m.near == pytest.approx(260.0, abs=1.0) and m.far == pytest.approx(420.0, abs=1.0)
    assert sorted(map(sorted, m.groups)) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert m.one_level == [] and m.spread["near"] == pytest.approx(0.4, abs=0.01)


def test_a_far_level_missing_from_a_launch_leaves_its_spread_unknown():
    lat = _heat()
    m = analysis.l2_map(lat, [lat, np.full_like(lat, 300.0), lat + 0.4])
    assert m.far == pytest.approx(420.0, abs=1.0) and m.far_repeats == 2
    assert math.isnan(m.spread["far"]) and not math.isnan(m.spread["near"])


def test_partitions_tolerate_a_few_disagreeing_lines():
    near = np.zeros((4, 50), bool)
    near[:, :25] = True
    near[1, 0] = False                         # one line read the other way
    near[2:, :] = ~near[2:, :]
    assert analysis.partitions(near) == [[0, 1], [2, 3]]


def test_one_level_heatmap_has_no_far():
    lat = np.full((4, 20), 300.0) + np.linspace(0, 3, 20)
    m = analysis.l2_map(lat, [lat])
    assert m.one_level == [0, 1, 2, 3] and math.isnan(m.far)
    assert m.near == pytest.approx(301.5) and len(m.groups) == 1


def test_vectorised_slopes_match_least_squares():
    rng = np.random.default_rng(0)
    a = rng.uniform(100, 300, (3, 5))
    dt = {n: 50 + n * a + rng.uniform(0, 1, a.shape) for n in (8, 16, 32)}
    got = analysis.slopes(dt)
    for i in range(3):
        for j in range(5):
            want = analysis.least_squares([8, 16, 32], [dt[n][i, j] for n in (8, 16, 32)])[0]
            assert got[i, j] == pytest.approx(want)


def test_loaded_point_bandwidth_and_coverage():
    cycles = {n: [1000 + 700 * n] * 4 for n in (16, 32, 64)}
    streams = [(0, 1_000_000)] * 10
    p = analysis.loaded_point(50, 10, cycles, [((100, 500), streams)] * 3, 16 << 20)
    assert p.latency.value == pytest.approx(700.0)
    assert p.gbps == pytest.approx(10 * (16 << 20) / 1_000_000)
    assert p.covered
    late = analysis.loaded_point(50, 10, cycles, [((100, 2_000_000), streams)], 16 << 20)
    assert not late.covered
    idle = analysis.loaded_point(0, 0, cycles, [((100, 500), [])], 16 << 20)
    assert idle.gbps == 0.0 and idle.covered


def test_knee_is_the_smallest_size_near_the_best():
    sizes = [256, 512, 1024, 2048, 4096, 8192]
    assert analysis.knee(sizes, [10, 19, 30, 35, 40, 39.5]) == 4096
    assert analysis.knee(sizes, [10, 19, 30, 37, 40, 39.5]) == 2048
    assert analysis.knee(sizes, [float("nan")] * 6) is None


def _launch_records(sms: int, per_sm: int, body: int, gap: int, start: int = 0):
    rows = []
    for s in range(sms):
        t = start + 7 * s
        for _ in range(per_sm):
            rows.append((t, t + body, s, 0))
            t += body + gap
    return np.array(rows, dtype=np.uint64)


def test_serial_blocks_slope_is_body_plus_gap():
    per_repeat = [[_launch_records(4, b, body=300, gap=900) for b in (2, 4, 8)]
                  for _ in range(3)]
    s = analysis.serial_blocks(per_repeat)
    assert s.value == pytest.approx(1200.0)
    assert s.gap == pytest.approx(900.0) and not s.overlapped and s.why == ""
    assert s.counts == [2, 4, 8]


def test_serial_blocks_are_judged_on_the_launches_interquartile_range():
    """One launch of seven in another placement (gap 1000 instead of 900) leaves the figure
    stable, its full range reported; launches scattered throughout make it unstable."""
    def launches(gaps):
        return [[_launch_records(4, b, body=300, gap=g) for b in (4, 8, 16)] for g in gaps]
    one_off = analysis.serial_blocks(launches([900] * 6 + [1000]))
    assert one_off.why == "" and one_off.value == pytest.approx(1200.0)
    assert one_off.spread == pytest.approx(100.0)
    scattered = analysis.serial_blocks(launches([800, 850, 900, 950, 1000, 1050, 1100]))
    assert "interquartile range" in scattered.why and "full range 300" in scattered.why


def test_serial_blocks_that_overlap_have_no_figure():
    rec = _launch_records(2, 4, body=300, gap=-100)
    s = analysis.serial_blocks([[rec, _launch_records(2, 2, 300, 900)]])
    assert s.overlapped and "overlapped" in s.why
