"""Bandwidths (issue 15, item 4), per SM per clock and whole GPU, against documented peaks:
shared memory with 32-, 64- and 128-bit accesses (documented 128 B/clk/SM), L1, L2, device
memory read, write and copy (achieved / the board's documented HBM bandwidth), cp.async
from the L2. The device-memory read row draws the bandwidth staircase into the report."""
from __future__ import annotations

import pytest

from pytest_gpuchar.topics.movement import rows, run, streams

pytestmark = pytest.mark.topic("movement")
ROWS = [pytest.param(r, id=r.id) for r in rows.STREAM_ROWS]


@pytest.mark.static
@pytest.mark.parametrize("row", ROWS)
def test_bandwidth_probe_sass(arch, row, offline_tools, static_check):
    static_check(streams.stream_probe(row, arch))


@pytest.mark.hardware
@pytest.mark.parametrize("row", ROWS)
def test_bandwidth(arch, row, gpu, gpuchar, gpuchar_artifact, hardware_row):
    hardware_row(run.bandwidth(gpuchar, row, arch, gpuchar_artifact))
