"""Table I and Section IV-A of the Ampere paper: the cost of reading the clock, the CPI of the
first few instructions after it, and the 32-bit clock pitfall.

These characteristics are *about* the fixed cost that the differential method cancels, so
they are single readings by design: Table I is cycles(n) / n for n = 1..4 independent
add.u32 (the paper's method), and the clock-read overhead is the reading of an empty region.
"""
from __future__ import annotations

import statistics

import pytest

from pytest_gpuchar import catalog, probes, sass
from pytest_gpuchar.plugin import assert_result

from _common import measured_run


@pytest.mark.static
@pytest.mark.parametrize("clock64", [True, False], ids=["clock64", "clock32"])
def test_clock_read_sass(arch, clock64, offline_tools):
    """64-bit %clock64 reads become CS2R (no wait); the timed region of two back-to-back reads
    is empty either way."""
    s = probes.build_static(probes.clock_overhead_probe(arch, clock64=clock64))
    f = s.functions[s.probe.entries[0]]
    reads = sass.clock_reads(f)
    assert len(reads) == 2, sass.format_listing(f.instrs)
    if clock64:
        assert all(i.opcode.startswith("CS2R") for r in reads for i in r
                   if i.is_clock_read), sass.format_listing(f.instrs)
    assert s.regions[0] == [], sass.format_listing(s.regions[0])


@pytest.mark.hardware
@pytest.mark.parametrize("clock64", [True, False], ids=["clock64", "clock32"])
def test_clock_read_overhead(arch, clock64, gpu, gpuchar, record):
    run = measured_run(gpuchar, probes.clock_overhead_probe(arch, clock64=clock64))
    samples = run.cycles[0]
    value = float(statistics.median(samples))
    # Table V's "mov.u32 clock" row is the 32-bit read: its cost is this pair's reading
    keys = ["overhead.clock_read"] if clock64 else ["overhead.clock_read_32bit",
                                                    "cpi.mov.u32.clock"]
    reads = [i.text for r in sass.clock_reads(run.functions[run.probe.entries[0]]) for i in r]
    results = [record(key, arch, value, "cycles" if key.startswith("overhead") else "cycles/op",
                      method="median cycles between two back-to-back clock reads "
                             "(empty region)", data={"samples": samples, "sass": reads})
               for key in keys]
    for r in results:
        r.spread = float(max(samples) - min(samples))
        assert_result(r)


@pytest.mark.hardware
@pytest.mark.parametrize("n", catalog.TABLE_I_COUNTS, ids=lambda n: f"n{n}")
def test_table_i_cpi_against_count(arch, n, gpu, gpuchar, record):
    """CPI of n independent add.u32 = cycles(region) / n, as the paper measured it."""
    row = catalog.row("add.u32")
    probe = probes.cpi_probe(row, arch, lengths=catalog.TABLE_I_COUNTS, prefix="table_i",
                             guard=False)
    run = measured_run(gpuchar, probe)
    samples = run.cycles[n]
    value = statistics.median(samples) / n
    r = record(f"table_i.cpi.n{n}", arch, value, "cycles/op",
               method="paper's method: cycles of one timed region of n independent add.u32 / n",
               data={"samples": samples})
    r.spread = (max(samples) - min(samples)) / n
    assert_result(r)
