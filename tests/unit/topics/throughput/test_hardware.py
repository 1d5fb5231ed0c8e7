"""The throughput and launch tables' hardware path on a fake GPU (NumPy in place of CuPy, the
real launch stage and Gpu): the whole-GPU rows launched repeat by repeat over the trip counts,
each launch waited for and event-timed; bar.sync and the launch stamps; the rates fitted."""
from __future__ import annotations

import types

import numpy as np
import pytest

from pytest_gpuchar.core.build import Built
from pytest_gpuchar.core.gpu import Gpu
from pytest_gpuchar.core.loop import LoopVerdict
from pytest_gpuchar.core.runner import Runner
from pytest_gpuchar.session import RunCache
from pytest_gpuchar.topics.throughput import kernels, rows, run
from pytest_gpuchar.topics.throughput.kernels import BLOCK, BLOCKS_PER_SM

ARCH = "sm_90"
SMS = 4


class Rows:
    """The rate kernel: every SM's warps are busy trips x results / rate cycles."""

    def __init__(self, probe, rate, log):
        self.probe, self.rate, self.log = probe, rate, log

    def __call__(self, grid, block, args, shared_mem=0):
        rec, _res, _in, trips = args
        assert grid == (SMS * BLOCKS_PER_SM,) and block == (BLOCK,) and shared_mem > 0
        wps = BLOCKS_PER_SM * BLOCK // 32
        busy = wps * 32 * int(trips) * self.probe.results_per_iter() / self.rate
        for w in range(rec.shape[0]):
            rec[w] = (100 + w % 5, 100 + busy + 40, w // wps)
        self.log.append(("rows", int(trips)))


class Bar:
    def __init__(self, log):
        self.log = log

    def __call__(self, grid, block, args, shared_mem=0):
        rec, _res, _in, trips = args
        wpb = block[0] // 32
        for b in range(grid[0]):
            rec[b * wpb:(b + 1) * wpb] = [(10 + w, 10 + 20 * int(trips) * kernels.BAR_UNROLL
                                           + 50, b) for w in range(wpb)]
        self.log.append(("bar", int(trips)))


def _session(make):
    dev = types.SimpleNamespace(arch=ARCH, driver="580", index=0, sm_count=SMS,
                                shared_per_sm=228 * 1024)
    gpu = Gpu(dev, None, 5.0)
    log: list = []
    verdict = LoopVerdict(True, {"FFMA": 1.0}, message="loop",
                          loop_control={"UIADD3": 1, "ISETP.NE.AND": 1, "BRA": 1})
    builds = types.SimpleNamespace(
        jit_groups=lambda d, g: {},
        jit=lambda probe, d: Built(probe, {}, compiled=types.SimpleNamespace(
            function=lambda entry: make(probe, log))))
    return types.SimpleNamespace(gpu=gpu, runner=Runner(gpu), builds=builds, runs=RunCache(),
                                 repeats=5, log=log, verify=lambda p, f: verdict)


def test_a_rate_row_interleaves_its_trip_counts_and_times_each_launch(fake_cupy, monkeypatch):
    monkeypatch.setattr(kernels.ThroughputProbe, "snapshot_text", lambda self, f: "sass")
    s = _session(lambda p, log: Rows(p, 64.0, log))
    m = run.fma(s, rows.ROWS["ffma"], ARCH)
    f = m.figures[0]
    assert f.key == "throughput.fma.ffma" and f.value == pytest.approx(64.0, rel=1e-6)
    reps = run.repeats(s)
    assert s.log == [("rows", t) for _ in range(reps + 1) for t in run.TRIPS]
    assert set(f.data["wall_ms"]) == set(run.TRIPS) and all(
        v > 0 for v in f.data["wall_ms"].values())
    assert f.data["warps_per_sm"] == [BLOCKS_PER_SM * BLOCK // 32] and m.sass == "sass"


def test_bar_sync_from_the_block_spans(fake_cupy, monkeypatch):
    monkeypatch.setattr(kernels.ThroughputProbe, "snapshot_text", lambda self, f: "sass")
    s = _session(lambda p, log: Bar(log))
    m = run.bar_sync(s, 256, ARCH)
    f = m.figures[0]
    assert f.key == "throughput.bar_sync.nt256" and f.value == pytest.approx(20.0)
    assert s.log[:3] == [("bar", t) for t in run.BAR_TRIPS]     # repeat by repeat
    assert len(s.log) == (run.repeats(s) + 1) * len(run.BAR_TRIPS)
    assert np.isfinite(f.spread)
