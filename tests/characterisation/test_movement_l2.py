"""The L2 seen from every SM (issue 15, item 5): near and far L2 latency of each SM, of
repeated loads and of atomics (performed at the line's home slice), drawn as heatmaps by SM
and line, and the partitions the SMs fall into (the partition map is kept in the results, so
its stability across drivers is recorded); latency under load (item 6):
device-memory load latency while a share of the other SMs stream, against the bandwidth
they achieve (the loaded-latency curve)."""
from __future__ import annotations

import pytest

from pytest_gpuchar.topics.movement import chases, rows, run

pytestmark = pytest.mark.topic("movement")
PROBES = [pytest.param(lambda arch: chases.l2_probe(arch, "load"), id="by_sm"),
          pytest.param(lambda arch: chases.l2_probe(arch, "atomic"), id="by_sm_atomic"),
          pytest.param(chases.loaded_probe, id="loaded")]
L2 = [pytest.param(r, id=r.value) for r in rows.L2_ROWS]
SHARES = [pytest.param(s, id=f"s{s}") for s in rows.LOADED_SHARES]


@pytest.mark.static
@pytest.mark.parametrize("probe", PROBES)
def test_l2_probe_sass(arch, probe, offline_tools, static_check):
    static_check(probe(arch))


@pytest.mark.hardware
@pytest.mark.parametrize("row", L2)
def test_l2_by_sm(arch, row, gpu, gpuchar, gpuchar_artifact, hardware_row):
    hardware_row(run.l2_by_sm(gpuchar, row, arch, gpuchar_artifact))


@pytest.mark.hardware
@pytest.mark.parametrize("share", SHARES)
def test_loaded_latency(arch, share, gpu, gpuchar, gpuchar_artifact, hardware_row):
    hardware_row(run.loaded(gpuchar, share, arch, gpuchar_artifact))
