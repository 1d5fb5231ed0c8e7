"""Bit-exact tensor-core outputs: for fixed inputs (seeded normal tiles, plus edge tiles:
subnormals, largest finite, signed zeros, cancellation), the bits of D per kernel are
snapshotted per arch (syrupy), so any driver or hardware change to tensor-core arithmetic
shows up as a diff. Before snapshotting, general random tiles are checked against the float64
reference (the fragment layouts are right: a wrong layout gives O(1) errors); a known layout
anomaly (rows.KNOWN_LAYOUT_ANOMALIES) is an expected failure that must keep reproducing."""
from __future__ import annotations

import pytest

from pytest_gpuchar.topics.numerics import rows, run

pytestmark = pytest.mark.topic("numerics")
ROWS = [pytest.param(name, id=name) for name in rows.MMA]


@pytest.mark.hardware
@pytest.mark.parametrize("name", ROWS)
def test_tensor_core_bits(arch, name, gpu, gpuchar, record, sass_snapshot):
    assert run.tensor_core_bits(gpuchar, record, name, arch) == sass_snapshot(run.BITS_TAG)
