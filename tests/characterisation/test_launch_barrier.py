"""bar.sync overhead for blocks of 256 and 1024 threads (Many-BSP report, seed 002, Tables
1-5..1-7, rows "bar.sync (for nt=...)"): cycles per barrier of the whole block, one block per
SM, back-to-back barriers in a loop (SASS-verified), slope over loop trip counts."""
from __future__ import annotations

import pytest

from pytest_gpuchar.topics.throughput import kernels, rows, run

pytestmark = pytest.mark.topic("throughput")
ROWS = [pytest.param(n, id=f"nt{n}") for n in rows.BAR_THREADS]


@pytest.mark.static
@pytest.mark.parametrize("threads", ROWS)
def test_bar_sync_sass(arch, threads, static_check):
    static_check(kernels.bar_probe(arch, threads), snapshot=run.snapshot)


@pytest.mark.hardware
@pytest.mark.parametrize("threads", ROWS)
def test_bar_sync_overhead(arch, threads, gpu, gpuchar, hardware_row):
    hardware_row(run.bar_sync(gpuchar, threads, arch))
