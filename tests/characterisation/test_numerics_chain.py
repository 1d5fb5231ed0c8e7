"""Seed 004 section 8.2, Figs 19-20: chain matrix multiplication D_i = A_i x B_i (mma
m16n8k8), A_{i+1} = D_i converted to the input type, B_i fresh normal(0,1) draws; mean l2
relative error against the float64 CPU chain over 1000 chains, for TF32, BF16 and FP16, each
initialised in the low-precision type and in FP32.

The paper's observations are asserted: with low-precision initialisation the error at N=1 is
negligible (products exact, accumulation in FP32); FP32 initialisation always costs more
(conversion loss); BF16's error grows fastest; FP16 tracks TF32 (same 10 mantissa bits) until
it overflows to infinity after about 10 links. The curves are plotted into the run's report.
"""
from __future__ import annotations

import pytest

from pytest_gpuchar.results import plots
from pytest_gpuchar.topics.numerics import rows, run

pytestmark = pytest.mark.topic("numerics")
ROWS = [pytest.param(r, id=r.id) for r in rows.FIG_20]


@pytest.mark.hardware
@pytest.mark.parametrize("row", ROWS)
def test_fig20_chain(arch, row, gpu, gpuchar, hardware_row):
    hardware_row(run.chain(gpuchar, row, arch))


@pytest.mark.hardware
def test_fig20_plot(arch, gpu, gpuchar, gpuchar_artifact, tmp_path):
    """Fig 20 as a plot and a JSON curve in the run's report."""
    png = run.chain_figure(gpuchar, arch, gpuchar_artifact, tmp_path)
    assert plots.written(png).stat().st_size > 1000
