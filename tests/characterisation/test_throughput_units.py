"""Per-functional-unit throughput per SM in the categories of the Many-BSP report's Tables
1-2..1-4 (seed 002): fp32 add/mul/fma, integer add, multiply-add, shift, logic, bit reverse,
popc, sad, compare/min/max, 64-bit conversions, fp64, SFU (rsqrt, sqrt, lg2, ex2, sin) and
shared-memory loads. Each row: one representative PTX op in independent chains on every SM,
SASS-verified, results per clock per SM (slope over loop trip counts).

Expectations: sm_30/sm_50/sm_61 from Many-BSP Tables 1-2..1-4; sm_80/sm_90 from the CUDA C++
Programming Guide's throughput table; the H200 figures measured here (per-device section).
"""
from __future__ import annotations

import pytest

from pytest_gpuchar.topics.throughput import kernels, rows, run

pytestmark = pytest.mark.topic("throughput")
ROWS = [pytest.param(r, id=r.name) for r in rows.UNIT_ROWS]


@pytest.mark.static
@pytest.mark.parametrize("row", ROWS)
def test_unit_throughput_sass(arch, row, static_check):
    static_check(kernels.row_probe(row, arch), snapshot=run.snapshot)


@pytest.mark.hardware
@pytest.mark.parametrize("row", ROWS)
def test_unit_throughput(arch, row, gpu, gpuchar, hardware_row):
    hardware_row(run.units(gpuchar, row, arch))
