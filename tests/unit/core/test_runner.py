"""core.runner without a GPU: the real Runner and Gpu over NumPy in place of CuPy and kernels
that write their records on the host. What a plan launches, in which order, what is
allocated when, what comes back per length and launch, the waits, the refusals, the
GPU-busy time."""
from __future__ import annotations

import types

import numpy as np
import pytest

from pytest_gpuchar.core import gpu as g
from pytest_gpuchar.core import timing
from pytest_gpuchar.core.runner import (WHOLE_GPU, Bounds, Launch, Order, Plan, Records, Refused,
                                        Runner)


class Kernel:
    """Writes (length, repeat argument) into its record; logs every launch."""

    def __init__(self, length, log, refuse_threads=None):
        self.length, self.log, self.refuse = length, log, refuse_threads

    def __call__(self, grid, block, args, shared_mem=0):
        if self.refuse is not None and block[0] >= self.refuse:
            raise FakeCupyError("CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES")
        rec, r = args[0], int(args[1])
        self.log.append(("launch", self.length, r, grid, block, shared_mem))
        if rec is not None:
            rec[...] = (self.length, r)


class FakeCupyError(Exception):
    pass


@pytest.fixture
def cp(fake_cupy, monkeypatch):
    fake_cupy.cuda.driver.CUDADriverError = FakeCupyError
    log = []
    zeros = fake_cupy.zeros

    def logged(shape, dtype):
        log.append(("alloc", tuple(np.atleast_1d(shape))))
        return zeros(shape, dtype)
    fake_cupy.zeros = logged
    fake_cupy.log = log
    return fake_cupy


def _runner(watchdog_s: float = 5.0) -> Runner:
    return Runner(g.Gpu(dev=None, jit=g.JitCache(), watchdog_s=watchdog_s))


def _plan(cp, lengths=(4, 8), *, repeats=2, args=None, **kw) -> Plan:
    fns = {n: Kernel(n, cp.log, kw.pop("refuse", None)) for n in lengths}

    def factory(n):
        cp.log.append(("args", n))
        return args(n) if args else (lambda r, rec: (rec, np.uint32(r)))
    return Plan("p", fns, Launch((1,), (32,)), factory, repeats, record=(2,), **kw)


def _launches(log):
    return [(e[1], e[2]) for e in log if e[0] == "launch"]


def test_length_order_allocates_each_length_before_its_launches(cp):
    out = _runner().measure(_plan(cp))
    assert cp.log[:3] == [("args", 4), ("alloc", (3, 2)), ("launch", 4, 0, (1,), (32,), 0)]
    assert _launches(cp.log) == [(4, 0), (4, 1), (4, 2), (8, 0), (8, 1), (8, 2)]
    assert [e for e in cp.log if e[0] != "launch"] == [("args", 4), ("alloc", (3, 2)),
                                                      ("args", 8), ("alloc", (3, 2))]
    assert out.raw[8].tolist() == [[8, 0], [8, 1], [8, 2]]
    assert out.timed(8).tolist() == [[8, 1], [8, 2]] and out.launches == 6


def test_repeat_order_interleaves_the_lengths_after_allocating_all(cp):
    out = _runner().measure(_plan(cp, order=Order.REPEAT))
    assert [e[0] for e in cp.log[:4]] == ["args", "args", "alloc", "alloc"]
    assert _launches(cp.log) == [(4, 0), (8, 0), (4, 1), (8, 1), (4, 2), (8, 2)]
    assert out.timed(4).tolist() == [[4, 1], [4, 2]]


def test_upfront_allocation_in_length_order(cp):
    _runner().measure(_plan(cp, upfront=True))
    assert [e[0] for e in cp.log[:4]] == ["args", "args", "alloc", "alloc"]
    assert _launches(cp.log)[:3] == [(4, 0), (4, 1), (4, 2)]


def test_split_records_and_no_warm_up(cp):
    out = _runner().measure(_plan(cp, lengths=(1,), repeats=3, split=True, warmup=False))
    assert [e for e in cp.log if e[0] == "alloc"] == [("alloc", (2,))] * 3
    assert isinstance(out.raw[1], list) and [r.tolist() for r in out.timed(1)] == \
        [[1, 0], [1, 1], [1, 2]]


def test_keep_copies_back_only_its_view_of_the_records(cp):
    """What a plan keeps of its records (here each launch's second word) is all that comes
    back, per launch, for an array of launches and for split buffers."""
    out = _runner().measure(_plan(cp, lengths=(4,), repeats=2, keep=lambda b: b[:, 1:]))
    assert out.timed(4).tolist() == [[1], [2]] and out.raw[4].shape == (3, 1)
    out = _runner().measure(_plan(cp, lengths=(4,), repeats=2, split=True,
                                  keep=lambda b: b[1:]))
    assert [r.tolist() for r in out.timed(4)] == [[1], [2]]


def test_before_runs_ahead_of_each_launch(cp):
    seen = []
    _runner().measure(_plan(cp, order=Order.REPEAT, before=lambda n, r: seen.append((n, r))))
    assert seen == _launches(cp.log)


