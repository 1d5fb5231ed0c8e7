"""The tensor topic's modules and sweep record (CPU only: nothing is compiled or launched)."""
from __future__ import annotations

import json
import sys
import types

import numpy as np
import pytest

from pytest_gpuchar.core.archs import KNOWN_ARCHS
from pytest_gpuchar.core.gpu import Gpu
from pytest_gpuchar.core.runner import Runner
from pytest_gpuchar.core.probe import NotApplicable
from pytest_gpuchar.session import RunCache
from pytest_gpuchar.topics.tensor.mma import analysis, figures, kernels, rows, run
from pytest_gpuchar.topics.tensor.mma.probes import TensorProbe, TensorVerdict, WgmmaProbe
from pytest_gpuchar.topics.tensor.mma.rows import Kind


def _names(arch):
    return {name: g for g in run.groups(arch) for _, _, name in g.parts()}


def test_groups_per_arch():
    sm90 = _names("sm_90")
    assert {"gpuchar_wgmma.ptx", "gpuchar_tensor_static.ptx", "gpuchar_wgmma_static.ptx",
            "gpuchar_tensor_movm.ptx", "gpuchar_tensor_emulated.ptx"} <= set(sm90)
    assert any(n.startswith("gpuchar_tensor0") for n in sm90)
    assert sm90["gpuchar_wgmma.ptx"].stage == run.Stage.HARDWARE
    assert sm90["gpuchar_tensor_static.ptx"].stage == run.Stage.STATIC
    assert "gpuchar_wgmma.ptx" not in _names("sm_80")
    assert _names("sm_61") == {}                          # no tensor cores: nothing to build


def test_sweep_parts_hold_every_hardware_probe():
    for arch in ("sm_70", "sm_80", "sm_90"):
        g = run.sweep_group(arch)
        assert sorted(p.name for part, _, _ in g.parts() for p in part) == \
            sorted(p.name for p in kernels.hardware_probes(arch))


def test_every_arch_has_groups():
    for arch in KNOWN_ARCHS:
        for g in run.groups(arch):
            assert g.probes and all(text.startswith(".version") for _, text, _ in g.parts())


def test_sweep_json():
    s = run.Sweep("sm_90", repeats=15)
    s.points[(Kind.MMA_SP, "f16.f32.m16n8k32")] = {
        (4, 2): analysis.SweepPoint(4, 2, 24.0, 1000.0, 0.1, 2.0, False)}
    s.skipped[("wgmma/x/ilp2", 16)] = "launch refused: out of resources"
    out = json.loads(s.dump())
    assert out["points"]["mma.sp/f16.f32.m16n8k32"]["w4_ilp2"]["throughput"] == 1000.0
    assert out["skipped"] == {"wgmma/x/ilp2@16": "launch refused: out of resources"}


# --- the sweep on a fake GPU: the launches, the jobs the kernels' limits refuse, the figures ---

