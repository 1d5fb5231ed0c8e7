"""The DPX topic's pure maths: the CPU reference of every intrinsic (against CUDA's own host
implementation), the chain replay, the result check, the throughput fit."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pytest_gpuchar.topics.dpx import analysis, kernels, rows

VECTORS = Path(__file__).with_name("host_vectors.txt")


def _vectors():
    for line in VECTORS.read_text().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name, *words = line.split()
        a, b, c, d = (int(w, 16) for w in words[:4])
        want = {"d": d, **dict(zip("ef", (int(x) for x in words[4:])))}
        yield pytest.param(name, a, b, c, want, id=f"{name}-{a:08x}")


@pytest.mark.parametrize("name, a, b, c, want", list(_vectors()))
def test_reference_matches_cudas_host_implementation(name, a, b, c, want):
    assert analysis.call(rows.row(name), a, b, c) == want


def test_every_row_has_host_vectors():
    names = {line.split()[0] for line in VECTORS.read_text().splitlines()
             if line.strip() and not line.startswith("#")}
    assert names == {r.name for r in rows.ROWS}


def test_lanes_split_and_join():
    assert analysis.split(0xFFFF0001, "s16x2") == [1, -1]
    assert analysis.split(0xFFFF0001, "u16x2") == [1, 0xFFFF]
    assert analysis.split(0x80000000, "s32") == [-2 ** 31]
    assert analysis.join([1, -1], "s16x2") == 0xFFFF0001
    assert analysis.call(rows.row("viaddmax_s16x2"), 0x7FFF0000, 0x00010000, 0x80000000) == \
        {"d": 0x80000000}   # 0x7fff + 1 wraps to -32768 in the high lane


def test_replay_follows_the_chain_layout():
    row = rows.row("viaddmax_s32")
    layout = kernels.chain_layout(row, 3)
    words = np.arange(1, 8, dtype=np.uint64) * 10       # x=10, then (b, c) per op
    out = analysis.replay(row, layout, words)
    x1 = max(10 + 20, 30)
    x2 = max(x1 + 40, 50)
    assert [o["d"] for o in out] == [x1, x2, max(x2 + 60, 70)]


def test_mismatches_name_the_op_and_field():
    row = rows.row("vibmax_s32")
    expected = [{"d": 5, "e": 1}, {"d": 7, "e": 0}]
    assert analysis.mismatches(row, expected, [(0, "e"), (1, "d"), (1, "e")], [1, 7, 0]) == []
    bad = analysis.mismatches(row, expected, [(0, "e"), (1, "d"), (1, "e")], [1, 8, 0])
    assert len(bad) == 1 and "1 of 3" in bad[0] and "op 1 d" in bad[0]


def _records(rate, trips, *, sms=4, warps=32, calls_per_iter=131072.0, skew=40, reps=3):
    out = {}
    for t in trips:
        rec = np.zeros((reps, sms * warps, 3), np.uint64)
        for r in range(reps):
            for w in range(sms * warps):
                start = 1000 + (w % warps) * skew // warps
                rec[r, w] = (start, 1000 + skew + 300 + t * calls_per_iter / rate, w // warps)
        out[t] = rec
    return out


def test_rate_is_the_inverse_slope_of_the_per_sm_span():
    trips = (64, 128, 192)
    calls = {t: 131072.0 * t for t in trips}
    r = analysis.rate(_records(64.0, trips), calls)
    assert r.rate == pytest.approx(64.0, rel=1e-6) and not r.unstable
    assert r.warps_per_sm == [32] and r.spread == pytest.approx(0.0, abs=1e-9)


def test_rate_with_uneven_blocks_is_unstable():
    trips = (64, 128, 192)
    recs = _records(64.0, trips)
    for t in trips:
        recs[t][:, -1, 2] = 0          # one warp of the last SM ran on SM 0
    r = analysis.rate(recs, {t: 131072.0 * t for t in trips})
    assert r.unstable and "warps per SM differ" in r.why


def test_dynamic_smem_holds_the_blocks_per_sm():
    x = analysis.dynamic_smem(228 * 1024, 4)
    assert 4 * (x + 1024) <= 228 * 1024 < 5 * (x + 1024)
    assert analysis.dynamic_smem(0, 4) == 0


def test_input_words_cover_32_bits():
    w = analysis.input_words(4096)
    assert w.dtype == np.uint64 and int(w.max()) < 2 ** 32 and int(w.max()) > 2 ** 31
    assert np.array_equal(w, analysis.input_words(4096))
