"""The FP8 mma.sync emulation probes (sm_90): PTX, the sequence verification on synthetic
SASS, the point fits and the figures on a fake GPU."""
from __future__ import annotations

import types

import numpy as np
import pytest

from pytest_gpuchar.core import sass
from pytest_gpuchar.core.build import Built
from pytest_gpuchar.core.gpu import Gpu
from pytest_gpuchar.core.runner import Runner
from pytest_gpuchar.core.probe import NotApplicable
from pytest_gpuchar.core.verify import ProbeInvalid
from pytest_gpuchar.session import RunCache
from pytest_gpuchar.topics.tensor.fp8_emulation import kernels as fe
from pytest_gpuchar.topics.tensor.fp8_emulation import run
from pytest_gpuchar.topics.tensor.wgmma import analysis as wa
from pytest_gpuchar.topics.tensor.wgmma import rows as wgmma_depth_rows


def test_probe_ptx():
    r = fe.ROWS[0]
    p = fe.probe(r, 2)
    assert p.arch == "sm_90" and p.isa == "8.4" and p.steps == fe.STEPS
    assert p.unit == ("HMMA.16816.F32", "F2FP.F16.E4M3.UNPACK_B", "FADD", "LDS.128", "LDS.64")
    assert p.ops == {fe.STEPS: 2 * fe.STEPS} and list(p.entries) == [fe.STEPS]
    ops = 2 * fe.STEPS
    assert p.kernels.count("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32") == ops
    # every op loads its own fragments (volatile: never shared, never hoisted), in the loop
    loop = p.kernels.split("$TC_LOOP:")[1].split("@%again bra $TC_LOOP;")[0]
    assert loop.count("ld.volatile.shared.v4.b32") == ops == loop.count("ld.volatile.shared.v2")
    assert len(p.inputs[fe.STEPS]) == 2 * 4          # the accumulators only
    assert p.smem_words * 4 == (fe.A_BYTES + fe.B_BYTES) * 1024 == 24 * fe.MAX_THREADS
    words = p.fill(np.random.default_rng(0))
    assert words.dtype == np.uint32 and words.size == p.smem_words and words.all()
    assert fe.module_text([p]).startswith(".version 8.4\n.target sm_90\n")
    with pytest.raises(NotApplicable, match="^static: .*sm_89"):
        run.static_probe(r, "sm_89")
    assert run.groups("sm_86") == [] and len(run.groups("sm_90")[0].probes) == 4
    assert fe.probe(fe.ROWS[1], 1).unit[1] == "F2FP.F16.E5M2.UNPACK_B"


def _op(acc: int) -> list[str]:
    return (["LDS.128 R40, [R2]", "LDS.64 R44, [R3]"]
            + ["F2FP.F16.E4M3.UNPACK_B R50, R40"] * 12
            + ["HMMA.16816.F32 R60, R50, R54, RZ"] * 2
            + [f"FADD R{acc + k}, R{acc + k}, R{60 + k}" for k in range(4)])


def _function(body: list[str]) -> sass.Function:
    lines = ["CS2R R6, SR_CLOCKLO", ".L_x_0:", *body, "UIADD3 UR8, UR8, -0x1, URZ",
             "ISETP.NE.U32.AND P0, PT, RZ, UR8, PT", "@P0 BRA `(.L_x_0)", "CS2R R20, SR_CLOCKLO",
             "EXIT"]
    text = "\n".join(ln if ln.endswith(":") else f"        /*{16 * k:04x}*/ {ln} ;"
                     for k, ln in enumerate(lines))
    return sass.parse(f"//------ .text.f ------\nf:\n{text}")["f"]


def test_loop_verification():
    """Each trip holds the sequence once per op (counted per opcode) and the loop control,
    at least STEPS deep; a hoisted conversion or a stray instruction makes it invalid."""
    p = fe.probe(fe.ROWS[0], 1)
    entry = p.entries[fe.STEPS]
    body = [x for _ in range(fe.STEPS) for x in _op(100)]
    v = p.check({entry: _function(body)})
    assert v.unit == {"F2FP.F16.E4M3.UNPACK_B": 12, "FADD": 4, "HMMA.16816.F32": 2,
                      "LDS.128": 1, "LDS.64": 1}
    assert v.loop_control == {"UIADD3": 1, "ISETP.NE.U32.AND": 1, "BRA": 1}
    hoisted = [x for x in body if not x.startswith("F2FP")] + ["F2FP.F16.E4M3.UNPACK_B R50, R40"]
    with pytest.raises(ProbeInvalid, match="wanted .*F2FP.F16.E4M3.UNPACK_B': 96"):
        p.check({entry: _function(hoisted)})
    with pytest.raises(ProbeInvalid, match="other instructions"):
        p.check({entry: _function(body + ["FFMA R1, R2, R3, R4"])})
    shallow = [x for k in range(fe.STEPS) for x in _op(100 + 8 * k)]    # 8 chains of one op
    with pytest.raises(ProbeInvalid, match="dependence depth"):
        p.check({entry: _function(shallow)})


def _raw(per_step, warps, skew=3.0, reps=5):
    trips = (10, 20, 30)
    return {t: [(np.arange(warps) * skew, np.arange(warps) * skew + 300 + t * fe.STEPS * per_step
                 + (r % 2) * 0.1) for r in range(reps)] for t in trips}


def test_point():
    pt = fe.point(_raw(40.0, 4), 4, 2)
    assert pt.latency == pytest.approx(40.0) and not pt.unstable
    assert pt.throughput == pytest.approx(fe.FLOP * 2 * 4 / 40.0, rel=1e-3)
    # a start skew of 3% of the span may bias the block span's slope; each warp's own chain
    # cycles are still trusted
    skewed = fe.point(_raw(1.0, 4, skew=80.0), 4, 2)
    assert skewed.unstable and "skew" in skewed.why and skewed.lat_why == ""
    assert skewed.latency == pytest.approx(1.0)


class _Kernel:
    max_threads_per_block = 1024

    def __init__(self, entry):
        self.ilp = int(entry.split("_ilp")[1].split("_")[0])

    def __call__(self, grid, block, args, shared_mem=0):
        out, d_in, d_fill, trips = args
        warps = block[0] // 32
        step = max(6.0 * self.ilp, 16.0 * self.ilp * warps / 4)   # issue-bound past 4 warps
        out[:, 0] = np.arange(block[0]) // 32
        out[:, 1] = out[:, 0] + 200 + int(trips) * fe.STEPS * step


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
    gpu = Gpu(dev, None, 5.0)
    s = types.SimpleNamespace(builds=Builds(), gpu=gpu, runner=Runner(gpu), runs=RunCache(),
                              repeats=7, verify=lambda p, f: verdict)
    m = run.figures(s, fe.ROWS[0], "sm_90")
    got = {f.key.rsplit(".", 1)[1]: f.value for f in m.figures}
    assert got["accumulate_chain_cycles"] == pytest.approx(6.0)
    best = max(fe.FLOP * i * w / max(6.0 * i, 16.0 * i * w / 4) for i in fe.ILPS for w in fe.WARPS)
    assert got["throughput"] == pytest.approx(best, rel=1e-3)
    assert got["vs_native_peak"] == pytest.approx(best / 8192, rel=1e-3)
    assert got["vs_native_wgmma"] == pytest.approx(best / 8192, rel=1e-3)
    assert m.sass == "sass fp8_emulated/e4m3.f32.m16n8k32/ilp1"
    assert "12 x F2FP.F16.E4M3.UNPACK_B" in m.figures[0].method
