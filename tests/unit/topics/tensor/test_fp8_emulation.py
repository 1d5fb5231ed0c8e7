"""The FP8 mma.sync emulation probes (sm_90): PTX, the sequence verification on synthetic
SASS, the point fits and the figures on a fake GPU."""
from __future__ import annotations

import types

import numpy as np
import pytest

from pytest_gpuchar.core import sass
from pytest_gpuchar.core.build import Built
from pytest_gpuchar.core.gpu import Gpu
from pytest_gpuchar.core.probe import NotApplicable
from pytest_gpuchar.core.verify import ProbeInvalid
from pytest_gpuchar.session import RunCache
from pytest_gpuchar.topics.tensor import fp8_emulation as fe
from pytest_gpuchar.topics.tensor import fp8_emulation_run as run
from pytest_gpuchar.topics.tensor import wgmma_depth_analysis as wa
from pytest_gpuchar.topics.tensor import wgmma_depth_rows


def test_probe_ptx():
    r = fe.ROWS[0]
    p = fe.probe(r, 2)
    assert p.arch == "sm_90" and p.isa == "8.4" and p.unit is None
    assert p.ops == {4: 8, 8: 16, 12: 24} and p.signature == fe.SIGNATURE
    n12 = p.kernels.split(".entry ")[3]
    assert n12.count("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32") == 24
    assert "bar.sync 0;" in n12 and len(p.inputs[12]) == 2 * 4 + 24 * 6
    assert fe.module_text([p]).startswith(".version 8.4\n.target sm_90\n")
    with pytest.raises(NotApplicable, match="^static: .*sm_89"):
        run.static_probe(r, "sm_89")
    assert run.groups("sm_86") == [] and len(run.groups("sm_90")[0].probes) == 4


def _region(n: int, extra=()) -> sass.Function:
    seq = ["F2FP.F16.E4M3.UNPACK_B R1, R2"] * 12 + ["HMMA.16816.F32 R8, R8, R12, RZ"] * 2 + \
          ["FADD R3, R3, R8"] * 4
    lines = ["CS2R R6, SR_CLOCKLO", "ISETP.NE.U32.AND P0, PT, R6, -0x1, PT",
             "@!P0 BRA `(.L_x_0)", *(seq * n), "@!UPT UIADD3 URZ, URZ, URZ, URZ", *extra,
             "CS2R R20, SR_CLOCKLO"]
    return sass.Function("f", [sass.parse_instr(16 * k, x) for k, x in enumerate(lines)])


def test_sequence_verification():
    p = fe.probe(fe.ROWS[0], 1)
    funcs = {e: _region(n) for n, e in p.entries.items()}
    v = p.check(funcs)
    assert v.unit == {"F2FP.F16.E4M3.UNPACK_B": 12, "FADD": 4, "HMMA.16816.F32": 2}
    bad = {e: _region(n, ("FFMA R1, R2, R3, R4",) * (n // 4)) for n, e in p.entries.items()}
    with pytest.raises(ProbeInvalid):
        p.check(bad)


def _recs(per_step, warps, skew=11.0, reps=5):
    return {n: [(np.arange(warps) * skew, np.arange(warps) * skew + 300 + n * per_step
                 + (r % 2) * 0.1) for r in range(reps)] for n in fe.LENGTHS}


def test_point():
    pt = fe.point(_recs(40.0, 4, skew=1.0), 4, 2)
    assert pt.chain_cycles == pytest.approx(40.0) and not pt.unstable
    assert pt.throughput == pytest.approx(fe.FLOP * 2 * 4 / 40.0, rel=1e-3)
    # warps 11 cycles apart: 33 of a 780-cycle span (4%) may bias the block span's slope;
    # each warp's own chain cycles are still trusted
    skewed = fe.point(_recs(40.0, 4), 4, 2)
    assert skewed.unstable and "start skew" in skewed.why and skewed.chain_why == ""
    assert skewed.chain_cycles == pytest.approx(40.0)


class _Kernel:
    max_threads_per_block = 256

    def __init__(self, entry):
        self.n = int(entry.rsplit("_n", 1)[1])
        self.ilp = int(entry.split("_ilp")[1].split("_")[0])

    def __call__(self, grid, block, args, shared_mem=0):
        out, d_in = args
        warps = block[0] // 32
        step = max(6.0 * self.ilp, 16.0 * self.ilp * warps / 4)   # issue-bound past 4 warps
        for t in range(block[0]):
            out[t] = (0, 200 + self.n * step, 0)


def test_figures_on_a_fake_gpu(fake_cupy, monkeypatch):
    monkeypatch.setattr(fe.EmulationProbe, "snapshot_text", lambda self, f: f"sass {self.name}")
    native = wa.Point(wgmma_depth_rows.LATENCY, 1, 128.0, 128.0, 8192.0, 0.0, False)
    monkeypatch.setattr(run.wgmma_depth_run, "row_run",
                        lambda s, r, a: types.SimpleNamespace(points=[native]))

    class Builds:
        def jit_groups(self, dev, groups):
            return {}

        def jit(self, p, dev):
            return Built(p, {}, compiled=types.SimpleNamespace(function=_Kernel))
    dev = types.SimpleNamespace(arch="sm_90", driver="580", index=0)
    verdict = types.SimpleNamespace(unit={"F2FP.F16.E4M3.UNPACK_B": 12.0, "FADD": 4.0,
                                          "HMMA.16816.F32": 2.0})
    s = types.SimpleNamespace(builds=Builds(), gpu=Gpu(dev, None, 5.0), runs=RunCache(),
                              verify=lambda p, f: verdict)
    m = run.figures(s, fe.ROWS[0], "sm_90")
    got = {f.key.rsplit(".", 1)[1]: f.value for f in m.figures}
    assert got["accumulate_chain_cycles"] == pytest.approx(6.0)
    best = max(fe.FLOP * i * w / max(6.0 * i, 16.0 * i * w / 4) for i in fe.ILPS for w in fe.WARPS)
    assert got["throughput"] == pytest.approx(best, rel=1e-3)
    assert got["vs_native_peak"] == pytest.approx(best / 8192, rel=1e-3)
    assert got["vs_native_wgmma"] == pytest.approx(best / 8192, rel=1e-3)
    assert m.sass == "sass fp8_emulated/e4m3.f32.m16n8k32/ilp1"
    assert "12 x F2FP.F16.E4M3.UNPACK_B" in m.figures[0].method
