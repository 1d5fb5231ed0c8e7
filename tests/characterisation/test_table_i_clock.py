"""Table I and Section IV-A of the Ampere paper: the cost of reading the clock, the CPI of the
first few instructions after it, and the 32-bit clock pitfall.

These characteristics are *about* the fixed cost that the differential method cancels, so
they are single readings by design: Table I is cycles(n) / n for n = 1..4 independent
add.u32 (the paper's method), and the clock-read overhead is the reading of an empty region.
"""
from __future__ import annotations

import pytest

from pytest_gpuchar.core import sass
from pytest_gpuchar.topics.instructions import kernels, rows, run

pytestmark = pytest.mark.topic("instructions")


@pytest.mark.static
@pytest.mark.parametrize("clock64", [True, False], ids=["clock64", "clock32"])
def test_clock_read_sass(arch, clock64, static_check):
    """64-bit %clock64 reads become CS2R (no wait); the timed region of two back-to-back reads
    is empty either way."""
    [(built, verdict)] = static_check(kernels.clock_overhead_probe(arch, clock64=clock64),
                                      snapshot=None)
    f = built.functions[built.probe.entries[0]]
    reads = sass.clock_reads(f)
    assert len(reads) == 2, sass.format_listing(f.instrs)
    if clock64:
        assert all(i.opcode.startswith("CS2R") for r in reads for i in r
                   if i.is_clock_read), sass.format_listing(f.instrs)
    assert verdict.regions[0] == [], sass.format_listing(verdict.regions[0])


@pytest.mark.hardware
@pytest.mark.parametrize("clock64", [True, False], ids=["clock64", "clock32"])
def test_clock_read_overhead(arch, clock64, gpu, gpuchar, hardware_row):
    hardware_row(run.clock_overhead(gpuchar, arch, clock64))


@pytest.mark.hardware
@pytest.mark.parametrize("n", rows.TABLE_I_COUNTS, ids=lambda n: f"n{n}")
def test_table_i_cpi_against_count(arch, n, gpu, gpuchar, hardware_row):
    """CPI of n independent add.u32 = cycles(region) / n, as the paper measured it."""
    hardware_row(run.table_i(gpuchar, arch, n))
