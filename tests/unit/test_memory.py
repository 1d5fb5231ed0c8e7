"""CPU tests of the memory suite's building blocks: chains, footprints, knees, fill size,
bank layouts, and the PTX builders (assembled and verified offline when ptxas is present)."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_gpuchar import memory, toolchain
from pytest_gpuchar.verify import ProbeInvalid


@given(st.integers(1, 3000), st.integers(0, 2**32 - 1))
@settings(max_examples=60, deadline=None)
def test_random_cycle_is_one_cycle_through_every_element(n, seed):
    nxt = memory.random_cycle(n, np.random.default_rng(seed))
    assert memory.is_single_cycle(nxt)
    order = memory.cycle_order(nxt, 0)
    assert sorted(order.tolist()) == list(range(n))


@given(st.integers(2, 400), st.integers(0, 2**32 - 1))
@settings(max_examples=40, deadline=None)
def test_sattolo_is_one_cycle(n, seed):
    assert memory.is_single_cycle(memory.sattolo(n, np.random.default_rng(seed)))


def test_single_cycle_check_rejects_two_cycles_and_non_permutations():
    assert not memory.is_single_cycle(np.array([1, 0, 3, 2]))      # two 2-cycles
    assert not memory.is_single_cycle(np.array([1, 1, 0]))         # not a permutation
    assert not memory.is_single_cycle(np.array([0, 2, 1]))         # fixed point + 2-cycle
    with pytest.raises(memory.ChainError, match="not a single cycle"):
        memory.cycle_order(np.array([1, 0, 3, 2]), 0)


@pytest.mark.parametrize("footprint", [4096, 1 << 20, 3 * (1 << 20) + 128])
def test_random_layout_visits_exactly_the_intended_lines(footprint):
    lay = memory.random_layout(footprint, memory.LINE, seed=5)
    assert lay.n == footprint // memory.LINE
    assert lay.distinct_lines() == lay.n
    # a walk of the chain from the host model visits every line once per cycle
    seen = {0}
    x = 0
    for _ in range(min(lay.n - 1, 5000)):
        x = int(lay.nxt[x])
        seen.add(x)
    assert len(seen) == min(lay.n, 5001)
    assert lay.walk(0, lay.n) == 0
    assert lay.walk(0, 1) == int(lay.nxt[0])
    assert lay.walk(0, 7) == int(lay.visit_order[7])


def test_a_chain_touching_fewer_lines_than_intended_is_refused():
    """The '1 GB at 4 KB stride touched only 17 MB' mistake: a layout whose pointers do not
    cover the intended lines fails check_layout."""
    lay = memory.random_layout(1 << 16, memory.LINE, seed=1)
    with pytest.raises(memory.ChainError, match="pointers"):
        memory.check_layout(lay, (1 << 30) // 4096)
    broken = memory.Layout(np.array([1, 0, 3, 2]), memory.LINE)
    with pytest.raises(memory.ChainError, match="single cycle"):
        memory.check_layout(broken, 4)
    sub = memory.Layout(np.roll(np.arange(16), -1), 64)     # 2 pointers per 128-byte line
    assert sub.distinct_lines() == 8


def test_pointers_are_addresses_of_the_next_line():
    lay = memory.random_layout(8192, 128, seed=2)
    base = 0x7F0000000000
    ptrs = lay.pointers(base)
    assert int(ptrs[0]) == base + int(lay.nxt[0]) * 128
    assert (lay.word_index() * 8 == np.arange(lay.n) * 128).all()


def test_sequential_layout():
    lay = memory.sequential_layout(10, 16)
    assert lay.walk(3, 4) == 7 and lay.walk(9, 1) == 0


class _Dev:
    def __init__(self, l2=50 * 2**20, l1=256 * 1024, free=140 * 2**30):
        self.l2_bytes, self.l1_shared_bytes, self.free_memory_bytes = l2, l1, free


def test_footprints_from_device_attributes():
    g = memory.geometry(_Dev())
    assert g.notes == []
    assert g.footprint("dram") == 256 * 2**20 and g.footprint("dram") >= 4 * g.l2_bytes
    assert g.l1_bytes < g.footprint("l2") < g.l2_bytes // 2
    assert g.footprint("l1") <= 24 * 1024
    pts = g.sweep()
    assert pts[0] == 4096 and pts[-1] == 256 * 2**20
    assert all(p % memory.LINE == 0 for p in pts) and pts == sorted(set(pts))
    assert len(pts) == 3 * 16 + 1


def test_footprint_reduced_when_above_free_memory():
    g = memory.geometry(_Dev(free=100 * 2**20))
    got, note = g.dram_footprint()
    assert got <= 75 * 2**20 and got == 64 * 2**20
    assert "reduced from 256 MiB" in note and "NOT reached" in note
    assert any("reduced" in n for n in g.notes)
    got, note = memory.fit_to_memory(1 << 30, 8 << 30)
    assert got == 1 << 30 and note == ""
    got, note = memory.fit_to_memory(1 << 30, None)
    assert got == 1 << 30


def test_fallback_when_attributes_unreadable():
    g = memory.geometry(_Dev(l2=0, l1=0, free=None))
    assert g.l2_bytes == memory.FALLBACK_L2 and g.l1_bytes == memory.FALLBACK_L1
    assert len(g.notes) == 2 and all("fallback" in n for n in g.notes)
    assert g.sweep()[-1] == 4 * memory.FALLBACK_L2


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
    found = memory.knees(FPS, lat)
    assert len(found) == 2
    l1, l2 = found
    assert l1.lo <= 256 * 1024 < l1.hi and l2.lo <= 50 * 2**20 < l2.hi
    assert abs(l1.below - 33) < 3 and abs(l2.above - 800) < 40


def test_knees_with_gradual_transition_and_a_far_level():
    levels = [(192 * 1024, 30.0), (20 * 2**20, 200.0), (40 * 2**20, 300.0), (1 << 40, 600.0)]
    lat = _curve(levels, FPS, 0.01, ramp=3)
    ps = memory.plateaus(FPS, lat)
    assert len(ps) == 4
    assert all(abs(p.latency - e) <= 0.05 * e for p, e in zip(ps, [30, 200, 300, 600]))
    ks = memory.knees(FPS, lat)
    assert ks[0].lo <= 192 * 1024 and ks[-1].lo <= 40 * 2**20 < ks[-1].hi


def test_flat_curve_has_no_knee():
    assert memory.knees(FPS, [100.0] * len(FPS)) == []


def test_fill_granularity_on_synthetic_sweep():
    strides = list(memory.STRIDES)
    hit, miss = 30.0, 250.0
    for fill in (32, 64, 128):
        lat = [hit + min(1.0, s / fill) * (miss - hit) for s in strides]
        assert memory.fill_granularity(strides, lat) == fill
    assert memory.fill_granularity(strides, [30.0] * len(strides)) is None
    lat = [hit + min(1.0, s / 32) * (miss - hit) for s in strides]
    assert memory.fill_model_error(strides, lat, 32) < 1e-9
    # a curve that falls back after the "fill size": not a fill-size curve at all
    bad = [30.0, 250.0, 40.0, 250.0, 60.0, 250.0]
    fill = memory.fill_granularity(strides, bad)
    assert memory.fill_model_error(strides, bad, fill) > 0.3


@pytest.mark.parametrize("row", memory.BANK_ROWS, ids=lambda r: r.name)
def test_bank_layout_gives_the_intended_conflict_degree(row):
    assert memory.bank_banks(row) == max(1, row.ways)
    words, starts = memory.bank_layout(row)
    k = row.ways
    block = max(128, 32 * 4 * k)
    for t in (0, 5, 31):
        a = int(starts[t])
        for m in range(4):   # the thread's cycle: 4 positions, back to the start
            a = int(words[a // 4])
        assert a == int(starts[t])
        assert int(words[int(starts[t]) // 4]) == block + t * 4 * k


def test_const_chain_is_a_single_cycle():
    lay = memory.const_layout()
    assert lay.n == memory.CONST_LINES


def test_probe_names_and_units():
    p = memory.chase_probe("cv", "sm_90", "chain")
    assert p.intent(8).unit == ("LDG.E.64.STRONG.SYS",) and p.intent(8).min_depth == 8
    assert memory.sass_unit("ca", "sm_80") == ("LDG.E.64.STRONG.SM",)
    assert memory.sass_unit("ca", "sm_61") == ("LDG.E.64",)
    loop = memory.chase_probe("shared_ld", "sm_90", "loop")
    assert set(loop.entries.values()) == {loop.entries[32]} and loop.ops[128] == 128
    with pytest.raises(ValueError, match="chain or loop"):
        memory.chase_probe("ca", "sm_90", "tree")
    with pytest.raises(KeyError, match="flavour"):
        memory.sass_unit("nope", "sm_90")


@pytest.mark.parametrize("arch", ["sm_90", "sm_80", "sm_61"])
def test_ptx_builders_assemble_and_verify_offline(arch):
    try:
        toolchain.find("ptxas", arch)
        toolchain.find("nvdisasm", arch)
    except toolchain.ToolMissing as e:
        pytest.skip(str(e))
    _, functions = memory.static_functions(arch)
    for p in memory.suite_probes(arch):
        unit = memory.verify(p, functions)
        assert unit
    # a tampered intent is refused: the same region does not hold a .cg load
    bad = memory.chase_probe("ca", arch, "chain")
    bad.intent = lambda n: memory.Intent(n, ("LDG.E.64.STRONG.GPU",), min_depth=n)
    with pytest.raises(ProbeInvalid):
        memory.verify(bad, functions)


def test_human_bytes():
    assert memory.human_bytes(256 * 2**20) == "256 MiB"
    assert memory.human_bytes(4096) == "4 KiB"
    assert math.isclose(len(memory.LEVELS), 9)


def test_device_info_memory_fields_default_and_table():
    from pytest_gpuchar import device
    d = device.DeviceInfo(0, "x", "sm_90", 132, 50 * 2**20, 228 * 1024, 1 << 37, None, None,
                          None, "580", "13.0", "13.0")
    assert d.l1_shared_bytes == 0 and d.free_memory_bytes is None
    assert d.max_shared_per_block_optin == 0
    assert device.L1_SHARED_BYTES["sm_90"] == 256 * 1024
    assert device.L1_SHARED_BYTES["sm_80"] == 192 * 1024
    # without cupy the free-memory probe answers None, never raises
    assert device.free_memory() is None or device.free_memory() > 0
    g = memory.geometry(d)
    assert g.l1_bytes == memory.FALLBACK_L1 and any("fallback" in n for n in g.notes)


# ld.global.ca staircases measured on the lent GPUs (2026-11-23), 4 KiB .. 256 MiB, 3 points per
# doubling: H100 run 1 and run 2 (a partial-hit point pair formed a plateau of its own in run
# 2), H200
H100_RUN1 = [32.0, 31.9, 31.3, 32.0, 32.5, 32.0, 32.3, 32.4, 31.8, 31.5, 32.1, 32.6, 31.4, 32.0,
             31.3, 31.2, 31.9, 31.4, 221.9, 274.6, 276.1, 277.5, 274.5, 271.9, 275.4, 279.1,
             276.1, 277.0, 272.9, 276.9, 275.1, 275.8, 275.3, 278.7, 276.7, 276.8, 274.1, 278.4,
             320.0, 531.6, 499.0, 533.2, 642.2, 672.9, 714.3, 693.9, 691.4, 679.1, 691.0]
H100_RUN2 = H100_RUN1[:38] + [331.8, 529.0, 497.2, 571.6, 653.8, 650.1, 690.6, 667.5, 675.8,
                              692.8, 683.7]
H200 = [32.2] * 18 + [211.4] + [282.0] * 20 + [431.7, 525.0, 477.7, 662.5, 647.5, 663.3, 654.2,
                                               673.1, 661.5, 633.4]


def _footprints(n=49):
    return [int(round(4096 * 2 ** (i / 3))) for i in range(n)]


@pytest.mark.parametrize("curve", [H100_RUN1, H100_RUN2, H200], ids=["h100-1", "h100-2", "h200"])
def test_last_level_knee_is_the_edge_of_device_memory(curve):
    fp = _footprints()
    k = memory.last_level_knee(fp, curve)
    # 50.8 MiB still at (far) L2 latency, 64 MiB in device memory, in every run
    assert (k.lo, k.hi) == (fp[39 + 2], fp[39 + 3])
    assert k.lo / (50 * 2 ** 20) < memory.SWEEP_STEP       # H100's 50 MiB L2: one step
    assert 600 < k.above < 700


def test_knees_alone_mistook_a_partial_hit_pair_for_the_l2():
    fp = _footprints()
    assert memory.knees(fp, H100_RUN2)[-1].lo == fp[42]          # 64 MiB: what failed on H100
    assert memory.last_level_knee(fp, H100_RUN2).lo == fp[41]    # 50.8 MiB


def test_last_level_knee_needs_a_level_below_device_memory():
    fp = _footprints(10)
    assert memory.last_level_knee(fp, [600.0] * 10) is None
