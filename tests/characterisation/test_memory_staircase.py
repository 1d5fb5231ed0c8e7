"""Cache geometry: the pointer-chase staircase (latency against footprint) gives the L1 and L2
capacities; a stride sweep gives the fill granularity (bytes fetched per miss: the sector).

The staircase is measured once per session (a random single cycle per footprint, 4 KiB to
>= 4x L2, three points per doubling, ld.global.ca) and drawn as a PNG into the run's report.
Levels are plateaus of near-constant latency; a capacity is the largest footprint whose latency
is at most 5% above its level's plateau, bisected between two staircase points to 3% of the
footprint (topics/memory/capacity.py; 9 more chases, the same kernels). Capacities are asserted
against the device's attributes and the expectation file; the L2 row notes the driver's
l2CacheSize beside the chase's figure (memory.capacity.l2_driver).
"""
from __future__ import annotations

import pytest

from pytest_gpuchar.topics.memory import rows, run

pytestmark = pytest.mark.topic("memory")
CAPACITY_ROWS = [pytest.param(r, id=r.value) for r in rows.CAPACITY_ROWS]
FILL_ROWS = list(rows.FILL_ROWS)


@pytest.mark.hardware
@pytest.mark.parametrize("row", CAPACITY_ROWS)
def test_cache_capacity(arch, row, gpu, gpuchar, gpuchar_artifact, hardware_row):
    hardware_row(run.capacity(gpuchar, row, arch, gpuchar_artifact))


@pytest.mark.hardware
@pytest.mark.parametrize("row", FILL_ROWS)
def test_fill_granularity(arch, row, gpu, gpuchar, hardware_row):
    """Line/sector size: a forward walk at strides 8..256 B; below the fill size only
    stride/fill of the loads miss, so the mean latency grows with the stride up to the fill
    size and is flat above it. Only the L1 fill (from the L2) is measured: the L2 fill from
    device memory gave a non-monotonic, session-dependent curve on the H200 (see
    chase.fill_sweep), so it is not reported rather than guessed."""
    hardware_row(run.fill(gpuchar, row, arch))
