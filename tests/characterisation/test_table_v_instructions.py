"""Table V of the Ampere paper: PTX instructions, the SASS they become, and their cycles.

Per row: the PTX->SASS mapping (static, any machine: offline ptxas for the arch, verified and
snapshotted, compared with the paper's printed SASS for sm_80), and on a GPU of the arch the
cycles per instruction of an independent sequence (what the paper reports) and the latency of a
dependent chain, both SASS-verified on the driver's own JIT output and measured as slopes.
"""
from __future__ import annotations

import pytest

from pytest_gpuchar.topics.instructions import kernels, rows, run

pytestmark = pytest.mark.topic("instructions")
ROWS = [pytest.param(r, id=r.name) for r in rows.TABLE_V]


@pytest.mark.static
@pytest.mark.parametrize("row", ROWS)
def test_table_v_mapping(arch, row, static_check, record, expected):
    """The row's probes assemble for `arch`, their timed regions hold exactly the intended
    SASS, and the SASS matches this compiler's snapshot; the mapping is compared with the
    paper's."""
    checked = static_check(kernels.mapping_probes(row, arch), invalid="xfail",
                           key=f"sass.{row.name}")
    note = run.paper_mapping(row, arch, dict(checked[-1][1].unit), checked.tool, expected)
    if note:
        record.note(note)


@pytest.mark.hardware
@pytest.mark.parametrize("row", ROWS)
def test_table_v_cycles(arch, row, gpu, gpuchar, hardware_row):
    """Cycles per instruction of an independent sequence (Table V's figure)."""
    hardware_row(run.cpi(gpuchar, row, arch))


@pytest.mark.hardware
@pytest.mark.parametrize("row", ROWS)
def test_table_v_latency(arch, row, gpu, gpuchar, hardware_row):
    """Latency: cycles per op of a dependent chain."""
    hardware_row(run.latency(gpuchar, row, arch))
