"""Table IV and section IV-B of the Ampere paper: memory latency by pointer chasing.

Rows (rows.LEVELS): L1 hit (ld.global.ca, and plain ld.global), the read-only path
(ld.global.nc), L2 hit (ld.global.cg), device memory (ld.global.cv, and ld.global.ca over the
same footprint of >= 4x the L2), shared-memory load and store, the constant cache. Each row
records two figures: the load-to-use latency (slope over unrolled dependent loads) and the chase
loop's cycles per step (slope over iterations of a nounroll loop holding one load), so the cost
the loop itself adds is visible beside the latency. The static test checks every memory probe's
SASS offline (exact opcode with its cache operator, count, dependence depth) and snapshots it.
"""
from __future__ import annotations

import pytest

from pytest_gpuchar.topics.memory import kernels, rows, run

pytestmark = pytest.mark.topic("memory")
PROBES = [pytest.param(f, k, id=f"{k}.{f}") for f in rows.FLAVOURS for k in ("chain", "loop")] + \
    [pytest.param("bank", w, id=f"bank.u{w}") for w in (32, 64)]
LEVELS = [pytest.param(lv, id=lv.key) for lv in rows.LEVELS]


@pytest.mark.static
@pytest.mark.parametrize("name, kind", PROBES)
def test_memory_probe_sass(arch, name, kind, offline_tools, static_check):
    """The probe assembles for `arch` (all memory probes in one ptxas run), its timed region
    holds exactly the intended SASS, and the SASS matches this compiler's snapshot."""
    (_, verdict), = static_check(kernels.table_iv_probe(name, kind, arch), snapshot=run.snapshot)
    assert verdict.unit, f"{name} {kind}: empty verdict"


@pytest.mark.hardware
@pytest.mark.parametrize("level", LEVELS)
def test_table_iv_latency(arch, level, gpu, gpuchar, hardware_row):
    hardware_row(run.latency(gpuchar, level, arch))
