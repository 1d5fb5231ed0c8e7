"""The memory figures' maths (topics/memory/analysis.py) on synthetic data: footprints from
device attributes, bank-conflict layouts, staircase plateaus and knees, fill size (the
capacity rule and its bisection: test_capacity.py)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_gpuchar.core import device
from pytest_gpuchar.topics.memory import analysis, rows
from pytest_gpuchar.topics.memory.rows import LINE


class _Dev:
    def __init__(self, l2=50 * 2**20, l1=256 * 1024, free=140 * 2**30):
        self.l2_bytes, self.l1_shared_bytes, self.free_memory_bytes = l2, l1, free


def test_footprints_from_device_attributes():
    g = analysis.geometry(_Dev())
    assert g.notes == []
    assert g.footprint("dram") == 256 * 2**20 and g.footprint("dram") >= 4 * g.l2_bytes
    assert g.l1_bytes < g.footprint("l2") < g.l2_bytes // 2
    assert g.footprint("l1") <= 24 * 1024
    pts = g.sweep()
    assert pts[0] == 4096 and pts[-1] == 256 * 2**20
    assert all(p % LINE == 0 for p in pts) and pts == sorted(set(pts))
    assert len(pts) == 3 * 16 + 1


def test_footprint_reduced_when_above_free_memory():
    g = analysis.geometry(_Dev(free=100 * 2**20))
    got, note = g.dram_footprint()
    assert got <= 75 * 2**20 and got == 64 * 2**20
    assert "reduced from 256 MiB" in note and "NOT reached" in note
    assert any("reduced" in n for n in g.notes)
    got, note = analysis.fit_to_memory(1 << 30, 8 << 30)
    assert got == 1 << 30 and note == ""
    got, note = analysis.fit_to_memory(1 << 30, None)
    assert got == 1 << 30


def test_fallback_when_attributes_unreadable():
    g = analysis.geometry(_Dev(l2=0, l1=0, free=None))
    assert g.l2_bytes == analysis.FALLBACK_L2 and g.l1_bytes == analysis.FALLBACK_L1
    assert len(g.notes) == 2 and all("fallback" in n for n in g.notes)
    assert g.sweep()[-1] == 4 * analysis.FALLBACK_L2


def test_sweep_warm_policy_by_footprint():
    g = analysis.geometry(_Dev())
    assert g.sweep_warm(1 << 20) == rows.Warm.EVERY
    assert g.sweep_warm(50 * 2**20) == rows.Warm.FIRST
    assert g.sweep_warm(64 * 2**20) == rows.Warm.NONE


def test_level_layouts_span_their_footprints():
    g = analysis.geometry(_Dev())
    for lv in rows.LEVELS:
        if lv.is_dram:
            continue
        lay = analysis.level_layout(lv, g)
        assert lay.footprint == g.footprint(lv.footprint)
    assert rows.level("l2_hit").policy == rows.Warm.FIRST
    assert rows.level("dram_cv").policy == rows.Warm.NONE
    assert rows.level("l1_hit").policy == rows.Warm.EVERY


def _curve(levels, fps, noise=0.0, seed=0, ramp=1):
    rng = np.random.default_rng(seed)
    lat = []
    for f in fps:
        v = levels[-1][1]
        for cap, val in levels:
            if f <= cap:
                v = val
                break
        lat.append(v)
    lat = np.array(lat, float)
    if ramp > 1:   # partial hits: a gradual rise over `ramp` points after each capacity
        for k in range(1, len(lat)):
            if lat[k] > lat[k - 1] * 1.3:
                lo, hi = lat[k - 1], lat[k]
                for j in range(ramp - 1):
                    if k + j < len(lat):
                        lat[k + j] = lo + (hi - lo) * (j + 1) / ramp
                break
    return (lat * (1 + noise * rng.standard_normal(len(lat)))).tolist()


FPS = [int(round(4096 * 2 ** (k / 3) / 128)) * 128 for k in range(49)]


@pytest.mark.parametrize("noise", [0.0, 0.02])
def test_knees_on_synthetic_staircase(noise):
    levels = [(256 * 1024, 33.0), (50 * 2**20, 260.0), (1 << 40, 800.0)]
    lat = _curve(levels, FPS, noise)
    found = analysis.knees(FPS, lat)
    assert len(found) == 2
    l1, l2 = found
    assert l1.lo <= 256 * 1024 < l1.hi and l2.lo <= 50 * 2**20 < l2.hi
    assert abs(l1.below - 33) < 3 and abs(l2.above - 800) < 40


def test_knees_with_gradual_transition_and_a_far_level():
    levels = [(192 * 1024, 30.0), (20 * 2**20, 200.0), (40 * 2**20, 300.0), (1 << 40, 600.0)]
    lat = _curve(levels, FPS, 0.01, ramp=3)
    ps = analysis.plateaus(FPS, lat)
    assert len(ps) == 4
    assert all(abs(p.latency - e) <= 0.05 * e for p, e in zip(ps, [30, 200, 300, 600]))
    ks = analysis.knees(FPS, lat)
    assert ks[0].lo <= 192 * 1024 and ks[-1].lo <= 40 * 2**20 < ks[-1].hi


# one H100 night's staircase from 8 MiB up (MiB, cycles): the 25.4 MiB point sits 7.8% above
# the near-L2 level, inside plateaus()' 8% band
H100_NIGHT = [(8.0, 271), (10.1, 271), (12.7, 270), (16.0, 270), (20.2, 268), (25.4, 291),
              (32.0, 509), (40.3, 514), (50.8, 560), (64.0, 676), (80.6, 669), (101.6, 680),
              (128.0, 692), (161.3, 667), (203.2, 682), (256.0, 683)]


def test_a_partial_miss_point_is_cut_from_the_upper_end_of_a_plateau():
    fps = [int(mib * 2**20) for mib, _ in H100_NIGHT]
    lat = [float(c) for _, c in H100_NIGHT]
    near = analysis.plateaus(fps, lat)[0]
    assert near.hi_bytes == fps[5]                 # the 8% band takes 25.4 MiB for a hit
    cut = analysis.without_rising_edge(near, fps, lat)
    assert (cut.first, cut.last, cut.hi_bytes) == (0, 4, fps[4])
    assert cut.latency == 270.0


@pytest.mark.parametrize("last", [268.0, 276.0, 240.0])
def test_a_plateau_within_its_edge_band_is_kept_whole(last):
    fps = [2**20 * k for k in range(1, 7)]
    lat = [270.0, 271.0, 270.0, 269.0, 270.0, last]
    p = analysis.Plateau(0, 5, 270.0, fps[0], fps[5])
    assert analysis.without_rising_edge(p, fps, lat) is p


def test_flat_curve_has_no_knee():
    assert analysis.knees(FPS, [100.0] * len(FPS)) == []


def test_fill_granularity_on_synthetic_sweep():
    strides = list(rows.STRIDES)
    hit, miss = 30.0, 250.0
    for fill in (32, 64, 128):
        lat = [hit + min(1.0, s / fill) * (miss - hit) for s in strides]
        assert analysis.fill_granularity(strides, lat) == fill
    assert analysis.fill_granularity(strides, [30.0] * len(strides)) is None
    lat = [hit + min(1.0, s / 32) * (miss - hit) for s in strides]
    assert analysis.fill_model_error(strides, lat, 32) < 1e-9
    # a curve that falls back after the "fill size": not a fill-size curve at all
    bad = [30.0, 250.0, 40.0, 250.0, 60.0, 250.0]
    fill = analysis.fill_granularity(strides, bad)
    assert analysis.fill_model_error(strides, bad, fill) > 0.3


# two L1 stride sweeps of H100 boards (strides 8..256 B): GPU-fa334b31's, and GPU-e721d509's
# whose all-miss level scattered (+-120 cycles) and read 64 B where every other board reads 32
CLEAN = ([94, 157, 280, 277, 279, 282], [10, 7, 15, 7, 5, 1])
SCATTERED = ([90.71, 153.96, 267.02, 398.76, 399.98, 393.7], [2.96, 7.03, 143.44, 122.95,
                                                             127.67, 123.9])


def test_a_fill_size_the_sweep_cannot_tell_from_the_stride_below_says_so():
    strides = list(rows.STRIDES)
    lat, spread = CLEAN
    assert analysis.fill_granularity(strides, lat) == 32
    assert analysis.fill_ambiguity(strides, lat, spread, 32) == ""
    lat, spread = SCATTERED
    assert analysis.fill_granularity(strides, lat) == 64
    assert analysis.fill_model_error(strides, lat, 64) < rows.FILL_MODEL_LIMIT
    why = analysis.fill_ambiguity(strides, lat, spread, 64)
    assert "32 B: 267 +- 143 cycles" in why and "32 and 64 B cannot be told apart" in why


@pytest.mark.parametrize("row", rows.BANK_ROWS, ids=lambda r: r.name)
def test_bank_layout_gives_the_intended_conflict_degree(row):
    assert analysis.bank_banks(row) == max(1, row.ways)
    words, starts = analysis.bank_layout(row)
    k = row.ways
    block = max(128, 32 * 4 * k)
    for t in (0, 5, 31):
        a = int(starts[t])
        for m in range(4):   # the thread's cycle: 4 positions, back to the start
            a = int(words[a // 4])
        assert a == int(starts[t])
        assert int(words[int(starts[t]) // 4]) == block + t * 4 * k
        # where the GPU's end-offset check expects thread t after n loads
        assert analysis.bank_end(row, t, 4) == int(starts[t])
        assert analysis.bank_end(row, t, 17) == block + t * 4 * k


def test_bank_rows_halves():
    assert rows.BankRow(32, 4).half == rows.BankRow(32, 2)
    assert rows.BankRow(64, 2).half is None        # no u64 1-way row
    assert rows.BankRow(32, 1).half is None and rows.BankRow(32, 0).half is None


def test_human_bytes():
    assert analysis.human_bytes(256 * 2**20) == "256 MiB"
    assert analysis.human_bytes(4096) == "4 KiB"
    assert math.isclose(len(rows.LEVELS), 9)


def test_device_info_memory_fields_default_and_table():
    d = device.DeviceInfo(0, "x", "sm_90", 132, 50 * 2**20, 228 * 1024, 1 << 37, None, None,
                          None, "580", "13.0", "13.0")
    assert d.l1_shared_bytes == 0 and d.free_memory_bytes is None
    assert d.max_shared_per_block_optin == 0
    assert device.L1_SHARED_BYTES["sm_90"] == 256 * 1024
    assert device.L1_SHARED_BYTES["sm_80"] == 192 * 1024
    # without cupy the free-memory probe answers None, never raises
    assert device.free_memory() is None or device.free_memory() > 0
    g = analysis.geometry(d)
    assert g.l1_bytes == analysis.FALLBACK_L1 and any("fallback" in n for n in g.notes)


def test_the_fill_size_spread_is_how_far_the_scatter_moves_the_crossing():
    strides = [16, 32, 64, 128, 256]
    lat = [100.0, 150.0, 250.0, 400.0, 400.0]      # the 90% level: 370 cycles
    size = analysis.fill_granularity(strides, lat)
    assert size == 128
    assert analysis.fill_spread(strides, lat, [5.0] * 5, size) == 0.0   # clear crossing
    # 64 B reaches the level within its spread, 128 B falls below it within its own
    assert analysis.fill_spread(strides, lat, [5.0, 5.0, 130.0, 40.0, 5.0], size) == 256 - 64
