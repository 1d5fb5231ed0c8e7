"""DPX: the CUDA intrinsics of Hopper's dynamic-programming instructions (__vimax3_*,
__vimin3_*, __viaddmax_*, __viaddmin_*, __vimax_*_relu, __vibmax_*, __vibmin_*), Table V
style, one row per intrinsic.

Per row: the PTX->SASS mapping (static, any machine: the intrinsic's PTX as CUDA 13.0 writes
it for the arch, assembled offline, verified and snapshotted): on sm_90 one DPX instruction
per call (VIMNMX3, VIADDMNMX, VIMNMX .RELU; __vibmax/__vibmin a select sequence), on
sm_80/sm_86/sm_89 an emulated sequence without any DPX opcode. On an sm_90 GPU: the latency
of a dependent chain (stored results checked against the CPU reference) and the calls per
clock per SM of a whole-GPU loop, both SASS-verified on the driver's JIT output.
"""
from __future__ import annotations

import pytest

from pytest_gpuchar.fixtures import assert_results
from pytest_gpuchar.topics.dpx import kernels, rows, run

pytestmark = pytest.mark.topic("dpx")
ROWS = [pytest.param(r, id=r.name) for r in rows.ROWS]


@pytest.mark.static
@pytest.mark.parametrize("row", ROWS)
def test_dpx_mapping(arch, row, static_check, record):
    """The row's probes assemble for `arch`, their timed regions hold exactly the intended
    SASS (sm_90: one DPX instruction per call) or a repeated sequence (the emulation), and
    the SASS matches this compiler's snapshot."""
    checked = static_check(kernels.mapping_probes(row, arch), key=f"sass.dpx.{row.name}")
    record.note(run.mapping_note(row, arch, checked))
    assert_results([], kernels.check_mapping(row, arch, [v for _, v in checked]))


@pytest.mark.hardware
@pytest.mark.parametrize("row", ROWS)
def test_dpx_latency(arch, row, gpu, gpuchar, hardware_row):
    """Cycles per call of a dependent chain."""
    hardware_row(run.latency(gpuchar, row, arch))


@pytest.mark.hardware
@pytest.mark.parametrize("row", ROWS)
def test_dpx_throughput(arch, row, gpu, gpuchar, hardware_row):
    """Calls per clock per SM over the whole GPU."""
    hardware_row(run.throughput(gpuchar, row, arch))