class _Kernel:
    """A launch writes each thread's clocks as the loop kernel would: warp w starts at w
    (the start skew), every chain step takes `step(warps)` cycles, 80 cycles fixed."""
    launches: list = []

    def __init__(self, entry, step=lambda warps: 16 * max(1, warps // 4)):
        self.entry = entry
        self.steps = 1 if entry.endswith("_lat") else int(entry.rsplit("_n", 1)[1])
        self.step = step
        self.max_threads_per_block = 256 if "ilp2" in entry else 1024

    def __call__(self, grid, block, args, shared_mem=0):
        out, d_in, d_fill, trips = args
        assert d_in.shape[0] == block[0] and shared_mem == 0 and trips >= 1
        if block[0] == 512:
            raise sys.modules["cupy"].CUDADriverError("CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES")
        _Kernel.launches.append((self.entry, block[0], int(trips)))
        warps = block[0] // 32
        out[:, 0] = np.arange(block[0]) // 32
        step = 250 if self.entry.endswith("_lat") else self.step(warps)
        out[:, 1] = out[:, 0] + 80 + int(trips) * self.steps * step


class _Compiled:
    info_log = "ptxas info"

    def __init__(self, step=None):
        self.step = step

    def function(self, entry):
        return _Kernel(entry, self.step) if self.step else _Kernel(entry)


class _Builds:
    def __init__(self, step=None):
        self.step = step

    def jit_groups(self, dev, groups):
        return {}

    def jit_module(self, dev, text, name):
        return _Compiled(self.step), {}


def _session(monkeypatch, ilps=(1, 2), step=None, name="f16.f32.m16n8k16"):
    row = rows.row("mma", name)
    monkeypatch.setattr(run.kernels, "hardware_probes",
                        lambda arch: [kernels.sweep_probe(row, arch, k) for k in ilps])
    control = {"UIADD3": 1, "ISETP.NE.U32.AND": 1, "BRA": 1}
    # the verdict a correct loop gets: steps x ILP x per_op tensor instructions per trip
    monkeypatch.setattr(TensorProbe, "check", lambda self, functions: TensorVerdict(
        True, loop_control=control, loops={self.steps: {
            "tensor_per_trip": self.ops[self.steps] * self.per_op, "loop_control": control}}))
    monkeypatch.setattr(TensorProbe, "snapshot_text", lambda self, funcs: f"sass {self.name}")
    dev = types.SimpleNamespace(arch="sm_80", driver="580", index=0)
    _Kernel.launches = []
    gpu = Gpu(dev, None, 5.0)
    return row, types.SimpleNamespace(builds=_Builds(step), gpu=gpu, runner=Runner(gpu),
                                      verify=lambda probe, functions: probe.check(functions),
                                      runs=RunCache(), repeats=3)


def test_sweep_on_a_fake_gpu(fake_cupy, monkeypatch):
    """Every (probe, block size) launched 1 + repeats times at each of its three trip counts;
    a kernel's thread limit and a refused launch are recorded as skipped; the rows' figures,
    their loop accounting and trip counts, and SASS come from the points."""
    row, session = _session(monkeypatch)
    s = run.sweep(session, "sm_80")
    assert s is run.sweep(session, "sm_80") and s.repeats == run.SWEEP_LAUNCHES.least
    assert s.skipped[("mma/f16.f32.m16n8k16/ilp2", 12)].startswith("384 threads exceed")
    assert s.skipped[("mma/f16.f32.m16n8k16/ilp1", 16)] == \
        "launch refused: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"
    pts = s.points[(Kind.MMA, row.name)]
    assert sorted(pts) == sorted([(w, 1) for w in rows.WARPS if w < 16] +
                                 [(w, 2) for w in rows.WARPS if w <= 8])
    p8 = kernels.sweep_probe(row, "sm_80", 1)
    trips = p8.trips(8 * 32, p8.steps)
    done = [t for e, n, t in _Kernel.launches if e == p8.entries[p8.steps] and n == 256]
    assert sorted(set(done)) == list(trips) and len(done) == 3 * (run.SWEEP_LAUNCHES.least + 1)
    assert pts[(8, 1)].trips == trips and not pts[(8, 1)].unstable
    assert pts[(1, 1)].latency == pytest.approx(16.0) and not pts[(1, 1)].unstable
    assert s.loops["mma/f16.f32.m16n8k16/ilp1"] == {str(rows.STEPS): {
        "tensor_per_trip": rows.STEPS, "loop_control": {"UIADD3": 1, "ISETP.NE.U32.AND": 1,
                                                        "BRA": 1}}}
    m = figures.sweep_row(session, row, "sm_80")
    assert m.sass == "sass mma/f16.f32.m16n8k16/ilp1" and m.checks == []
    keys = [f.key.removeprefix(row.key + ".") for f in m.figures]
    assert keys == ["completion_latency", "throughput_w4", "latency_w4", "throughput_w8",
                    "latency_w8", "throughput_peak_w4", "throughput_peak"]
    first = m.figures[0]
    assert first.value == pytest.approx(16.0) and "1 warp" in first.method
    assert first.data["loop"][str(rows.STEPS)]["loop_control"]["BRA"] == 1 and first.data["trips"]
    peak = m.figures[-1].data
    assert peak["skew_share"]["w8_ilp1"] < rows.SKEW_SHARE_MAX
    assert peak["start_skew"]["w8_ilp1"] == 7.0 and peak["monotonic_pairs_compared"] == 3 + 1
    assert not figures.sweep_data(session, "sm_80").checks
    with pytest.raises(NotApplicable, match="^hardware: "):
        figures.sweep_row(session, rows.row("mma", "e4m3.f32.m16n8k32"), "sm_80")


def test_falling_throughput_is_the_rows_check(fake_cupy, monkeypatch):
    """12 warps run slower per warp than 4 and 8 on the fake: the sweep's invariant fails the row
    (a check), naming the ILP, the warps and the figures."""
    row, session = _session(monkeypatch, ilps=(1,),
                            step=lambda w: 16 * max(1, w // 4) * (1.5 if w == 12 else 1))
    m = figures.sweep_row(session, row, "sm_80")
    assert len(m.checks) == 2        # 4 -> 12 and 8 -> 12 warps
    assert "ILP 1: throughput falls from 512.0 at 8 warps to 341.3 at 12 warps" in m.checks[1]


def test_sweep_json_records_the_loops(fake_cupy, monkeypatch):
    _, session = _session(monkeypatch, ilps=(1,))
    out = json.loads(run.sweep(session, "sm_80").dump())
    pt = out["points"]["mma/f16.f32.m16n8k16"]["w4_ilp1"]
    assert pt["steps"] == rows.STEPS and len(pt["trips"]) == 3 and "start_skew" in pt["cycles"]
    assert out["loops"]["mma/f16.f32.m16n8k16/ilp1"][str(rows.STEPS)]["tensor_per_trip"] == \
        rows.STEPS


def test_wgmma_on_a_fake_gpu(fake_cupy, monkeypatch):
    """The latency loop (one warpgroup, its fixed trip counts) gives the completion latency
    per trip; the throughput loop over warpgroups gives cycles per wgmma and FLOP/clk/SM."""
    row, session = _session(monkeypatch, ilps=())
    wg = rows.wgmma_row("f16.f32.m64n128k16.ss")
    monkeypatch.setattr(run.kernels, "wgmma_hardware", lambda arch: [kernels.wgmma_probe(wg)])
    monkeypatch.setattr(WgmmaProbe, "snapshot_text", lambda self, funcs: f"sass {self.name}")
    s = run.sweep(session, "sm_90")
    lat = s.latency[(Kind.WGMMA, wg.name)]
    assert lat.latency == pytest.approx(250.0) and lat.trips == rows.WGMMA_LAT_TRIPS
    assert sorted(s.points[(Kind.WGMMA, wg.name)]) == [(1, 1), (2, 1), (3, 1)]
    assert s.skipped[(f"wgmma/{wg.name}/ilp1", 16)].startswith("launch refused")   # 512 threads
    m = figures.wgmma_row(session, wg, "sm_90")
    f = {x.key.rsplit(".", 1)[1]: x for x in m.figures}
    assert f["completion_latency"].value == pytest.approx(250.0)
    assert not f["completion_latency"].unstable and "wait_group 0" in f["completion_latency"].method
    assert f["completion_latency"].data["tolerance"] == {"rel": 0.03}
    assert f["cycles_per_wgmma"].value == pytest.approx(16.0)        # 1 warpgroup: 16 / step
    assert f["throughput"].value == pytest.approx(wg.flop / 16.0)
    assert f["throughput"].data["falls_with_warpgroups"] == []


def test_hopper_fp64_rows_report_achieved_peak(fake_cupy, monkeypatch):
    """The FP64 m16n8kK rows on sm_90: the Table 3 figures plus throughput_peak over the
    documented 128 FMA/clk/SM (H100 whitepaper)."""
    row, session = _session(monkeypatch, ilps=(1,), name="f64.f64.m16n8k16",
                            step=lambda w: 16.0 * max(1, w))      # 2048 / 16 = 128 FMA/clk
    monkeypatch.setattr(run.kernels, "wgmma_hardware", lambda arch: [])
    m = figures.sweep_row(session, row, "sm_90")
    f = {x.key.removeprefix(row.key + "."): x for x in m.figures}
    assert f["throughput_peak"].value == pytest.approx(128.0)
    assert f["achieved_peak"].value == pytest.approx(1.0) and f["achieved_peak"].unit == "ratio"
    assert "66.9 TFLOP/s" in f["achieved_peak"].method


def test_a_probe_declared_unmeasurable_is_skipped_through_the_door(fake_cupy, monkeypatch):
    """The sweep verifies through the session's door: a probe the arch declares unmeasurable
    is not launched and its rows skip with the declaration's reason."""
    from pytest_gpuchar.core.probe import DeclaredUnmeasurable
    row, session = _session(monkeypatch, ilps=(1,))

    def door(probe, functions):
        raise DeclaredUnmeasurable(f"unmeasurable on sm_80: {probe.name}: declared")
    session.verify = door
    s = run.sweep(session, "sm_80")
    assert list(s.unmeasurable) == ["mma/f16.f32.m16n8k16/ilp1"] and not s.points
    assert _Kernel.launches == []
    with pytest.raises(DeclaredUnmeasurable, match="declared"):
        figures.sweep_row(session, row, "sm_80")


def test_the_sweep_fitted_in_worker_processes_is_the_sweep_fitted_here(fake_cupy, monkeypatch):
    """On a GPU run the session's worker processes fit each module's launch sets while the
    test thread launches the next module, and the operands come made ahead: the sweep is
    the one made in place, point for point."""
    from pytest_gpuchar.core import hostpool
    _, here = _session(monkeypatch)
    expected = run.sweep(here, "sm_80").dump()
    _, ahead = _session(monkeypatch)
    ahead.runs.once(run._inputs_key("sm_80"), lambda: run.sweep_inputs("sm_80"))
    ahead.runs._processes = hostpool.HostPool(1)
    start, fitted = run._fit_beside, []

    def beside(session, key, specs):
        start(session, key, specs)
        session.runs._runs[key].future.result()      # made in the worker, not here
        fitted.append(key)
    monkeypatch.setattr(run, "_fit_beside", beside)
    try:
        assert run.sweep(ahead, "sm_80").dump() == expected
    finally:
        ahead.runs.close()
    assert fitted == [("tensor", "sweep fits", "sm_80", 0)]
    assert run._inputs_key("sm_80") not in ahead.runs         # the operands were taken


def test_the_operands_made_ahead_are_the_ones_drawn_at_launch():
    """operands.of_probes (made ahead) gives each launch set what operands.inputs draws for
    it at its launch: the same seed, the same draws."""
    from pytest_gpuchar.topics.tensor.mma import operands
    ps = kernels.hardware_probes("sm_80")[:6] + kernels.wgmma_hardware("sm_90")[:2]
    made = operands.of_probes(ps)
    assert len(made) == sum(len(p.launches()) for p in ps)
    for p in ps:
        for threads, key in p.launches():
            buf, fill = operands.inputs(p, threads, key=key)
            got = made[(p.name, threads, key)]
            assert np.array_equal(got[0], buf) and np.array_equal(got[1], fill)
