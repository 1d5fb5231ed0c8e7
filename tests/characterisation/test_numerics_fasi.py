"""Beyond seed 004: the questions Fasi et al. (2021) asked of V100/T4/A100 tensor cores, asked
of each arch's mma.sync, one characteristic per answer (so a driver or arch change that alters
one fails loudly):

  products_exact       random products equal the exact product (rounded once for FP16 D)
  subnormal_inputs     subnormal A values times a power of two come out exactly
  subnormal_outputs    products that are subnormal in D's type come out exactly
  rounding_c_rn/_rz    the accumulation addition (C + product) rounds to nearest / truncates
  rounding_products_*  the same for the inner-product addition (C = 0)
  extra_bits           bits the inner-product adder keeps beyond FP32's 24 (P + P*2^-e - P)
  block_size           k terms summed in one multi-term addition
  order_invariant      results unchanged by permuting the k terms inside one block
  nan/inf/overflow     IEEE special values through the unit; overflow of D to inf
  native_tensor_core   the mma is one tensor-core instruction (no FPU/convert ops)

Answers that depend on an operation the compiler put on the FPU (on sm_90, C of the FP8
mma.sync is added with FADD) are reported "invalid" with the SASS, never as tensor-core data.
"""
from __future__ import annotations

import pytest

from pytest_gpuchar import numerics
from pytest_gpuchar.plugin import assert_result
from pytest_gpuchar.report import Result

COMBOS = ("f16-f32", "f16-f16", "bf16-f32", "tf32-f32", "e4m3-f32", "e5m2-f32")
QUESTIONS = ("native_tensor_core", "products_exact", "subnormal_inputs", "subnormal_outputs",
             "rounding_c_rn", "rounding_c_rz", "rounding_products_rn", "rounding_products_rz",
             "extra_bits", "block_size", "order_invariant", "nan_propagates", "inf_propagates",
             "inf_times_zero_nan", "inf_minus_inf_nan", "overflow_to_inf", "max_product_exact")
ROWS = [pytest.param(c, q, id=f"{c}-{q}") for c in COMBOS for q in QUESTIONS]
TOL = {"bool": {"abs": 0}, "bits": {"abs": 0}, "count": {"abs": 0}}
METHOD = ("Fasi et al. 2021 style probe on {instr} ({sass}): {detail}")


def answers(gpuchar, gpu, s):
    runner = numerics.session_runner(gpuchar, gpu)
    return numerics.cached(gpuchar, ("numerics.fasi", gpu.arch, s.name),
                           lambda: numerics.fasi(runner, s))


@pytest.mark.hardware
@pytest.mark.parametrize("combo,question", ROWS)
def test_fasi_questions(arch, combo, question, gpu, gpuchar, record):
    s = numerics.spec(numerics.ELEMENTWISE[combo])
    why = numerics.unsupported(s, arch)
    if why:
        pytest.skip(why)
    key = f"numerics.fasi.{combo.replace('-', '_')}.{question}"
    runner = numerics.session_runner(gpuchar, gpu)
    try:
        path = runner.verify(s)
    except numerics.NotTensorCore as e:
        gpuchar.recorder.add(Result(key, arch, "invalid", detail=str(e).splitlines()[0]))
        pytest.fail(str(e))
    if question == "native_tensor_core":
        r = record(key, arch, value=float(path.native), unit="bool",
                   method=f"driver JIT SASS of {s.instruction}: {path.describe()}",
                   data={"tolerance": TOL["bool"], "sass": path.describe()})
        assert_result(r)
        return
    base, _, mode = question.rpartition("_") if question.startswith("rounding") else \
        (question, "", "")
    got = answers(gpuchar, gpu, s).get(base)
    if got is None:
        pytest.skip(f"{question} does not apply to {s.in_type} -> {s.c_type}")
    if isinstance(got, str):
        if got.startswith("invalid"):
            msg = f"probe invalid: {key}: {got}"
            gpuchar.recorder.add(Result(key, arch, "invalid", detail=msg))
            pytest.xfail(msg + "\n" + runner.sass_text(s))
        pytest.skip(f"{question}: {got}")
    if mode:
        value, unit = float(mode in got.modes), "bool"
        detail = f"consistent rounding modes: {got.modes or 'none of rn/rz/rd/ru'}"
    else:
        value, unit, detail = got.value, got.unit, ""
    method = METHOD.format(instr=s.instruction, sass=path.describe(), detail=got.detail[:400])
    if value is None:
        gpuchar.recorder.add(Result(key, arch, "info", method=method, detail=got.detail[:300]))
        pytest.skip(f"{key}: {got.detail[:200]}")
    r = record(key, arch, value=value, unit=unit, method=method, detail=detail,
               data={"tolerance": TOL[unit], "cases": [str(c) for c in got.cases[:40]],
                     "modes": got.modes})
    assert_result(r)
