"""The capacity rule and its bisection (topics/memory/capacity.py), pure: on the staircases
the lent H100 and H200 measured (the committed reports and older runs) and on synthetic
curves."""
from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pytest_gpuchar.topics.memory import analysis
from pytest_gpuchar.topics.memory.capacity import (KNEE_REL, KNEE_RESOLUTION, CacheKnee, bisect,
                                                   find, grid_bracket, levels, limit, midpoint,
                                                   on_level, steps_needed)
from pytest_gpuchar.topics.memory.rows import LINE

ROOT = Path(__file__).resolve().parents[4]
MiB = 2 ** 20
FPS = [int(round(4096 * 2 ** (i / 3))) for i in range(49)]

# ld.global.ca staircases measured on the lent GPUs, 4 KiB .. 256 MiB, 3 points per doubling:
# two H100 runs (points just past the L2 formed a plateau of their own in the second) and H200
H100_RUN1 = [32.0, 31.9, 31.3, 32.0, 32.5, 32.0, 32.3, 32.4, 31.8, 31.5, 32.1, 32.6, 31.4, 32.0,
             31.3, 31.2, 31.9, 31.4, 221.9, 274.6, 276.1, 277.5, 274.5, 271.9, 275.4, 279.1,
             276.1, 277.0, 272.9, 276.9, 275.1, 275.8, 275.3, 278.7, 276.7, 276.8, 274.1, 278.4,
             320.0, 531.6, 499.0, 533.2, 642.2, 672.9, 714.3, 693.9, 691.4, 679.1, 691.0]
H100_RUN2 = H100_RUN1[:38] + [331.8, 529.0, 497.2, 571.6, 653.8, 650.1, 690.6, 667.5, 675.8,
                              692.8, 683.7]
H200_OLD = [32.2] * 18 + [211.4] + [282.0] * 20 + [431.7, 525.0, 477.7, 662.5, 647.5, 663.3,
                                                   654.2, 673.1, 661.5, 633.4]


def committed(board: str) -> tuple[list[int], list[float]]:
    """The staircase of a committed report (results/sm_90/<board>/)."""
    path = ROOT / "results" / "sm_90" / board / "gpuchar-results.json.gz"
    results = json.loads(gzip.decompress(path.read_bytes()))["results"]
    data = next(r for r in results if r["key"] == "memory.capacity.l1")["data"]
    return data["footprint_bytes"], data["latency_cycles"]


def brackets(fp, lat) -> dict[CacheKnee, tuple[int, int] | None]:
    lv = levels(fp, lat)
    return {k: grid_bracket(fp, lat, lv.below[k], lv.above[k]) if k in lv.below else None
            for k in CacheKnee}


def mib(fp, br) -> tuple[float, float]:
    return round(fp[br[0]] / MiB, 1), round(fp[br[1]] / MiB, 1)


# --- the rule on the committed curves -------------------------------------------------------

def test_committed_h100_curve_puts_its_l2_knee_below_50_8_mib():
    """H100 (2026-11-27): the 50.8 MiB point reads 572 cycles against a far plateau of 520:
    10% above it, partly missing, so the L2 knee lies between 40.3 and 50.8 MiB (the old
    rule reported 50.8 MiB: the last point before device memory)."""
    fp, lat = committed("nvidia-h100-80gb-hbm3")
    lv = levels(fp, lat)
    assert round(lv.below[CacheKnee.L2].latency) == 520
    assert not on_level(lat[fp.index(53264384)], lv.below[CacheKnee.L2].latency)
    br = brackets(fp, lat)
    assert mib(fp, br[CacheKnee.L2]) == (40.3, 50.8)
    assert mib(fp, br[CacheKnee.L2_NEAR]) == (20.2, 25.4)        # 25.4 MiB reads 343: missing
    assert (fp[br[CacheKnee.L1][0]], fp[br[CacheKnee.L1][1]]) == (208000, 262144)


def test_committed_h200_curve_puts_its_l2_knee_between_50_8_and_64_mib():
    """H200 (2026-11-28): 50.8 MiB still on the far plateau (505 vs 510), 64 MiB device
    memory (639 cycles): the driver's 60 MiB lies in that bracket, which bisection splits."""
    fp, lat = committed("nvidia-h200")
    br = brackets(fp, lat)
    assert mib(fp, br[CacheKnee.L2]) == (50.8, 64.0)
    assert mib(fp, br[CacheKnee.L2_NEAR]) == (25.4, 32.0)        # 32 MiB reads 439: near+far mix
    assert (fp[br[CacheKnee.L1][0]], fp[br[CacheKnee.L1][1]]) == (208000, 262144)


