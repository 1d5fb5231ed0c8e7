"""Per-functional-unit throughput per SM in the categories of the Many-BSP report's Tables
1-2..1-4 (seed 002): fp32 add/mul/fma, integer add, multiply-add, shift, logic, bit reverse,
popc, sad, compare/min/max, 64-bit conversions, fp64, SFU (rsqrt, sqrt, lg2, ex2, sin) and
shared-memory loads. Each row: one representative PTX op in independent chains on every SM,
SASS-verified, results per clock per SM (slope over loop trip counts).

Expectations: sm_30/sm_50/sm_61 from Many-BSP Tables 1-2..1-4; sm_80/sm_90 from the CUDA C++
Programming Guide's throughput table; the H200 figures measured here (per-device section).
"""
from __future__ import annotations

import pytest

from pytest_gpuchar import throughput
from pytest_gpuchar.plugin import assert_result

from _throughput import check_static, measured, snapshot_text

ROWS = [pytest.param(r, id=r.name) for r in throughput.UNIT_ROWS]


@pytest.mark.static
@pytest.mark.parametrize("row", ROWS)
def test_unit_throughput_sass(arch, row, offline_tools, sass_snapshot):
    check_static(arch, row, sass_snapshot)


@pytest.mark.hardware
@pytest.mark.parametrize("row", ROWS)
def test_unit_throughput(arch, row, gpu, gpuchar, record, sass_snapshot):
    why = throughput.supported(row, arch)
    if why:
        pytest.skip(f"hardware: {why}")
    m = measured(gpuchar, row, arch)
    peak = throughput.peak(row.name, arch)
    r = record(f"throughput.unit.{row.name}", arch, fit=m.as_fit(), unit="ops/clk/SM",
               method=m.method + (f"; {row.note}" if row.note else ""),
               detail=f"{row.category} ({row.unit_fu}): SASS {m.verdict['unit']}",
               data={"sass_unit": m.verdict["unit"], "category": row.category,
                     "functional_unit": row.unit_fu, "peak": peak,
                     "peak_fraction": None if not peak else round(m.rate / peak, 4),
                     "cycles_per_sm": {str(t): v for t, v in m.cycles.items()},
                     "sms": m.sms, "warps_per_sm": m.warps_per_sm,
                     "tolerance": {"rel": 0.03}})
    assert snapshot_text(throughput.jit_sass(gpu)[1][m.probe.entry]) == \
        sass_snapshot(f"jit-driver-{gpu.driver}")
    assert_result(r)
