"""The numerics experiments (topics/numerics/analysis.py) on a CPU model of a tensor core:
element-wise profiling, the chain matmul, the layout probe, the paper's observations as
invariants (synthetic curves), and the bit snapshot's text (no GPU needed)."""
from __future__ import annotations

import numpy as np
import pytest

from pytest_gpuchar.topics.numerics import analysis, kernels, plots, reference, rows
from pytest_gpuchar.topics.numerics.analysis import ModelTensorCore


def test_elementwise_on_model():
    r = ModelTensorCore(extra_bits=3, block=8, rounding="rn")
    s = rows.mma("bf16.m16n8k16.f32")
    low = analysis.elementwise(r, s, "mul", "low", n=512)
    high = analysis.elementwise(r, s, "mul", "fp32", n=512)
    assert low.vs_fp32.mean_abs == 0 and low.vs_exact.exact_fraction == 1.0
    assert high.vs_fp32.mean_abs > 1e-4
    h = analysis.elementwise(r, rows.mma("f16.m16n8k16.f16"), "acc", "low", n=512)
    assert h.vs_fp32_cvt is not None and h.vs_fp32_cvt.mean_abs == 0


def test_chain_on_model_overflows_fp16_and_bf16_grows_fastest(tmp_path):
    r = ModelTensorCore(extra_bits=3, block=8, rounding="rz")
    curves = [analysis.chain(r, rows.mma(rows.CHAIN[t]), "low", 16, 200)
              for t in ("tf32", "bf16", "f16")]
    tf, bf, f16 = curves
    assert 8 <= f16.overflow_link() <= 14 and tf.overflow_link() is None
    assert all(b > t for b, t in zip(bf.mean_err[1:], tf.mean_err[1:]))
    assert tf.mean_err[0] < 1e-6
    plots.plot_chain(curves, tmp_path / "c.png")
    assert (tmp_path / "c.png").stat().st_size > 1000


def test_layout_probe_finds_a_permuted_layout():
    s = rows.mma("bf16.m16n8k16.f32")
    assert analysis.layout_probe(ModelTensorCore(extra_bits=30, block=16, rounding="rn"), s) == []

    class Swapped(ModelTensorCore):      # a 'tensor core' that reads B transposed in k
        def run(self, s, A, B, C=None):
            return super().run(s, A, np.asarray(B)[:, ::-1, :], C)
    bad = analysis.layout_probe(Swapped(extra_bits=30, block=16, rounding="rn"), s)
    assert len(bad) == s.m * s.k and "B rows [15]" in bad[0]
    analysis.layout_check(ModelTensorCore(extra_bits=3, block=8, rounding="rn"), s)
    with pytest.raises(AssertionError, match="one-hot probe \\(256 slots differ\\)"):
        analysis.layout_check(Swapped(extra_bits=30, block=16, rounding="rn"), s)


def test_chain_pads_k_for_m16n8k16():
    r = ModelTensorCore(extra_bits=30, block=16, rounding="rn")
    c = analysis.chain(r, rows.mma("f16.m16n8k16.f32"), "low", 2, 20)
    assert c.mean_err[0] < 1e-6


def _curve(t, init, errs, over=None):
    return reference.ChainCurve(t, init, 10, list(errs), list(over or [0.0] * len(errs)))


