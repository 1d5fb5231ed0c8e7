"""Tensor cores on the GPU: latency and throughput of wmma (003 Table III), mma.sync (004
Tables 3-5, Figs 6-7), mma.sp (Tables 6-7), ldmatrix (Table 9) and Hopper wgmma, swept over
ILP x warps per SM. Every probe is a counted loop of dependent steps, timed at three trip
counts so the warps' start skew is under 1% of the span. The whole sweep is JIT-compiled by
the driver (plus one module for sm_90a wgmma), SASS-verified kernel by kernel, launched in one
batch and measured once per session (topics/tensor/mma/run.py); each test reads its row's figures
(topics/tensor/mma/figures.py) and judges them against the arch's expectations.

Per row: completion latency (1 warp, ILP 1), the two convergence points of 004's tables
(best throughput with 4 warps and with 8 warps: the smallest ILP reaching 95% of the best at
that warp count, with its latency), the peaks (achieved/peak for Hopper's FP64 shapes), and
the sweep's invariant: with warps a multiple of the schedulers, throughput never falls as
warps grow at a fixed ILP."""
from __future__ import annotations

import pytest

from pytest_gpuchar.topics.tensor.mma import figures, rows

pytestmark = pytest.mark.topic("tensor")


def _ids(table):
    return [pytest.param(r, id=r.name) for r in table]


@pytest.mark.hardware
@pytest.mark.parametrize("row", _ids(rows.MMA))
def test_table_3_mma(arch, row, gpu, gpuchar, hardware_row, gpuchar_artifact):
    """004 Tables 3-5 / Figs 6-7: mma.sync completion latency and the 4- and 8-warp
    convergence points (FMA/clk/SM); Hopper's FP64 shapes against their documented peak."""
    hardware_row(figures.sweep_row(gpuchar, row, arch, gpuchar_artifact))


@pytest.mark.hardware
@pytest.mark.parametrize("row", _ids(rows.MMA_SP))
def test_table_6_mma_sp(arch, row, gpu, gpuchar, hardware_row, gpuchar_artifact):
    """004 Tables 6-7: 2:4 sparse mma.sp (dense-equivalent FMA/clk/SM; metadata validated)."""
    hardware_row(figures.sweep_row(gpuchar, row, arch, gpuchar_artifact))


@pytest.mark.hardware
@pytest.mark.parametrize("row", _ids(rows.LDMATRIX))
def test_table_9_ldmatrix(arch, row, gpu, gpuchar, hardware_row, gpuchar_artifact):
    """004 Table 9: ldmatrix.xN completion latency (pointer chase) and bytes/clk/SM against the
    128 B/clk shared-memory bound."""
    hardware_row(figures.sweep_row(gpuchar, row, arch, gpuchar_artifact))


@pytest.mark.hardware
@pytest.mark.parametrize("row", _ids(rows.WMMA))
def test_table_iii_wmma(arch, row, gpu, gpuchar, hardware_row):
    """003 Table III: wmma completion latency (1 warp, ILP 1) and cycles per wmma of an
    independent sequence (1 warp, ILP 4: what the paper's 'Cycles' column reports)."""
    hardware_row(figures.wmma_row(gpuchar, row, arch))


@pytest.mark.hardware
@pytest.mark.parametrize("row", _ids(rows.WGMMA))
def test_hopper_wgmma(arch, row, gpu, gpuchar, hardware_row, gpuchar_artifact):
    """Hopper wgmma (sm_90a): cycles per wgmma of a dependent accumulator chain, completion
    latency (a loop of one wgmma from fence to wait complete per trip), and throughput (FLOP/clk/SM) with
    achieved/peak against the documented dense peak; for the sweep rows over warpgroups per
    SM x ILP."""
    hardware_row(figures.wgmma_row(gpuchar, row, arch, gpuchar_artifact))


@pytest.mark.hardware
def test_tensor_sweep_data(arch, gpu, gpuchar, hardware_row, gpuchar_artifact):
    """The raw sweep (every point's latency/throughput, invalid probes, skipped launches) as
    one JSON artifact; no probe of the sweep may be invalid."""
    hardware_row(figures.sweep_data(gpuchar, arch, gpuchar_artifact))
