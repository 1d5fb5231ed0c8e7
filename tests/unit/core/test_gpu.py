"""core.gpu without a GPU: the watchdog names the hung probe, the GPU is then wedged and
nothing more is launched."""
from __future__ import annotations

import pytest

from pytest_gpuchar.core import gpu as g


class _NeverDone:
    done = False


def test_watchdog_names_the_probe_and_marks_the_gpu_wedged():
    gpu = g.Gpu(dev=None, jit=g.JitCache(), watchdog_s=0.01)
    with pytest.raises(g.ProbeHang, match="probe latency/x.u32 did not finish within"):
        gpu.poll(_NeverDone(), "latency/x.u32")
    assert gpu.wedged == "latency/x.u32"
    with pytest.raises(g.GPUWedged, match="latency/x.u32"):
        gpu.launch(lambda *a, **k: None, (1,), (1,), (), name="cpi/y.u32")


def test_each_session_has_its_own_wedged_state():
    a, b = g.Gpu(None, g.JitCache()), g.Gpu(None, g.JitCache())
    a.wedged = "x"
    assert b.wedged is None
