"""The instruction tables' hardware path on a fake GPU (NumPy in place of CuPy, the real
launch stage and Gpu): every chain length launched 1 + repeats times in one batch with its
operands, thread 0's cycles read per timed launch, fitted; Table II's pair, the clock-read
pair and Table I's single regions as figures."""
from __future__ import annotations

import types

import numpy as np
import pytest

from pytest_gpuchar.core import sass
from pytest_gpuchar.core.build import Built
from pytest_gpuchar.core.gpu import PASSES, Gpu
from pytest_gpuchar.core.runner import Runner
from pytest_gpuchar.core.verify import Verdict
from pytest_gpuchar.session import RunCache
from pytest_gpuchar.topics.instructions import kernels, rows, run

ARCH = "sm_90"


class Kernel:
    """Thread 0 reads 20 + per_op x ops cycles (+1 every other launch)."""

    def __init__(self, ops: int, per_op: float, log: list):
        self.ops, self.per_op, self.log, self.calls = ops, per_op, log, 0

    def __call__(self, grid, block, args, shared_mem=0):
        out, d_in, passes = args
        assert grid == (1,) and block == (1,) and int(passes) == PASSES
        assert out.dtype == np.int64 and d_in.dtype == np.uint8 and len(d_in) > 0
        self.calls += 1
        out[0] = int(20 + self.per_op * self.ops) + self.calls % 2
        self.log.append(self.ops)


class Compiled:
    def __init__(self, probe, per_op, log):
        self.probe, self.per_op, self.log = probe, per_op, log

    def function(self, entry):
        n = next(k for k, e in self.probe.entries.items() if e == entry)
        return Kernel(self.probe.ops[n], self.per_op, self.log)


def session(per_op):
    """per_op(probe) -> cycles per op of its kernels."""
    dev = types.SimpleNamespace(arch=ARCH, driver="580", index=0)
    gpu = Gpu(dev, None, 5.0)
    log: list = []
    builds = types.SimpleNamespace(
        jit=lambda probe, d: Built(probe, {e: sass.Function(e, []) for e in probe.entries.values()},
                                   compiled=Compiled(probe, per_op(probe), log)))
    return types.SimpleNamespace(gpu=gpu, runner=Runner(gpu), builds=builds, runs=RunCache(),
                                 repeats=5, log=log,
                                 verify=lambda p, f, tag="": Verdict(True, {"IADD3": 1.0}))


def test_dependency_pair_is_fitted_from_one_batch_per_probe(fake_cupy):
    row = rows.row("add.u32")
    s = session(lambda p: 4.0 if p.name.startswith("latency") else 0.5)
    m = run.dependency(s, row, ARCH)
    lat, cpi = m.figures
    assert (lat.key, cpi.key) == ("latency.add.u32", "cpi.add.u32") and not m.checks
    assert lat.value == pytest.approx(4.0, abs=0.05) and cpi.value == pytest.approx(0.5, abs=0.1)
    dep = kernels.latency_probe(row, ARCH)
    first = [dep.ops[n] for n in dep.entries]
    assert s.log[:6 * len(first)] == [n for n in first for _ in range(6)]   # length by length
    assert len(lat.data["slopes"]) == 5
    launched = s.runner.launch_count
    assert launched == len(s.log) == 6 * (len(first) + len(kernels.cpi_probe(row, ARCH).entries))
    run.dependency(s, row, ARCH)
    assert s.runner.launch_count == launched                 # measured once per session


def test_a_cheaper_dependent_chain_is_the_rows_check(fake_cupy):
    s = session(lambda p: 1.0 if p.name.startswith("latency") else 3.0)
    assert "not being honoured" in run.dependency(s, rows.row("add.u32"), ARCH).checks[0]


def test_clock_pair_and_table_i(fake_cupy):
    s = session(lambda p: 2.0)
    m = run.clock_overhead(s, ARCH, clock64=False)
    assert [f.key for f in m.figures] == ["overhead.clock_read_32bit", "cpi.mov.u32.clock"]
    assert len(m.figures[0].data["samples"]) == 5
    t = run.table_i(s, ARCH, 2)
    assert t.figures[0].key == "table_i.cpi.n2" and t.figures[0].value == pytest.approx(12.0,
                                                                                       abs=0.5)