def test_chain_observations():
    """The paper's Fig 20 observations hold on curves shaped like the paper's, and each one
    fails when its curve breaks it."""
    tf_low = _curve("tf32", "low", [1e-8, 2e-4, 3e-4, 4e-4])
    tf_32 = _curve("tf32", "fp32", [1e-4, 3e-4, 4e-4, 5e-4])
    bf_low = _curve("bf16", "low", [1e-8, 2e-3, 3e-3, 4e-3])
    f16_low = _curve("f16", "low", [1e-8, 3e-4, 4e-4, 5e-4], [0, 0, 0.2, 0.9])
    good = {("tf32", "low"): tf_low, ("tf32", "fp32"): tf_32, ("bf16", "low"): bf_low,
            ("f16", "low"): f16_low}
    assert analysis.finite_until(f16_low) == 2 and analysis.finite_until(tf_low) == 4
    assert analysis.chain_observations(rows.ChainRow("tf32", "low"), good, 4) == []
    assert analysis.chain_observations(rows.ChainRow("tf32", "fp32"), good, 4) == []
    assert analysis.chain_observations(rows.ChainRow("bf16", "low"), good, 4) == []
    bad = analysis.chain_observations(rows.ChainRow("f16", "low"), good, 4)
    assert bad == ["numerics.chain.f16.init_f16: FP16 chains overflow at link 4, the paper "
                   "says after about 10"]
    slow_bf = {**good, ("bf16", "low"): _curve("bf16", "low", [1e-8, 1e-4, 1e-4, 1e-4])}
    assert "does not exceed tf32's at N=[2]" in \
        analysis.chain_observations(rows.ChainRow("bf16", "low"), slow_bf, 4)[0]
    cheap = {**good, ("tf32", "fp32"): _curve("tf32", "fp32", [1e-9, 3e-4, 1e-5, 1e-5])}
    assert analysis.chain_observations(rows.ChainRow("tf32", "fp32"), cheap, 4) == [
        "numerics.chain.tf32.init_fp32: FP32 initialisation not worse than tf32 at N=[1, 3, 4]"]
    big_n1 = {**good, ("tf32", "low"): _curve("tf32", "low", [1e-3, 2e-3, 3e-3, 4e-3])}
    assert "not negligible" in analysis.chain_observations(rows.ChainRow("tf32", "low"),
                                                           big_n1, 4)[0]
    js = analysis.chain_json({("f16", "low"): _curve("f16", "low", [1e-8, float("nan")])})
    assert js == {"f16-init_low": {"mean_err": [1e-8, None], "overflowed": [0.0, 0.0],
                                   "trials": 10}}


def test_element_conclusions():
    r = ModelTensorCore(extra_bits=3, block=8, rounding="rn")
    s = rows.mma("bf16.m16n8k16.f32")
    low = analysis.elementwise(r, s, "mul", "low", n=512)
    high = analysis.elementwise(r, s, "mul", "fp32", n=512)
    row_low, row_high = rows.TABLE_12[0], rows.TABLE_12[3]
    assert (row_low.init, row_low.op, row_high.init, row_high.op) == ("low", "mul", "fp32", "mul")
    assert analysis.element_conclusions(row_low, low, None) == []
    assert analysis.needs_low(row_high) and not analysis.needs_low(row_low)
    assert analysis.element_conclusions(row_high, high, low) == []
    broken = ModelTensorCore(extra_bits=-30, block=8, rounding="rz")
    wrong = analysis.elementwise(broken, s, "mul", "low", n=512)
    assert "products are not exact" in analysis.element_conclusions(row_low, wrong, None)[0]
    msg = analysis.element_conclusions(row_high, low, high)
    assert msg and "conversion loss does not dominate" in msg[0]
    f16 = rows.TABLE_14
    assert not analysis.needs_low([x for x in f16 if x.init == "fp32"][0])   # vs_fp32 column
    assert analysis.needs_low([x for x in f16 if x.init == "fp32"][-1])      # vs_fp32cvt16


def test_bits_text():
    s = rows.mma("f16.m16n8k16.f16")
    A, B, C = analysis.fixed_tiles(s)
    assert A.shape == (12, 16, 16) and B.shape == (12, 16, 8) and C.shape == (12, 16, 8)
    assert (A[10] == 0).all() and (C[9] == 0).all()
    D = np.zeros((2, s.m, s.n))
    D[0, 0, 0], D[1, 15, 7] = 1.0, -2.0
    text = analysis.bits_text(s, "sm_90", kernels.TensorPath(s.name, {"HMMA.16816.F16": 2}), D)
    lines = text.splitlines()
    assert lines[0] == f"// {s.instruction} on sm_90: 2x HMMA.16816.F16"
    assert lines[2] == "tile 0:" and lines[3].split()[:2] == ["3c00", "0000"]
    assert lines[-1].split()[-1] == "c000" and len(lines) == 2 + 2 * 17
