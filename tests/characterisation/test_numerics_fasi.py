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

from pytest_gpuchar.topics.numerics import rows, run

pytestmark = pytest.mark.topic("numerics")
ROWS = [pytest.param(r, id=r.id) for r in rows.FASI]


@pytest.mark.hardware
@pytest.mark.parametrize("row", ROWS)
def test_fasi_questions(arch, row, gpu, gpuchar, record, hardware_row):
    hardware_row(run.fasi(gpuchar, record, row, arch))
