"""numerics: fragment layouts, PTX builders, SASS classification, and the experiments run
against a CPU model of a tensor core whose parameters are known (no GPU needed)."""
from __future__ import annotations

import numpy as np
import pytest

from pytest_gpuchar import numerics, refnum, sass, toolchain

SPECS = [pytest.param(s, id=s.name) for s in numerics.SPECS.values()]


@pytest.mark.parametrize("s", SPECS)
class TestLayouts:
    def test_every_element_held_once(self, s):
        for which, (rows, cols) in (("a", (s.m, s.k)), ("b", (s.k, s.n)), ("c", (s.m, s.n))):
            xy = numerics.coords(s, which).reshape(-1, 2)
            assert len({tuple(p) for p in xy}) == rows * cols == len(xy)
            assert xy[:, 0].max() == rows - 1 and xy[:, 1].max() == cols - 1

    def test_pack_unpack_round_trip(self, s):
        rng = np.random.default_rng(0)
        for which, shape in (("a", (3, s.m, s.k)), ("b", (3, s.k, s.n)), ("c", (3, s.m, s.n))):
            t = refnum.numtype(s.c_type if which == "c" else s.in_type)
            bits = rng.integers(0, 2 ** t.bits, shape).astype(t.uint)
            regs = numerics.pack(s, which, bits)
            assert regs.shape == (3, 32, numerics.n_regs(s, which)) and regs.dtype == np.uint32
            assert np.array_equal(numerics.unpack(s, which, regs), bits)

    def test_ptx_has_one_mma(self, s):
        text = numerics.kernel_ptx(s)
        assert text.count("mma.sync") == 1 and s.instruction in text
        assert f".entry {s.entry}(" in text


def test_documented_layout_points():
    """Spot checks against the PTX ISA's fragment figures."""
    k16 = numerics.spec("f16.m16n8k16.f32")
    assert numerics.coord(k16, "a", 5, 0) == (1, 2)      # lane 5: group 1, thread 1
    assert numerics.coord(k16, "a", 5, 3) == (9, 3)
    assert numerics.coord(k16, "a", 5, 6) == (9, 10)
    assert numerics.coord(k16, "b", 5, 2) == (10, 1)
    assert numerics.coord(k16, "c", 5, 2) == (9, 2)
    tf = numerics.spec("tf32.m16n8k8.f32")
    assert numerics.coord(tf, "a", 5, 1) == (9, 1) and numerics.coord(tf, "a", 5, 2) == (1, 5)
    assert numerics.coord(tf, "b", 5, 1) == (5, 1)
    f8 = numerics.spec("e4m3.m16n8k32.f32")
    assert numerics.coord(f8, "a", 5, 4) == (9, 4) and numerics.coord(f8, "a", 5, 9) == (1, 21)
    assert numerics.coord(f8, "b", 5, 6) == (22, 1)


def test_unsupported_reasons():
    assert numerics.unsupported(numerics.spec("bf16.m16n8k16.f32"), "sm_61") == \
        "sm_61 has no tensor cores"
    assert "needs sm_89+" in numerics.unsupported(numerics.spec("e4m3.m16n8k32.f32"), "sm_80")
    assert "m8n8k4" in numerics.unsupported(numerics.spec("f16.m16n8k8.f32"), "sm_70")
    assert numerics.unsupported(numerics.spec("f16.m16n8k8.f32"), "sm_75") is None
    with pytest.raises(ValueError, match="unknown tensor-core kernel"):
        numerics.spec("f64.m8n8k4.f64")


def test_module_isa_version():
    text, specs = numerics.module_ptx("sm_90")
    assert text.startswith(".version 8.4") and len(specs) == len(numerics.SPECS)
    text, specs = numerics.module_ptx("sm_80")
    assert text.startswith(".version 7.1") and all(s.min_arch <= 80 for s in specs)
    assert numerics.module_ptx("sm_61")[1] == []


def _func(lines):
    return sass.Function("k", [sass.parse_instr(i * 16, l) for i, l in enumerate(lines)])


def test_tensor_path_classification():
    s = numerics.spec("e4m3.m16n8k32.f32")
    p = numerics.tensor_path(s, _func(["F2FP.F16.E4M3.UNPACK_B R14, R12 ;",
                                       "HMMA.16816.F32 R16, R16, R14, RZ ;",
                                       "FADD R4, R4, R8 ;"]))
    assert not p.native and p.accumulation_on_fpu and "HMMA" in p.describe()
    with pytest.raises(numerics.NotTensorCore, match="no tensor-core instruction"):
        numerics.tensor_path(s, _func(["FFMA R1, R2, R3, R4 ;"]))
    q = numerics.tensor_path(s, _func(["QMMA.16832.F32.E4M3.E4M3 R12, R4.ROW, R8.COL, R12 ;"]))
    assert q.native and not q.accumulation_on_fpu


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_ptx_assembles_offline_with_hmma(arch):
    try:
        toolchain.find("ptxas", arch)
        toolchain.find("nvdisasm", arch)
    except toolchain.ToolMissing as e:
        pytest.skip(str(e))
    from pytest_gpuchar import probes
    text, specs = numerics.module_ptx(arch)
    funcs = probes.functions_of(toolchain.assemble(text, arch), arch)
    for s in specs:
        path = numerics.tensor_path(s, funcs[s.entry])
        assert any(op.startswith("HMMA") or op.startswith("QMMA") for op in path.tensor)


