"""Table II of the Ampere paper: CPI of dependent against independent sequences.

The paper's observation, asserted on every arch measured: a dependent chain costs at least as
much per instruction as an independent sequence of the same instruction (the dependent figure is
the pipeline latency, the independent one the issue cost).
"""
from __future__ import annotations

import pytest

from pytest_gpuchar.topics.instructions import rows, run

pytestmark = pytest.mark.topic("instructions")
ROWS = [pytest.param(rows.row(name), id=name) for name in rows.TABLE_II]


@pytest.mark.hardware
@pytest.mark.parametrize("row", ROWS)
def test_table_ii_dependent_vs_independent(arch, row, gpu, gpuchar, hardware_row):
    hardware_row(run.dependency(gpuchar, row, arch))
