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


class _Faulted:
    """A stand-in event whose stream hit an illegal address."""
    ptr = None
    done = False


def test_a_fault_is_reported_at_once_not_as_a_hang(monkeypatch):
    monkeypatch.setattr(g, "event_status", lambda event: 700)
    gpu = g.Gpu(dev=None, jit=g.JitCache(), watchdog_s=30.0)
    with pytest.raises(g.ProbeFault, match=r"probe movement/x faulted: CUDA error 700"):
        gpu.poll(_Faulted(), "movement/x")
    assert gpu.wedged == "movement/x"


def test_event_status_of_a_stand_in():
    assert g.event_status(_NeverDone()) == g.NOT_READY
    assert g.event_status(type("Done", (), {"done": True})()) == 0


def test_the_poll_sleeps_short_first_then_doubling_to_the_longest(monkeypatch):
    left, slept = [9], []

    def status(event):
        left[0] -= 1
        return 0 if left[0] <= 0 else g.NOT_READY
    monkeypatch.setattr(g, "event_status", status)
    monkeypatch.setattr(g.time, "sleep", slept.append)
    g.Gpu(dev=None, jit=g.JitCache()).poll(_NeverDone(), "x")
    assert slept[0] == g.POLL_FIRST_S and max(slept) == g.POLL_MAX_S and len(slept) == 8
    assert all(b == min(2 * a, g.POLL_MAX_S) for a, b in zip(slept, slept[1:]))


class _DoneAfter:
    """A stand-in event whose work ends `s` seconds after it is made."""
    def __init__(self, s: float):
        import time
        self.end = time.monotonic() + s

    @property
    def done(self):
        import time
        return time.monotonic() >= self.end


def test_the_first_long_wait_starts_the_host_work_that_waited_for_it():
    """on_long_wait (the session's offline queueing) is called once, at the first wait that
    lasts LONG_WAIT_S, not at the short waits before it nor at any wait after it."""
    called = []
    gpu = g.Gpu(dev=None, jit=g.JitCache(), on_long_wait=lambda: called.append(1))
    gpu.poll(_DoneAfter(0.0), "short")
    gpu.poll(_DoneAfter(g.LONG_WAIT_S / 5), "short")
    assert called == [] and gpu.on_long_wait is not None
    gpu.poll(_DoneAfter(2 * g.LONG_WAIT_S), "long")
    gpu.poll(_DoneAfter(2 * g.LONG_WAIT_S), "long again")
    assert called == [1] and gpu.on_long_wait is None