def test_factor():
    a, b = numerics.factor(2.0 ** -28, "f16")
    assert numerics.factor(2.0 ** -30, "f16") is None   # f16 normals: products >= 2^-28
    assert a * b == 2.0 ** -28 and refnum.is_representable(np.array([a, b]), "f16").all()
    assert min(abs(a), b) >= refnum.numtype("f16").min_normal
    assert numerics.factor(3 * 2.0 ** -9, "e4m3") is not None
    assert numerics.factor(1 + 2.0 ** -20, "bf16") is None


class ModelRunner:
    """numerics.Runner's interface over refnum.model_mma (a tensor core with known
    parameters)."""

    def __init__(self, **kw):
        self.kw = kw

    def verify(self, s):
        return numerics.TensorPath(s.name, {"HMMA": 1})

    def run(self, s, A, B, C=None):
        A = np.asarray(A, dtype=float)
        if C is None:
            C = np.zeros((A.shape[0], s.m, s.n))
        conv = [refnum.to_type(x, t).astype(float)
                for x, t in ((A, s.in_type), (B, s.in_type), (C, s.c_type))]
        return refnum.model_mma(*conv, s.c_type, **self.kw)


@pytest.mark.parametrize("kw", [dict(extra_bits=3, block=8, rounding="rz"),
                                dict(extra_bits=5, block=16, rounding="rn")])
@pytest.mark.parametrize("name", ["bf16.m16n8k16.f32", "f16.m16n8k16.f16", "e5m2.m16n8k32.f32"])
def test_questions_recover_the_model(name, kw):
    s = numerics.spec(name)
    res = numerics.fasi(ModelRunner(**kw), s)
    assert res["products_exact"].value == 1.0
    assert res["subnormal_inputs"].value == 1.0
    assert res["rounding_c"].modes == [kw["rounding"]]
    assert res["rounding_products"].modes == [kw["rounding"]]
    assert res["extra_bits"].value == kw["extra_bits"]
    assert res["block_size"].value == min(kw["block"], s.k)
    assert res["order_invariant"].value in (1.0, None)
    assert res["nan_propagates"].value == 1.0


def test_accumulation_on_fpu_is_invalid():
    class FpuC(ModelRunner):
        def verify(self, s):
            return numerics.TensorPath(s.name, {"HMMA.16816.F32": 2}, {"FADD": 4},
                                       {"F2FP": 12})
    res = numerics.fasi(FpuC(extra_bits=3, block=8, rounding="rz"),
                        numerics.spec("e4m3.m16n8k32.f32"))
    assert res["rounding_c"].startswith("invalid:")
    assert res["rounding_products"].modes == ["rz"]


def test_elementwise_on_model():
    r = ModelRunner(extra_bits=3, block=8, rounding="rn")
    s = numerics.spec("bf16.m16n8k16.f32")
    low = numerics.elementwise(r, s, "mul", "low", n=512)
    high = numerics.elementwise(r, s, "mul", "fp32", n=512)
    assert low.vs_fp32.mean_abs == 0 and low.vs_exact.exact_fraction == 1.0
    assert high.vs_fp32.mean_abs > 1e-4
    h = numerics.elementwise(r, numerics.spec("f16.m16n8k16.f16"), "acc", "low", n=512)
    assert h.vs_fp32_cvt is not None and h.vs_fp32_cvt.mean_abs == 0


def test_chain_on_model_overflows_fp16_and_bf16_grows_fastest(tmp_path):
    r = ModelRunner(extra_bits=3, block=8, rounding="rz")
    curves = [numerics.chain(r, numerics.spec(numerics.CHAIN[t]), "low", 16, 200)
              for t in ("tf32", "bf16", "f16")]
    tf, bf, f16 = curves
    assert 8 <= f16.overflow_link() <= 14 and tf.overflow_link() is None
    assert all(b > t for b, t in zip(bf.mean_err[1:], tf.mean_err[1:]))
    assert tf.mean_err[0] < 1e-6
    numerics.plot_chain(curves, tmp_path / "c.png")
    assert (tmp_path / "c.png").stat().st_size > 1000


def test_layout_probe_finds_a_permuted_layout():
    s = numerics.spec("bf16.m16n8k16.f32")
    assert numerics.layout_probe(ModelRunner(extra_bits=30, block=16, rounding="rn"), s) == []

    class Swapped(ModelRunner):          # a 'tensor core' that reads B transposed in k
        def run(self, s, A, B, C=None):
            return super().run(s, A, np.asarray(B)[:, ::-1, :], C)
    bad = numerics.layout_probe(Swapped(extra_bits=30, block=16, rounding="rn"), s)
    assert len(bad) == s.m * s.k and "B rows [15]" in bad[0]


def test_chain_pads_k_for_m16n8k16():
    r = ModelRunner(extra_bits=30, block=16, rounding="rn")
    c = numerics.chain(r, numerics.spec("f16.m16n8k16.f32"), "low", 2, 20)
    assert c.mean_err[0] < 1e-6
