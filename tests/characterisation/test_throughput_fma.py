"""FMA throughput across the whole GPU (Beyond3D CUDA throughput note, seed 001): HFMA2
(fp16x2), FFMA (fp32) and DFMA (fp64) with long independent chains on every SM, per SM per
clock and as achieved/peak against the CUDA C++ Programming Guide's arithmetic-instruction
throughput table; the ratios between them per arch.

Static (any machine): the kernel of each row assembles for the arch, its timed loop holds
exactly the intended SASS, and the SASS matches this compiler's snapshot. Hardware: the same
check on the driver's JIT SASS, then the measurement (pytest-benchmark times one synchronised
launch; the cycle counts are in its extra_info).
"""
from __future__ import annotations

import pytest

from pytest_gpuchar.topics.throughput import kernels, rows, run

pytestmark = pytest.mark.topic("throughput")
ROWS = [pytest.param(r, id=r.name) for r in rows.FMA_ROWS]
AUDIT = [pytest.param(r, id=r.name) for r in rows.OPERAND_AUDIT_ROWS]


@pytest.mark.static
@pytest.mark.parametrize("row", ROWS)
def test_fma_throughput_sass(arch, row, static_check):
    static_check(kernels.row_probe(row, arch), snapshot=run.snapshot)


@pytest.mark.hardware
@pytest.mark.parametrize("row", ROWS)
def test_fma_throughput(arch, row, gpu, gpuchar, hardware_row, benchmark):
    measured = run.fma(gpuchar, row, arch)
    run.benchmark(benchmark, gpuchar, row, arch)
    hardware_row(measured)


@pytest.mark.static
@pytest.mark.parametrize("row", AUDIT)
def test_fma_operand_audit_sass(arch, row, static_check):
    static_check(kernels.row_probe(row, arch), snapshot=run.snapshot)


@pytest.mark.hardware
@pytest.mark.parametrize("row", AUDIT)
def test_fma_operand_audit(arch, row, gpu, gpuchar, hardware_row):
    """The same FMAs with three source registers per op, beside the rows above."""
    hardware_row(run.operand_audit(gpuchar, row, arch))