@pytest.mark.parametrize("curve, l2", [(H100_RUN1, (50.8, 64.0)), (H100_RUN2, (40.3, 50.8)),
                                       (H200_OLD, (50.8, 64.0))], ids=["h100-1", "h100-2", "h200"])
def test_older_runs_and_a_plateau_of_partial_hits_past_the_l2(curve, l2):
    """Run 2 of the H100 had 50.8 and 64 MiB (572 and 654 cycles) together within 8% of
    their median, a plateau of their own before device memory: 50.8 MiB is a partial hit
    (off the device-memory level that the run from 64 MiB reaches), so the levels are the
    same four as run 1's, and the last knee leaves the far plateau at 40.3 MiB (the first
    rule took 64 MiB)."""
    fp = FPS
    assert len(analysis.plateaus(fp, curve)) == 4
    assert mib(fp, brackets(fp, curve)[CacheKnee.L2]) == l2
    assert analysis.knees(fp, H100_RUN2)[-1].lo == fp[40]


# H200 GPU-c14f23a5 (2026-11-28): 32 MiB reads 440 cycles, a mix of near (280) and far (515)
# hits, within 8% of the median of itself and 40.3 MiB (516) but not of the far level
H200_C14 = [32.0] * 18 + [211.4] + [280.0] * 20 + [440.32, 516.54, 515.08, 643.45, 658.82,
                                                   651.56, 655.82, 658.51, 654.03, 653.14]


def test_a_transition_point_is_not_the_far_level():
    """The transition point once formed the far level with 40.3 MiB and cut it there: the
    far plateau read 440 cycles, 50.8 MiB (515) stood 17% above it, and the L2 capacity
    bisected to 32 MiB (0.53 x the driver's 60 MiB). Left out, the far level is 40.3-50.8
    MiB at 516 cycles and the L2 knee lies between 50.8 and 64 MiB."""
    fp = FPS
    lv = levels(fp, H200_C14)
    far = lv.below[CacheKnee.L2]
    assert (round(far.lo_bytes / MiB, 1), round(far.hi_bytes / MiB, 1)) == (40.3, 50.8)
    assert round(far.latency) == 516
    assert mib(fp, brackets(fp, H200_C14)[CacheKnee.L2]) == (50.8, 64.0)
    assert mib(fp, brackets(fp, H200_C14)[CacheKnee.L2_NEAR]) == (25.4, 32.0)


@pytest.mark.parametrize("board", ["nvidia-h100-80gb-hbm3", "nvidia-h200"])
def test_bisection_on_a_committed_curve_ends_within_three_percent(board):
    """Bisecting each knee of a committed curve, the curve interpolated (log footprint) for
    the points between: three steps from one sweep step, [lo, hi) at most 3% wide, lo on
    the level and hi off it."""
    fp, lat = committed(board)
    lv = levels(fp, lat)

    def measure(f):
        return float(np.interp(math.log(f), np.log(fp), lat))
    for k in CacheKnee:
        b = find(k, fp, lat, lv, measure)
        assert b.resolution <= KNEE_RESOLUTION and len(b.steps) == 3
        assert on_level(measure(b.lo), b.plateau) and not on_level(measure(b.hi), b.plateau)
        assert all(s.footprint % LINE == 0 for s in b.steps)
        assert b.as_data()["steps"][0]["footprint_bytes"] == b.steps[0].footprint


# --- levels -----------------------------------------------------------------------------------

def test_three_plateaus_give_one_l2_level_and_no_near_knee():
    lat = [30.0 if f <= 192 * 1024 else 250.0 if f <= 40 * MiB else 600.0 for f in FPS]
    lv = levels(FPS, lat)
    assert CacheKnee.L2_NEAR not in lv.below
    assert "near/far L2 not separated" in lv.why[CacheKnee.L2_NEAR]
    assert lv.below[CacheKnee.L2].latency == 250.0 and lv.above[CacheKnee.L2].latency == 600.0
    assert find(CacheKnee.L2_NEAR, FPS, lat, lv, lambda f: 0.0).startswith("near/far")


def test_a_flat_curve_has_no_knee():
    lv = levels(FPS, [100.0] * len(FPS))
    assert lv.below == {} and all("1 latency plateau" in w for w in lv.why.values())


def test_levels_within_the_rule_of_each_other_are_no_knee():
    lat = [100.0 if f <= MiB else 103.0 for f in FPS]
    p = analysis.Plateau(0, 10, 100.0, FPS[0], FPS[10])
    q = analysis.Plateau(30, 40, 103.0, FPS[30], FPS[40])
    assert grid_bracket(FPS, lat, p, q) is None


def test_the_rule_is_one_sided():
    """Points below the plateau (a near/far mix before the far plateau) are on it; the bound
    is the plateau plus 5%."""
    assert limit(500.0) == pytest.approx(525.0) and KNEE_REL == 0.05
    assert on_level(440.0, 500.0) and on_level(525.0, 500.0) and not on_level(525.1, 500.0)


