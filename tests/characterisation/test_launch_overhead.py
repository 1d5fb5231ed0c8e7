"""LaunchCost parameters of the Many-BSP model (seed 002, Table 1-8): warp launch overhead, block
launch overhead, issue cycle. Static: the launch kernels read %clock64 before anything but
setup (verified) and match the compiler's snapshot; the issue cycle is derived from the FFMA
throughput probe (verified here, its SASS snapshot is test_throughput_fma's)."""
from __future__ import annotations

import pytest

from pytest_gpuchar.topics.throughput import kernels, rows, run

pytestmark = pytest.mark.topic("throughput")
ROWS = [pytest.param(k, id=k.value) for k in rows.LAUNCH_ROWS]


@pytest.mark.static
@pytest.mark.parametrize("row", ROWS)
def test_launch_sass(arch, row, static_check):
    static_check(kernels.launch_probe(row, arch), snapshot=run.launch_snapshot(row))


@pytest.mark.hardware
@pytest.mark.parametrize("row", ROWS)
def test_launch_overhead(arch, row, gpu, gpuchar, hardware_row):
    hardware_row(run.launch(gpuchar, row, arch))
