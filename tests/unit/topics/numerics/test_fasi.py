"""Fasi et al.'s questions (topics/numerics/fasi.py) asked of a CPU model of a tensor core
whose parameters are known: each question must recover them (no GPU needed)."""
from __future__ import annotations

import numpy as np
import pytest

from pytest_gpuchar.topics.numerics import fasi, kernels, reference, rows
from pytest_gpuchar.topics.numerics.analysis import ModelTensorCore


def test_factor():
    a, b = fasi.factor(2.0 ** -28, "f16")
    assert fasi.factor(2.0 ** -30, "f16") is None   # f16 normals: products >= 2^-28
    assert a * b == 2.0 ** -28 and reference.is_representable(np.array([a, b]), "f16").all()
    assert min(abs(a), b) >= reference.numtype("f16").min_normal
    assert fasi.factor(3 * 2.0 ** -9, "e4m3") is not None
    assert fasi.factor(1 + 2.0 ** -20, "bf16") is None


@pytest.mark.parametrize("kw", [dict(extra_bits=3, block=8, rounding="rz"),
                                dict(extra_bits=5, block=16, rounding="rn")])
@pytest.mark.parametrize("name", ["bf16.m16n8k16.f32", "f16.m16n8k16.f16", "e5m2.m16n8k32.f32"])
def test_questions_recover_the_model(name, kw):
    s = rows.mma(name)
    res = fasi.fasi(ModelTensorCore(**kw), s)
    assert res["products_exact"].value == 1.0
    assert res["subnormal_inputs"].value == 1.0
    assert res["rounding_c"].modes == [kw["rounding"]]
    assert res["rounding_products"].modes == [kw["rounding"]]
    assert res["extra_bits"].value == kw["extra_bits"]
    assert res["block_size"].value == min(kw["block"], s.k)
    assert res["order_invariant"].value in (1.0, None)
    assert res["nan_propagates"].value == 1.0


def test_accumulation_on_fpu_is_invalid():
    class FpuC(ModelTensorCore):
        def verify(self, s):
            return kernels.TensorPath(s.name, {"HMMA.16816.F32": 2}, {"FADD": 4},
                                      {"F2FP": 12})
    res = fasi.fasi(FpuC(extra_bits=3, block=8, rounding="rz"), rows.mma("e4m3.m16n8k32.f32"))
    assert res["rounding_c"].startswith("invalid:")
    assert res["rounding_products"].modes == ["rz"]


def test_every_question_is_answered():
    """fasi() answers every question the table asks (the rounding rows read 'rounding_c' /
    'rounding_products'; the specials one answer each), except the overflow of a product
    that fits D (FP16 inputs, FP32 D: max_product_exact instead)."""
    s = rows.mma("f16.m16n8k16.f32")
    res = fasi.fasi(ModelTensorCore(extra_bits=3, block=8, rounding="rz"), s)
    asked = {rows.FasiRow("f16-f32", q).asked[0] for q in rows.FASI_QUESTIONS}
    assert asked - {"native_tensor_core"} - set(res) == {"overflow_to_inf"}
    assert res["max_product_exact"].value == 1.0
    assert set(fasi.QUESTIONS) - {"specials"} <= set(res)