def test_sync_each_waits_for_every_launch_and_more_extends_to_capacity(cp, monkeypatch):
    polled = []
    runner = _runner()
    real = runner.gpu.poll
    monkeypatch.setattr(runner.gpu, "poll", lambda ev, name, t=None: (polled.append(name),
                                                                       real(ev, name, t)))
    asked = []

    def more(r, ms, reps):
        asked.append((r, reps))
        return 5 if r == 1 else reps
    out = runner.measure(_plan(cp, lengths=(1,), repeats=2, sync_each=True, more=more,
                               capacity=4))
    assert [e for e in cp.log if e[0] == "alloc"] == [("alloc", (5, 2))]
    assert len(_launches(cp.log)) == 5          # 1 + 2, raised to 1 + 4 (the capacity)
    assert asked[:2] == [(0, 2), (1, 2)] and asked[-1] == (4, 4)
    assert len(out.raw[1]) == 5 and polled.count("p") == 5 + 1    # each launch + the batch
    assert len(out.timed_ms(1)) == 4 and all(ms > 0 for ms in out.launch_ms[1])


def test_busy_time_is_the_events_sum_charged_to_the_test(cp):
    timing.reset()
    timing.set_test("t::x")
    runner = _runner()
    out = runner.measure(_plan(cp))
    timing.set_test("")
    assert out.busy_ms == pytest.approx(6 * 1e-3)          # 6 launches, 1 us each (fake)
    assert runner.busy_ms == pytest.approx(out.busy_ms) and runner.launch_count == 6
    assert timing.busy()["t::x"] == pytest.approx(out.busy_ms / 1000)
    timing.reset()


def test_plans_of_one_batch_share_one_wait_and_refusals_skip_a_plan(cp, monkeypatch):
    runner = _runner()
    waits = []
    monkeypatch.setattr(runner.gpu, "wait", lambda name, t=None: waits.append((name, t)))
    ok = _plan(cp, lengths=(4,))
    bad = _plan(cp, lengths=(8,), refuse=32)
    late = _plan(cp, lengths=(2,), timeout_s=30.0)
    res = runner.run([ok, bad, late], name="sweep", skip_refused=True)
    assert isinstance(res[0], Records) and isinstance(res[2], Records)
    assert isinstance(res[1], Refused) and "OUT_OF_RESOURCES" in res[1].why
    assert waits == [("sweep", 30.0)]
    with pytest.raises(g.LaunchRefused):
        runner.run([bad])


def test_a_wedged_gpu_launches_nothing(cp):
    runner = _runner()
    runner.gpu.wedged = "earlier/probe"
    with pytest.raises(g.GPUWedged, match="earlier/probe"):
        runner.measure(_plan(cp))
    assert _launches(cp.log) == []


def test_a_hang_is_caught_by_the_watchdog(cp, monkeypatch):
    runner = _runner(watchdog_s=0.01)
    monkeypatch.setattr(g, "event_status", lambda ev: g.NOT_READY)
    with pytest.raises(g.ProbeHang, match="probe p did not finish"):
        runner.measure(_plan(cp, sync_each=True))
    assert runner.gpu.wedged == "p"


def test_cluster_and_driver_launches_go_to_the_launcher(cp):
    calls = []
    launcher = types.SimpleNamespace(launch=lambda fn, grid, block, args, **kw: calls.append(
        (grid, block, kw)))
    runner = Runner(g.Gpu(None, g.JitCache()), launcher)
    plan = Plan("c", {1: Kernel(1, cp.log)}, Launch((4,), (1,), cluster=2, smem=1024),
                lambda n: (lambda r, rec: (rec, np.uint32(r))), 1, record=(2,))
    runner.measure(plan)
    assert calls == [((4,), (1,), {"name": "c", "cluster": 2, "shared_mem": 1024})] * 2
    runner.once("d", Kernel(1, cp.log), Launch(driver=True, smem=64), (None, np.uint32(0)))
    assert calls[-1] == ((1,), (1,), {"name": "d", "cluster": None, "shared_mem": 64})
    assert Launch().through_driver is False


def test_schedule_and_geometry_per_length(cp):
    plan = _plan(cp, order=Order.REPEAT)
    assert plan.schedule() == [(4, 0), (8, 0), (4, 1), (8, 1), (4, 2), (8, 2)]
    plan.launch = lambda n: Launch((n,), (32,))
    _runner().measure(plan)
    assert {e[3] for e in cp.log if e[0] == "launch"} == {(4,), (8,)}


def test_named_buffers_are_made_once(cp):
    runner = _runner()
    a = runner.buffer("x", 100)
    assert runner.buffer("x", 64) is a and a.nbytes == 104
    assert runner.buffer("x", 200) is not a


@pytest.mark.parametrize("asked", [0, 1, 3, 5, 7, 15, 30, 80])
def test_bounds_are_the_clamps_the_topics_wrote(asked):
    """The one repeats policy gives what each topic's own clamp gave: 3 to 5 for whole-GPU
    launches, at least N for a scattered level, at most as many as a buffer holds, and a
    wanted number no further than the room, never below what was asked."""
    assert WHOLE_GPU.of(asked) == max(3, min(asked, 5))
    assert Bounds(60).of(asked) == max(asked, 60)
    assert Bounds(1, most=4).of(asked) == max(1, min(asked, 4))
    for room in (2, 20, 100):
        assert Bounds(60, room=room).of(asked) == max(asked, min(60, room))
    assert Bounds(0).of(asked) == asked
