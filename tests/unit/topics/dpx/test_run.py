"""The DPX run functions on a fake GPU (numpy in place of CuPy): the launches, the latency fit
and its result check, the throughput fit, once per session."""
from __future__ import annotations

import types

import numpy as np
import pytest

from pytest_gpuchar.core.build import Built
from pytest_gpuchar.core.gpu import Gpu
from pytest_gpuchar.core.loop import LoopVerdict
from pytest_gpuchar.core.runner import Runner
from pytest_gpuchar.core.verify import Verdict
from pytest_gpuchar.session import RunCache
from pytest_gpuchar.topics.dpx import analysis, kernels, rows, run


class _Chain:
    """A chain kernel: 30 + 6 cycles per call, results from the CPU reference (or wrong)."""

    def __init__(self, row, arch, n, wrong=False):
        self.row, self.arch, self.n, self.wrong = row, arch, n, wrong
        self.calls = 0

    def __call__(self, grid, block, args, shared_mem=0):
        out, d_in, passes = args
        assert grid == (1,) and block == (1,) and passes == 2
        self.calls += 1
        out[0] = 30 + 6 * self.n + (self.calls % 2)
        res = analysis.replay(self.row, kernels.chain_layout(self.row, self.n), np.asarray(d_in))
        for i, (k, f) in enumerate(kernels.stored(self.row, self.arch, self.n)):
            out[1 + i] = res[k][f] ^ (1 if self.wrong and i == 0 else 0)


class _Loop:
    """The throughput kernel: every SM's 32 warps take iters x calls / rate cycles."""

    def __init__(self, rate):
        self.rate = rate

    def __call__(self, grid, block, args, shared_mem=0):
        rec, res, d_in, iters = args
        assert block == (kernels.BLOCK,) and shared_mem > 0
        warps_per_sm = kernels.BLOCKS_PER_SM * kernels.BLOCK // 32
        calls = warps_per_sm * 32 * kernels.CHAINS * kernels.UNROLL
        for w in range(rec.shape[0]):
            start = 500 + w % 7
            rec[w] = (start, 600 + int(iters) * calls / self.rate, w // warps_per_sm)


class _Compiled:
    def __init__(self, make):
        self.make = make

    def function(self, entry):
        return self.make(entry)


class _Builds:
    def __init__(self, make):
        self.make = make
        self.jits = 0

    def jit(self, probe, dev):
        self.jits += 1
        return Built(probe, {}, compiled=_Compiled(lambda entry: self.make(probe, entry)))


def _session(monkeypatch, make, verdict):
    monkeypatch.setattr(kernels.DpxProbe, "snapshot_text", lambda self, f: f"sass {self.name}")
    monkeypatch.setattr(kernels.LoopProbe, "snapshot_text", lambda self, f: f"sass {self.name}")
    dev = types.SimpleNamespace(arch="sm_90", driver="580", index=0, sm_count=4,
                                shared_per_sm=228 * 1024)
    gpu = Gpu(dev, None, 5.0)
    return types.SimpleNamespace(builds=_Builds(make), gpu=gpu, runner=Runner(gpu),
                                 runs=RunCache(), repeats=5, verify=lambda p, f: verdict)


def test_latency_on_a_fake_gpu(fake_cupy, monkeypatch):
    row = rows.row("viaddmax_s16x2")
    s = _session(monkeypatch, lambda p, e: _Chain(row, "sm_90", int(e.rsplit("_n", 1)[1])),
                 Verdict(True, {"VIADDMNMX.S16x2": 1.0}, message="exact"))
    m = run.latency(s, row, "sm_90")
    f, = m.figures
    assert f.key == "dpx.latency.viaddmax_s16x2" and f.unit == "cycles/op"
    assert f.value == pytest.approx(6.0) and not f.unstable and not m.checks
    assert m.sass == "sass dpx/latency/viaddmax_s16x2" and "__viaddmax_s16x2" in f.method
    assert f.data["sass_unit"] == {"VIADDMNMX.S16x2": 1.0} and f.data["tolerance"] == {"abs": 0.5}
    assert sorted(f.data["cycles"]) == list(kernels.LENGTHS)
    assert all(len(v) == 5 for v in f.data["cycles"].values())
    run.latency(s, row, "sm_90")
    assert s.builds.jits == 1                       # measured once per session


def test_latency_results_are_checked(fake_cupy, monkeypatch):
    row = rows.row("vibmin_s16x2")
    s = _session(monkeypatch,
                 lambda p, e: _Chain(row, "sm_90", int(e.rsplit("_n", 1)[1]), wrong=True),
                 Verdict(True, {"VIMNMX.S16x2": 1.0, "SEL": 2.0}, message="sequence"))
    m = run.latency(s, row, "sm_90")
    assert len(m.checks) == len(kernels.LENGTHS)
    assert "differ from the CPU reference" in m.checks[0] and "op 0 e" in m.checks[0]


def test_throughput_on_a_fake_gpu(fake_cupy, monkeypatch):
    row = rows.row("vimax3_s32")
    s = _session(monkeypatch, lambda p, e: _Loop(32.0),
                 LoopVerdict(True, {"VIMNMX3": 1.0}, message="loop",
                             loop_control={"UIADD3": 1, "ISETP.LE.U32.AND": 1, "BRA": 1}))
    m = run.throughput(s, row, "sm_90")
    f, = m.figures
    assert f.key == "dpx.throughput.vimax3_s32" and f.unit == "ops/clk/SM"
    assert f.value == pytest.approx(32.0, rel=1e-6) and not f.unstable
    assert f.data["loop_control"]["BRA"] == 1 and f.data["lanes_per_call"] == 1
    assert f.data["warps_per_sm"] == [32] and m.sass == "sass dpx/throughput/vimax3_s32"
    assert "4 per SM" in f.method and "[64, 128, 192]" in f.method


def test_throughput_not_applicable_rows(fake_cupy, monkeypatch):
    s = _session(monkeypatch, lambda p, e: None, None)
    from pytest_gpuchar.core.probe import NotApplicable
    with pytest.raises(NotApplicable, match="predicate"):
        run.throughput(s, rows.row("vibmax_s32"), "sm_90")
