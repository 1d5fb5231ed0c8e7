"""throughput: per-SM analysis of the throughput records and the launch figures (pure maths,
synthetic records)."""
from __future__ import annotations

import math
import random

import numpy as np
import pytest

from pytest_gpuchar.topics.throughput import analysis as an


def test_per_sm_spans_and_rate():
    rec = np.array([[100, 1100, 0], [110, 1090, 0], [50, 2050, 1], [60, 2000, 1]], np.uint64)
    assert an.per_sm_spans(rec) == {0: (1000, 2), 1: (2000, 2)}
    # 128 results per clock: cycles = results / 128 + 300 fixed
    res = {16: 16 * 8192.0, 32: 32 * 8192.0, 48: 48 * 8192.0}
    spans = {t: [r / 128 + 300 + d for d in (0, 1, -1)] for t, r in res.items()}
    rate, spread, unstable, why, icpt, rates = an.rate_from_spans(spans, res)
    assert rate == pytest.approx(128, rel=1e-3)
    assert not unstable and icpt == pytest.approx(300, abs=2)


def test_rate_unstable_when_repeats_disagree():
    res = {16: 16 * 8192.0, 32: 32 * 8192.0, 48: 48 * 8192.0}
    spans = {t: [r / 128, r / 100, r / 128] for t, r in res.items()}
    *_, unstable, why, _, _ = an.rate_from_spans(spans, res)
    assert unstable and "per-repeat rates" in why


def test_trip_spans_drop_the_warm_up_and_take_the_median_sm():
    def launch(base: int, cycles: int):    # 3 SMs of 2 warps: busy cycles, 2x, 3x
        return [[base, base + k * cycles, k] for k in (1, 2, 3) for _ in range(2)]
    host = {t: np.array([launch(0, 10**6)] + [launch(5, 100 * t + r) for r in range(3)],
                        np.uint64) for t in (1, 2)}
    spans, sms, warps = an.trip_spans(host, 3)
    assert spans == {1: [200.0, 202.0, 204.0], 2: [400.0, 402.0, 404.0]}
    assert sms == 3 and warps == [2]


def test_dynamic_smem_holds_blocks_per_sm():
    for per_sm in (233472, 167936, 102400, 65536):
        x = an.dynamic_smem(per_sm, 4)
        if x:
            assert 4 * (x + 1024) <= per_sm < 5 * (x + 1024)
    assert an.dynamic_smem(233472, 4) > 0
    assert an.dynamic_smem(0) == 0


def test_block_and_warp_analysis():
    # 2 blocks of 2 warps: [start, end, smid, cta]
    rec = np.array([[0, 100, 0, 0], [10, 120, 0, 0], [5, 50, 1, 1], [25, 60, 1, 1]], np.uint64)
    assert an.block_spans(rec, 2) == [120, 55]
    assert an.warp_start_skew(rec, 2) == [10, 20]
    serial = np.array([[0, 10, 0, 0], [30, 40, 0, 1], [0, 10, 1, 2], [5, 15, 1, 3]], np.uint64)
    span, count, bodies, overlap = an.serial_blocks(serial)
    assert span == {0: 40, 1: 15} and count == {0: 2, 1: 2} and overlap
    assert an.issue_cycle({"ffma": 128.0, "dfma": 64.0}) == 1.0


def test_block_fit_pools_the_blocks_each_sm_ran():
    rnd = random.Random(1)
    # 430 cycles per block, 40 fixed; SMs ran 2..9 blocks
    reps = [[(c, 430 * c + 40 + rnd.randint(-3, 3)) for c in (2, 3, 4, 5, 7, 8, 9) * 5]
            for _ in range(5)]
    f = an.block_fit(reps)
    assert f["value"] == pytest.approx(430, abs=2) and not f["unstable"]
    assert an.block_fit([[(4, 100), (4, 120)]])["unstable"]        # one block count only
    # not linear in blocks per SM (an SM handed 7+ waited for the dispatcher): reported with
    # its residual, judged by the gap cross-check instead
    bent = [[(c, 430 * c + (1500 if c > 6 else 0)) for c in (2, 3, 4, 5, 7, 8, 9)]] * 3
    f = an.block_fit(bent)
    assert not f["unstable"] and f["residual"] > 300


def test_block_gaps_and_the_cross_check():
    # SM 0 ran blocks [0,50], [420,470], [840,890]; SM 1 [10,60], [400,450]
    rec = np.array([[0, 50, 0, 0], [420, 470, 0, 1], [840, 890, 0, 2], [10, 60, 1, 3],
                    [400, 450, 1, 4]], np.uint64)
    assert sorted(an.block_gaps(rec)) == [340, 370, 370]
    ok = an.judge_block(364.0, [340, 370, 370])
    assert ok["why"] == "" and ok["data"]["gap_median_cycles"] == 370
    bad = an.judge_block(364.0, [900, 950, 1000])
    assert "disagree" in bad["why"] and "950" in bad["why"]
    assert "no two blocks" in an.judge_block(364.0, [])["why"]


def _serial_grid(blocks_per_sm: int, sms: int = 2, body: int = 50, gap: int = 370):
    """One-warp blocks run one after another on each SM: [start, end, smid, cta]."""
    rows, cta = [], 0
    for sm in range(sms):
        t = 10 * sm
        for _ in range(blocks_per_sm):
            rows.append([t, t + body, sm, cta])
            t += body + gap
            cta += 1
    return np.array(rows, np.uint64)


def test_block_launch_figure_from_serialised_blocks():
    seen = an.serial_records([[_serial_grid(b) for b in (2, 4, 8)] for _ in range(3)])
    assert seen.counts == {2, 4, 8} and not seen.overlapped and set(seen.gaps) == {370}
    res = an.block_launch_figure(seen.per_repeat, seen.bodies, seen.gaps, seen.overlapped,
                                 {"dynamic_shared_bytes": 1, "blocks_per_sm_seen": [2, 4, 8],
                                  "setup": []})
    assert res.value == pytest.approx(370) and not res.unstable
    assert res.data["cycles_per_block"] == 420 and res.data["block_body_cycles"] == 50
    assert list(res.data)[:5] == ["cycles_per_block", "block_body_cycles",
                                  "median_span_by_blocks", "linear_fit_residual",
                                  "dynamic_shared_bytes"]
    assert res.data["gap_count"] == 3 * 2 * (1 + 3 + 7)


def test_block_launch_figure_needs_serialised_blocks():
    grid = _serial_grid(4)
    grid[1, 0] = 20                      # the second block of SM 0 starts before the first ends
    seen = an.serial_records([[grid, _serial_grid(8)]])
    assert seen.overlapped
    res = an.block_launch_figure(seen.per_repeat, seen.bodies, seen.gaps, seen.overlapped, {})
    assert math.isnan(res.value) and res.unstable and "not serialised" in res.why


def test_warp_launch_figure_is_the_full_block_skew_per_warp():
    # H200-like: warps start in parallel groups (not linear in W)
    skew = {2: [15.0] * 5, 4: [59.5] * 5, 8: [50.0] * 5, 16: [56.0] * 5,
            32: [63.0, 62.0, 64.0, 63.5, 63.0]}
    r = an.warp_launch_figure(skew, ["LDC"])
    assert r.value == pytest.approx(63.0 / 31) and not r.unstable
    assert r.data["slope_linear"] is False and r.data["skew_block_warps"] == 32
    noisy = {**skew, 32: [30.0, 60.0, 90.0, 60.0, 60.0]}
    assert an.warp_launch_figure(noisy).unstable
