"""Table 10 of the tensor-core paper (seed 004): ld.shared latency under bank conflicts.

One warp; at every step thread t loads the word at m*B + t*4k bytes (k = the conflict degree;
broadcast: all threads the same word), so every load is a k-way conflict; each thread chases
its own 4-position cycle, and thread 0's slope over 16/32/64 dependent loads is the row's
figure. 64-bit rows use the same byte stride (u64 with k = 2 is the natural two-wavefront
access: the paper's first u64 column). The paper's observation is asserted on every arch: about
2 cycles per extra way, never cheaper with more ways.
"""
from __future__ import annotations

import pytest

from pytest_gpuchar import measure, memory
from pytest_gpuchar.plugin import assert_result

ROWS = [pytest.param(r, id=r.name) for r in memory.BANK_ROWS]


@pytest.mark.hardware
@pytest.mark.parametrize("row", ROWS)
def test_table_10_bank_conflicts(arch, row, gpu, gpuchar, record):
    s = memory.session_for(gpuchar)
    reps = gpuchar.repeats
    run = memory.measured(gpuchar, ("bank", row.name), lambda: s.bank(row, repeats=reps))
    fit = measure.fit(run.cycles, run.ops)
    assert memory.bank_banks(row) == max(1, row.ways if row.ways else 1), row
    r = record(row.key, arch, fit=fit, unit="cycles",
               method=f"one warp, thread t at byte m*B + t*{4 * row.ways} (k-way conflict by "
                      f"construction), 1 x ld.shared.u{row.width} per step chasing a 4-position "
                      f"cycle; slope of thread 0's %clock64 cycles over 16/32/64 dependent loads, "
                      f"median of {reps} launches",
               data={"cycles": run.cycles, "sass_unit": s.verified(run.probe)})
    assert_result(r)
    if row.ways >= 2:
        half = memory.BankRow(row.width, row.ways // 2)
        if half in memory.BANK_ROWS:
            prev = memory.measured(gpuchar, ("bank", half.name),
                                   lambda: s.bank(half, repeats=reps))
            pfit = measure.fit(prev.cycles, prev.ops)
            assert fit.value >= pfit.value - 1.0, (
                f"{row.name} ({fit.value:.1f} cycles) is cheaper than {half.name} "
                f"({pfit.value:.1f}): the conflict degree is not what the layout intends")
