"""The tensor-core tables as data (CPU only)."""
from __future__ import annotations

import pytest

from pytest_gpuchar.topics.tensor.mma import kernels, rows
from pytest_gpuchar.topics.tensor.mma.rows import Kind


def test_unsupported_rows_skip_before_ptxas():
    assert "no tensor cores" in rows.row("mma", "f16.f32.m16n8k16").supported("sm_61")
    assert "sm_80+" in rows.row("mma", "bf16.f32.m16n8k16").supported("sm_75")
    assert "no FP8 mma.sync on sm_90" in rows.row("mma", "e4m3.f32.m16n8k32").supported("sm_90")
    assert rows.row("mma", "e4m3.f32.m16n8k32").supported("sm_89") is None
    with pytest.raises(kernels.Unsupported, match="sm_80"):
        kernels.sweep_probe(rows.row("mma.sp", "f16.f32.m16n8k32"), "sm_75", 1)


def test_wmma_runs_on_volta_other_kinds_do_not():
    assert rows.row("wmma", "f16.f32.m16n16k16").supported("sm_70") is None
    assert "Volta tensor cores only" in rows.row("ldmatrix", "x1").supported("sm_70")
    assert "lacks this shape" in rows.row("wmma", "bf16.f32.m16n16k16").supported("sm_70")


def test_wmma_sass_per_arch():
    r = rows.row("wmma", "f16.f32.m16n16k16")
    assert r.sass_for("sm_70") == ("HMMA.884.F32.F32*", 16)
    assert r.sass_for("sm_75") == ("HMMA.1688.F32", 4)
    assert r.sass_for("sm_90") == ("HMMA.16816.F32", 2)


def test_kinds_name_probes_keys_and_work():
    sp, ldm = rows.row(Kind.MMA_SP, "f16.f32.m16n8k32"), rows.row("ldmatrix", "x4")
    assert (sp.kind, sp.key, sp.what, sp.work) == (
        "mma.sp", "tensor.mma_sp.f16.f32.m16n8k32", "mma.sp.f16.f32.m16n8k32", 16 * 8 * 32)
    assert (ldm.key, ldm.unit, ldm.work) == ("tensor.ldmatrix.x4", "B/clk/SM", 512)
    assert rows.row("wmma", "u8.s32.m16n16k16").ilps == rows.WMMA_ILPS
    assert f"{Kind.EMULATED}/x" == "mma.emulated/x"


def test_emulated_rows_per_arch():
    assert rows.emulated_rows("sm_61") == []
    assert [h for h, _ in rows.emulated_rows("sm_80")] == [rows.Emulation.FPU]
    E = rows.Emulation
    assert [h for h, _ in rows.emulated_rows("sm_90")] == [E.FPU, E.FP8_CONVERT, E.INT4_CALL]
    sm100 = [(h, r.name) for h, r in rows.emulated_rows("sm_100")]
    assert sm100[:4] == [(E.FPU, "f16.f32.m8n8k4"), (E.FP8_CONVERT, "e4m3.f32.m16n8k32"),
                         (E.INT4_CALL, "u4.s32.m8n8k32"), (E.IMMA_PADDED, "s8.s32.m8n8k16")]
    assert sorted(n for h, n in sm100 if h is E.SPARSE_CALL) == sorted(
        r.name for r in rows.MMA_SP if r.meta_type != "tf32")
    # sm_120 has FP8 mma.sync again (QMMA): not an emulated row there, a tensor row
    assert E.FP8_CONVERT not in [h for h, _ in rows.emulated_rows("sm_120")]
    assert rows.row("mma", "e4m3.f32.m16n8k32").supported("sm_120") is None
    assert "sm_90..sm_110" in rows.row("mma", "e4m3.f32.m16n8k32").supported("sm_100")
    em = rows.row("mma", "e4m3.f32.m16n8k32").emulated()
    assert em.kind == Kind.EMULATED and em.supported("sm_90") is None and em.isa == "8.4"


def test_hopper_peak_source_arithmetic():
    assert round(989.4e12 / (132 * 1.83e9)) == rows.HOPPER_PEAK_FLOP["f16"]
    assert rows.wgmma_row("f16.f32.m64n256k16.ss").flop == 2 * 64 * 256 * 16


def test_hopper_fp64_shapes():
    """m16n8k4/k8/k16 .f64: sm_90+ (PTX ISA), one DMMA.16x8xK on sm_90, 2/4/8 DMMA.8x8x4 on
    sm_100+ (ptxas); m8n8k4 stays Ampere's row. Their documented peak: 128 FMA/clk/SM."""
    names = [r.name for r in rows.MMA if r.name.startswith("f64.")]
    assert names == ["f64.f64.m8n8k4", "f64.f64.m16n8k4", "f64.f64.m16n8k8",
                     "f64.f64.m16n8k16"]
    for k, per in ((4, 2), (8, 4), (16, 8)):
        r = rows.row("mma", f"f64.f64.m16n8k{k}")
        assert r.fma == 16 * 8 * k and r.table == "hopper"
        assert "needs sm_90+" in r.supported("sm_80") and "needs sm_90+" in r.supported("sm_89")
        assert r.supported("sm_90") is None
        assert r.sass_for("sm_90") == (f"DMMA.16x8x{k}", 1)
        assert r.sass_for("sm_100") == r.sass_for("sm_120") == ("DMMA.8x8x4", per)
        assert r.rate_bound == 128 and r.documented_peak[0] == 128
    assert rows.row("mma", "f64.f64.m8n8k4").supported("sm_80") is None
    # 66.9 TFLOP/s on 132 SMs at 1980 MHz, 2 FLOP per FMA
    assert round(66.9e12 / (132 * 1.98e9 * 2)) == rows.HOPPER_F64_PEAK_FMA
    assert rows.row("mma", "f16.f32.m16n8k16").documented_peak is None


def test_rate_bounds():
    assert rows.row("mma", "f16.f32.m16n8k16").rate_bound == 2048
    assert rows.row("mma.sp", "f16.f32.m16n8k32").rate_bound == 4096      # dense-equivalent
    assert rows.row("ldmatrix", "x4").rate_bound == rows.SMEM_BYTES_PER_CLK
    assert all(r.rate_bound > 0 for rs in rows.tables().values() for r in rs)


def test_blackwell_narrow_format_rows():
    """sm_120's mma.sync kinds: sm_120a only (sm_100 has tcgen05 instead), PTX ISA 8.7, the
    block-scaled ones with one scale register for both operands."""
    names = {r.name: r for r in rows.MMA if r.table == "blackwell"}
    assert set(names) == {"f8f6f4.e4m3.e2m1.m16n8k32", "mxf8f6f4.e4m3.m16n8k32",
                          "mxf4nvf4.2x.e2m1.m16n8k64", "mxf4nvf4.4x.e2m1.m16n8k64"}
    nv = names["mxf4nvf4.4x.e2m1.m16n8k64"]
    assert nv.arch_specific and nv.isa == "8.7" and nv.supported("sm_120") is None
    assert "needs sm_120+" in nv.supported("sm_100")
    text = nv.ptx.format(d="{d}", a="{a}", b="{b}", c="{c}", e="%s")
    assert text.endswith(".f32.ue4m3 {d}, {a}, {b}, {c}, %s, {0, 0}, %s, {0, 0};")
    assert "scale" not in names["f8f6f4.e4m3.e2m1.m16n8k32"].ptx