# --- bisection --------------------------------------------------------------------------------

def test_steps_from_one_sweep_step_and_midpoints_on_lines():
    assert steps_needed(10 * MiB, int(10 * MiB * analysis.SWEEP_STEP)) == 3
    assert steps_needed(100, 102) == 0
    # three halvings leave 1.0293 x at most without the lines; the mid-points' rounding to a
    # line can leave 1.0300 (above 3%): a fourth step (Hypothesis's case below)
    assert steps_needed(136448, 171904) == 4
    with pytest.raises(ValueError, match="lines"):
        steps_needed(1024, 1024 + 4 * LINE)
    m = midpoint(50 * MiB, 64 * MiB)
    assert m % LINE == 0 and abs(m - math.sqrt(50 * 64) * MiB) <= LINE


def test_bisection_needs_an_ordered_bracket():
    with pytest.raises(ValueError, match="lo < hi"):
        bisect(CacheKnee.L2, 64 * MiB, 50 * MiB, lambda f: 0.0, 500.0, 650.0)


def test_bisection_stops_when_no_line_is_left_between():
    b = bisect(CacheKnee.L1, 1024, 1024 + LINE, lambda f: 0.0, 30.0, 250.0, resolution=0.0)
    assert b.steps == [] and (b.lo, b.hi) == (1024, 1024 + LINE)


@settings(max_examples=200, deadline=None)
@given(lo=st.integers(1024, 400_000).map(lambda n: n * LINE),
       frac=st.floats(0.0, 0.999), noise=st.floats(-0.04, 0.04),
       plateau=st.floats(20.0, 700.0), jump=st.floats(0.06, 8.0))
@example(lo=136448, frac=0.0, noise=0.0, plateau=20.0, jump=1.0)   # four steps, not three
def test_bisection_brackets_a_step_to_three_percent(lo, frac, noise, plateau, jump):
    """A step at capacity C inside one sweep step: below it the plateau (give or take 4%),
    above it a level more than 5% higher. The bisection's [lo, hi) holds C, is at most 3%
    wide, and took no more steps than steps_needed (from 128 KiB up, where a line is fine
    enough a unit for the mid-points)."""
    hi = int(lo * analysis.SWEEP_STEP) // LINE * LINE
    cap = lo + frac * (hi - lo)
    above = plateau * (1 + KNEE_REL + jump)

    def measure(f):
        return plateau * (1 + noise) if f <= cap else above
    b = bisect(CacheKnee.L2, lo, hi, measure, plateau, above)
    assert b.lo <= cap < b.hi
    assert b.resolution <= KNEE_RESOLUTION or b.hi - b.lo <= LINE
    assert len(b.steps) <= steps_needed(lo, hi)
    assert [s.on_level for s in b.steps] == [s.footprint <= cap for s in b.steps]


@settings(max_examples=100, deadline=None)
@given(cap=st.floats(20 * MiB, 60 * MiB), width=st.floats(0.005, 0.2))
def test_bisection_on_a_gradual_rise_finds_where_it_leaves_the_rule(cap, width):
    """A smooth rise (a logistic in log footprint, `width` of it wide) from the plateau to the
    next level: the bisected capacity is where the curve crosses plateau x 1.05."""
    plateau, above = 500.0, 680.0

    def curve(f):
        return plateau + (above - plateau) / (1 + math.exp(-math.log(f / cap) / width))
    lo = int(cap / analysis.SWEEP_STEP) // LINE * LINE
    while not on_level(curve(lo), plateau):
        lo = int(lo / analysis.SWEEP_STEP) // LINE * LINE
    hi = int(lo * analysis.SWEEP_STEP) // LINE * LINE
    while on_level(curve(hi), plateau):
        lo, hi = hi, int(hi * analysis.SWEEP_STEP) // LINE * LINE
    b = bisect(CacheKnee.L2, lo, hi, curve, plateau, above)
    crossing = cap * math.exp(-width * math.log((above - plateau) / (plateau * KNEE_REL) - 1))
    assert b.lo <= crossing * 1.0001 and b.hi >= crossing * 0.9999
    assert b.resolution <= KNEE_RESOLUTION


def test_each_step_prepares_the_two_footprints_the_next_may_measure():
    asked, prepared = [], []

    def measure(f):
        asked.append(f)
        return 30.0 if f <= 200_000 else 300.0
    b = bisect(CacheKnee.L1, 131072, 262144, measure, 30.0, 280.0, prepare=prepared.append)
    assert len(prepared) == len(asked) == len(b.steps)
    for nxt, cands in zip(asked[1:], prepared):
        assert nxt in cands                   # what the next step measured had been prepared
