"""wgmma in depth (Hopper, sm_90a), beyond the per-shape rows of test_tensor_hw: sparse
wgmma.mma_async.sp (2:4 metadata validated before launch) for f16/bf16/e4m3/s8 against the
sparse peak; the small-N shapes (N = 8..64) with 1, 2, 3 warpgroups per SM and several wgmma
in flight per warpgroup before wgmma.wait_group; f16 accumulation and FP8 with f16
accumulation; the shared-memory descriptors' swizzle modes (none/32B/64B/128B); and the FP8
mma.sync that sm_90 emulates (F2FP unpack + HMMA + FADD), timed beside the native FP8 wgmma
(a counted loop as the sweeps').

Every kernel is a counted loop (per trip: fence, C wgmma, commit, wait_group) whose timed
region is verified in SASS (C x HGMMA/QGMMA/IGMMA, one WARPGROUP.ARRIVE and one
WARPGROUP.DEPBAR per trip, named loop control); cycles per trip are the slope of the SM's span
over trip counts, so the warpgroups' start skew cancels (topics/tensor/wgmma/)."""
from __future__ import annotations

import pytest

from pytest_gpuchar.topics.tensor.fp8_emulation import kernels as fp8_emulation
from pytest_gpuchar.topics.tensor.fp8_emulation import run as fp8_emulation_run
from pytest_gpuchar.topics.tensor.mma import probes
from pytest_gpuchar.topics.tensor.wgmma import rows
from pytest_gpuchar.topics.tensor.wgmma import run

pytestmark = pytest.mark.topic("tensor")
ROWS = [pytest.param(r, id=r.name) for r in rows.ROWS]


@pytest.mark.static
@pytest.mark.parametrize("row", ROWS)
def test_wgmma_depth_sass(arch, row, offline_tools, static_check):
    """Every loop kernel of the row assembles for sm_90a without serialisation warnings and
    holds exactly its wgmma, one fence and one wait per trip."""
    static_check(run.static_probe(row, arch), snapshot=run.snapshot)


@pytest.mark.hardware
@pytest.mark.parametrize("row", ROWS)
def test_wgmma_depth(arch, row, gpu, gpuchar, hardware_row, gpuchar_artifact):
    """Completion latency, best throughput over warpgroups x wgmma in flight, achieved/peak
    (sparse rows: against the sparse peak); small-N rows: the latency-bound figure and the
    concurrency that reaches 95% of the peak; swizzle rows: throughput against no swizzle."""
    hardware_row(run.row_figures(gpuchar, row, arch, gpuchar_artifact))


EMULATED = [pytest.param(r, id=r.name) for r in fp8_emulation.ROWS]


@pytest.mark.static
@pytest.mark.parametrize("row", EMULATED)
def test_fp8_mma_sync_emulation_sass(arch, row, offline_tools, static_check):
    """FP8 mma.sync on sm_90: per op F2FP unpacks + HMMA.16816.F32 + FADD (no QMMA on
    Hopper), a counted loop whose trip holds that sequence per op, fed by shared loads."""
    static_check(fp8_emulation_run.static_probe(row, arch), snapshot=probes.snapshot)


@pytest.mark.hardware
@pytest.mark.parametrize("row", EMULATED)
def test_fp8_mma_sync_emulation(arch, row, gpu, gpuchar, hardware_row):
    """The emulated FP8 mma.sync timed as what it is: cost per op in a C-dependent chain,
    throughput against the FP8 peak and against the native FP8 wgmma of this session."""
    hardware_row(fp8_emulation_run.figures(gpuchar, row, arch))
