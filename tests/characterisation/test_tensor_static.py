"""Tensor cores, static (offline ptxas, every arch, no GPU): the SASS each wmma / mma.sync /
mma.sp / ldmatrix / wgmma probe becomes (the counted loop the GPU times: exactly its tensor
instructions per trip and named loop control), verified and snapshotted; the MOVM transposes that
row/col layouts add (003 section IV-C); the instructions that are no tensor-core instruction on
an arch (mma.m8n8k4 f16 on Ampere and later, 004; FP8 mma.sync and u4 wmma on Hopper).

The topic's modules (every row's ILP 1 probe, the sm_90a wgmma probes, the layouts, the
emulated rows) are assembled once per arch and session; each test only verifies and
snapshots."""
from __future__ import annotations

import pytest

from pytest_gpuchar.fixtures import assert_results
from pytest_gpuchar.topics.tensor.mma import analysis, kernels, probes, rows, run
from pytest_gpuchar.topics.tensor.tcgen05 import kernels as tcgen05

pytestmark = pytest.mark.topic("tensor")


def _tensor_ops(checked):
    """The tensor instructions of the checked probe's timed region (its loop's trip)."""
    (_, verdict), = checked
    return analysis.tensor_opcodes(verdict.regions[min(verdict.regions)])


ROWS_WMMA = [pytest.param(r, id=r.name) for r in rows.WMMA]
ROWS_MMA = [pytest.param(r, id=r.name) for r in rows.MMA]
ROWS_SP = [pytest.param(r, id=r.name) for r in rows.MMA_SP]
ROWS_LDM = [pytest.param(r, id=r.name) for r in rows.LDMATRIX]
ROWS_WG = [pytest.param(r, id=r.name) for r in rows.WGMMA]
ROWS_TC05 = [pytest.param(r, id=r.name) for r in tcgen05.ROWS]
LAYOUTS = [pytest.param(lay, t, id=f"{lay}-{t}") for lay, t in kernels.movm_layouts()]


@pytest.mark.static
@pytest.mark.parametrize("row", ROWS_WMMA)
def test_table_iii_wmma_sass(arch, row, offline_tools, static_check):
    """003 Table III: each wmma type/shape becomes N x its SASS (on sm_80: the paper's)."""
    checked = static_check(kernels.static_probe(row, arch), snapshot=probes.snapshot)
    assert_results([], analysis.table_iii_problems(row, arch, _tensor_ops(checked)))


@pytest.mark.static
@pytest.mark.parametrize("row", ROWS_MMA)
def test_table_3_mma_sass(arch, row, offline_tools, static_check):
    """004 Tables 3-5: each mma.sync shape/type is one tensor-core instruction (Hopper's FP64
    m16n8k4/k8/k16: one DMMA.16x8xK on sm_90, skipped before sm_90)."""
    checked = static_check(kernels.static_probe(row, arch), snapshot=probes.snapshot)
    assert_results([], analysis.one_op_problems(row, arch, _tensor_ops(checked)))


@pytest.mark.static
@pytest.mark.parametrize("row", ROWS_SP)
def test_table_6_mma_sp_sass(arch, row, offline_tools, static_check):
    """004 Tables 6-7: 2:4 sparse mma.sp becomes one .SP tensor-core instruction."""
    checked = static_check(kernels.static_probe(row, arch), snapshot=probes.snapshot)
    assert_results([], analysis.sparse_problems(row, _tensor_ops(checked)))


@pytest.mark.static
@pytest.mark.parametrize("row", ROWS_LDM)
def test_table_9_ldmatrix_sass(arch, row, offline_tools, static_check):
    """004 Table 9: ldmatrix.xN becomes one LDSM.16.M88[.N] (pointer chase: depth n)."""
    static_check(kernels.static_probe(row, arch), snapshot=probes.snapshot)


@pytest.mark.static
@pytest.mark.parametrize("row", ROWS_WG)
def test_hopper_wgmma_sass(arch, row, offline_tools, static_check):
    """wgmma (sm_90a): per loop trip n x HGMMA/QGMMA/IGMMA between one WARPGROUP.ARRIVE and
    the wait (the latency loop: one), assembled without serialisation warnings (C7510/C7519
    fail in toolchain.assemble)."""
    (_, verdict), = static_check(kernels.static_wgmma_probe(row, arch), snapshot=probes.snapshot)
    assert verdict.unit.get("WARPGROUP.ARRIVE") == 1


@pytest.mark.static
@pytest.mark.parametrize("layout,types", LAYOUTS)
def test_table_iii_movm_layouts(arch, layout, types, offline_tools, gpuchar):
    """003 section IV-C: MOVM.16.MT88 transposes appear or vanish with the layouts: none for
    row.col, some for row.row (B), more for col.col (A and C, with f16 C), most for col.row."""
    assert_results([], run.movm(gpuchar, arch, layout, types))


@pytest.mark.static
def test_not_tensor_core_instructions(arch, offline_tools, gpuchar):
    """PTX that is valid on the arch but no tensor-core instruction there: mma.m8n8k4 f16
    becomes FPU code (a subroutine call, no HMMA) on sm_80+ (004); on sm_70/sm_75 it is
    HMMA.884. On sm_90 FP8 mma.sync becomes F2FP conversions + f16 HMMA (no FP8 tensor op)
    and u4 wmma a subroutine (no INT4 tensor cores)."""
    assert_results([], run.emulated(gpuchar, arch))


@pytest.mark.static
@pytest.mark.parametrize("row", ROWS_TC05)
def test_blackwell_tcgen05_sass(arch, row, static_check):
    """B200 / B300 (sm_100a, sm_103a): one tcgen05.mma of each kind and its commit become
    exactly one UTC*MMA (UTCHMMA f16/tf32, UTCQMMA f8f6f4 and mxf8f6f4, UTCIMMA i8, UTCOMMA
    mxf4nvf4) and one UTCBAR; snapshotted."""
    static_check(tcgen05.probe(row, arch))
