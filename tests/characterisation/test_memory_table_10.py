"""Table 10 of the tensor-core paper (seed 004): ld.shared latency under bank conflicts.

One warp; at every step thread t loads the word at m*B + t*4k bytes (k = the conflict degree;
broadcast: all threads the same word), so every load is a k-way conflict; each thread chases
its own 4-position cycle, and thread 0's slope over 32/64/128 dependent loads is the row's
figure. 64-bit rows use the same byte stride (u64 with k = 2 is the natural two-wavefront
access: the paper's first u64 column). The paper's observation is asserted on every arch: about
2 cycles per extra way, never cheaper with more ways.
"""
from __future__ import annotations

import pytest

from pytest_gpuchar.topics.memory import rows, run

pytestmark = pytest.mark.topic("memory")
ROWS = [pytest.param(r, id=r.name) for r in rows.BANK_ROWS]


@pytest.mark.hardware
@pytest.mark.parametrize("row", ROWS)
def test_table_10_bank_conflicts(arch, row, gpu, gpuchar, hardware_row):
    hardware_row(run.bank_conflicts(gpuchar, row, arch))
