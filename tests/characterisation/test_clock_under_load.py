"""The SM clock under sustained load (Hopper): %clock64 against %globaltimer while the whole
GPU runs wgmma, FFMA or HBM streaming for about a second and a half each, against an idle
GPU (one sleeping warp), in that order; per compute load the work per clock per SM against the
per-clock peak and the achieved TFLOP/s in wall time against that peak at the device's maximum
clock, with the decomposition of the gap (per-clock efficiency x clock ratio x busy share).
Every load is a counted loop whose SASS is verified (topics/tensor/clock_load/)."""
from __future__ import annotations

import pytest

from pytest_gpuchar.topics.tensor.clock_load import kernels as clock_load
from pytest_gpuchar.topics.tensor.clock_load import run as clock_load_run

pytestmark = pytest.mark.topic("tensor")
LOADS = [pytest.param(load, id=str(load)) for load in clock_load.Load]


@pytest.mark.static
@pytest.mark.parametrize("load", LOADS)
def test_clock_load_kernel_sass(arch, load, offline_tools, static_check):
    """Each load's loop assembles for sm_90a and holds exactly its work per trip."""
    static_check(clock_load_run.static_probe(load, arch))


@pytest.mark.hardware
@pytest.mark.parametrize("load", LOADS)
def test_clock_under_load(arch, load, gpu, gpuchar, hardware_row):
    """Sustained SM clock (and against idle); for FFMA and wgmma the per-clock rate against
    the per-clock peak and the wall-time rate against the peak at the maximum clock."""
    hardware_row(clock_load_run.load_figures(gpuchar, load, arch))


@pytest.mark.hardware
def test_clock_under_load_trace(arch, gpu, gpuchar, hardware_row, gpuchar_artifact):
    """The SM clock of every window of every load, plotted (report artifact)."""
    hardware_row(clock_load_run.trace(gpuchar, arch, gpuchar_artifact))
