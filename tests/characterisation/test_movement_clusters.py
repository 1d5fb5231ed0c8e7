"""Thread-block clusters and distributed shared memory (issue 15, item 1): load-to-use latency
of ld.shared::cluster from the own SM and from the other SMs of the cluster, by cluster size
(2..8, 16 with the non-portable attribute) and rank offset; DSM bandwidth per cluster size;
mapa and barrier.cluster costs; serialised launches with clusters against plain launches.
Static: every probe's timed region (what mapa, ld.shared::cluster and barrier.cluster become)
verified and snapshotted. A cluster size the device cannot launch is skipped with the
driver's occupancy answer."""
from __future__ import annotations

import pytest

from pytest_gpuchar.topics.movement import rows, run

pytestmark = pytest.mark.topic("movement")
PROBES = list(run.CLUSTER_PROBES)
DSM = [pytest.param(r, id=r.id) for r in rows.DSM_ROWS]
DSM_BW = [pytest.param(c, id=f"c{c}") for c in rows.DSM_BW_CLUSTERS]
SYNC = [pytest.param(r, id=r.id) for r in rows.SYNC_ROWS]
LAUNCH = [pytest.param(c, id="plain" if c == 1 else f"c{c}") for c in rows.LAUNCH_CLUSTERS]


@pytest.mark.static
@pytest.mark.parametrize("name", PROBES)
def test_cluster_probe_sass(arch, name, offline_tools, static_check):
    static_check(run.cluster_probe(name, arch))


@pytest.mark.hardware
@pytest.mark.parametrize("row", DSM)
def test_dsm_latency(arch, row, gpu, gpuchar, hardware_row):
    hardware_row(run.dsm_latency(gpuchar, row, arch))


@pytest.mark.hardware
@pytest.mark.parametrize("cluster", DSM_BW)
def test_dsm_bandwidth(arch, cluster, gpu, gpuchar, hardware_row):
    hardware_row(run.dsm_bandwidth(gpuchar, cluster, arch))


@pytest.mark.hardware
@pytest.mark.parametrize("row", SYNC)
def test_cluster_sync(arch, row, gpu, gpuchar, hardware_row):
    hardware_row(run.sync(gpuchar, row, arch))


@pytest.mark.hardware
@pytest.mark.parametrize("cluster", LAUNCH)
def test_cluster_launch(arch, cluster, gpu, gpuchar, hardware_row):
    hardware_row(run.launch(gpuchar, cluster, arch))
