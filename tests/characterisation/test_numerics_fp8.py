"""FP8 tensor-core numerics on Hopper's native path (wgmma.mma_async e4m3/e5m2 -> f32,
sm_90a), the questions Fasi et al. asked of the FP16/BF16/TF32 tensor cores asked of it, and
what public FP8 training reports found (the accumulation keeps about 14 bits):

  products_exact       random products equal the exact product
  subnormal_inputs     subnormal inputs times a power of two come out exactly
  accumulator_bits     significant bits of C + product kept (C = 2^e + 1: exact up to e = bits-1)
  extra_bits           accumulator_bits - 24: bits kept beyond (negative: short of) FP32's
  product_sum_bits     the same for two products in one wgmma (C = 0), where representable
  rounding_*_rn/rz/terms  how the kept result is rounded: nearest, toward zero, or every
                       aligned term truncated at the kept unit (no bit below it kept)
  block_size           products summed in one addition before the accumulator (if visible)
  order_invariant      results unchanged by permuting the k terms
  nan/inf/overflow     special values through the unit (e4m3 has no infinity)

plus the bits of D for fixed inputs (snapshot) and the error growth with K against the exact
product (ml_dtypes values, math.fsum), plotted beside CPU models of the accumulator. The
kernels' fragment layouts are checked against A@B+C before any figure is taken."""
from __future__ import annotations

import pytest

from pytest_gpuchar.fixtures import assert_results
from pytest_gpuchar.topics.numerics import fp8_questions as q
from pytest_gpuchar.topics.numerics import fp8_run, fp8_wgmma
from pytest_gpuchar.topics.numerics import run as numerics_run

pytestmark = pytest.mark.topic("numerics")
ROWS = [pytest.param(r, id=r.id) for r in q.FP8_ROWS]
TYPES = [pytest.param(t, id=t) for t in fp8_wgmma.TYPES]
KERNELS = [pytest.param(t, k, id=f"{t}-steps{k}") for t in fp8_wgmma.TYPES
           for k in fp8_wgmma.STEPS]


@pytest.mark.static
@pytest.mark.parametrize("in_type,steps", KERNELS)
def test_fp8_wgmma_kernel_sass(arch, in_type, steps, offline_tools, static_check):
    """The kernel assembles for sm_90a and is `steps` native QGMMA, no FPU arithmetic."""
    (built, verdict), = static_check(fp8_run.static_probe(in_type, steps, arch),
                                     snapshot=fp8_run.static_snapshot)
    path = verdict.path
    assert_results([], [] if path.native and sum(path.tensor.values()) == steps else
                   [f"{built.probe.name}: {path.describe()}, wanted {steps} x QGMMA alone"])


@pytest.mark.hardware
@pytest.mark.parametrize("row", ROWS)
def test_fp8_wgmma_questions(arch, row, gpu, gpuchar, record, hardware_row):
    hardware_row(fp8_run.question(gpuchar, record, row, arch))


@pytest.mark.hardware
@pytest.mark.parametrize("in_type", TYPES)
def test_fp8_wgmma_bits(arch, in_type, gpu, gpuchar, sass_snapshot):
    """D's bits for fixed tiles and for the accumulator-bits cases, per arch (syrupy)."""
    assert fp8_run.bits_text(gpuchar, in_type, arch) == sass_snapshot(numerics_run.BITS_TAG)


@pytest.mark.hardware
@pytest.mark.parametrize("in_type", TYPES)
def test_fp8_wgmma_k_growth(arch, in_type, gpu, gpuchar, hardware_row, gpuchar_artifact,
                            tmp_path):
    """Error of A @ B against the exact product for K = 32..4096 (plotted with the models)."""
    hardware_row(fp8_run.k_growth(gpuchar, in_type, arch, gpuchar_artifact, tmp_path))
