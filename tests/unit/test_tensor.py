"""Unit tests of the tensor-core catalogue and probe builders (CPU only, no ptxas)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from pytest_gpuchar import tensor
from pytest_gpuchar.verify import ProbeInvalid

VALID = tensor.META_NIBBLES["f16"]


def _word(nibbles):
    return sum(n << (4 * i) for i, n in enumerate(nibbles))


@given(st.lists(st.sampled_from(VALID), min_size=8, max_size=8))
def test_valid_2_4_metadata_accepted(nibbles):
    tensor.validate_sparse_metadata([_word(nibbles)], "f16", "p")


@pytest.mark.parametrize("bad,why", [(0x0, "equal"), (0x5, "equal"), (0x1, "ascending"),
                                     (0x6, "ascending"), (0xF, "equal")])
def test_invalid_metadata_rejected_with_the_group(bad, why):
    word = _word([0x4] * 7 + [bad])
    with pytest.raises(tensor.SparseMetadataError) as e:
        tensor.validate_sparse_metadata([0x44444444, word], "f16", "mma.sp/x/ilp1")
    msg = str(e.value)
    assert "mma.sp/x/ilp1" in msg and "word 1" in msg and "group 7" in msg and why in msg


def test_tf32_metadata_is_1_2():
    tensor.validate_sparse_metadata([_word([0x4, 0xE] * 4)], "tf32")
    with pytest.raises(tensor.SparseMetadataError, match="not allowed for tf32"):
        tensor.validate_sparse_metadata([_word([0x8] * 8)], "tf32")


def test_metadata_wider_than_32_bits_rejected():
    with pytest.raises(tensor.SparseMetadataError, match="wider than 32 bits"):
        tensor.validate_sparse_metadata([1 << 40], "f16")


def test_bad_metadata_rejected_before_launch(monkeypatch):
    """inputs() (what every launch uses) validates metadata: a bad draw never reaches the GPU."""
    p = tensor.sweep_probe(tensor.row("mma.sp", "f16.f32.m16n8k32"), "sm_80", 1)
    real = tensor.draw_regs

    def bad(kind, n, rng):
        out = real(kind, n, rng)
        return out & np.uint64(0xFFFFFFF0) if kind.startswith("meta.") else out
    monkeypatch.setattr(tensor, "draw_regs", bad)
    with pytest.raises(tensor.SparseMetadataError, match=p.name):
        tensor.inputs(p, 64)


@settings(max_examples=20)
@given(st.sampled_from([k for k in tensor.REG_KINDS]), st.integers(0, 2**32 - 1))
def test_random_inputs_never_zero(kind, seed):
    v = tensor.draw_regs(kind, 64, np.random.default_rng(seed))
    assert v.shape == (64,) and (v != 0).all()
    if kind in ("s8x4", "u8x4", "e4m3x4", "e5m2x4"):
        for k in range(4):
            assert ((v >> np.uint64(8 * k)) & np.uint64(0xFF) != 0).all(), "a zero byte"
    if kind in ("f16x2", "bf16x2"):
        assert ((v & np.uint64(0x7FFF)) != 0).all() and ((v >> np.uint64(16)) & np.uint64(0x7FFF)
                                                          != 0).all()


def test_inputs_are_random_per_thread_and_valid():
    p = tensor.sweep_probe(tensor.row("mma.sp", "tf32.f32.m16n8k8"), "sm_80", 2)
    buf, _ = tensor.inputs(p, 128)
    assert buf.shape == (128, len(p.slots))
    assert len(np.unique(buf[:, 0])) > 100   # operands differ between threads


@pytest.mark.parametrize("k", [1, 2, 4])
@pytest.mark.parametrize("ilp", [1, 3])
def test_ldmatrix_pointer_chase_is_a_fixed_point(k, ilp):
    """Simulate ldmatrix.m8n8.xk on the fill: thread t addressing row t of its chain gets back
    (first register) word t%4 of row t//4 = the offset of row t; 8 distinct rows per matrix."""
    fill = tensor.ldmatrix_fill(ilp)
    for c in range(ilp):
        addr = np.array([c * 512 + t * 16 for t in range(32)])
        rows = addr[:8 * k] // 16
        for m in range(k):
            assert len(set(rows[8 * m:8 * m + 8] % 8)) == 8   # one 128-byte phase, no conflict
        got = np.array([fill[addr[t // 4] // 4 + t % 4] for t in range(32)])
        assert (got == addr).all()


def test_unsupported_rows_skip_before_ptxas():
    assert "no tensor cores" in tensor.row("mma", "f16.f32.m16n8k16").supported("sm_61")
    assert "sm_80+" in tensor.row("mma", "bf16.f32.m16n8k16").supported("sm_75")
    assert "no FP8 mma.sync on sm_90" in tensor.row("mma", "e4m3.f32.m16n8k32").supported("sm_90")
    assert tensor.row("mma", "e4m3.f32.m16n8k32").supported("sm_89") is None
    with pytest.raises(tensor.Unsupported, match="sm_80"):
        tensor.sweep_probe(tensor.row("mma.sp", "f16.f32.m16n8k32"), "sm_75", 1)


def test_sweep_probe_shape():
    p = tensor.sweep_probe(tensor.row("mma", "f16.f32.m16n8k16"), "sm_80", 3)
    assert sorted(p.entries) == list(tensor.LENGTHS)
    assert p.intent(8).count == 24 and p.intent(8).min_depth == 8
    # A (4) + B (2) shared, one 4-register accumulator per chain
    assert len(p.slots) == 4 + 2 + 3 * 4
    assert p.text.count("mma.sync.aligned.m16n8k16") == 3 * sum(tensor.LENGTHS)


def test_wmma_sass_per_arch():
    r = tensor.row("wmma", "f16.f32.m16n16k16")
    assert r.sass_for("sm_70") == ("HMMA.884.F32.F32*", 16)
    assert r.sass_for("sm_75") == ("HMMA.1688.F32", 4)
    assert r.sass_for("sm_90") == ("HMMA.16816.F32", 2)


def test_hopper_peak_source_arithmetic():
    assert round(989.4e12 / (132 * 1.83e9)) == tensor.HOPPER_PEAK_FLOP["f16"]
    assert tensor.wgmma_row("f16.f32.m64n256k16.ss").flop == 2 * 64 * 256 * 16


@pytest.mark.parametrize("log", ["ptxas warning : (C7510) Potential Performance Loss: wgmma.mma_async "
                                 "instructions are serialized", "warning C7519: fences inserted"])
def test_wgmma_serialisation_warning_fails(log):
    with pytest.raises(ProbeInvalid, match="serialised"):
        tensor.check_wgmma_log("wgmma/x", "info: 40 registers\n" + log)
    tensor.check_wgmma_log("wgmma/x", "ptxas info: Used 90 registers")


def _raw(per_step, warps, lengths=tensor.LENGTHS, reps=5, skew=3):
    rng = np.random.default_rng(0)
    return {n: [(t0 := rng.integers(0, skew, warps).astype(float),
                 t0 + 50 + n * per_step) for _ in range(reps)] for n in lengths}


def test_fit_point_and_convergence():
    r = tensor.row("mma", "f16.f32.m16n8k16")
    pts = {}
    for w in (1, 4, 8):
        for ilp in (1, 2, 3):
            p = tensor.sweep_probe(r, "sm_80", ilp)
            step = max(25.0, 2048 * ilp * w / 1000)   # a 1000 FMA/clk/SM ceiling
            pts[(w, ilp)] = tensor.fit_point(p, 32 * w, _raw(step, w))
    assert pts[(1, 1)].latency == pytest.approx(25.0, abs=0.01)
    assert pts[(8, 3)].throughput == pytest.approx(1000, rel=0.01)
    c = tensor.convergence(pts, 8)
    assert c.ilp == 2 and c.throughput == pytest.approx(1000, rel=0.01)
    fig = tensor.heatmap(pts, "t", "fma/clk/SM")
    assert len(fig.axes) == 4


def test_start_skew_that_changes_with_chain_length_makes_a_point_unstable():
    """H200, 8 warps of HMMA chains: the warps left bar.sync ~270 cycles apart at n=8 and ~218
    at n=32; the block-span slope looked repeatable but was biased. Such a point is unstable
    and never a peak."""
    r = tensor.row("mma", "f16.f32.m16n8k16")
    p = tensor.sweep_probe(r, "sm_90", 2)
    raw = {}
    for n in tensor.LENGTHS:
        sk = {8: 270.0, 16: 270.0, 32: 218.0}[n]
        raw[n] = [(np.linspace(0, sk, 8), np.linspace(0, sk, 8) + 50 + 22 * n)
                  for _ in range(15)]
    pt = tensor.fit_point(p, 256, raw)
    assert pt.unstable and pt.skewed and \
        "start skew changes with chain length (270 cycles at n=8, 218" in pt.why
    steady = tensor.fit_point(p, 256, {n: [(np.linspace(0, 200, 8), np.linspace(0, 200, 8)
                                             + 50 + 22 * n)] * 15 for n in tensor.LENGTHS})
    assert not steady.unstable and not steady.skewed, steady.why
    assert tensor.peak({(8, 2): pt, (4, 2): steady}).warps == 8      # the stable one
    assert tensor.peak({(8, 2): pt}) is None


def test_convergence_candidates_are_the_points_that_can_cross_the_threshold():
    """H200 ldmatrix x2, 4 warps: ILP 3 (123.4 +- 9.0) sits at the 95% threshold of 128.7, so
    the convergence point is ILP 3 or ILP 4 depending on the run."""
    def pt(ilp, thr, sp, lat):
        return tensor.SweepPoint(4, ilp, lat, thr, 0.5, sp, False)
    pts = {(4, i): pt(i, t, sp, lat) for i, t, sp, lat in
           [(1, 40.96, 1.65, 25.0), (2, 81.95, 1.64, 25.0), (3, 123.41, 9.04, 25.08),
            (4, 128.72, 2.79, 31.78), (5, 127.43, 3.71, 40.0), (6, 128.02, 3.58, 48.0)]}
    assert [p.ilp for p in tensor.convergence_candidates(pts, 4)] == [3, 4]
    assert tensor.convergence(pts, 4).ilp == 3


def test_one_odd_launch_does_not_make_a_point_unstable():
    """Spreads are interquartile ranges of the per-launch slopes: one launch of 15 in another
    scheduling mode is tolerated (the median is unaffected), a bimodal batch is not."""
    r = tensor.row("mma", "f16.f32.m16n8k16")
    p = tensor.sweep_probe(r, "sm_90", 1)
    raw = _raw(24.0, 4, reps=15)
    t0, t1 = raw[32][0]
    raw[32][0] = (t0, t1 + 300)
    pt = tensor.fit_point(p, 128, raw)
    assert not pt.unstable and pt.latency == pytest.approx(24.0, abs=0.05)
    for i in range(0, 15, 2):
        t0, t1 = raw[32][i]
        raw[32][i] = (t0, t1 + 300)
    assert tensor.fit_point(p, 128, raw).unstable


def test_wgmma_work_counts_warpgroups():
    r = tensor.wgmma_row("f16.f32.m64n128k16.ss")
    p = tensor.wgmma_probe(r, 1)
    pt = tensor.fit_point(p, 256, _raw(64.0, 8, lengths=tensor.WGMMA_LENGTHS))
    assert pt.throughput == pytest.approx(2 * r.flop / 64.0, rel=0.01)


def test_never_executed_filler():
    from pytest_gpuchar.sass import parse_instr
    assert tensor.never_executed(parse_instr(0, "@!UPT UIADD3 URZ, URZ, URZ, URZ"))
    assert tensor.never_executed(parse_instr(0, "NOP"))
    assert not tensor.never_executed(parse_instr(0, "HMMA.16816.F32 R4, R8, R12, R4"))


def test_a_higher_unstable_point_makes_the_peak_unstable_not_low():
    def pt(w, ilp, thr, unstable=False, why="", skewed=False):
        return tensor.SweepPoint(w, ilp, 24.0, thr, 0.1, 1.0, unstable, why, skewed=skewed)
    pts = {(4, 3): pt(4, 3, 1024.0), (4, 4): pt(4, 4, 1413.0, True, "per-launch throughput: "
                                                   "interquartile range 90"),
           (8, 2): pt(8, 2, 1677.0, True, "the warps' start skew changes with chain length",
                      skewed=True)}
    best = tensor.peak(pts)
    assert best.throughput == 1024.0
    over = tensor.higher_unstable(pts, best)
    assert over.ilp == 4 and over.warps == 4             # the skew-biased 8-warp point is not
    pts[(4, 4)] = pt(4, 4, 1060.0, True, "per-launch throughput: interquartile range 90")
    assert tensor.higher_unstable(pts, best) is None     # within 5%: the stable best stands
