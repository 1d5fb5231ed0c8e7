"""The Tensor Memory Accelerator (issue 15, item 2): completion latency of a dependent 1 KiB
transfer through an mbarrier (cp.async.bulk, 1D and 2D tensor maps) with the data in the L2
and in device memory, against one warp's plain loads of the same bytes; bytes per clock per
SM against the transfer size, and the size the rate levels off at (published: above about
2 KiB); a block multicast to a cluster against every CTA loading it. A tensor map the
driver rejects is reported with the driver's error."""
from __future__ import annotations

import pytest

from pytest_gpuchar.topics.movement import rows, run

pytestmark = pytest.mark.topic("movement")
PROBES = list(run.TMA_PROBES)
LATENCY = [pytest.param(r, id=r.id) for r in rows.TMA_ROWS]
SIZES = [pytest.param(r, id=r.id) for r in rows.TMA_BW_ROWS]
KNEES = [pytest.param(lv, id=lv.value) for lv in rows.TMA_BW_LEVELS]
MULTICAST = [pytest.param(r, id=r.id) for r in rows.MULTICAST_ROWS]


@pytest.mark.static
@pytest.mark.parametrize("name", PROBES)
def test_tma_probe_sass(arch, name, offline_tools, static_check):
    static_check(run.tma_probe(name, arch))


@pytest.mark.hardware
@pytest.mark.parametrize("row", LATENCY)
def test_tma_latency(arch, row, gpu, gpuchar, hardware_row):
    hardware_row(run.tma_latency(gpuchar, row, arch))


@pytest.mark.hardware
@pytest.mark.parametrize("row", SIZES)
def test_tma_bandwidth(arch, row, gpu, gpuchar, hardware_row):
    hardware_row(run.tma_bandwidth(gpuchar, row, arch))


@pytest.mark.hardware
@pytest.mark.parametrize("level", KNEES)
def test_tma_size_knee(arch, level, gpu, gpuchar, gpuchar_artifact, hardware_row):
    hardware_row(run.tma_knee(gpuchar, level, arch, gpuchar_artifact))


@pytest.mark.hardware
@pytest.mark.parametrize("row", MULTICAST)
def test_tma_multicast(arch, row, gpu, gpuchar, hardware_row):
    hardware_row(run.multicast(gpuchar, row, arch))
