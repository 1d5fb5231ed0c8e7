"""Seed 004 section 8.1, Tables 12-15: element-wise numeric profiling of the tensor cores.

Each row isolates one operation of D = A*B + C (Fig 16): the multiplication (one non-zero in
A's row and B's column), the inner-product addition (two), the accumulation addition (one
product + C), with inputs initialised in the low-precision type or in FP32 and converted. The
figure is the mean absolute error against the CPU's FP32 computation (the paper's baseline;
Table 14 also against fp16(CPU FP32)). The paper's conclusions are asserted per row:
products are exact; FP16 C/D is computed in higher precision and rounded once; with FP32
initialisation the conversion loss dominates. A NaN/Inf where the reference is finite fails as
such, never as "within tolerance". FP8 (e4m3/e5m2, sm_89+) is profiled the same way (beyond
the paper).
"""
from __future__ import annotations

import pytest

from pytest_gpuchar.topics.numerics import rows, run

pytestmark = pytest.mark.topic("numerics")


def _params(table: list[rows.ElementRow]) -> list:
    return [pytest.param(r, id=r.id) for r in table]


@pytest.mark.hardware
@pytest.mark.parametrize("row", _params(rows.TABLE_12))
def test_table_12_bf16(arch, row, gpu, gpuchar, record, hardware_row):
    """Table 12: BF16 inputs, FP32 C/D."""
    hardware_row(run.elementwise(gpuchar, record, row, arch))


@pytest.mark.hardware
@pytest.mark.parametrize("row", _params(rows.TABLE_13))
def test_table_13_fp16_fp32(arch, row, gpu, gpuchar, record, hardware_row):
    """Table 13: FP16 inputs, FP32 C/D."""
    hardware_row(run.elementwise(gpuchar, record, row, arch))


@pytest.mark.hardware
@pytest.mark.parametrize("row", _params(rows.TABLE_14))
def test_table_14_fp16_fp16(arch, row, gpu, gpuchar, record, hardware_row):
    """Table 14: FP16 inputs, FP16 C/D, against CPU FP32 and against fp16(CPU FP32)."""
    hardware_row(run.elementwise(gpuchar, record, row, arch))


@pytest.mark.hardware
@pytest.mark.parametrize("row", _params(rows.TABLE_15))
def test_table_15_tf32(arch, row, gpu, gpuchar, record, hardware_row):
    """Table 15: TF32 inputs (FP32 rounded with cvt.rna), FP32 C/D."""
    hardware_row(run.elementwise(gpuchar, record, row, arch))


@pytest.mark.hardware
@pytest.mark.parametrize("row", _params(rows.FP8_ELEMENTWISE))
def test_fp8_elementwise(arch, row, gpu, gpuchar, record, hardware_row):
    """Beyond the paper: the same profiling for FP8 mma.sync (sm_89+)."""
    hardware_row(run.elementwise(gpuchar, record, row, arch))
